package masterserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClusterID: a node joins only the master of its cluster, checked on
// both sides, and a client without an ID is still served.
func TestClusterID(t *testing.T) {
	info := func(id string) meta.NodeInfo {
		return meta.NodeInfo{ID: meta.NodeID(id), Addr: "127.0.0.1:1", RAMBytes: 1 << 20, BlockSize: 4096}
	}
	for _, tc := range []struct {
		name            string
		master, node    string
		token           string // the master's and the node's
		dialErr, regErr string // "" when it must succeed
		masterLog       string // in the master's log
	}{
		{name: "both unset"},
		{name: "same", master: "c-a", node: "c-a"},
		{name: "same with token", master: "c-a", node: "c-a", token: "0123456789abcdef-token"},
		{name: "other cluster", master: "c-b", node: "c-a",
			dialErr: "the peer is for cluster c-a, this master is cluster c-b", masterLog: "refused a peer of another cluster"},
		{name: "master without ID", master: "", node: "c-a",
			dialErr: "the peer is for cluster c-a, this master has no cluster ID", masterLog: "refused a peer of another cluster"},
		{name: "node without ID", master: "c-b", node: "",
			regErr: "node n1 has no cluster ID, this master is cluster c-b", masterLog: "node n1 has no cluster ID, this master is cluster c-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			ts := start(t, newMaster(t, master.Options{}), Options{ClusterID: tc.master, Token: []byte(tc.token),
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
			c, err := masterclient.Dial(ctxT(t), ts.addr, masterclient.Options{ClusterID: tc.node, Token: []byte(tc.token)})
			if tc.dialErr != "" {
				if err == nil {
					c.Close()
					t.Fatal("Dial succeeded; want a refusal")
				}
				if !errors.Is(err, kvpool.ErrUnauthorized) || !strings.Contains(err.Error(), tc.dialErr) {
					t.Fatalf("Dial: %v; want ErrUnauthorized saying %q", err, tc.dialErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				defer c.Close()
				_, err = c.Register(ctxT(t), info("n1"), nil, meta.NodeUsage{})
				if tc.regErr == "" && err != nil {
					t.Fatalf("Register: %v", err)
				}
				if tc.regErr != "" && (!errors.Is(err, kvpool.ErrUnauthorized) || !strings.Contains(err.Error(), tc.regErr)) {
					t.Fatalf("Register: %v; want ErrUnauthorized saying %q", err, tc.regErr)
				}
				if tc.regErr != "" {
					_, err = c.Heartbeat(ctxT(t), "n1", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil)
					if !errors.Is(err, kvpool.ErrUnauthorized) {
						t.Fatalf("Heartbeat: %v; want ErrUnauthorized", err)
					}
				}
			}
			if tc.dialErr != "" || tc.regErr != "" {
				if n := len(ts.m.Nodes()); n != 0 {
					t.Fatalf("the master lists %d nodes; want none registered", n)
				}
				if !strings.Contains(logs.String(), tc.masterLog) {
					t.Fatalf("master log lacks %q:\n%s", tc.masterLog, logs.String())
				}
			}
			// A client without an ID (ctl, the client library) is served
			// by any master.
			cl, err := masterclient.Dial(ctxT(t), ts.addr, masterclient.Options{Token: []byte(tc.token)})
			if err != nil {
				t.Fatalf("Dial without an ID: %v", err)
			}
			defer cl.Close()
			if _, err := cl.Nodes(ctxT(t)); err != nil {
				t.Fatalf("Nodes without an ID: %v", err)
			}
			// The admin endpoints report the ID.
			_, body := httpGet(t, ts.admin+"/health")
			if tc.master != "" && !strings.Contains(body, `"cluster_id": "`+tc.master+`"`) {
				t.Fatalf("/health = %s; want cluster_id %q", body, tc.master)
			}
		})
	}
}

// TestClusterIDMissingInReply: a node with an ID refuses a master that
// accepts its HELLO without echoing an ID (a foreign or broken server).
func TestClusterIDMissingInReply(t *testing.T) {
	_, err := masterclient.Dial(context.Background(), fakeHelloServer(t), masterclient.Options{ClusterID: "c-a"})
	if !errors.Is(err, kvpool.ErrUnauthorized) || !strings.Contains(err.Error(), "this peer is for cluster c-a, the master there has no cluster ID") {
		t.Fatalf("Dial: %v; want a refusal of the master without an ID", err)
	}
}

// fakeHelloServer accepts one connection on a loopback listener, reads its
// HELLO and accepts it without a cluster ID, as a master of an older build
// would not; it returns the address. The goroutine ends with the test.
func fakeHelloServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r, err := masterproto.NewReader(nc, masterproto.Limits{})
		if err != nil {
			return
		}
		h, _, err := r.ReadFrame()
		if err != nil {
			return
		}
		reply := masterproto.HelloReplyFor(nil, masterproto.Limits{})
		b, _ := masterproto.AppendHelloReply(nil, h.ReqID, &reply)
		nc.Write(b)
		io.Copy(io.Discard, nc) // until the client closes
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}
