package client_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/node/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const blockSize = 4 << 10

// newCluster starts a test cluster that is closed (and checked) when the
// test ends.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c, err := startCluster(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func newClient(t *testing.T, c *cluster, opts client.Options) *client.Client {
	t.Helper()
	cl, err := c.client(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func seq(from, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(from + i)
	}
	return ids
}

func payloads(ids []uint64) [][]byte {
	p := make([][]byte, len(ids))
	for i, id := range ids {
		p[i] = payload(id, blockSize)
	}
	return p
}

func put(t *testing.T, cl *client.Client, ids []uint64, po client.PutOptions) {
	t.Helper()
	errs, err := cl.Put(context.Background(), ids, payloads(ids), po)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("put block %d: %v", ids[i], e)
		}
	}
}

// checkLoaded fails unless every block of r is Loaded with its bytes.
func checkLoaded(t *testing.T, r client.GetResult, ids []uint64) {
	t.Helper()
	if r.Prefix() != len(ids) {
		t.Fatalf("prefix %d of %d (cached %d; %d missing, %d corrupt, %d timed out)", r.Prefix(), len(ids), r.Cached,
			r.Count(client.Missing), r.Count(client.Corrupt), r.Count(client.TimedOut))
	}
	for i, id := range ids {
		if !bytes.Equal(r.Blocks[i], payload(id, blockSize)) {
			t.Fatalf("block %d: %d bytes differ from what was put", id, len(r.Blocks[i]))
		}
	}
}

func TestPutGetReplicated(t *testing.T) {
	c := newCluster(t, 3)
	w := newClient(t, c, client.Options{LocalNode: "n0"})
	ids := seq(1000, 200)
	put(t, w, ids, client.PutOptions{Replicas: 2})

	pre, err := w.Lookup(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if pre.Len != len(ids) {
		t.Fatalf("lookup prefix %d, want %d", pre.Len, len(ids))
	}
	for i, locs := range pre.Replicas {
		if len(locs) != 2 || locs[0].Node == locs[1].Node {
			t.Fatalf("block %d: replicas %+v, want 2 on distinct nodes", ids[i], locs)
		}
	}

	// The writer's own node n0 goes away: a reader on another node gets
	// every block, byte-identical, from the other replicas.
	if err := c.nodes[0].stop(); err != nil {
		t.Fatal(err)
	}
	r := newClient(t, c, client.Options{LocalNode: "n1"})
	dst := make([][]byte, len(ids))
	for i := range dst {
		dst[i] = make([]byte, 0, blockSize)
	}
	res, err := r.Get(context.Background(), ids, dst)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, res, ids)
	for i, from := range res.From {
		if from.Node == "n0" {
			t.Fatalf("block %d read from the stopped node n0", ids[i])
		}
	}
	if &res.Blocks[0][0] != &dst[0][:1][0] {
		t.Error("block 0 was not read into the caller's buffer")
	}
	if st := r.Stats(); st.NodeFailures > 1 {
		t.Errorf("%d node failures; a dead node should cost one", st.NodeFailures)
	}
}

func TestCoalescing(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{LocalNode: "n0"})
	ids := []uint64{42}
	put(t, cl, ids, client.PutOptions{Hint: "n1"})
	n1 := c.nodes[1]
	before := n1.srv.Stats().RequestCount(wire.OpMGet, wire.CodeOK)
	n1.backend.reads.Store(0)
	release := n1.backend.hold()
	t.Cleanup(release)

	const readers = 32
	results := make([]client.GetResult, readers)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() { results[i], errs[i] = cl.Get(context.Background(), ids, nil) })
	}
	// Wait until the leader's fetch is blocked at the node and every other
	// reader has joined it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for client.Waiters(cl, ids[0]) != readers-1 || n1.backend.reads.Load() != 1 {
		if ctx.Err() != nil {
			release()
			wg.Wait()
			t.Fatalf("readers never all joined one fetch: %d waiters, %d reads", client.Waiters(cl, ids[0]), n1.backend.reads.Load())
		}
		runtime.Gosched()
	}
	release()
	wg.Wait()
	for i := range readers {
		if errs[i] != nil {
			t.Fatalf("reader %d: %v", i, errs[i])
		}
		checkLoaded(t, results[i], ids)
	}
	if got := n1.backend.reads.Load(); got != 1 {
		t.Errorf("node read the block %d times, want 1", got)
	}
	if got := n1.srv.Stats().RequestCount(wire.OpMGet, wire.CodeOK) - before; got != 1 {
		t.Errorf("node served %d MGETs, want 1", got)
	}
	if got := cl.Stats().Coalesced; got != readers-1 {
		t.Errorf("Coalesced = %d, want %d", got, readers-1)
	}
	// Each reader has its own copy: changing one changes no other.
	results[0].Blocks[0][0] ^= 0xff
	if results[1].Blocks[0][0] == results[0].Blocks[0][0] {
		t.Error("two readers share one buffer")
	}
}

