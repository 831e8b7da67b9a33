package master

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// TestLRULogOldRecordAfterWrap: a replica that nobody touches or evicts
// keeps its record in the log indefinitely, and a sweep keeps a record
// inside its chunk's range or the one before, so unless the old chunk is
// given a new range, the positions come round to its range after 2^31
// more records: a touch of that replica landing on its old position
// makes both its records live, and the replica just touched is the LRU
// victim. The test appends for real between white-box jumps of the
// position (each stands for that many records appended and swept away
// while the other keys were read): the sweeps see the whole history.
func TestLRULogOldRecordAfterWrap(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: 1000 * time.Hour, LeaseTTL: time.Hour, RecencyResolution: time.Nanosecond})
	s := register(t, m, info("a", 100*100, 0), nil) // the pool stays far from full
	heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 1, 2, 3)}, nil, nil)
	var l1, l2, l3 uint32
	for _, l := range lruOrderLinks(m) {
		switch {
		case l1 == 0:
			l1 = l
		case l2 == 0:
			l2 = l
		default:
			l3 = l
		}
	}
	const (
		skip = 1 << 20        // positions a jump passes over first
		jump = 1<<27 - 2*skip // and the most it covers after that
		span = 1<<31 + 1<<29  // the history, in positions
		real = 3 * lruSlack   // records appended for real between jumps: a whole sweep
	)
	m.lruMu.Lock()
	g := &m.lruLog
	covered, collided := 0, false
	sweeps := g.sweeps
	for covered < span && !collided {
		// t/2 and t/3 are read in turn, until a sweep has run and the
		// last chunk is full.
		for i := 0; i < real || g.chunks[len(g.chunks)-1].n < lruChunkLen; i++ {
			m.lruTouch([2]uint32{l2, l3}[i%2])
			if i%32 == 31 {
				m.lruSweep()
			}
			covered++
		}
		// A jump: from skip positions on, it stops at t/1's position if
		// it comes to it, and t/1 is read there.
		p := m.lruRep(l1).seq & lruPosMask
		from := (g.next + skip) & lruPosMask
		if d := (p - from) & lruPosMask; d < jump {
			g.next = p
			covered += skip + int(d)
			m.lruTouch(l1)
			collided = true
			break
		}
		g.next = (from + jump) & lruPosMask
		covered += skip + jump
	}
	if !collided { // t/1 is read last
		m.lruTouch(l1)
	}
	v := lruVictimAll(m)
	sweeps = g.sweeps - sweeps
	m.lruMu.Unlock()
	t.Logf("%d positions, %d sweeps; t/1 read when the log came to its position: %v", covered, sweeps, collided)
	if v != l2 && v != l3 {
		t.Errorf("the LRU victim is %#x, not t/2 (%#x) or t/3 (%#x); t/1 (%#x) was read last", v, l2, l3, l1)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Errorf("invariants: %v", err)
	}
}

// lruModel is a model of the exact LRU order of the RAM replicas of a
// master with the lru policy: each replica in the order stamped with its
// last access, and which replicas hold a lease.
type lruModel struct {
	t      *testing.T
	m      *Master
	clock  uint64
	stamp  map[lruModelRep]uint64 // in the order
	leased map[lruModelRep]bool
	tiers  map[lruModelRep]bool // indexed (RAM evicting or not, SSD)
	evict  map[lruModelRep]bool // RAM replicas under an eviction order
	lastID uint64               // the last task seen
	att    int64                // eviction attempts seen
}

type lruModelRep struct {
	node meta.NodeID
	id   uint64
	tier meta.Tier
}

func (md *lruModel) touch(r lruModelRep) { md.clock++; md.stamp[r] = md.clock }

// order returns the model's order, least recent first.
func (md *lruModel) order() []lruModelRep {
	out := make([]lruModelRep, 0, len(md.stamp))
	for r := range md.stamp {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b lruModelRep) int { return cmp.Compare(md.stamp[a], md.stamp[b]) })
	return out
}

