package node

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node/store"
)

// syncTimeout bounds every wait of these tests; none is expected to come
// near it (it only turns a hang into a failure).
const syncTimeout = time.Minute

// hourly is a master that asks for a heartbeat once an hour and issues no
// eviction orders: while a test runs, only a Sync's kick makes the agent
// beat.
var hourly = master.Options{HighWatermark: 1, LowWatermark: 0.99, HeartbeatInterval: time.Hour, NodeTTL: 2 * time.Hour}

// runAgent runs the agent's loop, beating once an hour, until the test
// ends.
func (r *agentRig) runAgent() {
	r.ag.interval, r.ag.every = time.Hour, time.Hour
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.ag.run(rctx)
	}()
	r.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// sync calls the agent's Sync, failing the test on an error.
func (r *agentRig) sync() {
	r.t.Helper()
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if err := r.ag.Sync(sctx); err != nil {
		r.t.Fatalf("Sync: %v", err)
	}
}

// indexed reports whether the master's index holds k on the test node.
func (r *agentRig) indexed(k block.Key) bool {
	for _, rep := range r.c.master().Query(k) {
		if rep.Node == testNode {
			return true
		}
	}
	return false
}

// waitUntil waits for cond to hold (polling), failing the test after
// syncTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(syncTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, syncTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAgentSync: with beats an hour apart, a Sync after a put (and after
// a delete) returns once the master's index has the change; a Sync before
// the node registered is served by the registration.
func TestAgentSync(t *testing.T) {
	c := &inProc{}
	c.set(newMaster(t, hourly), false)
	r := newRig(t, c, 4096, 8, 16)

	r.put(1, 100)
	first := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, syncTimeout)
		defer cancel()
		first <- r.ag.Sync(sctx) // before the agent runs: the registration serves it
	}()
	r.runAgent()
	if err := <-first; err != nil {
		t.Fatalf("Sync before registration: %v", err)
	}
	if s := r.ag.stats(); s.Registers != 1 || !r.indexed(tkey(1)) {
		t.Fatalf("after the first Sync: %+v, key 1 indexed %v; want registered with it", s, r.indexed(tkey(1)))
	}

	r.put(2, 200)
	r.sync()
	if !r.indexed(tkey(2)) {
		t.Fatal("key 2 not indexed after put and Sync")
	}
	if err := r.st.Delete(ctx, tkey(2)); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if r.indexed(tkey(2)) {
		t.Fatal("key 2 still indexed after delete and Sync")
	}
	named := block.Named("t", "user:42")
	p := payload(3, 50)
	if _, err := r.st.Put(ctx, named, p, block.Checksum(named, p)); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if !r.indexed(named) {
		t.Fatal("a named object not indexed after put and Sync")
	}
	s := r.ag.stats()
	if s.Syncs != 4 || s.Beats < 3 || s.Kicked < 3 {
		t.Errorf("agent stats %+v; want 4 syncs, at least 3 beats, all kicked", s)
	}
	r.check("after the syncs", ids(4), func(id uint64) int { return 100 * int(id) })
}

// gated holds heartbeats at a gate while it is shut, to line up
// concurrent Syncs behind one beat.
type gated struct {
	*inProc
	shut atomic.Bool
	held chan struct{} // receives when a heartbeat reaches the shut gate
	open chan struct{} // closed to let held heartbeats through
}

func (c *gated) Heartbeat(ctx context.Context, id meta.NodeID, s meta.Session, d meta.Delta, u meta.NodeUsage, hits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	if c.shut.Load() {
		c.held <- struct{}{}
		<-c.open
	}
	return c.inProc.Heartbeat(ctx, id, s, d, u, hits, done)
}

