package nodeclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/nodeserver/nodeservertest"
	"github.com/kvpool/kvpool/internal/node/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every test call: a call that hangs fails instead.
const testTimeout = 20 * time.Second

// node is a server on loopback with its in-memory backend.
type node struct {
	b    *nodeservertest.Backend
	srv  *nodeserver.Server
	addr string
}

func startNode(t *testing.T, opts nodeserver.Options) *node {
	t.Helper()
	b := nodeservertest.NewBackend(t.TempDir())
	t.Cleanup(func() { b.Close() }) // after the server stops (cleanups run last-in first-out)
	if opts.Backend == nil {
		opts.Backend = b
	}
	srv, addr := nodeservertest.Start(t, opts)
	return &node{b: b, srv: srv, addr: addr}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, addr string, opts nodeclient.DialOptions) *nodeclient.Conn {
	t.Helper()
	c, err := nodeclient.Dial(ctxT(t), addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// payload returns n bytes that differ per seed.
func payload(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7) + byte(i>>11)
	}
	return p
}

func TestRoundTripEveryOp(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t1"})
	ctx := ctxT(t)
	sizes := []int{0, 1, 1000, 64 << 10, 1 << 20}
	for i, size := range sizes {
		t.Run(fmt.Sprintf("put_get_%d", size), func(t *testing.T) {
			id := uint64(100 + i)
			want := payload(size, byte(i))
			if err := c.Put(ctx, id, want); err != nil {
				t.Fatal(err)
			}
			got, sum, err := c.Get(ctx, id, make([]byte, 0, size))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || sum != block.Checksum(block.Key{Tenant: "t1", ID: id}, want) {
				t.Fatalf("got %d bytes (sum %08x), want %d", len(got), sum, len(want))
			}
		})
	}
	t.Run("exists", func(t *testing.T) {
		got, err := c.Exists(ctx, []uint64{100, 999, 104, 101})
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{true, false, true, true}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Exists = %v, want %v", got, want)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := c.Delete(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, 100); !errors.Is(err, kvpool.ErrNotFound) {
			t.Fatalf("second delete: %v, want not found", err)
		}
		if _, _, err := c.Get(ctx, 100, nil); !errors.Is(err, kvpool.ErrNotFound) {
			t.Fatalf("get after delete: %v, want not found", err)
		}
	})
	t.Run("mput_mget", func(t *testing.T) {
		ids := []uint64{1, 2, 3, 4}
		ps := [][]byte{payload(10, 1), payload(0, 2), payload(5000, 3), payload(1<<20, 4)}
		errs, err := c.MPut(ctx, ids, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Errorf("block %d: %v", ids[i], e)
			}
		}
		res, err := c.MGet(ctx, append(ids, 77), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			if res[i].Err != nil || !bytes.Equal(res[i].Payload, ps[i]) {
				t.Errorf("block %d: %d bytes, %v", ids[i], len(res[i].Payload), res[i].Err)
			}
		}
		if !errors.Is(res[4].Err, kvpool.ErrNotFound) || res[4].Payload != nil {
			t.Errorf("absent block: %v, %d bytes", res[4].Err, len(res[4].Payload))
		}
		if res, err := c.MGet(ctx, nil, nil); err != nil || len(res) != 0 {
			t.Errorf("empty MGet: %v, %v", res, err)
		}
	})
	t.Run("stats", func(t *testing.T) {
		tiers, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tiers) != 2 || tiers[0].Name != "ram" || tiers[0].Stats.Blocks != n.b.Len() {
			t.Fatalf("stats %+v, want ram with %d blocks", tiers, n.b.Len())
		}
	})
}