// logOrder returns the log's order, least recent first.
func (md *lruModel) logOrder() []lruModelRep {
	m := md.m
	m.lruMu.Lock()
	defer m.lruMu.Unlock()
	var out []lruModelRep
	for _, c := range m.lruLog.chunks {
		for j := c.lo; j < c.n; j++ {
			l := c.recs[j]
			if !m.lruLive(l, c.base+uint32(j)) {
				continue
			}
			s := &m.shards[l>>lruShardShift]
			r, ei := s.repAt(lruHandle(l))
			out = append(out, lruModelRep{m.nodeAt(r.node).id, s.ent(ei).id(), r.tier()})
		}
	}
	return out
}

func (md *lruModel) checkOrder(what string) {
	md.t.Helper()
	got, want := md.logOrder(), md.order()
	if !slices.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		md.t.Fatalf("%s: the log orders %d replicas, the model %d; first difference at %d: log %v, model %v",
			what, len(got), len(want), i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
	}
	if err := md.m.CheckInvariants(); err != nil {
		md.t.Fatalf("%s: %v", what, err)
	}
}

// afterPass checks the eviction passes run since the last call against
// the model: each attempt names the model's least recent replica, which
// is re-touched when leased and leaves the order otherwise.
func (md *lruModel) afterPass(what string) {
	md.t.Helper()
	m := md.m
	var victims []lruModelRep
	var ids []uint64
	m.nodesMu.RLock()
	for _, n := range m.nodes {
		n.mu.Lock()
		for id, tk := range n.tasks {
			if id > md.lastID && (tk.Kind == meta.TaskDrop || tk.Kind == meta.TaskDemote) {
				ids = append(ids, id)
			}
		}
		n.mu.Unlock()
	}
	m.nodesMu.RUnlock()
	slices.Sort(ids)
	for _, id := range ids {
		m.nodesMu.RLock()
		for _, n := range m.nodes {
			n.mu.Lock()
			if tk := n.tasks[id]; tk != nil {
				victims = append(victims, lruModelRep{n.id, tk.Key.ID, meta.TierRAM})
			}
			n.mu.Unlock()
		}
		m.nodesMu.RUnlock()
	}
	if len(ids) > 0 {
		md.lastID = ids[len(ids)-1]
	}
	att := m.c.evictAttempts.Load()
	n := int(att - md.att)
	md.att = att
	if n == 0 && len(victims) == 0 {
		return
	}
	vi := 0
	o := md.order()
	for i := range n {
		if i >= len(o) {
			md.t.Fatalf("%s: an eviction attempt with the model's order empty", what)
		}
		v := o[i]
		if md.leased[v] {
			md.touch(v)
			o = append(o, v)
			continue
		}
		if vi == len(victims) || victims[vi] != v {
			md.t.Fatalf("%s: eviction attempt names %v (victim %d of %v), the model's least recent unleased replica is %v", what, victims[min(vi, len(victims)-1):], vi, victims, v)
		}
		vi++
		delete(md.stamp, v)
		md.evict[v] = true
	}
	if vi != len(victims) {
		md.t.Fatalf("%s: %d victims, the model took %d in %d attempts", what, len(victims), vi, n)
	}
}