func TestCorruptReplica(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		want     client.Status
	}{
		{"fallback to the second replica", 2, client.Loaded},
		{"only replica corrupt", 1, client.Corrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 2)
			cl := newClient(t, c, client.Options{})
			ids := []uint64{7}
			put(t, cl, ids, client.PutOptions{Replicas: tc.replicas, Hint: "n0"})
			// Replicas of one tier are tried in node ID order: n0 first.
			if err := c.nodes[0].backend.FlipBit(block.Key{ID: 7}, 100); err != nil {
				t.Fatal(err)
			}
			res, err := cl.Get(context.Background(), ids, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status[0] != tc.want {
				t.Fatalf("status %v, want %v", res.Status[0], tc.want)
			}
			if res.Corruptions != 1 || cl.Stats().Corruptions != 1 {
				t.Errorf("corruptions: result %d, stats %d; want 1", res.Corruptions, cl.Stats().Corruptions)
			}
			switch tc.want {
			case client.Loaded:
				checkLoaded(t, res, ids)
				if res.From[0].Node != "n1" {
					t.Errorf("loaded from %q, want n1", res.From[0].Node)
				}
			default:
				if res.Blocks[0] != nil || res.Prefix() != 0 {
					t.Errorf("corrupt block returned %d bytes, prefix %d", len(res.Blocks[0]), res.Prefix())
				}
			}
		})
	}
}

func TestDeadline(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{LocalNode: "n0"})
	fast, slow := seq(0, 4), seq(4, 4)
	put(t, cl, fast, client.PutOptions{Hint: "n0"})
	put(t, cl, slow, client.PutOptions{Hint: "n1"})
	release := c.nodes[1].backend.hold()
	t.Cleanup(release)

	// The deadline leaves the fast node ample time on any machine, busy
	// or not: twenty times its Get of the same blocks without a deadline,
	// and at least 0.3 s. The held node never answers, so no deadline is
	// too long for it.
	start := time.Now()
	if res, err := cl.Get(context.Background(), fast, nil); err != nil || res.Prefix() != len(fast) {
		t.Fatalf("get of the fast node's blocks: prefix %d, %v", res.Prefix(), err)
	}
	budget := max(0.3, 20*time.Since(start).Seconds())
	ids := append(append([]uint64(nil), fast...), slow...)
	ctx, cancel := context.WithDeadline(context.Background(), client.DeadlineFor(budget))
	defer cancel()
	res, err := cl.Get(ctx, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Prefix() != len(fast) {
		t.Fatalf("prefix %d, want %d", res.Prefix(), len(fast))
	}
	checkLoaded(t, client.GetResult{Status: res.Status[:4], Blocks: res.Blocks[:4]}, fast)
	for i := len(fast); i < len(ids); i++ {
		if res.Status[i] != client.TimedOut || res.Blocks[i] != nil {
			t.Errorf("block %d: %v with %d bytes, want timed-out with none", ids[i], res.Status[i], len(res.Blocks[i]))
		}
	}
	if d, _ := ctx.Deadline(); time.Now().Before(d) {
		t.Error("Get returned timed-out blocks before the deadline")
	}
	if st := cl.Stats(); st.NodeFailures != 0 {
		t.Errorf("a slow node past the caller's deadline was marked down (%d failures)", st.NodeFailures)
	}
}