// TestMGetMixed asks for blocks in RAM, in the file tier (sendfile), absent,
// and corrupt in each tier, in one MGET.
func TestMGetMixed(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "mix"})
	ctx := ctxT(t)
	key := func(id uint64) block.Key { return block.Key{Tenant: "mix", ID: id} }
	want := map[uint64][]byte{}
	for id := uint64(1); id <= 6; id++ {
		want[id] = payload(3000+int(id), byte(id))
		n.b.Store(key(id), want[id])
	}
	for _, id := range []uint64{2, 3, 6} {
		if err := n.b.Spill(key(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint64{5, 6} { // 5 corrupt in RAM, 6 in the file
		if err := n.b.FlipBit(key(id), 8*100+3); err != nil {
			t.Fatal(err)
		}
	}
	ids := []uint64{1, 2, 404, 3, 5, 6, 1}
	res, err := c.MGet(ctx, ids, [][]byte{make([]byte, 0, 4096)})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		r := res[i]
		switch id {
		case 404:
			if !errors.Is(r.Err, kvpool.ErrNotFound) {
				t.Errorf("id %d: %v, want not found", id, r.Err)
			}
		case 5, 6:
			if !errors.Is(r.Err, kvpool.ErrCorrupt) || r.Payload != nil {
				t.Errorf("id %d: %v with %d bytes, want corrupt and no bytes", id, r.Err, len(r.Payload))
			}
		default:
			if r.Err != nil || !bytes.Equal(r.Payload, want[id]) {
				t.Errorf("id %d: %v, %d bytes", id, r.Err, len(r.Payload))
			}
		}
	}
	if got := c.Counters().Corruptions; got != 2 {
		t.Errorf("corruptions counted: %d, want 2", got)
	}
	// The server counts bytes once written; the client may have them a
	// moment before.
	waitFor(t, "both send paths to be counted", func() bool {
		st := n.srv.Stats()
		return st.WritevBytes > 0 && (runtime.GOOS != "linux" || st.SendfileBytes > 0)
	})
}

// TestBitFlip: a block whose bytes changed at rest on the node reaches the
// client as kvpool.ErrCorrupt, counted, never as bytes.
func TestBitFlip(t *testing.T) {
	for _, spill := range []bool{false, true} {
		t.Run(fmt.Sprintf("file=%v", spill), func(t *testing.T) {
			n := startNode(t, nodeserver.Options{})
			c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t"})
			k := block.Key{Tenant: "t", ID: 9}
			n.b.Store(k, payload(256<<10, 9))
			if spill {
				if err := n.b.Spill(k); err != nil {
					t.Fatal(err)
				}
			}
			if err := n.b.FlipBit(k, 12345); err != nil {
				t.Fatal(err)
			}
			got, sum, err := c.Get(ctxT(t), 9, nil)
			if !errors.Is(err, kvpool.ErrCorrupt) || got != nil || sum != 0 {
				t.Fatalf("Get = %d bytes, sum %08x, %v; want kvpool.ErrCorrupt and nothing", len(got), sum, err)
			}
			if c.Counters().Corruptions != 1 {
				t.Fatalf("corruptions %d, want 1", c.Counters().Corruptions)
			}
			if c.Broken() {
				t.Fatal("a corrupt block broke the connection")
			}
		})
	}
}

func TestTenantIsolation(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	ctx := ctxT(t)
	a := dial(t, n.addr, nodeclient.DialOptions{Tenant: "A"})
	b := dial(t, n.addr, nodeclient.DialOptions{Tenant: "B"})
	pa, pb := payload(100, 1), payload(100, 2)
	if err := a.Put(ctx, 7, pa); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, 7, nil); !errors.Is(err, kvpool.ErrNotFound) {
		t.Fatalf("tenant B reads A's block 7: %v", err)
	}
	if ok, err := b.Exists(ctx, []uint64{7}); err != nil || ok[0] {
		t.Fatalf("tenant B sees A's block 7: %v %v", ok, err)
	}
	if err := b.Put(ctx, 7, pb); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		conn *nodeclient.Conn
		want []byte
	}{{a, pa}, {b, pb}} {
		got, _, err := c.conn.Get(ctx, 7, nil)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Fatalf("tenant %s: %v", c.conn.Tenant(), err)
		}
	}
	if err := a.Delete(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, 7, nil); err != nil {
		t.Fatalf("A's delete removed B's block: %v", err)
	}
}

