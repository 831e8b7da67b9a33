package master

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// shardKeys returns n ids of tenant "t" whose keys share one shard.
func shardKeys(m *Master, n int) []uint64 {
	var ids []uint64
	s := m.keyAt(key("t", 1), false).s
	for id := uint64(1); len(ids) < n; id++ {
		if m.keyAt(key("t", id), false).s == s {
			ids = append(ids, id)
		}
	}
	return ids
}

// checkLeaseCount fails t when Stats does not count the leases a walk of
// the index finds.
func checkLeaseCount(t *testing.T, m *Master, what string) {
	t.Helper()
	if got, want := m.Stats().LeasesActive, scanLeases(m); got != want {
		t.Fatalf("%s: Stats counts %d leases, the index holds %d", what, got, want)
	}
}

// TestLeaseCountsAfterIdleHalfTurn lets a shard's lease counts sit unused
// for over half the clock's turn (24.8 days), the node heartbeating and
// the ticker expiring once an hour, and then leases keys whose windows
// fall in the slots last used before: new leases, old leases extended and
// old leases dropped must all be counted as the index holds them.
func TestLeaseCountsAfterIdleHalfTurn(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: 1000 * 24 * time.Hour, LeaseTTL: 5 * time.Second})
	ids := shardKeys(m, 12)
	old, fresh, gone := ids[:4], ids[4:8], ids[8:]
	sess := register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", ids...)))
	lookup(t, m, "t", true, old...)
	lookup(t, m, "t", true, gone...)
	checkLeaseCount(t, m, "leased")
	// Over half a turn, in whole rings of windows: the leases of now end
	// in the slots the first ones did.
	ringMs := int64(leaseSlots) << m.leaseShift
	left := time.Duration((1<<31/ringMs+1)*ringMs) * time.Millisecond
	for left > 0 {
		d := min(left, time.Hour)
		clk.Advance(d)
		left -= d
		heartbeat(t, m, "a", sess, meta.Delta{}, nil, nil)
		m.Expire()
	}
	checkLeaseCount(t, m, "24.9 days on")
	lookup(t, m, "t", true, fresh...)
	checkLeaseCount(t, m, "keys leased for the first time")
	lookup(t, m, "t", true, old...)
	checkLeaseCount(t, m, "leases of 24.9 days ago extended")
	var d meta.Delta
	for _, id := range gone {
		d.Removed = append(d.Removed, meta.ItemKey{Key: key("t", id), Tier: meta.TierRAM})
	}
	heartbeat(t, m, "a", sess, d, nil, nil)
	checkLeaseCount(t, m, "replicas with leases of 24.9 days ago removed")
	lookup(t, m, "t", true, fresh...)
	lookup(t, m, "t", true, old...)
	clk.Advance(100 * time.Millisecond)
	lookup(t, m, "t", true, fresh...)
	checkLeaseCount(t, m, "extended again")
}