func TestDeadNodeSkipped(t *testing.T) {
	c := newCluster(t, 1)
	// "a-dead" sorts before "n0", so its replicas are tried first.
	hole, err := c.addBlackhole("a-dead")
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c, client.Options{RequestTimeout: 200 * time.Millisecond, DialTimeout: 200 * time.Millisecond})
	ids := seq(0, 16)
	put(t, cl, ids, client.PutOptions{Hint: "n0"})
	for _, id := range ids {
		if err := c.announce(hole.id, hole.session, block.Key{ID: id}, payload(id, blockSize)); err != nil {
			t.Fatal(err)
		}
	}

	for i, want := range []struct{ failures, conns int64 }{{1, 1}, {1, 1}} {
		res, err := cl.Get(context.Background(), ids, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkLoaded(t, res, ids)
		st := cl.Stats()
		if int64(st.NodeFailures) != want.failures || hole.conns.Load() != want.conns {
			t.Errorf("after get %d: %d node failures, %d connections to the dead node; want %d, %d",
				i+1, st.NodeFailures, hole.conns.Load(), want.failures, want.conns)
		}
	}
	if cl.Stats().Skipped == 0 {
		t.Error("the second Get did not skip the dead node's replicas")
	}
}

func TestPrefetch(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{})
	ids := seq(500, 10)
	put(t, cl, ids, client.PutOptions{Hint: "n0"})
	want := []client.PrefetchResult{
		{Cached: 10, Moved: 10},
		{Cached: 10, Present: 10},
	}
	for i, w := range want {
		got, err := cl.Prefetch(context.Background(), append(ids, 9999), "n1")
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("prefetch %d: %+v, want %+v", i+1, got, w)
		}
	}
	for _, id := range ids {
		if !c.nodes[1].backend.Exists(block.Key{ID: id}) {
			t.Errorf("block %d not on n1 after prefetch", id)
		}
	}
}

func TestExists(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c, client.Options{Tenant: "t1"})
	put(t, cl, seq(0, 3), client.PutOptions{})
	leases := c.m.Stats()
	got, err := cl.Exists(context.Background(), []uint64{0, 9, 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true}; !equalBools(got, want) {
		t.Errorf("Exists = %v, want %v", got, want)
	}
	if after := c.m.Stats(); after != leases {
		t.Errorf("Exists changed the master's counters:\n%+v\n%+v", leases, after)
	}
	// Another tenant sees nothing.
	other := newClient(t, c, client.Options{Tenant: "t2"})
	got, err = other.Exists(context.Background(), []uint64{0})
	if err != nil || got[0] {
		t.Errorf("tenant t2 sees tenant t1's block: %v, %v", got, err)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBadInput(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c, client.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"put length mismatch", func() error {
			_, err := cl.Put(ctx, []uint64{1, 2}, [][]byte{{1}}, client.PutOptions{})
			return err
		}, "2 ids but 1 payloads"},
		{"put replicas", func() error {
			_, err := cl.Put(ctx, []uint64{1}, [][]byte{{1}}, client.PutOptions{Replicas: -1})
			return err
		}, "PutOptions.Replicas"},
		{"prefetch no node", func() error {
			_, err := cl.Prefetch(ctx, []uint64{1}, "")
			return err
		}, "empty target node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	cl.Close()
	if _, err := cl.Get(ctx, []uint64{1}, nil); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	idx := masterIndex{}
	for _, tc := range []struct {
		name string
		opts client.Options
		want string // "" = valid
	}{
		{"zero with index", client.Options{Index: idx}, ""},
		{"no master no index", client.Options{}, "Options.Master"},
		{"bad tenant", client.Options{Index: idx, Tenant: "a b"}, "Options.Tenant"},
		{"negative dial timeout", client.Options{Index: idx, DialTimeout: -1}, "Options.DialTimeout"},
		{"negative request timeout", client.Options{Index: idx, RequestTimeout: -1}, "Options.RequestTimeout"},
		{"negative pool", client.Options{Index: idx, PoolSize: -1}, "Options.PoolSize"},
		{"too many replicas", client.Options{Index: idx, Replicas: client.MaxReplicas + 1}, "Options.Replicas"},
		{"negative down retry", client.Options{Index: idx, DownRetry: -time.Second}, "Options.DownRetry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestDeadlineFor(t *testing.T) {
	for _, tc := range []struct {
		seconds float64
		want    time.Duration
	}{
		{-1, 0}, {0, 0}, {2.5, 2500 * time.Millisecond},
	} {
		before := time.Now()
		got := client.DeadlineFor(tc.seconds)
		after := time.Now()
		if got.Before(before.Add(tc.want)) || got.After(after.Add(tc.want)) {
			t.Errorf("DeadlineFor(%v) = %v, want between %v and %v", tc.seconds, got, before.Add(tc.want), after.Add(tc.want))
		}
	}
	if got := client.DeadlineFor(1e300); got.Before(time.Now()) {
		t.Errorf("DeadlineFor(1e300) = %v, in the past", got)
	}
}
