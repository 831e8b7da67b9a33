package master

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/meta"
)

// scanLeases counts what Stats.LeasesActive says it counts by reading
// every replica: the leases running now, and those that ended in the
// window of the lease counts now is in when that window is the first
// one summed.
func scanLeases(m *Master) int64 {
	nowMs := m.nowMs()
	sameWindow := (nowMs+1)>>m.leaseShift == nowMs>>m.leaseShift
	var n int64
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		for ei := range s.entries() {
			for r := range s.replicas(ei) {
				l := r.lease
				if m.leaseRuns(l, nowMs) || (sameWindow && l != 0 && l>>m.leaseShift == nowMs>>m.leaseShift) {
					n++
				}
			}
		}
		s.mu.RUnlock()
	}
	return n
}

// TestLeaseCounts runs leased lookups, steps of the clock short and long
// (across the lease counts' windows and past the leases' ends), removals,
// re-additions, moves between tiers and a node's drop, and checks after
// every step that Stats counts the running leases as a walk of the whole
// index does.
func TestLeaseCounts(t *testing.T) {
	for _, ttl := range []time.Duration{5 * time.Second, 150 * time.Millisecond, time.Hour} {
		t.Run(ttl.String(), func(t *testing.T) {
			const nKeys = 600
			nodeTTL := 2*ttl + time.Minute
			m, clk := newTest(t, Options{NodeTTL: nodeTTL, LeaseTTL: ttl, HighWatermark: 0.99, LowWatermark: 0.98})
			ids := make([]uint64, nKeys)
			for i := range ids {
				ids[i] = uint64(i)
			}
			sa := register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", ids...)))
			sb := register(t, m, info("b", 1<<40, 1<<40), inv(ssd("t", ids[:nKeys/2]...)))
			rng := rand.New(rand.NewPCG(5, uint64(ttl)))
			inA := make([]bool, nKeys) // a's replica is indexed
			for i := range inA {
				inA[i] = true
			}
			// advance moves the clock by d, both nodes heartbeating.
			advance := func(d time.Duration) {
				clk.Advance(d)
				heartbeat(t, m, "a", sa, meta.Delta{}, nil, nil)
				heartbeat(t, m, "b", sb, meta.Delta{}, nil, nil)
			}
			var res meta.LookupResult
			leased := 0
			for step := range 1200 {
				var what string
				switch r := rng.IntN(100); {
				case r < 50:
					from := rng.IntN(nKeys)
					q := ids[from:min(nKeys, from+1+rng.IntN(40))]
					if err := m.Lookup("t", q, true, &res); err != nil {
						t.Fatal(err)
					}
					leased += len(res.Replicas)
					what = fmt.Sprintf("leased lookup of %d keys from %d", len(q), from)
				case r < 75:
					d := time.Duration(rng.Int64N(int64(ttl) / 20))
					advance(d)
					what = fmt.Sprintf("clock +%v", d)
				case r < 80:
					d := time.Duration(rng.Int64N(int64(ttl) * 3 / 2))
					advance(d)
					what = fmt.Sprintf("clock +%v", d)
				case r < 90: // a's replica of a key removed, or added back
					i := rng.IntN(nKeys)
					var d meta.Delta
					if inA[i] {
						d.Removed = []meta.ItemKey{{Key: key("t", ids[i]), Tier: meta.TierRAM}}
					} else {
						d.Added = ram("t", ids[i])
					}
					inA[i] = !inA[i]
					heartbeat(t, m, "a", sa, d, nil, nil)
					what = fmt.Sprintf("a's key %d in the index: %v", i, inA[i])
				case r < 99: // a's replica of a key moved to SSD and back
					i := rng.IntN(nKeys)
					if !inA[i] {
						continue
					}
					k := key("t", ids[i])
					heartbeat(t, m, "a", sa, meta.Delta{Moved: []meta.Move{{Key: k, From: meta.TierRAM, To: meta.TierSSD}}}, nil, nil)
					heartbeat(t, m, "a", sa, meta.Delta{Moved: []meta.Move{{Key: k, From: meta.TierSSD, To: meta.TierRAM}}}, nil, nil)
					what = fmt.Sprintf("a's key %d moved to SSD and back", i)
				default: // b is dropped and comes back with its SSD
					clk.Advance(nodeTTL / 2)
					heartbeat(t, m, "a", sa, meta.Delta{}, nil, nil)
					clk.Advance(nodeTTL/2 + time.Millisecond)
					heartbeat(t, m, "a", sa, meta.Delta{}, nil, nil)
					if got := m.Expire(); got != 1 {
						t.Fatalf("step %d: Expire dropped %d nodes, want b", step, got)
					}
					sb = register(t, m, info("b", 1<<40, 1<<40), inv(ssd("t", ids[:nKeys/2]...)))
					what = "b dropped and back"
				}
				if got, want := m.Stats().LeasesActive, scanLeases(m); got != want {
					t.Fatalf("step %d (%s): Stats counts %d leases, the index holds %d", step, what, got, want)
				}
				if step%200 == 0 {
					if err := m.CheckInvariants(); err != nil {
						t.Fatalf("step %d (%s): %v", step, what, err)
					}
				}
			}
			if leased == 0 {
				t.Fatal("no lookup leased a replica")
			}
		})
	}
}

