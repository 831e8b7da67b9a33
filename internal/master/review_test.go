package master

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// Adversarial tests of the flat index (index.go): keys built to collide
// on shard, home slot and tag; shards at their limits; node numbers
// reused; a clock that wraps; and a concurrent run whose every answer is
// checked against what the key alone determines.

// unmulInv returns the inverse of odd a modulo 2^64 (Newton's iteration).
func unmulInv(a uint64) uint64 {
	x := a
	for range 6 {
		x *= 2 - a*x
	}
	return x
}

// unxorshift inverts z ^= z >> s.
func unxorshift(z uint64, s uint) uint64 {
	x := z
	for range 64 / s {
		x = z ^ x>>s
	}
	return x
}

// unmix64 inverts block.Mix64.
func unmix64(h uint64) uint64 {
	z := unxorshift(h, 31)
	z *= unmulInv(0x94d049bb133111eb)
	z = unxorshift(z, 27)
	z *= unmulInv(0xbf58476d1ce4e5b9)
	return unxorshift(z, 30)
}

// idWithHash returns the id whose key of tenant has hash h.
func idWithHash(tenant string, h uint64) uint64 { return unmix64(h) ^ block.FNV1a(tenant) }

func TestUnmix64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		h := rng.Uint64()
		if got := block.Mix64(unmix64(h)); got != h {
			t.Fatalf("Mix64(unmix64(%#x)) = %#x", h, got)
		}
	}
}