// TestLRULogModel drives a master with the lru policy through leased
// lookups of keys with replicas on up to three nodes, RAM and SSD
// additions, removals, moves both ways, eviction passes (victims
// confirmed by a drop or a demotion, or failed and withdrawn), the end of
// every lease, and node drops, and checks every eviction attempt, and the
// whole order now and then, against a model.
func TestLRULogModel(t *testing.T) {
	const nodeTTL = 100 * time.Hour
	m, clk := newTest(t, Options{NodeTTL: nodeTTL, LeaseTTL: time.Hour, RecencyResolution: time.Nanosecond, Promotion: PromotionOptions{TaskTimeout: 50 * time.Hour}})
	md := &lruModel{t: t, m: m, stamp: map[lruModelRep]uint64{}, leased: map[lruModelRep]bool{}, tiers: map[lruModelRep]bool{}, evict: map[lruModelRep]bool{}}
	m.lruLog.next = lruPosMask - 2*lruChunkLen // the positions wrap early
	names := []meta.NodeID{"a", "b", "c"}
	sess := map[meta.NodeID]meta.Session{}
	const nKeys = 1500
	reg := func(id meta.NodeID) {
		sess[id] = register(t, m, info(id, 100*600, 1<<30), nil)
		md.afterPass("register")
	}
	for _, id := range names {
		reg(id)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	hb := func(id meta.NodeID, d meta.Delta, done []meta.TaskResult) meta.HeartbeatReply {
		t.Helper()
		r := heartbeat(t, m, id, sess[id], d, nil, done)
		return r
	}
	// resolve settles every eviction order: confirmed by a drop or a
	// demotion, or failed (the replica goes back, most recent).
	resolve := func() {
		for len(md.evict) > 0 {
			vs := make([]lruModelRep, 0, len(md.evict))
			for v := range md.evict {
				vs = append(vs, v)
			}
			slices.SortFunc(vs, func(a, b lruModelRep) int { return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.id, b.id)) })
			v := vs[0]
			delete(md.evict, v)
			ik := meta.ItemKey{Key: key("t", v.id), Tier: meta.TierRAM}
			switch rng.IntN(3) {
			case 0:
				hb(v.node, meta.Delta{Removed: []meta.ItemKey{ik}}, nil)
				delete(md.tiers, v)
				delete(md.leased, v)
			case 1:
				hb(v.node, meta.Delta{Moved: []meta.Move{{Key: ik.Key, From: meta.TierRAM, To: meta.TierSSD}}}, nil)
				delete(md.tiers, v)
				sv := lruModelRep{v.node, v.id, meta.TierSSD}
				if md.tiers[sv] {
					delete(md.leased, v)
				} else {
					md.tiers[sv] = true
					md.leased[sv] = md.leased[v]
					delete(md.leased, v)
				}
			default:
				taskOf := func() (uint64, bool) {
					m.nodesMu.RLock()
					n := m.nodes[v.node]
					m.nodesMu.RUnlock()
					n.mu.Lock()
					defer n.mu.Unlock()
					id := n.evictByKey[ik.Key]
					tk := n.tasks[id]
					return id, tk != nil && tk.delivered
				}
				tid, delivered := taskOf()
				if !delivered {
					hb(v.node, meta.Delta{}, nil) // delivers the order
					if tid, delivered = taskOf(); !delivered {
						t.Fatalf("the order for %v was not delivered", v)
					}
				}
				md.afterPass("deliver")
				md.touch(v) // withdrawn: back in the order, most recent
				hb(v.node, meta.Delta{}, []meta.TaskResult{{ID: tid, OK: false}})
			}
			md.afterPass("resolve")
		}
	}
	var res meta.LookupResult
	for step := range 15000 {
		what := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(100); {
		case r < 60: // a leased lookup
			keys := make([]block.Key, 0, 32)
			seen := map[uint64]bool{}
			for range 1 + rng.IntN(64) {
				id := 1 + uint64(rng.IntN(nKeys))
				if !seen[id] {
					seen[id] = true
					keys = append(keys, key("t", id))
				}
			}
			clk.Advance(time.Millisecond)
			// The model: each key's replicas touched in the index's order.
			for _, k := range keys {
				p := m.keyAt(k, false)
				p.s.mu.RLock()
				if e1 := p.entryOf(k); e1 != 0 {
					for rp := range p.s.replicas(e1 - 1) {
						if rp.evicting() {
							continue
						}
						mr := lruModelRep{m.nodeAt(rp.node).id, k.ID, rp.tier()}
						md.leased[mr] = true
						if rp.tier() == meta.TierRAM {
							md.touch(mr)
						}
					}
				}
				p.s.mu.RUnlock()
			}
			if err := m.Locate(keys, true, &res); err != nil {
				t.Fatal(err)
			}
		case r < 80: // a node stores new replicas
			n := names[rng.IntN(len(names))]
			tier := meta.TierRAM
			if r >= 76 {
				tier = meta.TierSSD
			}
			var added []uint64
			for range 1 + rng.IntN(24) {
				id := 1 + uint64(rng.IntN(nKeys))
				mr := lruModelRep{n, id, tier}
				if !md.tiers[mr] && !slices.Contains(added, id) {
					added = append(added, id)
				}
			}
			for _, id := range added {
				mr := lruModelRep{n, id, tier}
				md.tiers[mr] = true
				if tier == meta.TierRAM {
					md.touch(mr)
				}
			}
			hb(n, meta.Delta{Added: items("t", tier, added)}, nil)
			md.afterPass(what + " add")
			resolve()
		case r < 88: // removes a few
			n := names[rng.IntN(len(names))]
			var gone []meta.ItemKey
			for mr := range md.tiers {
				if mr.node == n && !md.evict[mr] && len(gone) < 1+rng.IntN(4) {
					gone = append(gone, meta.ItemKey{Key: key("t", mr.id), Tier: mr.tier})
				}
			}
			for _, ik := range gone {
				mr := lruModelRep{n, ik.Key.ID, ik.Tier}
				delete(md.tiers, mr)
				delete(md.leased, mr)
				delete(md.stamp, mr)
			}
			hb(n, meta.Delta{Removed: gone}, nil)
			md.afterPass(what + " remove")
		case r < 96: // moves a few
			n := names[rng.IntN(len(names))]
			var mv []meta.Move
			for mr := range md.tiers {
				if mr.node == n && !md.evict[mr] && len(mv) < 1+rng.IntN(4) {
					if slices.ContainsFunc(mv, func(x meta.Move) bool { return x.Key.ID == mr.id }) {
						continue
					}
					mv = append(mv, meta.Move{Key: key("t", mr.id), From: mr.tier, To: otherTier(mr.tier)})
				}
			}
			for _, x := range mv {
				from := lruModelRep{n, x.Key.ID, x.From}
				to := lruModelRep{n, x.Key.ID, x.To}
				delete(md.stamp, from)
				delete(md.tiers, from)
				if md.tiers[to] { // merged into the copy there
					delete(md.leased, from)
					continue
				}
				md.tiers[to] = true
				md.leased[to] = md.leased[from]
				delete(md.leased, from)
				if x.To == meta.TierRAM {
					md.touch(to)
				}
			}
			hb(n, meta.Delta{Moved: mv}, nil)
			md.afterPass(what + " move")
			resolve()
		case r < 99 || rng.IntN(4) > 0: // every lease ends
			clk.Advance(2 * time.Hour)
			for _, n := range names {
				hb(n, meta.Delta{}, nil)
			}
			clear(md.leased)
			md.afterPass(what + " leases end")
		default: // a node is dropped, and comes back empty
			x := names[rng.IntN(len(names))]
			clk.Advance(nodeTTL / 2)
			for _, n := range names {
				if n != x {
					hb(n, meta.Delta{}, nil)
				}
			}
			clk.Advance(nodeTTL/2 + time.Millisecond)
			for mr := range md.tiers {
				if mr.node == x {
					delete(md.tiers, mr)
					delete(md.stamp, mr)
				}
			}
			clear(md.leased)
			if got := m.Expire(); got != 1 {
				t.Fatalf("%s: Expire dropped %d nodes, want 1", what, got)
			}
			md.afterPass(what + " drop")
			reg(x)
			for _, n := range names {
				hb(n, meta.Delta{}, nil)
			}
			md.afterPass(what + " drop")
		}
		if step%200 == 0 {
			md.checkOrder(what)
		}
	}
	md.checkOrder("end")
	nRAM := 0
	for mr := range md.tiers {
		if mr.tier == meta.TierRAM {
			nRAM++
		}
	}
	t.Logf("model: %d replicas, %d RAM", len(md.tiers), nRAM)
	t.Logf("%d sweeps, %d eviction attempts, %d records for %d live", m.lruLog.sweeps, md.att, m.lruLog.recs, m.lruLog.live)
}

