package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node/store"
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
)

// errDown is what the in-process master answers while it is "down".
var errDown = errors.New("test master: connection refused")

// inProc is a MasterClient calling a master.Master in process. The test
// can take it down and replace the master (a restart).
type inProc struct {
	mu    sync.Mutex
	m     *master.Master
	down  bool
	beats chan struct{} // receives after every successful heartbeat, if not nil
}

func newMaster(t testing.TB, o master.Options) *master.Master {
	t.Helper()
	if o.NodeTTL == 0 {
		o.NodeTTL = time.Hour // no expiry while a test runs slowly under -race
	}
	m, err := master.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (c *inProc) master() *master.Master {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m
}

func (c *inProc) set(m *master.Master, down bool) {
	c.mu.Lock()
	c.m, c.down = m, down
	c.mu.Unlock()
}

func (c *inProc) Register(ctx context.Context, info meta.NodeInfo, inv meta.Inventory, usage meta.NodeUsage) (meta.RegisterReply, error) {
	c.mu.Lock()
	m, down := c.m, c.down
	c.mu.Unlock()
	if down {
		return meta.RegisterReply{}, errDown
	}
	return m.Register(info, inv, usage)
}

func (c *inProc) Heartbeat(ctx context.Context, id meta.NodeID, s meta.Session, d meta.Delta, u meta.NodeUsage, hits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	c.mu.Lock()
	m, down := c.m, c.down
	c.mu.Unlock()
	if down {
		return meta.HeartbeatReply{}, errDown
	}
	r, err := m.Heartbeat(id, s, d, u, hits, done)
	if err == nil && c.beats != nil {
		select {
		case c.beats <- struct{}{}:
		default:
		}
	}
	return r, err
}

const testNode meta.NodeID = "node-a"

// agentRig is a store with an agent, driven by hand.
type agentRig struct {
	t  *testing.T
	st *store.Store
	ag *agent
	c  *inProc
}

// newRig opens a store of ramSlots RAM slots and an SSD tier of at most ssdSlots objects (none:
// no SSD tier) of bs bytes, with an agent talking to c.
func newRig(t *testing.T, c *inProc, bs, ramSlots, ssdSlots int) *agentRig {
	t.Helper()
	ag := newAgent(c, time.Second, slog.New(slog.DiscardHandler))
	so := store.Options{
		RAM:         ram.Options{BlockSize: bs, CapacityBytes: int64(bs * ramSlots)},
		Promoter:    ag,
		OnEvent:     ag.onEvent,
		OnPromotion: ag.onPromotion,
	}
	ssdBytes := int64(0)
	if ssdSlots > 0 {
		so.SSD = &ssd.Options{Dir: "/ssd", FS: vfs.NewMem(), BlockSize: bs, CapacityBytes: int64(ssdSlots) * ssd.SlotSize(bs),
			PagesPerFile: 16, Sync: ssd.SyncNone, HighWatermark: 1, LowWatermark: 1,
			MaxObjects: ssdSlots} // objects of up to bs bytes: ssdSlots of them, as the old slots were
		ssdBytes = so.SSD.CapacityBytes
	}
	st, err := store.Open(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.WaitIdle(ctx); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ag.attach(st, meta.NodeInfo{ID: testNode, Addr: "127.0.0.1:7480", RAMBytes: int64(bs * ramSlots), SSDBytes: ssdBytes, BlockSize: int64(bs)})
	return &agentRig{t: t, st: st, ag: ag, c: c}
}

var ctx = context.Background()

func tkey(id uint64) block.Key { return block.Key{Tenant: "t", ID: id} }

func payload(id uint64, n int) []byte { return tiertest.Payload(id, 1, n) }

func (r *agentRig) put(id uint64, n int) {
	r.t.Helper()
	k := tkey(id)
	p := payload(id, n)
	if _, err := r.st.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
		r.t.Fatalf("put %s: %v", k, err)
	}
}

func (r *agentRig) beat() {
	r.t.Helper()
	if err := r.ag.beat(ctx); err != nil {
		r.t.Fatalf("beat: %v", err)
	}
}

// settle beats until the master has no task in flight for the node (the
// orders and promotions of each beat are executed by the agent and
// confirmed by the next), so that the index can be compared with the
// store.
func (r *agentRig) settle() {
	r.t.Helper()
	for range 10 {
		if err := r.st.WaitIdle(ctx); err != nil {
			r.t.Fatal(err)
		}
		r.beat()
		busy := false
		for _, ns := range r.c.master().Nodes() {
			if ns.Info.ID == testNode {
				busy = ns.TasksInFlight > 0 || ns.PromotionsQueued > 0
			}
		}
		if !busy {
			return
		}
	}
	r.t.Fatal("the master still hands out tasks after 10 beats")
}

// check compares the master's index for the node with the store, key by
// key over ids, and in total.
func (r *agentRig) check(where string, ids []uint64, size func(uint64) int) {
	r.t.Helper()
	m := r.c.master()
	if err := m.CheckInvariants(); err != nil {
		r.t.Fatalf("%s: master invariants: %v", where, err)
	}
	for _, id := range ids {
		k := tkey(id)
		want := r.st.Locate([]block.Key{k})[0]
		var got store.Location
		for _, rep := range m.Query(k) {
			if rep.Node != testNode {
				continue
			}
			switch rep.Tier {
			case meta.TierRAM:
				got |= store.InRAM
			case meta.TierSSD:
				got |= store.InSSD
			}
			p := payload(id, size(id))
			if rep.Size != int64(len(p)) || rep.Sum != block.Checksum(k, p) {
				r.t.Errorf("%s: %s indexed with size %d sum %08x, want %d %08x", where, k, rep.Size, rep.Sum, len(p), block.Checksum(k, p))
			}
		}
		if got != want {
			r.t.Fatalf("%s: %s indexed in %v, store holds it in %v", where, k, got, want)
		}
	}
	st := r.st.Stats()
	for _, ns := range m.Nodes() {
		if ns.Info.ID != testNode {
			continue
		}
		if ns.RAMReplicas != st.RAM.Blocks || ns.SSDReplicas != st.SSD.Blocks {
			r.t.Fatalf("%s: master counts %d RAM and %d SSD replicas, store holds %d and %d",
				where, ns.RAMReplicas, ns.SSDReplicas, st.RAM.Blocks, st.SSD.Blocks)
		}
		return
	}
	r.t.Fatalf("%s: node %s not registered", where, testNode)
}

func ids(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}

// TestAgentIndex: registration indexes the store's inventory; puts,
// deletes, demotions and SSD evictions reach the index with the next
// beat; a restarted master gets the full inventory again.
func TestAgentIndex(t *testing.T) {
	const bs = 4096
	size := func(id uint64) int { return 100 + int(id%7)*500 }
	c := &inProc{}
	c.set(newMaster(t, master.Options{HighWatermark: 1, LowWatermark: 0.99}), false)
	r := newRig(t, c, bs, 8, 24)
	all := ids(40)

	r.beat() // registers (empty)
	r.check("registered empty", all, size)

	for i := range uint64(20) { // 8 in RAM, 12 demoted
		r.put(i, size(i))
	}
	r.beat()
	r.check("after 20 puts", all, size)

	for _, id := range []uint64{0, 5, 19} { // SSD, SSD, RAM
		if err := r.st.Delete(ctx, tkey(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(20); i < 40; i++ { // overflows SSD: SSD evictions
		r.put(i, size(i))
	}
	if st := r.st.Stats(); st.SSD.Evicted == 0 {
		t.Fatalf("setup: no SSD eviction (%+v)", st.SSD)
	}
	r.beat()
	r.check("after deletes and SSD evictions", all, size)

	// A restarted master knows nothing: the next beat is refused, and
	// the agent registers its full inventory, dropping the old master's
	// tasks (a promotion in flight, a result not yet reported).
	r.ag.mu.Lock()
	r.ag.promos[tkey(999)] = 42
	r.ag.results = append(r.ag.results, meta.TaskResult{ID: 41, OK: true})
	r.ag.mu.Unlock()
	c.set(newMaster(t, master.Options{HighWatermark: 1, LowWatermark: 0.99}), false)
	r.beat()
	if s := r.ag.stats(); s.Reregisters != 1 || s.Registers != 2 || s.TasksDropped != 2 {
		t.Errorf("after the master restart: %+v, want 1 re-registration, 2 registrations, 2 tasks dropped", s)
	}
	r.check("after master restart", all, size)
}

// TestAgentUnreachable: while the master is down the store keeps serving
// and the changes accumulate; when it is back (restarted meanwhile) the
// index catches up.
func TestAgentUnreachable(t *testing.T) {
	const bs = 4096
	size := func(uint64) int { return 1000 }
	c := &inProc{}
	noOrders := master.Options{HighWatermark: 1, LowWatermark: 0.99}
	m := newMaster(t, noOrders)
	c.set(m, false)
	r := newRig(t, c, bs, 4, 64)
	all := ids(30)
	for i := range uint64(10) {
		r.put(i, 1000)
	}
	r.beat()
	r.check("before the outage", all, size)

	c.set(m, true)
	for i := uint64(10); i < 30; i++ {
		r.put(i, 1000)
	}
	if err := r.st.Delete(ctx, tkey(3)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := r.ag.beat(ctx); !errors.Is(err, errDown) {
			t.Fatalf("beat while down: %v, want errDown", err)
		}
	}
	// The data plane does not depend on the master.
	if got, _, _, err := r.st.Get(ctx, tkey(25), nil); err != nil || len(got) != 1000 {
		t.Fatalf("Get while the master is down: %d bytes, %v", len(got), err)
	}
	c.set(m, false)
	r.beat()
	r.check("after the outage", all, size)

	// Down, then back as a new master.
	c.set(m, true)
	for i := range uint64(5) {
		if err := r.st.Delete(ctx, tkey(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.ag.beat(ctx); err == nil {
		t.Fatal("beat while down: no error")
	}
	c.set(newMaster(t, noOrders), false)
	r.beat()
	r.check("after the outage and a master restart", all, size)
	if s := r.ag.stats(); s.Failures != 4 || !s.Registered {
		t.Errorf("agent stats %+v, want 4 failures and registered", s)
	}
}

// TestAgentOrders: the master's eviction orders are executed and
// confirmed by the next delta; SSD hits lead to promotion tasks whose
// results reach the master.
func TestAgentOrders(t *testing.T) {
	const bs = 4096
	size := func(uint64) int { return bs }
	c := &inProc{}
	// Pool RAM is 16 slots: over 8 (0.5) the master orders demotions down
	// to 6 (0.375).
	c.set(newMaster(t, master.Options{HighWatermark: 0.5, LowWatermark: 0.375,
		Promotion: master.PromotionOptions{RAMWatermark: 1}}), false)
	r := newRig(t, c, bs, 16, 64)
	all := ids(20)
	for i := range uint64(12) {
		r.put(i, bs)
	}
	r.beat() // registers
	r.beat() // reports nothing new; the master is over its watermark
	st := c.master().Stats()
	if st.EvictFreed == 0 {
		t.Fatalf("master ordered no eviction: %+v", st)
	}
	r.beat() // the orders ran; this delta confirms them
	st = c.master().Stats()
	if st.EvictConfirmed != st.EvictFreed || st.EvictFailed != 0 {
		t.Errorf("orders: %d freed, %d confirmed, %d failed", st.EvictFreed, st.EvictConfirmed, st.EvictFailed)
	}
	if got := r.st.Stats().RAM.Blocks; got != 6 {
		t.Errorf("RAM holds %d blocks after the demotions, want 6", got)
	}
	r.check("after demotion orders", all, size)

	// Read a demoted block twice from SSD: the master promotes it.
	var demoted block.Key
	for _, id := range all {
		if r.st.Locate([]block.Key{tkey(id)})[0] == store.InSSD {
			demoted = tkey(id)
			break
		}
	}
	for range 2 {
		if _, _, from, err := r.st.Get(ctx, demoted, nil); err != nil || from != store.InSSD {
			t.Fatalf("Get %s: from %v, %v", demoted, from, err)
		}
		r.beat()
	}
	if err := r.st.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if loc := r.st.Locate([]block.Key{demoted})[0]; loc != store.InRAM|store.InSSD {
		t.Fatalf("promoted block in %v, want ram+ssd", loc)
	}
	r.beat() // the result and the new RAM copy
	ps := c.master().PromotionStats()
	if ps.Completed != 1 || ps.CompletedBytes != bs {
		t.Errorf("master promotion stats %+v, want 1 completed of %d bytes", ps, bs)
	}
	r.check("after promotion", all, size)
}

// TestAgentModel: random store operations and master restarts, with a
// beat after every few; after every beat the index equals the store.
func TestAgentModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			const bs = 1024
			rng := rand.New(rand.NewPCG(seed, 42))
			sizes := map[uint64]int{}
			size := func(id uint64) int { return sizes[id] }
			c := &inProc{}
			mo := master.Options{HighWatermark: 0.6, LowWatermark: 0.5, Promotion: master.PromotionOptions{RAMWatermark: 1}}
			c.set(newMaster(t, mo), false)
			r := newRig(t, c, bs, 16, 40)
			all := ids(64)
			for step := range 400 {
				id := uint64(rng.IntN(len(all)))
				switch op := rng.IntN(10); {
				case op < 5:
					n := 1 + rng.IntN(bs)
					sizes[id] = n
					r.put(id, n)
				case op < 7:
					r.st.Get(ctx, tkey(id), nil) // may miss
				case op < 8:
					if err := r.st.Delete(ctx, tkey(id)); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						t.Fatal(err)
					}
				case op < 9:
					if err := r.st.Demote(ctx, tkey(id)); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						t.Fatal(err)
					}
				default:
					if rng.IntN(20) == 0 {
						c.set(newMaster(t, mo), false) // restart
					}
					r.settle()
					r.check(fmt.Sprint("step ", step), all, size)
				}
			}
			ms, ps := c.master().Stats(), c.master().PromotionStats()
			t.Logf("agent %+v; last master: %d orders confirmed, %d promotions completed", r.ag.stats(), ms.EvictConfirmed, ps.Completed)
		})
	}
}

// sizing is a MasterClient recording the largest report it was sent, in
// entries and encoded bytes.
type sizing struct {
	*inProc
	registers, beats   int
	maxItems, maxBytes int
	maxHitBytes, hits  int
	// backlogs records each report's Backlog flag, in order.
	backlogs []bool
}

func (c *sizing) note(items []meta.Item, removed []meta.ItemKey, moved []meta.Move) {
	n, b := len(items)+len(removed)+len(moved), 0
	for _, it := range items {
		b += masterproto.ItemLen(it.Key)
	}
	for _, ik := range removed {
		b += masterproto.ItemLen(ik.Key)
	}
	for _, mv := range moved {
		b += masterproto.ItemLen(mv.Key)
	}
	c.maxItems, c.maxBytes = max(c.maxItems, n), max(c.maxBytes, b)
}

func (c *sizing) Register(ctx context.Context, info meta.NodeInfo, inv meta.Inventory, usage meta.NodeUsage) (meta.RegisterReply, error) {
	c.registers++
	c.note(inv, nil, nil)
	c.backlogs = append(c.backlogs, usage.Backlog)
	return c.inProc.Register(ctx, info, inv, usage)
}

func (c *sizing) Heartbeat(ctx context.Context, id meta.NodeID, s meta.Session, d meta.Delta, u meta.NodeUsage, hits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	c.beats++
	c.note(d.Added, d.Removed, d.Moved)
	c.backlogs = append(c.backlogs, u.Backlog)
	hb := 0
	for _, k := range hits {
		hb += masterproto.HitLen(k)
	}
	c.maxHitBytes, c.hits = max(c.maxHitBytes, hb), c.hits+len(hits)
	return c.inProc.Heartbeat(ctx, id, s, d, u, hits, done)
}

// TestAgentSplitsLargeInventory: a node holding more objects than one
// REGISTER frame may carry (here, injected limits of a few entries or a
// few names' bytes) registers with part of its inventory and reports the
// rest in the heartbeats that follow at once, each within the limits,
// until the master indexes every object; a restarted master gets it all
// again the same way.
func TestAgentSplitsLargeInventory(t *testing.T) {
	c := &inProc{}
	c.set(newMaster(t, master.Options{HighWatermark: 1, LowWatermark: 0.99}), false)
	r := newRig(t, c, 4096, 64, 0)
	var keys []block.Key
	for i := range 40 {
		k := block.Named("t", fmt.Sprintf("object-%02d-%s", i, strings.Repeat("n", 40)))
		if i%2 == 1 {
			k = tkey(uint64(i))
		}
		p := payload(uint64(i), 100)
		if _, err := r.st.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	named := masterproto.ItemLen(keys[0])
	for _, lim := range []reportLimits{{items: 7, bytes: 1 << 20}, {items: 1000, bytes: 5 * named}, {items: 1, bytes: 1}} {
		t.Run(fmt.Sprintf("items=%d,bytes=%d", lim.items, lim.bytes), func(t *testing.T) {
			sc := &sizing{inProc: c}
			r.ag.client, r.ag.limits = sc, lim
			c.set(newMaster(t, master.Options{HighWatermark: 1, LowWatermark: 0.99}), false)
			r.ag.registered = false // as after a master restart
			r.beat()
			for n := 0; r.ag.backlog; n++ {
				if n > len(keys) {
					t.Fatalf("still a backlog after %d beats", n)
				}
				r.beat()
			}
			if sc.registers != 1 || sc.beats < 2 {
				t.Errorf("%d registrations and %d beats; want 1 and several (the inventory split)", sc.registers, sc.beats)
			}
			// Every report but the last says part of the inventory is
			// still to come (a new leader waits for that).
			for i, b := range sc.backlogs {
				if last := i == len(sc.backlogs)-1; b == last {
					t.Errorf("report %d of %d: backlog %v; want %v", i+1, len(sc.backlogs), b, !last)
				}
			}
			if tiny := lim.items < 2; tiny { // one key per report, over the limits: still progress
				if sc.maxItems > 1 {
					t.Errorf("largest report: %d entries; want 1 a call under limits no key fits", sc.maxItems)
				}
			} else if sc.maxItems > lim.items || sc.maxBytes > lim.bytes {
				t.Errorf("largest report: %d entries, %d bytes; limits %d and %d", sc.maxItems, sc.maxBytes, lim.items, lim.bytes)
			}
			m := c.master()
			for _, k := range keys {
				if reps := m.Query(k); len(reps) != 1 || reps[0].Size != 100 {
					t.Errorf("%v indexed as %+v, want one replica of 100 bytes", k, reps)
				}
			}
			if err := m.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAgentBoundsSSDHits: the SSD hits of one heartbeat take at most a
// quarter of its bytes; the rest go with the next beats, none lost.
func TestAgentBoundsSSDHits(t *testing.T) {
	c := &inProc{}
	c.set(newMaster(t, master.Options{HighWatermark: 1, LowWatermark: 0.99}), false)
	r := newRig(t, c, 4096, 8, 0)
	sc := &sizing{inProc: c}
	r.ag.client = sc
	r.beat() // registers
	const n = 50
	name := func(i int) block.Key {
		return block.Named("t", fmt.Sprintf("hit-%03d-%s", i, strings.Repeat("h", 1000)))
	}
	hit := masterproto.HitLen(name(0))
	r.ag.limits = reportLimits{items: 1000, bytes: 4 * 10 * hit} // ten hits per beat
	for i := range n {
		r.ag.Consider(name(i), store.Load{})
	}
	for range n {
		r.beat()
	}
	if sc.hits != n || sc.maxHitBytes > 10*hit {
		t.Errorf("%d hits reported, at most %d bytes in a beat; want %d, at most %d", sc.hits, sc.maxHitBytes, n, 10*hit)
	}
}
