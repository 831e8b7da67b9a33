package nodeclient_test

import (
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// fakeNode accepts one connection, completes the handshake, reads one
// request and answers it with respond(request), then hangs up or waits for
// the client to close. It stands in for a buggy or hostile node.
func fakeNode(t *testing.T, respond func(req *wire.Frame) []byte, hangUp bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r, err := wire.NewReader(nc, wire.Limits{})
		if err != nil {
			return
		}
		var h wire.Hello
		if r.ReadHello(&h) != nil {
			return
		}
		ack := wire.HelloAckFor(nil, wire.Limits{})
		if _, err := nc.Write(wire.AppendHelloAck(nil, &ack)); err != nil {
			return
		}
		var req wire.Frame
		if r.ReadFrame(&req) != nil {
			return
		}
		if _, err := nc.Write(respond(&req)); err != nil || hangUp {
			return
		}
		for r.ReadFrame(&req) == nil { // until the client closes
		}
	})
	return ln.Addr().String()
}

func okBlock(tenant string, id uint64, p []byte) wire.Block {
	return wire.Block{ID: id, Checksum: block.Checksum(block.Key{Tenant: tenant, ID: id}, p), Payload: p}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err) // the fixed frames below always encode
	}
	return b
}

// TestMisbehavingNode: whatever a node sends, the client returns verified
// blocks or an error, never wrong bytes, and drops the connection when the
// stream can no longer be trusted.
func TestMisbehavingNode(t *testing.T) {
	p := payload(1000, 3)
	cases := []struct {
		name    string
		mget    bool // send MGET [7] instead of GET 7
		respond func(req *wire.Frame) []byte
		want    error
		broken  bool
	}{
		{"block of another id", false, func(req *wire.Frame) []byte {
			return must(wire.AppendGetResponse(nil, req.Header.ReqID, okBlock("t", 8, p)))
		}, kvpool.ErrCorrupt, false},
		{"block of another tenant", false, func(req *wire.Frame) []byte {
			return must(wire.AppendGetResponse(nil, req.Header.ReqID, okBlock("u", 7, p)))
		}, kvpool.ErrCorrupt, false},
		{"MGET block of another id", true, func(req *wire.Frame) []byte {
			return must(wire.AppendMGetResponse(nil, req.Header.ReqID, []wire.Block{okBlock("t", 8, p)}))
		}, kvpool.ErrCorrupt, false},
		{"ERROR", false, func(req *wire.Frame) []byte {
			return wire.AppendError(nil, req.Header.ReqID, errors.New("disk on fire"))
		}, frame.ErrInternal, false},
		{"payload over the client's limit", false, func(req *wire.Frame) []byte {
			return must(wire.AppendGetResponse(nil, req.Header.ReqID, okBlock("t", 7, make([]byte, 2000))))
		}, frame.ErrPayloadTooLarge, false},
		{"wrong request id", false, func(req *wire.Frame) []byte {
			return must(wire.AppendGetResponse(nil, req.Header.ReqID+1, okBlock("t", 7, p)))
		}, frame.ErrMalformed, true},
		{"wrong op", false, func(req *wire.Frame) []byte {
			return wire.AppendPutResponse(nil, req.Header.ReqID, wire.Status{ID: 7})
		}, frame.ErrMalformed, true},
		{"MGET count mismatch", true, func(req *wire.Frame) []byte {
			return must(wire.AppendMGetResponse(nil, req.Header.ReqID, []wire.Block{okBlock("t", 7, p), okBlock("t", 7, p)}))
		}, frame.ErrMalformed, true},
		{"truncated payload", false, func(req *wire.Frame) []byte {
			b := must(wire.AppendGetResponse(nil, req.Header.ReqID, okBlock("t", 7, p)))
			return b[:len(b)-10]
		}, nil, true},
		{"frame over the client's limit", false, func(req *wire.Frame) []byte {
			return wire.AppendHeader(nil, wire.Header{Len: 1 << 30, Op: wire.OpGetResponse, ReqID: req.Header.ReqID})
		}, frame.ErrFrameTooLarge, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := fakeNode(t, c.respond, c.name == "truncated payload")
			conn, err := nodeclient.Dial(ctxT(t), addr, nodeclient.DialOptions{Tenant: "t", Limits: wire.Limits{MaxPayload: 1500}})
			if err != nil {
				t.Fatal(err)
			}
			// The fake node's goroutine ends when this closes, before its
			// cleanup waits for it.
			defer conn.Close()
			var got []byte
			if c.mget {
				var res []nodeclient.Result
				res, err = conn.MGet(ctxT(t), []uint64{7}, nil)
				if err == nil {
					got, err = res[0].Payload, res[0].Err
				}
			} else {
				got, _, err = conn.Get(ctxT(t), 7, nil)
			}
			if err == nil || got != nil {
				t.Fatalf("got %d bytes, %v; want an error and no bytes", len(got), err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			if conn.Broken() != c.broken {
				t.Fatalf("broken = %v, want %v (%v)", conn.Broken(), c.broken, err)
			}
			if errors.Is(c.want, kvpool.ErrCorrupt) && conn.Counters().Corruptions != 1 {
				t.Fatalf("corruptions %d, want 1", conn.Counters().Corruptions)
			}
		})
	}
}

// TestPoolEveryOp runs each op through a Pool.
func TestPoolEveryOp(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	p, err := nodeclient.NewPool(n.addr, nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Tenant: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	errs, err := p.MPut(ctx, []uint64{1, 2}, [][]byte{payload(10, 1), payload(20, 2)})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatal(err, errs)
	}
	if err := p.Put(ctx, 3, payload(30, 3)); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, 2); err != nil {
		t.Fatal(err)
	}
	ok, err := p.Exists(ctx, []uint64{1, 2, 3})
	if err != nil || !ok[0] || ok[1] || !ok[2] {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
	tiers, err := p.Stats(ctx)
	if err != nil || tiers[0].Stats.Blocks != 2 {
		t.Fatalf("Stats = %+v, %v", tiers, err)
	}
	if p.Addr() != n.addr {
		t.Fatalf("Addr %s", p.Addr())
	}
	p.Close()
	if _, _, err := p.Get(ctx, 1, nil); !errors.Is(err, nodeclient.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}