// TestIndexCollidingKeys fills one shard with keys whose hashes agree on
// the shard, the tag and every home bit (so every one of them probes the
// same slot at every table size), half of them homed at the table's last
// slot (their run wraps round to slot 0) and half at slot 0, plus named
// keys sharing those ids whose names differ only in length, in two
// tenants. Random adds, removes and moves through heartbeats, each
// followed by a full comparison with a model and the invariant check.
func TestIndexCollidingKeys(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	nodes := []meta.NodeID{"a", "b"}
	sess := map[meta.NodeID]meta.Session{}
	models := map[meta.NodeID]modelNode{}
	for _, id := range nodes {
		sess[id] = register(t, m, info(id, 1<<50, 1<<50), nil)
		models[id] = modelNode{}
	}
	const si = 37
	tag := uint64(0x2a) << 58
	var keys []block.Key
	for _, tenant := range []string{"t", "u"} {
		for i := range uint64(150) {
			// Bits 6..40 all ones (home = mask at any size) or all
			// zeros (home 0); bits 41..57 tell the keys apart.
			var homeBits uint64
			if i%2 == 0 {
				homeBits = (1<<41 - 1) &^ (numShards - 1)
			}
			h := tag | (i+1)<<41 | homeBits | si
			id := idWithHash(tenant, h)
			if got := (block.Key{Tenant: tenant, ID: id}).Hash(); got != h {
				t.Fatalf("constructed hash %#x, got %#x", h, got)
			}
			keys = append(keys, block.Key{Tenant: tenant, ID: id})
			if i%10 == 0 {
				for _, n := range []int{1, 2, 3, 200} {
					keys = append(keys, block.Key{Tenant: tenant, ID: id, Name: strings.Repeat("x", n)})
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var res meta.LookupResult
	for step := range 500 {
		id := nodes[rng.IntN(len(nodes))]
		var d meta.Delta
		for range 1 + rng.IntN(6) {
			k := keys[rng.IntN(len(keys))]
			tier := modelTiers[rng.IntN(2)]
			switch op := rng.IntN(10); {
			case op < 5 || step < 100:
				d.Added = append(d.Added, meta.Item{Key: k, Tier: tier, Size: int64(1 + rng.IntN(1000)), Sum: rng.Uint32()})
			case op < 9:
				d.Removed = append(d.Removed, meta.ItemKey{Key: k, Tier: tier})
			default:
				d.Moved = append(d.Moved, meta.Move{Key: k, From: tier, To: otherTier(tier)})
			}
		}
		heartbeat(t, m, id, sess[id], d, nil, nil)
		models[id].apply(d)
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		var want []row
		for nid, mn := range models {
			want = append(want, rowsOf(nid, mn.inventory())...)
		}
		slices.SortFunc(want, rowCmp)
		if df := diffRows(dump(m), want); df != "" {
			t.Fatalf("step %d: index differs from the model:\n%s", step, df)
		}
		q := make([]block.Key, 8)
		for i := range q {
			q[i] = keys[rng.IntN(len(keys))]
		}
		if err := m.Locate(q, true, &res); err != nil {
			t.Fatal(err)
		}
		if got, want := layout(&res), expectLocate(models, q); got != want {
			t.Fatalf("step %d: locate %v = %q, model says %q", step, q, got, want)
		}
		checkSums(t, &res, q, models)
	}
	if got := m.shards[si].keys; got == 0 {
		t.Fatalf("shard %d holds no key: the keys were not built to collide", si)
	}
}

// checkSums checks each replica of res (a Locate of q) carries the size
// and checksum its node's model holds for that very key.
func checkSums(t *testing.T, res *meta.LookupResult, q []block.Key, models map[meta.NodeID]modelNode) {
	t.Helper()
	for i, k := range q {
		for _, r := range res.Block(i) {
			it, ok := models[r.Node][meta.ItemKey{Key: k, Tier: r.Tier}]
			if !ok || it.Size != r.Size || it.Sum != r.Sum {
				t.Fatalf("key %v: replica %+v, the node holds %+v (%v)", k, r, it, ok)
			}
		}
	}
}

// TestShardLimits fills a shard's entry and overflow counts to
// maxEntries (by setting the counts: 2^25 keys take gigabytes) and checks
// a new key, and a new second replica, are refused without a panic and
// without disturbing what is indexed.
func TestShardLimits(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	sa := register(t, m, info("a", 1<<40, 1<<40), nil)
	sb := register(t, m, info("b", 1<<40, 1<<40), nil)
	const si = 5
	k1 := block.Key{Tenant: "t", ID: idWithHash("t", 1<<20|si)}
	k2 := block.Key{Tenant: "t", ID: idWithHash("t", 2<<20|si)}
	heartbeat(t, m, "a", sa, meta.Delta{Added: ram("t", k1.ID)}, nil, nil)
	s := &m.shards[si]
	s.mu.Lock()
	nEnts, nOvfs := s.nEnts, s.nOvfs
	s.nEnts, s.nOvfs = maxEntries, maxEntries
	s.mu.Unlock()
	heartbeat(t, m, "a", sa, meta.Delta{Added: ram("t", k2.ID)}, nil, nil) // no entry left
	heartbeat(t, m, "b", sb, meta.Delta{Added: ram("t", k1.ID)}, nil, nil) // no overflow replica left
	s.mu.Lock()
	s.nEnts, s.nOvfs = nEnts, nOvfs
	s.mu.Unlock()
	if got := m.Stats().IndexFull; got != 2 {
		t.Errorf("Stats().IndexFull = %d, want 2", got)
	}
	var res meta.LookupResult
	if err := m.Locate([]block.Key{k1, k2}, false, &res); err != nil {
		t.Fatal(err)
	}
	if got, want := layout(&res), "a:ram|"; got != want {
		t.Errorf("locate = %q, want %q", got, want)
	}
}

// TestNodeNumberReuse drops a node, lets Expire forget it, registers
// another node (which takes its number) and re-registers the first (a
// new number): every replica must stay with its own node.
func TestNodeNumberReuse(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: 10 * time.Second})
	sa := register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", 1, 2), ssd("t", 3)))
	sb := register(t, m, info("b", 1<<40, 1<<40), inv(ram("t", 2, 3)))
	numA := m.nodes["a"].num
	dropSilent(t, m, clk, "a", sa, map[meta.NodeID]meta.Session{"b": sb})
	register(t, m, info("c", 1<<40, 1<<40), inv(ram("t", 1), ssd("t", 4)))
	if got := m.nodes["c"].num; got != numA {
		t.Errorf("c has number %d, want a's old %d (reused)", got, numA)
	}
	register(t, m, info("a", 1<<40, 1<<40), inv(ssd("t", 1, 2)))
	heartbeat(t, m, "b", sb, meta.Delta{}, nil, nil)
	want := "c:ram,a:ssd|b:ram,a:ssd|b:ram|c:ssd"
	if got := layout(lookup(t, m, "t", false, 1, 2, 3, 4)); got != want {
		t.Errorf("lookup = %q, want %q", got, want)
	}
}

// TestNodeLimit fills the node table to MaxNodes (with placeholders: a
// real run of 65,535 registrations copies the table each time) and checks
// the next registration is refused with ErrFull and a clear message.
func TestNodeLimit(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", 1)))
	m.nodesMu.Lock()
	saved := m.nodeTab.Load()
	tab := slices.Clone(*saved)
	for len(tab) < MaxNodes {
		n := newNode(meta.NodeID(fmt.Sprint("p", len(tab))))
		n.num = uint16(len(tab) + 1)
		tab = append(tab, n)
	}
	m.nodeTab.Store(&tab)
	m.nodesMu.Unlock()
	_, err := m.Register(info("z", 1<<40, 1<<40), inv(ram("t", 2)), meta.NodeUsage{})
	m.nodesMu.Lock()
	m.nodeTab.Store(saved)
	m.nodesMu.Unlock()
	if !errors.Is(err, kvpool.ErrFull) || !strings.Contains(err.Error(), "65535") {
		t.Fatalf("register of node 65,536: %v, want ErrFull naming the limit", err)
	}
	if _, ok := m.nodes["z"]; ok {
		t.Errorf("the refused node is in the membership map")
	}
	if got := layout(lookup(t, m, "t", false, 1, 2)); got != "a:ram" {
		t.Errorf("lookup = %q", got)
	}
}

// TestLeaseAcrossClockWrap grants a lease, moves the clock across the
// 2^32 ms wrap of the index's clock and by more than 24 days, and checks
// lookups answer the same whatever a lease's end looks like; and that an
// end which wrapped round only delays an eviction.
func TestLeaseAcrossClockWrap(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: 1000 * time.Hour * 24, LeaseTTL: 5 * time.Second, HighWatermark: 0.5, LowWatermark: 0.4})
	s := register(t, m, info("a", 1000, 1<<40), inv(ram("t", 1)))
	want := "a:ram"
	if got := layout(lookup(t, m, "t", true, 1)); got != want {
		t.Fatalf("lookup = %q", got)
	}
	const wrap = time.Duration(1<<32) * time.Millisecond
	for _, step := range []time.Duration{25 * 24 * time.Hour, wrap - 25*24*time.Hour - 2*time.Second, time.Second, 10 * time.Second, wrap} {
		clk.Advance(step)
		heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
		if got := layout(lookup(t, m, "t", false, 1)); got != want {
			t.Fatalf("after %v: lookup = %q, want %q", step, got, want)
		}
	}
	// The lease granted at the start ended long ago; a wrapped end may
	// hold the eviction back for one lease TTL at most.
	s2 := s
	r := heartbeat(t, m, "a", s2, meta.Delta{Added: ram("t", 2, 3, 4, 5, 6)}, nil, nil)
	clk.Advance(6 * time.Second)
	r2 := heartbeat(t, m, "a", s2, meta.Delta{}, nil, nil)
	if len(r.Tasks)+len(r2.Tasks) == 0 {
		t.Errorf("no eviction order over the high watermark")
	}
	if err := (Options{LeaseTTL: 25 * 24 * time.Hour}).Validate(); err == nil || !strings.Contains(err.Error(), "24 days") {
		t.Errorf("LeaseTTL of 25 days: %v, want an error naming it", err)
	}
}

