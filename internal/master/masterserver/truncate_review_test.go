package masterserver

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterproto"
)

// readToEnd reads frames until the server closes the connection, failing
// on a hang (5 s without a byte) and returning the frames' ops.
func readToEnd(t *testing.T, nc net.Conn) []masterproto.Op {
	t.Helper()
	r, err := masterproto.NewReader(nc, masterproto.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var ops []masterproto.Op
	for {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		h, _, err := r.ReadFrame()
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			t.Fatalf("server neither answered nor closed within 5 s (hang); frames so far %v", ops)
		}
		if err != nil {
			return ops
		}
		ops = append(ops, h.Op)
	}
}

// TestTruncatedAndFlippedStreams: a HELLO, LOOKUP and NODES stream cut
// at every byte offset, and the HELLO with each byte flipped, sent over
// real TCP: the server answers what arrived whole, then closes; it never
// hangs, crashes or answers a cut request; it still serves afterwards.
func TestTruncatedAndFlippedStreams(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{Token: []byte("tok"), HandshakeTimeout: 5 * time.Second}, nil)
	hello := mustEncode(masterproto.AppendHello(nil, 1, &masterproto.Hello{Token: []byte("tok")}))
	lookup := mustEncode(masterproto.AppendLookup(nil, 2, &masterproto.Lookup{Tenant: "t", IDs: []uint64{1, 2, 3}}))
	nodes := masterproto.AppendNodes(nil, 3)
	stream := append(append(append([]byte(nil), hello...), lookup...), nodes...)
	send := func(b []byte) []masterproto.Op {
		nc, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
		nc.(*net.TCPConn).CloseWrite()
		return readToEnd(t, nc)
	}
	for k := 0; k <= len(stream); k++ {
		ops := send(stream[:k])
		want := 0 // whole frames answered
		for _, end := range []int{len(hello), len(hello) + len(lookup), len(stream)} {
			if k >= end {
				want++
			}
		}
		if len(ops) != want {
			t.Fatalf("stream cut at byte %d of %d: answers %v, want %d", k, len(stream), ops, want)
		}
	}
	for i := range hello {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), hello...)
			b[i] ^= x
			b = append(b, nodes...)
			inToken := i >= len(hello)-len("tok")
			for _, op := range send(b) {
				if op != masterproto.OpHelloResponse && op != masterproto.OpError && op != masterproto.OpNodesResponse ||
					inToken && op == masterproto.OpNodesResponse {
					t.Fatalf("hello byte %d ^ %#x: answered with %v", i, x, op)
				}
			}
		}
	}
	rc := rawDial(t, ts.addr, true, "tok")
	rc.expectNodesWorks(9)
}