// TestAgentSyncCoalesces: 50 concurrent Syncs share beats: those waiting
// when a beat takes the dirty marks are served by it, those that came
// while it was in flight by the next one, so they cost at most two.
func TestAgentSyncCoalesces(t *testing.T) {
	ip := &inProc{}
	ip.set(newMaster(t, hourly), false)
	c := &gated{inProc: ip, held: make(chan struct{}), open: make(chan struct{})}
	r := newRig(t, ip, 4096, 8, 0)
	r.ag.client = c
	r.runAgent()
	r.sync() // registers
	before := r.ag.stats()

	r.put(1, 100)
	c.shut.Store(true)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, syncTimeout)
			defer cancel()
			errs <- r.ag.Sync(sctx)
		})
	}
	<-c.held // a kicked beat is in flight
	// Every Sync has chosen the report it waits for: the one at the gate,
	// or the next.
	waitUntil(t, "50 Syncs waiting", func() bool { return r.ag.stats().Syncs == before.Syncs+n })
	c.shut.Store(false)
	close(c.open)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	if !r.indexed(tkey(1)) {
		t.Fatal("key 1 not indexed after the Syncs")
	}
	after := r.ag.stats()
	if beats := after.Beats - before.Beats; beats < 1 || beats > 3 {
		t.Errorf("%d concurrent Syncs cost %d beats; want 1 to 3", n, beats)
	}
	if kicked := after.Kicked - before.Kicked; kicked > 3 {
		t.Errorf("%d concurrent Syncs kicked %d beats; want at most 3", n, kicked)
	}
}

// failing counts the calls a MasterClient failed.
type failing struct {
	*inProc
	failed atomic.Int64
}

func (c *failing) Register(ctx context.Context, info meta.NodeInfo, inv meta.Inventory, usage meta.NodeUsage) (meta.RegisterReply, error) {
	r, err := c.inProc.Register(ctx, info, inv, usage)
	if err != nil {
		c.failed.Add(1)
	}
	return r, err
}

func (c *failing) Heartbeat(ctx context.Context, id meta.NodeID, s meta.Session, d meta.Delta, u meta.NodeUsage, hits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	r, err := c.inProc.Heartbeat(ctx, id, s, d, u, hits, done)
	if err != nil {
		c.failed.Add(1)
	}
	return r, err
}

// TestAgentSyncMasterDown: while the master is down a Sync waits, the
// agent retrying on its backoff, and returns its context's error when the
// context ends; once the master is back a Sync delivers what changed
// meanwhile.
func TestAgentSyncMasterDown(t *testing.T) {
	ip := &inProc{}
	m := newMaster(t, hourly)
	ip.set(m, false)
	c := &failing{inProc: ip}
	r := newRig(t, ip, 4096, 8, 0)
	r.ag.client = c
	r.runAgent()
	r.sync()

	ip.set(m, true)
	r.put(1, 100)
	sctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- r.ag.Sync(sctx) }()
	waitUntil(t, "two failed beats", func() bool { return c.failed.Load() >= 2 }) // the kicked one and a retry
	cancel()
	err := <-res
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "node: sync with the master: ") {
		t.Fatalf("Sync with the master down: %v; want context.Canceled, wrapped", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Millisecond)
	defer dcancel()
	if err := r.ag.Sync(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync with the master down: %v; want context.DeadlineExceeded", err)
	}
	if r.indexed(tkey(1)) {
		t.Fatal("key 1 indexed while the master was down")
	}

	ip.set(m, false)
	r.sync()
	if !r.indexed(tkey(1)) {
		t.Fatal("key 1 not indexed after the master came back and a Sync")
	}
}

// partWatch counts the heartbeats that add index entries after the Sync
// under test returned. Each such heartbeat first waits a moment for that
// return, so a Sync returning too early is caught rather than outrun.
type partWatch struct {
	*inProc
	returned chan struct{} // closed when the Sync returns
	late     atomic.Int64
}

func (c *partWatch) Heartbeat(ctx context.Context, id meta.NodeID, s meta.Session, d meta.Delta, u meta.NodeUsage, hits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	if len(d.Added) > 0 {
		select {
		case <-c.returned:
			c.late.Add(1)
		case <-time.After(10 * time.Millisecond): // the Sync waits for this part: fine
		}
	}
	return c.inProc.Heartbeat(ctx, id, s, d, u, hits, done)
}