// TestLeaseClockStepBack grants a read lease, then the wall clock steps
// back a little (an NTP correction; the master's clock is wall time):
// the leased replica must not become an eviction victim while its lease
// runs.
func TestLeaseClockStepBack(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: 5 * time.Second, HighWatermark: 0.5, LowWatermark: 0.1})
	s := register(t, m, info("a", 1000, 0), inv(ram("t", 1)))
	lookup(t, m, "t", true, 1)
	clk.Advance(-50 * time.Millisecond)
	r := heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 2, 3, 4, 5, 6, 7, 8)}, nil, nil)
	for _, tk := range r.Tasks {
		if tk.Key == key("t", 1) {
			t.Fatalf("the replica leased 50 ms (wall clock) ago is ordered out: %v", taskString(r.Tasks))
		}
	}
}

// stressSum and stressSize are what the stress run's nodes report for a
// key: functions of the key alone (and the node, for the checksum), so a
// reader can tell a replica of another key, or of another node, from
// the right one without knowing what the nodes hold at that instant.
func stressSum(k block.Key, node meta.NodeID) uint32 {
	return uint32(block.Mix64(k.Hash() ^ block.FNV1a(k.Name) ^ block.FNV1a(string(node))))
}

func stressSize(k block.Key) int64 { return 1 + int64(block.Mix64(k.Hash()^block.FNV1a(k.Name))%300) }