// TestLRULogDirect drives the log itself (lruPush, lruUnlink, lruTouch,
// lruVictim, as the master calls them) over tens of thousands of
// replicas, with victims taken out in runs long enough to drop whole
// chunks while a sweep is under way, and checks the log against a model
// of the order, its invariants, and its size, after every step.
func TestLRULogDirect(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	const nKeys = 3 * lruChunkLen
	s := register(t, m, info("a", 1<<40, 0), nil)
	for i := uint64(0); i < nKeys; i += 4096 {
		heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", ids(i+1, i+4096)...)}, nil, nil)
	}
	// The links, in the order the keys joined.
	var links []uint32
	for _, l := range lruOrderLinks(m) {
		links = append(links, l)
	}
	stamp := map[uint32]int{}
	clock := 0
	for _, l := range lruOrderLinks(m) {
		clock++
		stamp[l] = clock
	}
	var out []uint32 // taken out of the order (as evicting), to come back
	rng := rand.New(rand.NewPCG(3, 4))
	m.lruMu.Lock()
	defer m.lruMu.Unlock()
	g := &m.lruLog
	// modelOrder is the model's order, least recent first.
	modelOrder := func() []uint32 {
		order := make([]uint32, 0, len(stamp))
		for l := range stamp {
			order = append(order, l)
		}
		slices.SortFunc(order, func(a, b uint32) int { return cmp.Compare(stamp[a], stamp[b]) })
		return order
	}
	// touchRandom touches n random links, as lookups do, in the log and
	// in the model (where the link is in the order).
	touchRandom := func(n int) {
		for range n {
			l := links[rng.IntN(len(links))]
			if _, ok := stamp[l]; ok {
				clock++
				stamp[l] = clock
			}
			m.lruTouch(l)
		}
		m.lruSweep()
	}
	check := func(step int) {
		t.Helper()
		want := modelOrder()
		got := lruOrderLinksLocked(m)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: the log's order differs from the model's (%d, %d live)", step, len(got), len(want))
		}
		if bound := 2*g.live + lruSlack + 2*lruChunkLen; g.recs > bound {
			t.Fatalf("step %d: %d records for %d live, over %d", step, g.recs, g.live, bound)
		}
		m.lruMu.Unlock()
		_, err := m.checkLRU()
		m.lruMu.Lock()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	sweepingSeen, dropsWhileSweeping := 0, 0
	jumpedAt, jumps, partial := 0, 0, 0
	for step := range 1000 {
		r := rng.IntN(100)
		if g.sweeping && rng.IntN(3) == 0 {
			r = 86 // victims while a sweep runs
		} else if r >= 85 && r < 89 && rng.IntN(4) > 0 {
			r = 0
		}
		switch {
		case r < 3: // a scan: the least recent keys read in order, stale records in front
			order := modelOrder()
			for i, l := range order[:min(len(order), 2*lruChunkLen)] {
				clock++
				stamp[l] = clock
				m.lruTouch(l)
				if i%32 == 31 { // as lookups touch, a batch at a time
					m.lruSweep()
				}
			}
			m.lruSweep()
		case r < 85: // a batch of touches
			touchRandom(1 + rng.IntN(256))
		case r < 89: // an eviction run: victims leave the order
			order := modelOrder()
			for i := range rng.IntN(lruChunkLen / 2) {
				before := len(g.chunks)
				v, more := m.lruVictim()
				if more {
					// The search let go of the lock after a chunk's walk:
					// lookups touch meanwhile, and the run ends.
					partial++
					touchRandom(1 + rng.IntN(64))
					break
				}
				if v == 0 {
					if i < len(order) {
						t.Fatalf("step %d: no victim, the model has %d", step, len(order)-i)
					}
					break
				}
				if g.sweeping && len(g.chunks) < before {
					dropsWhileSweeping++
				}
				if i >= len(order) || v != order[i] {
					t.Fatalf("step %d: victim %d is %#x, not the model's", step, i, v)
				}
				delete(stamp, v)
				m.lruUnlink(m.lruRep(v))
				out = append(out, v)
			}
		case r < 98: // some come back (an order withdrawn)
			for range rng.IntN(len(out) + 1) {
				i := rng.IntN(len(out))
				l := out[i]
				out[i] = out[len(out)-1]
				out = out[:len(out)-1]
				clock++
				stamp[l] = clock
				m.lruPush(l, m.lruRep(l))
			}
		default: // a run of removals of replicas in the order, no appends
			for l := range stamp {
				if rng.IntN(8) == 0 {
					delete(stamp, l)
					m.lruUnlink(m.lruRep(l))
					out = append(out, l)
				}
			}
		}
		if g.sweeping {
			sweepingSeen++
		}
		// After each whole sweep, a white-box jump of 2^28 positions (as
		// many records appended and swept away), so that the positions
		// wrap many times and chunks grow old enough to be renumbered:
		// first the last chunk is filled, so that the jump starts a chunk.
		if g.sweeps > jumpedAt && !g.sweeping {
			for g.chunks[len(g.chunks)-1].n < lruChunkLen {
				l := links[rng.IntN(len(links))]
				if _, ok := stamp[l]; ok {
					clock++
					stamp[l] = clock
				}
				m.lruTouch(l)
				if r := m.lruRep(l); r.seq == 0 {
					// not in the order: append a stand-in touch of one that is
					for l2 := range stamp {
						clock++
						stamp[l2] = clock
						m.lruTouch(l2)
						break
					}
				}
			}
			g.next = (g.next + 1<<28) & lruPosMask
			for l := range stamp { // the chunk the jump starts
				clock++
				stamp[l] = clock
				m.lruTouch(l)
				break
			}
			jumpedAt = g.sweeps
			jumps++
		}
		if step%20 == 0 || g.sweeping && step%8 == 0 {
			check(step)
		}
		if step%300 == 0 {
			t.Logf("step %d: %d recs %d live %d chunks sweeping %v", step, g.recs, g.live, len(g.chunks), g.sweeping)
		}
	}
	t.Logf("%d sweeps, sweeping after %d steps, %d chunk drops by a victim while sweeping, %d jumps of 2^28 positions, %d victim searches cut short", g.sweeps, sweepingSeen, dropsWhileSweeping, jumps, partial)
	// Back to the order, for the invariants at the end.
	for _, l := range out {
		m.lruPush(l, m.lruRep(l))
	}
}