// TestBatchSplitting runs batches larger than the node's limits.
func TestBatchSplitting(t *testing.T) {
	ctx := ctxT(t)
	t.Run("mget_by_count_and_frame", func(t *testing.T) {
		// MaxBatch 3; 1500-byte blocks: two fit a 4096-byte frame, the
		// third is answered too large and asked again.
		n := startNode(t, nodeserver.Options{Limits: wire.Limits{MaxFrame: 4096, MaxBatch: 3, MaxPayload: 2000}})
		c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "s"})
		var ids []uint64
		for id := uint64(1); id <= 10; id++ {
			n.b.Store(block.Key{Tenant: "s", ID: id}, payload(1500, byte(id)))
			ids = append(ids, id)
		}
		res, err := c.MGet(ctx, ids, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || !bytes.Equal(r.Payload, payload(1500, byte(ids[i]))) {
				t.Fatalf("id %d: %v", ids[i], r.Err)
			}
		}
		if got := n.srv.Stats().RequestCount(wire.OpMGet, wire.CodeOK); got != 5 {
			t.Errorf("%d MGET requests, want 5 (two blocks fit a frame)", got)
		}
	})
	t.Run("mget_falls_back_to_get", func(t *testing.T) {
		// A maximum payload fits a GET response but not an MGET one.
		n := startNode(t, nodeserver.Options{Limits: wire.Limits{MaxFrame: 1036, MaxPayload: 1000}})
		c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "s"})
		for id := uint64(1); id <= 3; id++ {
			n.b.Store(block.Key{Tenant: "s", ID: id}, payload(1000, byte(id)))
		}
		res, err := c.MGet(ctx, []uint64{1, 2, 3}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || len(r.Payload) != 1000 {
				t.Fatalf("block %d: %v", i+1, r.Err)
			}
		}
		if got := n.srv.Stats().RequestCount(wire.OpGet, wire.CodeOK); got != 3 {
			t.Errorf("%d GET requests, want 3", got)
		}
	})
	t.Run("mput_by_count_and_frame", func(t *testing.T) {
		n := startNode(t, nodeserver.Options{Limits: wire.Limits{MaxFrame: 4096, MaxBatch: 3, MaxPayload: 1500}})
		c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "s"})
		var ids []uint64
		var ps [][]byte
		for id := uint64(1); id <= 10; id++ {
			ids = append(ids, id)
			ps = append(ps, payload(1500, byte(id)))
		}
		ids = append(ids, 11)
		ps = append(ps, payload(1501, 11)) // over the node's MaxPayload
		errs, err := c.MPut(ctx, ids, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs[:10] {
			if e != nil {
				t.Errorf("block %d: %v", ids[i], e)
			}
		}
		if !errors.Is(errs[10], kvpool.ErrTooLarge) {
			t.Errorf("oversized block: %v, want too large", errs[10])
		}
		if got := n.srv.Stats().RequestCount(wire.OpMPut, wire.CodeOK); got != 5 {
			t.Errorf("%d MPUT requests, want 5 (two blocks fit a frame)", got)
		}
		if n.b.Len() != 10 {
			t.Errorf("node holds %d blocks, want 10", n.b.Len())
		}
	})
	t.Run("exists_by_count", func(t *testing.T) {
		n := startNode(t, nodeserver.Options{Limits: wire.Limits{MaxBatch: 3}})
		c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "s"})
		n.b.Store(block.Key{Tenant: "s", ID: 8}, nil)
		got, err := c.Exists(ctx, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
		if err != nil {
			t.Fatal(err)
		}
		for i, ok := range got {
			if ok != (i == 7) {
				t.Fatalf("Exists = %v", got)
			}
		}
		if got := n.srv.Stats().RequestCount(wire.OpExists, wire.CodeOK); got != 4 {
			t.Errorf("%d EXISTS requests, want 4", got)
		}
	})
}

func TestPutTooLargeNotSent(t *testing.T) {
	n := startNode(t, nodeserver.Options{Limits: wire.Limits{MaxPayload: 100}})
	c := dial(t, n.addr, nodeclient.DialOptions{})
	if err := c.Put(ctxT(t), 1, make([]byte, 101)); !errors.Is(err, kvpool.ErrTooLarge) {
		t.Fatalf("Put: %v, want too large", err)
	}
	if got := n.srv.Stats().RequestCount(wire.OpPut, wire.CodeOK); got != 0 {
		t.Fatalf("%d PUTs reached the node", got)
	}
}