// TestLeaseCountsStaleClocks extends the leases of a few replicas from
// several goroutines at once, each with its own clock lagging the latest
// by up to a few windows (as lookups that read the clock and were then
// held up do), the clock moving on meanwhile, for lease TTLs from 1 ms to
// MaxLeaseTTL and across the clock's wrap; once they are done the counts
// must match the index.
func TestLeaseCountsStaleClocks(t *testing.T) {
	for _, tc := range []struct {
		ttl   time.Duration
		start time.Duration // the clock's start, from the master's birth
	}{
		{time.Millisecond, 0},
		{3 * time.Millisecond, (1<<32 - 700) * time.Millisecond},
		{10 * time.Millisecond, 0},
		{5 * time.Second, (1<<32 - 3000) * time.Millisecond},
		{MaxLeaseTTL, 0},
		{MaxLeaseTTL, (1<<32 - 5000) * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v@%v", tc.ttl, tc.start), func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: 1000 * 24 * time.Hour, LeaseTTL: tc.ttl})
			ids := shardKeys(m, 4)
			register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", ids...), ssd("t", ids...)))
			for left := tc.start; left > 0; { // in steps the index's clock takes
				d := min(left, time.Duration(1<<31)*time.Millisecond)
				clk.Advance(d)
				left -= d
				m.nowMs()
			}
			lookup(t, m, "t", true, ids...)
			var reps []*replica
			s := m.keyAt(key("t", ids[0]), false).s
			s.mu.RLock()
			for _, id := range ids {
				p := m.keyAt(key("t", id), false)
				for r := range s.replicas(p.entryOf(key("t", id)) - 1) {
					reps = append(reps, r)
				}
			}
			s.mu.RUnlock()
			// step is the clock's step: a few windows, or a few ms.
			step := uint32(1) << m.leaseShift
			ttlMs := m.leaseSpan - 2
			const workers, rounds = 4, 2000
			var wg sync.WaitGroup
			for g := range workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), uint64(tc.ttl)))
					for range rounds {
						nowMs := m.nowMs() - uint32(rng.IntN(4))*step/2
						r := reps[rng.IntN(len(reps))]
						s.mu.RLock()
						m.extendLease(s, r, nowMs+ttlMs+uint32(rng.IntN(2)), nowMs)
						s.mu.RUnlock()
					}
				})
			}
			wg.Go(func() {
				for range rounds {
					clk.Advance(time.Duration(max(1, step/4)) * time.Millisecond)
				}
			})
			wg.Wait()
			checkLeaseCount(t, m, "after the extensions")
			clk.Advance(time.Duration(step) * time.Millisecond)
			checkLeaseCount(t, m, "a window on")
			lookup(t, m, "t", true, ids...)
			checkLeaseCount(t, m, "leased again")
			if err := m.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLeaseCountsClockSteps leases keys while the clock steps back (under
// an hour, which the index's clock holds through) and forward, with
// removals and moves between tiers, for short and long lease TTLs, and
// compares the counts with the index after every step.
func TestLeaseCountsClockSteps(t *testing.T) {
	for _, ttl := range []time.Duration{time.Millisecond, 10 * time.Millisecond, MaxLeaseTTL} {
		t.Run(ttl.String(), func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: 1000 * 24 * time.Hour, LeaseTTL: ttl})
			const nKeys = 64
			ids := make([]uint64, nKeys)
			for i := range ids {
				ids[i] = uint64(i)
			}
			sess := register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", ids...)))
			inRAM := make([]bool, nKeys)
			for i := range inRAM {
				inRAM[i] = true
			}
			rng := rand.New(rand.NewPCG(9, uint64(ttl)))
			steps := []time.Duration{-59 * time.Minute, -time.Second, -time.Millisecond, time.Millisecond,
				ttl / 2, ttl, 2 * ttl, time.Hour, 12 * 24 * time.Hour}
			var res meta.LookupResult
			var held time.Duration // how far the clock is behind the index's
			// ran is how far the clock went forward, at most a turn of
			// the index's clock less two lease spans (see checkLeases).
			var ran time.Duration
			turn := time.Duration(1<<32-2*int64(m.leaseSpan))*time.Millisecond - 2*time.Hour
			for step := range 600 {
				var what string
				switch r := rng.IntN(10); {
				case r < 5:
					from := rng.IntN(nKeys)
					if err := m.Lookup("t", ids[from:min(nKeys, from+1+rng.IntN(8))], true, &res); err != nil {
						t.Fatal(err)
					}
					what = fmt.Sprintf("lookup from %d", from)
				case r < 8:
					d := steps[rng.IntN(len(steps))]
					if held-d >= time.Hour {
						d = -d // the index's clock would take the step back as it is
					}
					if d > 0 && ran+d > turn {
						d = time.Millisecond // a lease of the clock's last turn would end in a window summed now
					}
					held = max(0, held-d)
					ran += max(d, 0)
					clk.Advance(d)
					heartbeat(t, m, "a", sess, meta.Delta{}, nil, nil)
					what = fmt.Sprintf("clock %+v", d)
				default:
					i := rng.IntN(nKeys)
					mv := meta.Move{Key: key("t", ids[i]), From: meta.TierRAM, To: meta.TierSSD}
					if !inRAM[i] {
						mv.From, mv.To = mv.To, mv.From
					}
					inRAM[i] = !inRAM[i]
					heartbeat(t, m, "a", sess, meta.Delta{Moved: []meta.Move{mv}}, nil, nil)
					what = fmt.Sprintf("key %d moved to %v", i, mv.To)
				}
				checkLeaseCount(t, m, fmt.Sprintf("step %d (%s)", step, what))
			}
			if err := m.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDropRacingLookups drops node a, which holds chain and named keys in
// RAM, SSD or both, some of them on a alone, while leased lookups and
// locates of those keys run and node b heartbeats keys in and out and
// moves them between tiers; node c re-registers with a changed
// inventory and block size meanwhile (all its replicas removed and added
// back), and a re-registers as soon as it is dropped.
// Afterwards the index holds exactly the inventories the nodes last
// reported, and the replica counts, the pool's RAM and the lease counts
// agree with it.
func TestDropRacingLookups(t *testing.T) {
	const nKeys = 12000
	m, clk := newTest(t, Options{NodeTTL: 10 * time.Second, LeaseTTL: 50 * time.Millisecond, HighWatermark: 1, LowWatermark: 0.99})
	keys := make([]block.Key, nKeys)
	var invA, invB, invC meta.Inventory
	for i := range keys {
		k := block.Key{Tenant: "t", ID: uint64(i)}
		if i%4 == 0 {
			k.Name = fmt.Sprintf("obj-%d", i)
		}
		keys[i] = k
		it := meta.Item{Key: k, Tier: meta.TierRAM, Size: 50 + int64(i%300), Sum: sumOf(k)}
		switch i % 6 {
		case 0: // a alone, both tiers
			invA = append(invA, it)
			it.Tier = meta.TierSSD
			invA = append(invA, it)
		case 1: // a alone, SSD
			it.Tier = meta.TierSSD
			invA = append(invA, it)
		case 2: // a and b
			invA = append(invA, it)
			it.Tier = meta.TierSSD
			invB = append(invB, it)
		case 3: // a in both tiers, c in RAM
			invC = append(invC, it)
			invA = append(invA, it)
			it.Tier = meta.TierSSD
			invA = append(invA, it)
		case 4: // b and c
			invB = append(invB, it)
			it.Tier = meta.TierSSD
			invC = append(invC, it)
		}
	}
	sa := register(t, m, info("a", 1<<40, 1<<40), invA)
	sb := register(t, m, info("b", 1<<40, 1<<40), invB)
	sc := register(t, m, info("c", 1<<40, 1<<40), invC)
	lookupAll := func() {
		var res meta.LookupResult
		for i := 0; i < nKeys; i += 64 {
			if err := m.Locate(keys[i:min(nKeys, i+64)], true, &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	lookupAll()
	clk.Advance(6 * time.Second)
	heartbeat(t, m, "b", sb, meta.Delta{}, nil, nil)
	heartbeat(t, m, "c", sc, meta.Delta{}, nil, nil)
	lookupAll()
	clk.Advance(6 * time.Second) // a is past its TTL, b and c are not

	// b's churn: extra keys (of its own) in RAM, added and removed; c
	// re-registers without its case 4 keys.
	var extra meta.Inventory
	for i := range 200 {
		k := block.Key{Tenant: "u", ID: uint64(i)}
		extra = append(extra, meta.Item{Key: k, Tier: meta.TierRAM, Size: 77, Sum: sumOf(k)})
	}
	var invC2 meta.Inventory
	for _, it := range invC {
		if it.Tier == meta.TierRAM {
			invC2 = append(invC2, it)
		}
	}
	// a re-registers while it is being dropped (its registration waits
	// for the removal), with a few of its keys and new ones.
	var invA2 meta.Inventory
	for _, it := range invA {
		if it.Key.ID%6 == 2 && it.Key.ID%5 == 0 {
			invA2 = append(invA2, it)
		}
	}
	for i := range 50 {
		k := block.Key{Tenant: "v", ID: uint64(i), Name: fmt.Sprintf("n%d", i%3)}
		it := meta.Item{Key: k, Tier: meta.TierRAM, Size: 1000, Sum: sumOf(k)}
		if i%2 == 1 {
			it.Tier = meta.TierSSD
		}
		invA2 = append(invA2, it)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	m.onDrop = func() {
		wg.Go(func() {
			if _, err := m.Register(info("a", 1<<40, 1<<40), invA2, meta.NodeUsage{}); err != nil {
				t.Error(err)
			}
		})
	}
	for g := range 2 {
		wg.Go(func() {
			var res meta.LookupResult
			ids := make([]uint64, 16)
			for i := 0; ; i++ {
				if i >= 50 && stop.Load() {
					return
				}
				from := (i*97 + g*31) % (nKeys - 64)
				if err := m.Locate(keys[from:from+64], true, &res); err != nil {
					t.Error(err)
					return
				}
				for j := range ids {
					ids[j] = uint64(from + j)
				}
				if err := m.Lookup("t", ids, true, &res); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		in := false
		for i := 0; ; i++ {
			if i >= 20 && stop.Load() && !in {
				return
			}
			var d meta.Delta
			if in {
				for _, it := range extra {
					d.Removed = append(d.Removed, meta.ItemKey{Key: it.Key, Tier: it.Tier})
				}
			} else {
				d.Added = extra
			}
			// b's case 4 keys go to SSD and come back.
			mv := meta.Move{Key: keys[4+6*(i%50)], From: meta.TierRAM, To: meta.TierSSD}
			d.Moved = []meta.Move{mv, {Key: mv.Key, From: mv.To, To: mv.From}}
			if _, err := m.Heartbeat("b", sb, d, meta.NodeUsage{}, nil, nil); err != nil {
				t.Error(err)
				return
			}
			in = !in
		}
	})
	wg.Go(func() {
		var err error
		// Another block size: c's replicas are all removed and added back.
		ci := info("c", 1<<40, 1<<40)
		ci.BlockSize = 64
		if _, err = m.Register(ci, invC2, meta.NodeUsage{}); err != nil {
			t.Error(err)
		}
	})
	m.Expire() // or a lookup's lazy expiry, which may have come first
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if _, err := m.Heartbeat("a", sa, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Fatalf("heartbeat of the dropped node a: %v", err)
	}
	want := sortedRows(rowsOf("a", invA2), rowsOf("b", invB), rowsOf("c", invC2))
	checkDump(t, m, want)
	st := m.Stats()
	var ramN, ssdN, ramUsed int64
	for i, part := range []meta.Inventory{invA2, invB, invC2} {
		for _, it := range part {
			if it.Tier == meta.TierRAM {
				ramN++
				ramUsed += meta.Footprint(it.Key, it.Size, []int64{100, 100, 64}[i])
			} else {
				ssdN++
			}
		}
	}
	if st.RAMReplicas != ramN || st.SSDReplicas != ssdN || st.PoolRAMUsed != ramUsed || st.PoolRAMBytes != 3<<40 {
		t.Errorf("Stats: %d RAM and %d SSD replicas, pool RAM %d used of %d; want %d, %d, %d of %d",
			st.RAMReplicas, st.SSDReplicas, st.PoolRAMUsed, st.PoolRAMBytes, ramN, ssdN, ramUsed, int64(3<<40))
	}
	checkLeaseCount(t, m, "after the drop")
	m.onDrop = nil
	if got := m.Stats().NodesDropped; got != 1 {
		t.Fatalf("%d nodes dropped, want a", got)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseNotShortenedByLaggingLookup extends a lease as a lookup that
// read the clock a few ms before another (and was held up before
// extending) does, after the other extended it: the lease the other
// granted must stand, and the counts follow it.
func TestLeaseNotShortenedByLaggingLookup(t *testing.T) {
	for _, ttl := range []time.Duration{time.Millisecond, 5 * time.Second, MaxLeaseTTL} {
		t.Run(ttl.String(), func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: 1000 * 24 * time.Hour, LeaseTTL: ttl})
			register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", 1)))
			clk.Advance(time.Hour)
			lookup(t, m, "t", true, 1)
			p := m.keyAt(key("t", 1), false)
			s := p.s
			s.mu.RLock()
			r, _ := s.findRep(p.entryOf(key("t", 1))-1, m.nodeAt(1).num, meta.TierRAM)
			granted := atomic.LoadUint32(&r.lease)
			ttlMs := m.leaseSpan - 2
			for _, lag := range []uint32{1, 2, 3, 10, ttlMs / 2} {
				now := granted - ttlMs - lag // the lagging lookup's clock
				m.extendLease(s, r, now+ttlMs, now)
				if got := atomic.LoadUint32(&r.lease); got != granted {
					s.mu.RUnlock()
					t.Fatalf("a lookup %d ms behind moved the lease's end from %d to %d", lag, granted, got)
				}
			}
			s.mu.RUnlock()
			checkLeaseCount(t, m, "after the lagging extensions")
		})
	}
}