// TestLRULogConcurrent runs the log under everything at once: four nodes
// (adds, removes, RAM↔SSD moves, eviction orders carried out or failed,
// re-registrations) over pools that fill, so that eviction passes take
// victims; two readers whose leased lookups touch thousands of keys, so
// that the log is swept again and again; a killer that drops nodes (all
// their replicas leave the order at once); and an invariant checker.
// Goroutines pace themselves by a progress counter. The log must stay
// consistent with the index (checkLRU, checkShard) and bounded.
func TestLRULogConcurrent(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: 1000 * time.Hour, LeaseTTL: time.Millisecond, RecencyResolution: time.Nanosecond})
	const (
		nIDs     = 500
		beats    = 2500
		minReads = 6000
		nReaders = 2
	)
	nodes := newStressNodes(t, m, 21, nIDs, 1200, 100*700)
	errs := make(errSink, 16)
	fail := errs.fail
	var progress atomic.Int64
	var wg, rd, bg sync.WaitGroup
	writing := make(chan struct{}) // closed when the nodes are done
	for _, n := range nodes {
		wg.Go(func() {
			for range beats {
				progress.Add(1)
				n.mu.Lock()
				if n.rng.IntN(8) == 0 {
					n.tasks = nil // orders ignored: they are withdrawn
				}
				err := n.step(m, nIDs)
				n.mu.Unlock()
				if err != nil {
					fail(fmt.Errorf("node %s: %w", n.id, err))
					return
				}
			}
		})
	}
	for r := range nReaders {
		rd.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 22))
			var res meta.LookupResult
			keys := make([]block.Key, 96)
			for i := 0; ; i++ {
				if i >= minReads {
					select {
					case <-writing:
						return
					default:
					}
				}
				progress.Add(1)
				for i := range keys {
					keys[i] = stressKey(rng, nIDs)
				}
				clk.Advance(time.Millisecond) // leases end, touches count
				if err := m.Locate(keys, true, &res); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	bg.Go(func() { // the killer, while the nodes beat
		rng := rand.New(rand.NewPCG(5, 23))
		for {
			if !awaitProgress(writing, &progress, int64(300+rng.IntN(300))) {
				return
			}
			nodes[rng.IntN(len(nodes))].kill(m)
		}
	})
	bg.Go(func() { // the checker
		for {
			if !awaitProgress(stop, &progress, 150) {
				return
			}
			if err := m.CheckInvariants(); err != nil {
				fail(err)
				return
			}
			m.lruMu.Lock()
			recs, live := m.lruLog.recs, m.lruLog.live
			m.lruMu.Unlock()
			if bound := 2*live + lruSlack + 2*lruChunkLen; recs > bound {
				fail(fmt.Errorf("the log holds %d records for %d live, over %d", recs, live, bound))
				return
			}
		}
	})
	wg.Wait()
	close(writing)
	rd.Wait()
	close(stop)
	bg.Wait()
	errs.report(t)
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	m.lruMu.Lock()
	sweeps, live, recs := m.lruLog.sweeps, m.lruLog.live, m.lruLog.recs
	m.lruMu.Unlock()
	attempts := m.c.evictAttempts.Load()
	t.Logf("%d sweeps, %d eviction attempts, %d records for %d live", sweeps, attempts, recs, live)
	if sweeps == 0 || attempts == 0 {
		t.Errorf("the run exercised too little: %d sweeps, %d eviction attempts", sweeps, attempts)
	}
}