// TestPayloadOverClientLimit: a block larger than the client accepts is an
// error, and the connection stays in step.
func TestPayloadOverClientLimit(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	c := dial(t, n.addr, nodeclient.DialOptions{Limits: wire.Limits{MaxPayload: 100}})
	n.b.Store(block.Key{ID: 1}, payload(200, 1))
	n.b.Store(block.Key{ID: 2}, payload(50, 2))
	ctx := ctxT(t)
	if _, _, err := c.Get(ctx, 1, nil); !errors.Is(err, frame.ErrPayloadTooLarge) {
		t.Fatalf("Get: %v, want payload too large", err)
	}
	if got, _, err := c.Get(ctx, 2, nil); err != nil || len(got) != 50 {
		t.Fatalf("next Get: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	n := startNode(t, nodeserver.Options{Token: []byte("s3cret"),
		TenantPolicy: func(tenant string) error {
			if tenant == "banned" {
				return errors.New("tenant is banned")
			}
			return nil
		}})
	first := dial(t, n.addr, nodeclient.DialOptions{Tenant: "x", Token: []byte("s3cret")})
	ctx := ctxT(t)
	cases := []struct {
		name string
		opts nodeclient.DialOptions
		want error
	}{
		{"bad tenant", nodeclient.DialOptions{Tenant: "a/b"}, block.ErrBadTenant},
		{"missing token", nodeclient.DialOptions{Tenant: "x"}, kvpool.ErrUnauthorized},
		{"wrong token", nodeclient.DialOptions{Tenant: "x", Token: []byte("guess")}, kvpool.ErrUnauthorized},
		{"banned tenant", nodeclient.DialOptions{Tenant: "banned", Token: []byte("s3cret")}, kvpool.ErrUnauthorized},
		{"client frame limit below the node's", nodeclient.DialOptions{Token: []byte("s3cret"), Limits: wire.Limits{MaxFrame: 1 << 20, MaxPayload: 1000}}, kvpool.ErrTooLarge},
		{"negative timeout", nodeclient.DialOptions{Timeout: -1}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := nodeclient.Dial(ctx, n.addr, c.opts)
			if err == nil {
				conn.Close()
				t.Fatal("Dial succeeded")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Dial: %v, want %v", err, c.want)
			}
			if bytes.Contains([]byte(err.Error()), []byte("s3cret")) {
				t.Fatalf("error reveals the token: %v", err)
			}
		})
	}
	if _, err := first.Stats(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMaxConnsRefused(t *testing.T) {
	n := startNode(t, nodeserver.Options{MaxConns: 1})
	first := dial(t, n.addr, nodeclient.DialOptions{})
	if _, err := nodeclient.Dial(ctxT(t), n.addr, nodeclient.DialOptions{}); !errors.Is(err, kvpool.ErrUnavailable) {
		t.Fatalf("second Dial: %v, want unavailable (kvpool.ErrUnavailable)", err)
	}
	if _, err := first.Stats(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got := n.srv.Stats().ConnsRefused; got != 1 {
		t.Fatalf("refused %d, want 1", got)
	}
}

// gate is a pacer that blocks every Wait until opened (or the server's
// context ends), telling the test when a Wait has begun.
type gate struct {
	entered chan struct{}
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 100), open: make(chan struct{})} }

func (g *gate) Wait(ctx context.Context, n int) error {
	g.entered <- struct{}{}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestContextEndsCall: a call stuck on the node ends with its context, and
// the connection is not reused.
func TestContextEndsCall(t *testing.T) {
	g := newGate()
	n := startNode(t, nodeserver.Options{Egress: g})
	t.Cleanup(func() { close(g.open) })
	n.b.Store(block.Key{ID: 1}, payload(10, 1))
	p, err := nodeclient.NewPool(n.addr, nodeclient.PoolOptions{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, _, err := p.Get(ctx, 1, nil)
				errc <- err
			}()
			<-g.entered // the node is sending, held by the pacer
			if c.want == context.Canceled {
				cancel()
			}
			if err := <-errc; !errors.Is(err, c.want) {
				t.Fatalf("Get: %v, want %v", err, c.want)
			}
		})
	}
	// The pool replaced the broken connection.
	if _, err := p.Exists(ctxT(t), []uint64{1}); err != nil {
		t.Fatal(err)
	}
	if got := p.Counters().Dials; got != 3 {
		t.Fatalf("%d dials, want 3 (each broken connection replaced)", got)
	}
}