// TestLeaseCountsAcrossClockWrap leases keys, lets the leases end and
// removes the replicas, and brings the clock round its 2^32 ms to the
// same window: the removed replicas' leases, ended or not, must not be
// counted there.
func TestLeaseCountsAcrossClockWrap(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: 1000 * time.Hour * 24, LeaseTTL: 5 * time.Second})
	s := register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", 1, 2, 3)))
	if got := layout(lookup(t, m, "t", true, 1, 2, 3)); got != "a:ram|a:ram|a:ram" {
		t.Fatalf("lookup = %q", got)
	}
	if got := m.Stats().LeasesActive; got != 3 {
		t.Fatalf("%d leases counted, want 3", got)
	}
	clk.Advance(10 * time.Second)
	heartbeat(t, m, "a", s, meta.Delta{Removed: []meta.ItemKey{
		{Key: key("t", 1), Tier: meta.TierRAM}, {Key: key("t", 2), Tier: meta.TierRAM}, {Key: key("t", 3), Tier: meta.TierRAM},
	}}, nil, nil)
	const half = time.Duration(1<<31) * time.Millisecond
	clk.Advance(half)
	heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
	if got := m.Stats().LeasesActive; got != 0 {
		t.Fatalf("%d leases counted 24 days after they ended, want 0", got)
	}
	// 3 s after the lookup, modulo the index's clock.
	clk.Advance(half - 7*time.Second)
	heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
	if got := m.Stats().LeasesActive; got != 0 {
		t.Fatalf("one turn of the clock on: %d leases counted, want 0", got)
	}
}

// TestLeaseCountsConcurrent extends the leases of a few keys from several
// goroutines at once while the clock moves a millisecond at a time across
// the lease counts' windows (so that two extensions of one lease may
// cross a window together), and checks the counts against the index.
func TestLeaseCountsConcurrent(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: 200 * time.Millisecond})
	ids := []uint64{1, 2, 3, 4}
	register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", ids...), ssd("t", ids...)))
	const readers, rounds = 4, 3000
	var wg sync.WaitGroup
	for g := range readers {
		wg.Go(func() {
			var res meta.LookupResult
			for i := range rounds {
				if err := m.Lookup("t", ids[:1+(g+i)%len(ids)], true, &res); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			clk.Advance(time.Millisecond)
			runtime.Gosched()
		}
	})
	wg.Wait()
	if got, want := m.Stats().LeasesActive, scanLeases(m); got != want {
		t.Fatalf("Stats counts %d leases, the index holds %d", got, want)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseCountsSlotReuse leases keys, lets the leases end and removes
// the replicas, then, with no Stats call between, leases another key of
// the same shard a whole ring of windows later, in the same slot: the
// slot must start over from that lease.
func TestLeaseCountsSlotReuse(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: 5 * time.Second})
	var ids []uint64 // four keys of one shard
	for id := uint64(1); len(ids) < 4; id++ {
		if m.keyAt(key("t", id), false).s == m.keyAt(key("t", 1), false).s {
			ids = append(ids, id)
		}
	}
	s := register(t, m, info("a", 1<<40, 1<<40), inv(ram("t", ids...)))
	for _, id := range ids[:3] {
		lookup(t, m, "t", true, id)
	}
	clk.Advance(10 * time.Second)
	var gone []meta.ItemKey
	for _, id := range ids[:3] {
		gone = append(gone, meta.ItemKey{Key: key("t", id), Tier: meta.TierRAM})
	}
	heartbeat(t, m, "a", s, meta.Delta{Removed: gone}, nil, nil)
	clk.Advance(time.Duration(leaseSlots<<m.leaseShift)*time.Millisecond - 10*time.Second)
	heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
	lookup(t, m, "t", true, ids[3])
	if got := m.Stats().LeasesActive; got != 1 {
		t.Fatalf("%d leases counted, want 1", got)
	}
}
