package masterclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/meta"
)

// The client's connections own reader goroutines; all must be joined.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs a master server on loopback until the test ends.
func serve(t *testing.T, opts masterserver.Options) (*master.Master, string) {
	t.Helper()
	m, err := master.New(master.Options{NodeTTL: time.Hour, HeartbeatInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s, err := masterserver.New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		s.Close()
	})
	return m, ln.Addr().String()
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, addr string, opts masterclient.Options) *masterclient.Client {
	t.Helper()
	c, err := masterclient.Dial(ctxT(t, 5*time.Second), addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConcurrentPipelined: many goroutines share one client; every answer
// matches its own request (the in-order demultiplexing is right).
func TestConcurrentPipelined(t *testing.T) {
	m, addr := serve(t, masterserver.Options{})
	const keys = 256
	var inv meta.Inventory
	for id := range uint64(keys) {
		inv = append(inv, meta.Item{Key: block.Key{Tenant: "t", ID: id}, Tier: meta.TierRAM, Size: int64(id), Sum: uint32(id)})
	}
	if _, err := m.Register(meta.NodeInfo{ID: "n1", Addr: "127.0.0.1:9"}, inv, meta.NodeUsage{}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr, masterclient.Options{Conns: 2})
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			var res masterclient.LookupResult
			var present []bool
			for i := range 200 {
				first := uint64((g*31 + i) % keys)
				n := 1 + (g+i)%8
				ids := make([]uint64, n)
				for j := range ids {
					ids[j] = first + uint64(j)
				}
				want := min(n, keys-int(first))
				if i%3 == 0 {
					var err error
					if present, err = c.Exists(context.Background(), "t", ids, present); err != nil || len(present) != n {
						errc <- fmt.Errorf("exists: %v %v", present, err)
						return
					}
					continue
				}
				if err := c.Lookup(context.Background(), "t", ids, i%2 == 0, &res); err != nil {
					errc <- err
					return
				}
				if res.Hit != want || res.Block(0)[0].Sum != uint32(first) || res.Block(res.Hit - 1)[0].Size != int64(first)+int64(want-1) {
					errc <- fmt.Errorf("lookup %v: hit %d (want %d), block 0 %+v", ids, res.Hit, want, res.Block(0))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestUnavailable: nothing listening → Dial and calls fail with
// ErrUnavailable, quickly.
func TestUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := masterclient.Dial(ctxT(t, 5*time.Second), addr, masterclient.Options{}); !errors.Is(err, masterclient.ErrUnavailable) {
		t.Fatalf("dial of a closed port: %v", err)
	}
}

// stallingServer completes the handshake and then never answers.
func stallingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Go(func() {
				r, _ := masterproto.NewReader(nc, masterproto.Limits{})
				h, _, err := r.ReadFrame()
				if err != nil {
					return
				}
				reply := masterproto.HelloReplyFor(nil, masterproto.Limits{})
				b, _ := masterproto.AppendHelloReply(nil, h.ReqID, &reply)
				nc.Write(b)
				for {
					if _, _, err := r.ReadFrame(); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestDeadline: a call to a master that does not answer returns when its
// context ends, with ErrUnavailable and the context's error; the client
// stays usable (the next call redials).
func TestDeadline(t *testing.T) {
	addr := stallingServer(t)
	c := dial(t, addr, masterclient.Options{Conns: 1})
	var res masterclient.LookupResult
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := c.Lookup(ctx, "t", []uint64{1}, false, &res)
		cancel()
		if !errors.Is(err, masterclient.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lookup against a stalled master: %v", err)
		}
	}
	// Options.Timeout bounds a call whose context has none.
	c2 := dial(t, addr, masterclient.Options{Timeout: 50 * time.Millisecond})
	if _, err := c2.Nodes(context.Background()); !errors.Is(err, masterclient.ErrUnavailable) {
		t.Fatalf("nodes without a deadline: %v", err)
	}
}

// TestBadArguments fail before anything is sent.
func TestBadArguments(t *testing.T) {
	_, addr := serve(t, masterserver.Options{Limits: masterproto.Limits{MaxBatch: 4}})
	c := dial(t, addr, masterclient.Options{})
	var res masterclient.LookupResult
	cases := []struct {
		name string
		err  error
	}{
		{"batch over the server's limit", c.Lookup(context.Background(), "t", make([]uint64, 5), false, &res)},
		{"bad tenant", c.Lookup(context.Background(), "a b", nil, false, &res)},
		{"nil result", c.Lookup(context.Background(), "t", nil, false, nil)},
		{"nil placement", c.Place(context.Background(), "t", nil, 1, "", 0, nil)},
	}
	for _, cs := range cases {
		if !errors.Is(cs.err, meta.ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", cs.name, cs.err)
		}
	}
	if _, err := c.Nodes(context.Background()); err != nil {
		t.Fatalf("the client is still usable: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []masterclient.Options{{Timeout: -1}, {Conns: -1}, {Conns: 5000}, {Limits: masterproto.Limits{MaxBatch: -1}}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestClose: calls after Close fail with ErrClosed; Close is idempotent.
func TestClose(t *testing.T) {
	_, addr := serve(t, masterserver.Options{})
	c := dial(t, addr, masterclient.Options{})
	c.Close()
	if _, err := c.Nodes(context.Background()); !errors.Is(err, masterclient.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	c.Close()
}