// TestLRUVictimWalkIsBounded: the stale records in front of the oldest
// live one can number as many as the live ones (keys read once each in
// the order they were stored leave every first record stale, short of a
// sweep), and the victim's search drops them under lruMu, which every
// leased lookup takes: at tens of millions of keys, a stall of seconds.
// One hold of the lock drops at most a chunk's worth (as a sweep's step
// walks at most a chunk); the eviction pass's victim still is the least
// recently used key.
func TestLRUVictimWalkIsBounded(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: time.Millisecond, RecencyResolution: time.Nanosecond})
	const nKeys = 6 * lruChunkLen
	s := register(t, m, info("a", 1<<40, 0), nil)
	for i := uint64(0); i < nKeys; i += 4096 {
		heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", ids(i+1, i+4096)...)}, nil, nil)
	}
	var res meta.LookupResult
	keys := make([]block.Key, 0, 256)
	for i := uint64(0); i < nKeys; i += 256 { // every key read once, in order
		keys = keys[:0]
		for id := i + 1; id <= i+256; id++ {
			keys = append(keys, key("t", id))
		}
		clk.Advance(time.Millisecond)
		if err := m.Locate(keys, true, &res); err != nil {
			t.Fatal(err)
		}
	}
	m.lruMu.Lock()
	g := &m.lruLog
	if g.sweeping || g.recs-g.live < nKeys {
		t.Fatalf("set-up: %d records for %d live, sweeping %v", g.recs, g.live, g.sweeping)
	}
	before := g.recs
	m.lruVictim()
	dropped := before - g.recs
	m.lruMu.Unlock()
	if dropped > lruChunkLen {
		t.Errorf("one search for the victim dropped %d stale records under lruMu, over %d", dropped, lruChunkLen)
	}
	clk.Advance(time.Second) // the leases have ended
	h, ok := m.victim()
	if !ok {
		t.Fatal("no victim")
	}
	if _, k, _ := m.victimAt(h); k.ID != 1 {
		t.Errorf("victim %v, want t/1, read first", k)
	}
}

// lruOrderLinks returns the links of the log's live records, least
// recent first.
func lruOrderLinks(m *Master) []uint32 {
	m.lruMu.Lock()
	defer m.lruMu.Unlock()
	return lruOrderLinksLocked(m)
}

func lruOrderLinksLocked(m *Master) []uint32 {
	var out []uint32
	for _, c := range m.lruLog.chunks {
		for j := c.lo; j < c.n; j++ {
			if l := c.recs[j]; m.lruLive(l, c.base+uint32(j)) {
				out = append(out, l)
			}
		}
	}
	return out
}

// lruVictimAll is lruVictim asked until it answers (lruMu held).
func lruVictimAll(m *Master) uint32 {
	for {
		if l, more := m.lruVictim(); !more {
			return l
		}
	}
}