// TestAgentSyncWaitsForEveryPart: a change reported over several beats
// (a report over the frame limits leaves the rest for the next) is synced
// only when its last part is in.
func TestAgentSyncWaitsForEveryPart(t *testing.T) {
	ip := &inProc{}
	ip.set(newMaster(t, hourly), false)
	c := &partWatch{inProc: ip, returned: make(chan struct{})}
	r := newRig(t, ip, 4096, 16, 0)
	r.ag.client = c
	r.ag.limits = reportLimits{items: 2, bytes: 1 << 20} // one key (an entry per tier at worst) per beat
	r.runAgent()
	r.sync()
	before := r.ag.stats()
	const n = 10
	for i := range uint64(n) {
		r.put(i, 100)
	}
	r.sync()
	close(c.returned)
	for i := range uint64(n) {
		if !r.indexed(tkey(i)) {
			t.Errorf("key %d not indexed after Sync", i)
		}
	}
	if beats := r.ag.stats().Beats - before.Beats; beats < n {
		t.Errorf("%d keys reported in %d beats; want one a beat", n, beats)
	}
	if late := c.late.Load(); late != 0 {
		t.Errorf("%d parts of the report went out after Sync returned", late)
	}
}

// TestAgentSyncRecheck: a beat that finds a copy said to be leaving RAM
// still there puts its mark back to look again; a Sync waits for that
// second look.
func TestAgentSyncRecheck(t *testing.T) {
	c := &inProc{}
	c.set(newMaster(t, hourly), false)
	r := newRig(t, c, 4096, 8, 0)
	r.runAgent()
	r.put(1, 100)
	r.sync()
	before := r.ag.stats()
	// As if RAM had reported evicting key 1 while its copy is still
	// leaving (it stays here: the second look reports it in RAM).
	r.ag.onEvent(store.Event{Kind: store.EventDropped, Key: tkey(1)})
	r.sync()
	if beats := r.ag.stats().Beats - before.Beats; beats < 2 {
		t.Errorf("Sync returned after %d beats; want 2 (the look and the second look)", beats)
	}
	if !r.indexed(tkey(1)) {
		t.Fatal("key 1 not indexed")
	}
}

// TestNodeSync: over the data plane, SYNC after a put (or a delete) on a
// node with a master returns once the master's index has the change,
// with heartbeats an hour apart; a standalone node answers SYNC at once.
func TestNodeSync(t *testing.T) {
	c := &inProc{}
	c.set(newMaster(t, hourly), false)
	cfg := testConfig("")
	cfg.NodeName = "n1"
	cfg.HeartbeatInterval = time.Hour
	r := start(t, cfg, Options{Master: c})
	p := pool(t, r.n.Addr())
	indexed := func(k block.Key) bool {
		for _, rep := range c.master().Query(k) {
			if rep.Node == "n1" {
				return true
			}
		}
		return false
	}
	k := block.Named("t", "session:7")
	if err := p.PutNamed(ctx, k.Name, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatalf("Sync after put: %v", err)
	}
	if !indexed(k) {
		t.Fatal("the object is not indexed after put and SYNC")
	}
	if err := p.DeleteNamed(ctx, k.Name); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatalf("Sync after delete: %v", err)
	}
	if indexed(k) {
		t.Fatal("the object is still indexed after delete and SYNC")
	}
	if s := r.n.AgentStats(); s.Syncs != 2 || s.Kicked < 2 {
		t.Errorf("agent stats %+v; want 2 syncs, each kicking a beat", s)
	}

	alone := start(t, testConfig(""), Options{})
	if err := pool(t, alone.n.Addr()).Sync(ctx); err != nil {
		t.Fatalf("Sync on a standalone node: %v", err)
	}
}