func TestClosedConn(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	c := dial(t, n.addr, nodeclient.DialOptions{})
	c.Close()
	if _, _, err := c.Get(ctxT(t), 1, nil); !errors.Is(err, nodeclient.ErrClosed) {
		t.Fatalf("Get on a closed conn: %v", err)
	}
	if !c.Broken() {
		t.Fatal("closed conn not broken")
	}
}

// waitFor waits until cond holds, failing the test after testTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// TestPoolRetriesStaleConn: a pooled connection the node closed while it
// was idle is replaced transparently. The idle timeout is a second: the
// first Get must reach the node before it, and a busy machine can hold
// the test process back for hundreds of milliseconds.
func TestPoolRetriesStaleConn(t *testing.T) {
	n := startNode(t, nodeserver.Options{IdleTimeout: time.Second})
	n.b.Store(block.Key{ID: 1}, payload(10, 1))
	p, err := nodeclient.NewPool(n.addr, nodeclient.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := ctxT(t)
	if _, _, err := p.Get(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node to close the idle connection", func() bool { return n.srv.Stats().ConnsOpen == 0 })
	if _, _, err := p.Get(ctx, 1, nil); err != nil {
		t.Fatalf("Get after the node closed the idle connection: %v", err)
	}
	if got := p.Counters().Retries; got != 1 {
		t.Fatalf("%d retries, want 1", got)
	}
}

// TestPoolConcurrent runs many goroutines through a small pool.
func TestPoolConcurrent(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	p, err := nodeclient.NewPool(n.addr, nodeclient.PoolOptions{Size: 3, Dial: nodeclient.DialOptions{Tenant: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := ctxT(t)
	const workers, perWorker = 12, 20
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				id := uint64(w*1000 + i)
				want := payload(1000+i*100, byte(id))
				if err := p.Put(ctx, id, want); err != nil {
					errc <- err
					return
				}
				got, _, err := p.Get(ctx, id, nil)
				if err != nil || !bytes.Equal(got, want) {
					errc <- fmt.Errorf("get %d: %v", id, err)
					return
				}
				res, err := p.MGet(ctx, []uint64{id, id + 1<<40}, nil)
				if err != nil || !bytes.Equal(res[0].Payload, want) || !errors.Is(res[1].Err, kvpool.ErrNotFound) {
					errc <- fmt.Errorf("mget %d: %v", id, err)
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
	if got := p.Counters().Dials; got > 3 {
		t.Errorf("%d dials for a pool of 3", got)
	}
	if n.b.Len() != workers*perWorker {
		t.Errorf("%d blocks stored, want %d", n.b.Len(), workers*perWorker)
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"dial ok", nodeclient.DialOptions{}.Validate(), ""},
		{"bad tenant", nodeclient.DialOptions{Tenant: "x y"}.Validate(), "Tenant"},
		{"bad limits", nodeclient.DialOptions{Limits: wire.Limits{MaxBatch: -1}}.Validate(), "MaxBatch"},
		{"token too long", nodeclient.DialOptions{Token: make([]byte, 1<<16)}.Validate(), "Token"},
		{"negative timeout", nodeclient.DialOptions{Timeout: -time.Second}.Validate(), "Timeout"},
		{"pool ok", nodeclient.PoolOptions{}.Validate(), ""},
		{"negative size", nodeclient.PoolOptions{Size: -1}.Validate(), "Size"},
		{"negative idle", nodeclient.PoolOptions{IdleTimeout: -1}.Validate(), "IdleTimeout"},
		{"pool dial", nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Tenant: "é"}}.Validate(), "Dial"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.field == "" {
				if c.err != nil {
					t.Fatal(c.err)
				}
				return
			}
			if c.err == nil || !bytes.Contains([]byte(c.err.Error()), []byte(c.field)) {
				t.Fatalf("error %v does not name %s", c.err, c.field)
			}
		})
	}
}