// stressMayHold says whether node i may ever hold k: each key has a
// fixed set of nodes (two of the four), so a replica listed on any other
// node is a wrong answer however the run interleaves.
func stressMayHold(k block.Key, i int) bool {
	h := block.Mix64(k.Hash() ^ block.FNV1a(k.Name))
	return int(h%4) == i || int(h/4%4) == i
}

var stressNames = []string{"", "", "n", "nn", "a-longer-name-of-thirty-bytes.", "n/x"}

func stressKey(rng *rand.Rand, nIDs int) block.Key {
	return block.Key{Tenant: modelTenants[rng.IntN(len(modelTenants))], ID: uint64(rng.IntN(nIDs)), Name: stressNames[rng.IntN(len(stressNames))]}
}

// stressNode is a simNode whose keys and their sizes and checksums follow
// the stress functions above.
type stressNode struct {
	i     int
	id    meta.NodeID
	inv   modelNode
	sess  meta.Session
	tasks []meta.Task
	rng   *rand.Rand
	mu    sync.Mutex // held while the node talks to the master (the killer takes it)
	ram   int64      // RAMBytes; 0: 20,000
}

// newStressNodes registers four stress nodes, their random streams seeded
// by seed, each with an inventory of fill random deltas over nIDs keys
// and ram bytes of RAM (0: the default).
func newStressNodes(t testing.TB, m *Master, seed uint64, nIDs, fill int, ram int64) []*stressNode {
	t.Helper()
	nodes := make([]*stressNode, 4)
	for i := range nodes {
		nodes[i] = &stressNode{i: i, id: meta.NodeID(fmt.Sprint("n", i)), inv: modelNode{}, rng: rand.New(rand.NewPCG(uint64(i), seed)), ram: ram}
		for range fill {
			nodes[i].inv.apply(nodes[i].randDelta(nIDs))
		}
		if err := nodes[i].register(m); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// errSink keeps the first errors of a test's goroutines (as many as its
// capacity) and drops the rest.
type errSink chan error

func (e errSink) fail(err error) {
	select {
	case e <- err:
	default:
	}
}

// report closes e, once its senders are done, and fails t with each
// error kept.
func (e errSink) report(t testing.TB) {
	t.Helper()
	close(e)
	for err := range e {
		t.Error(err)
	}
}

// kill drops the node from m, as if its TTL had passed, if it is alive,
// and has m forget it (its number is free for the next node); it reports
// whether it dropped the node. It holds sn.mu, so that the node does not
// talk to the master meanwhile.
func (sn *stressNode) kill(m *Master) bool {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	m.nodesMu.RLock()
	n := m.nodes[sn.id]
	m.nodesMu.RUnlock()
	dropped := false
	if n != nil {
		n.mu.Lock()
		if n.alive && !n.removed {
			m.dropNode(n)
			dropped = true
		}
		n.mu.Unlock()
	}
	m.Expire()
	return dropped
}

func (n *stressNode) item(k block.Key, tier meta.Tier) meta.Item {
	return meta.Item{Key: k, Tier: tier, Size: stressSize(k), Sum: stressSum(k, n.id)}
}

func (n *stressNode) randDelta(nIDs int) meta.Delta {
	var d meta.Delta
	for range n.rng.IntN(8) {
		k := stressKey(n.rng, nIDs)
		if !stressMayHold(k, n.i) {
			continue
		}
		tier := modelTiers[n.rng.IntN(2)]
		switch op := n.rng.IntN(10); {
		case op < 5:
			d.Added = append(d.Added, n.item(k, tier))
		case op < 8:
			d.Removed = append(d.Removed, meta.ItemKey{Key: k, Tier: tier})
		default:
			d.Moved = append(d.Moved, meta.Move{Key: k, From: tier, To: otherTier(tier)})
		}
	}
	return d
}

func (n *stressNode) register(m *Master) error {
	ramBytes := n.ram
	if ramBytes == 0 {
		ramBytes = 20000
	}
	r, err := m.Register(meta.NodeInfo{ID: n.id, Addr: "h:1", RAMBytes: ramBytes, SSDBytes: 1 << 30, BlockSize: 100}, n.inv.inventory(), meta.NodeUsage{})
	n.sess, n.tasks = r.Session, nil
	return err
}

func (n *stressNode) step(m *Master, nIDs int) error {
	var d meta.Delta
	var done []meta.TaskResult
	for _, tk := range n.tasks {
		ramK := meta.ItemKey{Key: tk.Key, Tier: meta.TierRAM}
		ssdK := meta.ItemKey{Key: tk.Key, Tier: meta.TierSSD}
		_, inRAM := n.inv[ramK]
		switch tk.Kind {
		case meta.TaskDrop:
			if inRAM {
				d.Removed = append(d.Removed, ramK)
			}
			done = append(done, meta.TaskResult{ID: tk.ID, OK: inRAM})
		case meta.TaskDemote:
			if inRAM {
				d.Moved = append(d.Moved, meta.Move{Key: tk.Key, From: meta.TierRAM, To: meta.TierSSD})
			}
			done = append(done, meta.TaskResult{ID: tk.ID, OK: inRAM})
		case meta.TaskPromote:
			it, ok := n.inv[ssdK]
			if ok && !inRAM {
				it.Tier = meta.TierRAM
				d.Added = append(d.Added, it)
			}
			done = append(done, meta.TaskResult{ID: tk.ID, OK: ok && !inRAM, Bytes: it.Size})
		}
	}
	n.inv.apply(d)
	extra := n.randDelta(nIDs)
	n.inv.apply(extra)
	d.Added = append(d.Added, extra.Added...)
	d.Removed = append(d.Removed, extra.Removed...)
	d.Moved = append(d.Moved, extra.Moved...)
	var hits []block.Key
	for range n.rng.IntN(3) {
		hits = append(hits, stressKey(n.rng, nIDs))
	}
	r, err := m.Heartbeat(n.id, n.sess, d, meta.NodeUsage{}, hits, done)
	if errors.Is(err, meta.ErrUnknownNode) {
		return n.register(m)
	}
	if err != nil {
		return err
	}
	n.tasks = r.Tasks
	return nil
}

// checkAnswer checks one key's replicas as a reader can: each on a node
// that may hold the key, with the key's size and that node's checksum.
func checkAnswer(k block.Key, reps []meta.Replica, nodes []*stressNode) error {
	for _, r := range reps {
		i := slices.IndexFunc(nodes, func(n *stressNode) bool { return n.id == r.Node })
		switch {
		case i < 0 || !stressMayHold(k, i):
			return fmt.Errorf("key %v listed on node %q, which never holds it", k, r.Node)
		case r.Size != stressSize(k) || r.Sum != stressSum(k, r.Node):
			return fmt.Errorf("key %v on %q: size %d sum %#x, want %d %#x (another key's replica)", k, r.Node, r.Size, r.Sum, stressSize(k), stressSum(k, r.Node))
		}
	}
	return nil
}

// TestStressIndexAnswers runs four nodes (adds, removes, RAM↔SSD moves,
// evictions carried out, promotions, re-registrations), a killer that
// drops nodes and lets Expire forget them (so node numbers are reused),
// leased and unleased readers of chain keys (Lookup, whose unlocked
// warm-up races with the writers) and of named keys (Locate, ExistsKeys,
// Scan), and an invariant checker, with thousands of keys so the tables
// grow, entries and overflow replicas are freed and reused and name
// arenas are compacted. Every answer is checked against what the key
// alone determines; at the end the index must equal the nodes' own
// inventories.
func TestStressIndexAnswers(t *testing.T) {
	// lru is the list threaded through the index; fifo a policy object
	// keyed by replica handles.
	for _, ev := range []string{"lru", "fifo"} {
		t.Run(ev, func(t *testing.T) { stressIndex(t, ev) })
	}
}

// awaitProgress waits until progress has advanced by n steps, and reports
// false if stop closes first.
func awaitProgress(stop <-chan struct{}, progress *atomic.Int64, n int64) bool {
	target := progress.Load() + n
	for progress.Load() < target {
		select {
		case <-stop:
			return false
		default:
			runtime.Gosched()
		}
	}
	return true
}

func stressIndex(t *testing.T, eviction string) {
	m, err := New(Options{NodeTTL: time.Hour, HeartbeatInterval: time.Second, LeaseTTL: time.Millisecond, RecencyResolution: time.Nanosecond, Eviction: eviction})
	if err != nil {
		t.Fatal(err)
	}
	const (
		nIDs     = 3000
		beats    = 1500
		reads    = 3000
		nReaders = 2
	)
	nodes := newStressNodes(t, m, 9, nIDs, 400, 0)
	errs := make(errSink, 16)
	fail := errs.fail
	// progress counts the writers' and readers' steps: the background
	// goroutines pace themselves by it, not by a timer, so that they
	// interleave with the work however busy the machine is.
	var progress atomic.Int64
	var wg, bg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			for i := range beats {
				progress.Add(1)
				n.mu.Lock()
				var err error
				if i%300 == 299 {
					err = n.register(m)
				} else {
					err = n.step(m, nIDs)
				}
				n.mu.Unlock()
				if err != nil {
					fail(fmt.Errorf("node %s beat %d: %w", n.id, i, err))
					return
				}
			}
		})
	}
	for r := range nReaders {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 10))
			var res meta.LookupResult
			var ex []bool
			for range reads {
				progress.Add(1)
				tenant := modelTenants[rng.IntN(2)]
				start := uint64(rng.IntN(nIDs))
				ids := []uint64{start, start + 1, start + 2, start + 3, uint64(rng.IntN(nIDs)), uint64(rng.IntN(nIDs))}
				if err := m.Lookup(tenant, ids, rng.IntN(2) == 0, &res); err != nil {
					fail(err)
					return
				}
				if err := checkLookup(&res, ids); err != nil {
					fail(fmt.Errorf("lookup %s %v: %w", tenant, ids, err))
					return
				}
				for i := range res.Hit {
					if err := checkAnswer(block.Key{Tenant: tenant, ID: ids[i]}, res.Block(i), nodes); err != nil {
						fail(fmt.Errorf("lookup: %w", err))
						return
					}
				}
				keys := make([]block.Key, 6)
				for i := range keys {
					keys[i] = stressKey(rng, nIDs)
				}
				if err := m.Locate(keys, rng.IntN(2) == 0, &res); err != nil {
					fail(err)
					return
				}
				for i, k := range keys {
					if err := checkAnswer(k, res.Block(i), nodes); err != nil {
						fail(fmt.Errorf("locate: %w", err))
						return
					}
				}
				var err error
				if ex, err = m.ExistsKeys(keys, ex); err != nil || len(ex) != len(keys) {
					fail(fmt.Errorf("exists: %v, %d answers", err, len(ex)))
					return
				}
				if rng.IntN(50) == 0 {
					names, err := scanNames(m, tenant)
					if err != nil {
						fail(err)
						return
					}
					for _, nm := range names {
						if !slices.Contains(stressNames, nm) {
							fail(fmt.Errorf("scan of %s: name %q was never indexed", tenant, nm))
							return
						}
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var kills atomic.Int64
	bg.Go(func() { // the killer: drop a node now and then, and forget it
		rng := rand.New(rand.NewPCG(5, 5))
		for {
			if !awaitProgress(stop, &progress, int64(50+rng.IntN(200))) {
				return
			}
			if nodes[rng.IntN(len(nodes))].kill(m) {
				kills.Add(1)
			}
		}
	})
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := m.CheckInvariants(); err != nil {
				fail(err)
				return
			}
			_ = m.Stats()
			if !awaitProgress(stop, &progress, 20) {
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	bg.Wait()
	errs.report(t)
	if t.Failed() {
		return
	}
	for _, n := range nodes { // a last beat: re-registers a dropped node
		if err := n.step(m, nIDs); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	var want []row
	for _, n := range nodes {
		want = append(want, rowsOf(n.id, n.inv.inventory())...)
	}
	slices.SortFunc(want, rowCmp)
	if d := diffRows(dump(m), want); d != "" {
		t.Fatalf("index differs from the nodes' inventories:\n%s", d)
	}
	st := m.Stats()
	t.Logf("keys %d, kills %d, lookups %d, evict freed %d confirmed %d, promotions %+v", len(want), kills.Load(), st.Lookups, st.EvictFreed, st.EvictConfirmed, st.Promotion.Admitted)
	if st.EvictFreed == 0 || kills.Load() == 0 {
		t.Errorf("the run exercised too little: %d evictions, %d kills", st.EvictFreed, kills.Load())
	}
}

// scanNames scans every name of tenant.
func scanNames(m *Master, tenant string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		next, names, err := m.Scan(tenant, cursor, 50, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}

// TestIndexClockHeldBack checks the index's clock (msNow) holds through a
// small step back of the wall clock and follows a large one, and a jump
// ahead of more than 2^31 ms (which compares as behind modulo 2^32).
func TestIndexClockHeldBack(t *testing.T) {
	m, clk := newTest(t, Options{})
	_, ns := m.now()
	base := m.msNow(ns)
	for _, c := range []struct {
		step time.Duration
		want uint32
	}{
		{time.Second, base + 1000},
		{-500 * time.Millisecond, base + 1000}, // held
		{300 * time.Millisecond, base + 1000},  // still behind: held
		{300 * time.Millisecond, base + 1100},
		{-2 * time.Hour, base + 1100 - 7_200_000}, // too far back: followed
		{30 * 24 * time.Hour, base + 1100 - 7_200_000 + 2_592_000_000},
	} {
		clk.Advance(c.step)
		_, ns := m.now()
		if got := m.msNow(ns); got != c.want {
			t.Fatalf("after a step of %v: index clock %d, want %d", c.step, got, c.want)
		}
	}
}

// TestNameArenaLimit fills one shard's name arena to its limit (lowered:
// the real one is 4 GiB) and checks a name that would pass it is refused
// rather than given an offset that wraps round to another key's name,
// that compaction makes room again once names are removed, and that
// every key keeps its own name throughout.
func TestNameArenaLimit(t *testing.T) {
	defer func(old int) { maxArena = old }(maxArena)
	maxArena = 200
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	s := register(t, m, info("a", 1<<40, 1<<40), nil)
	const si = 9
	mk := func(i int, n int) block.Key {
		return block.Key{Tenant: "t", ID: idWithHash("t", uint64(i+1)<<20|si), Name: fmt.Sprintf("%02d%s", i, strings.Repeat("x", n))}
	}
	var keys []block.Key
	for i := range 8 {
		keys = append(keys, mk(i, 40)) // 43 bytes each in the arena
	}
	var d meta.Delta
	for _, k := range keys {
		d.Added = append(d.Added, meta.Item{Key: k, Tier: meta.TierRAM, Size: 1, Sum: 1})
	}
	heartbeat(t, m, "a", s, d, nil, nil)
	if got := m.c.indexFull.Load(); got != 4 {
		t.Errorf("indexFull = %d, want 4 (four names of 43 bytes fit in 200)", got)
	}
	var res meta.LookupResult
	if err := m.Locate(keys, false, &res); err != nil {
		t.Fatal(err)
	}
	if got, want := layout(&res), "a:ram|a:ram|a:ram|a:ram||||"; got != want {
		t.Errorf("locate = %q, want %q", got, want)
	}
	// Remove two: their 86 bytes are garbage until compaction.
	d = meta.Delta{Removed: []meta.ItemKey{{Key: keys[0], Tier: meta.TierRAM}, {Key: keys[2], Tier: meta.TierRAM}}}
	heartbeat(t, m, "a", s, d, nil, nil) // a delta adds before it removes
	d = meta.Delta{Added: []meta.Item{{Key: keys[5], Tier: meta.TierRAM, Size: 1, Sum: 1}, {Key: keys[6], Tier: meta.TierRAM, Size: 1, Sum: 1}}}
	heartbeat(t, m, "a", s, d, nil, nil)
	if err := m.Locate(keys, false, &res); err != nil {
		t.Fatal(err)
	}
	if got, want := layout(&res), "|a:ram||a:ram||a:ram|a:ram|"; got != want {
		t.Errorf("locate after compaction = %q, want %q", got, want)
	}
	names, err := scanNames(m, "t")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if want := []string{keys[1].Name, keys[3].Name, keys[5].Name, keys[6].Name}; !slices.Equal(names, want) {
		t.Errorf("scan = %q, want %q", names, want)
	}
}

// TestLRUStepByStep drives the stress nodes one step at a time on a
// small pool (evictions ordered, confirmed, failed and withdrawn;
// replicas demoted, promoted, removed while in the LRU order and re-added
// in freed places; nodes dropped, forgotten and re-registered) with
// leased lookups between steps, and checks the invariants (the LRU log's
// live records name only live, evictable RAM replicas, each once) after
// every step.
func TestLRUStepByStep(t *testing.T) {
	for _, ev := range []string{"lru", "fifo"} {
		t.Run(ev, func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: 10 * time.Millisecond, RecencyResolution: time.Nanosecond, Eviction: ev})
			const nIDs = 300
			nodes := newStressNodes(t, m, 11, nIDs, 0, 5000)
			rng := rand.New(rand.NewPCG(3, 3))
			var res meta.LookupResult
			for step := range 1200 {
				n := nodes[rng.IntN(len(nodes))]
				switch r := rng.IntN(40); {
				case r == 0: // drop and forget
					m.nodesMu.RLock()
					mn := m.nodes[n.id]
					m.nodesMu.RUnlock()
					mn.mu.Lock()
					if mn.alive {
						m.dropNode(mn)
					}
					mn.mu.Unlock()
					m.Expire()
				case r == 1: // a failed or ignored order
					n.tasks = nil
					fallthrough
				default:
					if err := n.step(m, nIDs); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				}
				clk.Advance(time.Duration(rng.IntN(5)) * time.Millisecond)
				keys := make([]block.Key, 4)
				for i := range keys {
					keys[i] = stressKey(rng, nIDs)
				}
				if err := m.Locate(keys, true, &res); err != nil {
					t.Fatal(err)
				}
				for i, k := range keys {
					if err := checkAnswer(k, res.Block(i), nodes); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				}
				if err := m.CheckInvariants(); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			st := m.Stats()
			if st.EvictFreed == 0 || st.EvictConfirmed == 0 {
				t.Errorf("the run exercised too little: %+v", st)
			}
			t.Logf("evict freed %d confirmed %d skipped leased %d", st.EvictFreed, st.EvictConfirmed, st.EvictSkippedLeased)
		})
	}
}

// TestDropManyKeys drops a node whose replicas fill several of
// removeAll's runs in every shard — chain and named keys, some its
// only replica, some beside another node's RAM or SSD replica, leased
// and not — and checks the others' replicas are all that is left, the
// keys that were only its are gone, and the accounting agrees
// (CheckInvariants at the end).
func TestDropManyKeys(t *testing.T) {
	const nKeys = 3 * removeRun * numShards / 2
	m, clk := newTest(t, Options{NodeTTL: 10 * time.Second})
	var invA, invB, invC meta.Inventory
	for i := range uint64(nKeys) {
		k := block.Key{Tenant: "t", ID: i}
		if i%5 == 0 {
			k.Name = fmt.Sprintf("key-%d", i)
		}
		it := meta.Item{Key: k, Tier: meta.TierRAM, Size: 100 + int64(i%7), Sum: sumOf(k)}
		invA = append(invA, it)
		if i%2 == 0 {
			it.Tier = meta.TierSSD
			invA = append(invA, it) // a holds it in both tiers
			invB = append(invB, it)
		}
		if i%3 == 0 {
			it.Tier = meta.TierRAM
			invC = append(invC, it)
		}
	}
	sa := register(t, m, info("a", 1<<40, 1<<40), invA)
	sb := register(t, m, info("b", 1<<40, 1<<40), invB)
	sc := register(t, m, info("c", 1<<40, 1<<40), invC)
	var res meta.LookupResult
	for from := uint64(0); from < nKeys; from += 97 {
		if err := m.Lookup("t", []uint64{from}, true, &res); err != nil {
			t.Fatal(err)
		}
	}
	dropSilent(t, m, clk, "a", sa, map[meta.NodeID]meta.Session{"b": sb, "c": sc})
	checkDump(t, m, sortedRows(rowsOf("b", invB), rowsOf("c", invC)))
	if st := m.Stats(); st.RAMReplicas != int64(len(invC)) || st.SSDReplicas != int64(len(invB)) {
		t.Errorf("%d RAM and %d SSD replicas counted, want %d and %d", st.RAMReplicas, st.SSDReplicas, len(invC), len(invB))
	}
}
