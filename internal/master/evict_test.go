package master

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/meta"
)

func ids(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestEvictionOrder fills a two-node pool past its high watermark and
// checks that the victims come in LRU order (least recently looked up with
// a lease first), down to the low watermark, delivered in heartbeat
// replies as drops (node without SSD) or demotions (node with SSD), and
// confirmed by the nodes' deltas.
func TestEvictionOrder(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour})
	lease := m.Options().LeaseTTL
	// a has SSD (demote), b has none (drop); 10 slots of 100 B each.
	sa := register(t, m, info("a", 1000, 5000), inv(ram("t", ids(1, 8)...)))
	sb := register(t, m, info("b", 1000, 0), inv(ram("t", ids(11, 20)...)))
	if st := m.Stats(); st.PoolRAMUsed != 1800 || st.PoolRAMBytes != 2000 || st.EvictAttempts != 0 {
		t.Fatalf("after registration: used %d of %d, %d eviction attempts", st.PoolRAMUsed, st.PoolRAMBytes, st.EvictAttempts)
	}
	// Touch a's blocks: b's become the least recently used.
	lookup(t, m, "t", true, ids(1, 8)...)
	clk.Advance(lease) // every lease has run out

	// a stores two more: 2000/2000 > 0.95; evict down to 1800 (0.90).
	reply := heartbeat(t, m, "a", sa, meta.Delta{Added: ram("t", 9, 10)}, nil, nil)
	if len(reply.Tasks) != 0 {
		t.Errorf("a got %q, want no orders (its blocks are recent)", taskString(reply.Tasks))
	}
	reply = heartbeat(t, m, "b", sb, meta.Delta{}, nil, nil)
	if got := taskString(reply.Tasks); got != "drop:11 drop:12" {
		t.Fatalf("b got %q, want drop:11 drop:12", got)
	}
	if st := m.Stats(); st.PoolRAMUsed != 1800 || st.EvictAttempts != 2 || st.EvictFreed != 2 || st.EvictFreedBytes != 200 {
		t.Fatalf("after the pass: %+v", st)
	}
	// Ordered-out replicas are hidden at once, but stay indexed until the
	// node confirms.
	if r := lookup(t, m, "t", false, 11); r.Hit != 0 {
		t.Errorf("t/11 under a drop order is still visible: %q", layout(r))
	}
	if q := m.Query(key("t", 11)); len(q) != 1 || !q[0].Evicting {
		t.Errorf("Query(t/11) = %+v, want one evicting replica", q)
	}
	if again := heartbeat(t, m, "b", sb, meta.Delta{}, nil, nil); len(again.Tasks) != 0 {
		t.Errorf("orders delivered twice: %q", taskString(again.Tasks))
	}
	heartbeat(t, m, "b", sb, meta.Delta{Removed: []meta.ItemKey{{Key: key("t", 11), Tier: meta.TierRAM}, {Key: key("t", 12), Tier: meta.TierRAM}}}, nil, []meta.TaskResult{{ID: reply.Tasks[0].ID, OK: true}})
	if st := m.Stats(); st.EvictConfirmed != 2 || st.RAMReplicas != 18 || st.PoolRAMUsed != 1800 {
		t.Fatalf("after confirmation: %+v", st)
	}

	// Round two: touch b's remaining blocks; a's oldest go next, as
	// demotions, in the reply to the heartbeat that crossed the watermark.
	lookup(t, m, "t", true, ids(13, 20)...)
	clk.Advance(lease)
	reply = heartbeat(t, m, "a", sa, meta.Delta{Added: ram("t", 21, 22)}, nil, nil)
	if got := taskString(reply.Tasks); got != "demote:1 demote:2" {
		t.Fatalf("a got %q, want demote:1 demote:2", got)
	}
	heartbeat(t, m, "a", sa, meta.Delta{Moved: []meta.Move{{Key: key("t", 1), From: meta.TierRAM, To: meta.TierSSD}, {Key: key("t", 2), From: meta.TierRAM, To: meta.TierSSD}}}, nil, nil)
	if r := lookup(t, m, "t", false, 1, 2); layout(r) != "a:ssd|a:ssd" {
		t.Errorf("after demotion: %q, want a:ssd|a:ssd", layout(r))
	}
	if st := m.Stats(); st.EvictConfirmed != 4 || st.SSDReplicas != 2 {
		t.Fatalf("after demotion: %+v", st)
	}
}

// TestEvictionPolicyOrder checks that the configured policy, not a
// built-in order, picks the victims.
func TestEvictionPolicyOrder(t *testing.T) {
	tests := []struct {
		policy string
		want   string
	}{
		{"lru", "drop:2 drop:4"}, // 1 and 3 were looked up
		{"fifo", "drop:1 drop:2"},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: time.Hour, Eviction: tc.policy, HighWatermark: 0.8, LowWatermark: 0.6})
			s := register(t, m, info("a", 1000, 0), inv(ram("t", 1, 2, 3, 4, 5, 6, 7, 8)))
			lookup(t, m, "t", true, 1)
			lookup(t, m, "t", true, 3)
			clk.Advance(m.Options().LeaseTTL)
			r := heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
			if len(r.Tasks) != 0 {
				t.Fatalf("orders at 80%% usage: %q", taskString(r.Tasks))
			}
			r = heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 9)}, nil, nil) // 90% > 80%: down to 60%
			if got := taskString(r.Tasks); got[:len(tc.want)] != tc.want {
				t.Errorf("orders %q, want them to start %q", got, tc.want)
			}
			if len(r.Tasks) != 3 {
				t.Errorf("%d orders, want 3 (900 → 600 bytes)", len(r.Tasks))
			}
		})
	}
}

// TestLeases checks that leased replicas are never victims while the lease
// runs, that Exists and unleased lookups never extend a lease, and that
// attempts and freed are counted apart.
func TestLeases(t *testing.T) {
	for _, extend := range []bool{false, true} {
		t.Run(fmt.Sprintf("leased lookup in between=%v", extend), func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: time.Hour})
			lease := m.Options().LeaseTTL
			s := register(t, m, info("a", 1000, 0), inv(ram("t", ids(1, 9)...)))
			t0 := clk.Now()
			lookup(t, m, "t", true, ids(1, 8)...) // 9 is not leased
			clk.Advance(time.Second)
			// 900 → 1000 bytes: over 0.95, evict to 0.90 = one block. The
			// LRU victim order is 9, 1..8, 10: 9 and 10 are unleased.
			r := heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 10)}, nil, nil)
			if got := taskString(r.Tasks); got != "drop:9" {
				t.Fatalf("first pass: %q, want drop:9", got)
			}
			heartbeat(t, m, "a", s, meta.Delta{Removed: []meta.ItemKey{{Key: key("t", 9), Tier: meta.TierRAM}}}, nil, nil)
			// Now 1..8 are leased and first in line: adding two blocks
			// (1100 bytes) needs two victims; only 10 and 11 are free.
			r = heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 11, 12)}, nil, nil)
			if got := taskString(r.Tasks); got != "drop:10 drop:11" {
				t.Fatalf("second pass: %q, want drop:10 drop:11 (1..8 leased)", got)
			}
			st := m.Stats()
			if st.EvictFreed != 3 || st.EvictSkippedLeased != 8 || st.EvictAttempts != 11 {
				t.Fatalf("attempts %d freed %d skipped %d, want 11, 3, 8", st.EvictAttempts, st.EvictFreed, st.EvictSkippedLeased)
			}
			if st.LeasesActive != 8 {
				t.Fatalf("%d active leases, want 8", st.LeasesActive)
			}
			// The node confirms, and drops 12 on its own: 1..8 remain.
			heartbeat(t, m, "a", s, meta.Delta{Removed: []meta.ItemKey{{Key: key("t", 10), Tier: meta.TierRAM}, {Key: key("t", 11), Tier: meta.TierRAM}, {Key: key("t", 12), Tier: meta.TierRAM}}}, nil, nil)

			// Probe 1..8 just before the lease ends.
			clk.Advance(lease - 2*time.Second)
			if got, _ := m.Exists("t", ids(1, 8), nil); !slices.Equal(got, []bool{true, true, true, true, true, true, true, true}) {
				t.Fatalf("Exists = %v", got)
			}
			if r := lookup(t, m, "t", false, ids(1, 8)...); r.Hit != 8 {
				t.Fatalf("unleased lookup hit %d", r.Hit)
			}
			if extend {
				lookup(t, m, "t", true, 1)
			}
			for _, q := range m.Query(key("t", 2)) {
				if want := t0.Add(lease); !q.LeaseUntil.Equal(want) {
					t.Fatalf("lease of t/2 ends %v, want %v (probes must not extend it)", q.LeaseUntil, want)
				}
			}
			clk.Advance(time.Second) // t0+lease: every unextended lease has ended
			r = heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 13, 14, 15)}, nil, nil)
			// 800 + 300 = 1100: two victims to reach 900.
			want := "drop:1 drop:2"
			if extend {
				want = "drop:2 drop:3" // 1 was leased again
			}
			if got := taskString(r.Tasks); got != want {
				t.Fatalf("after the leases ran out: %q, want %q", got, want)
			}
		})
	}
}

// TestEvictionOrderLifecycle covers orders that fail, expire, or whose
// node disappears: the replica comes back into the index and the policy.
func TestEvictionOrderLifecycle(t *testing.T) {
	tests := []struct {
		name   string
		act    func(t *testing.T, m *Master, clk *fakeClock, s meta.Session, order meta.Task) meta.Session
		failed int64
		exp    int64
	}{
		{"node reports failure", func(t *testing.T, m *Master, _ *fakeClock, s meta.Session, o meta.Task) meta.Session {
			heartbeat(t, m, "a", s, meta.Delta{}, nil, []meta.TaskResult{{ID: o.ID}})
			return s
		}, 1, 0},
		{"acknowledged without the delta", func(t *testing.T, m *Master, _ *fakeClock, s meta.Session, o meta.Task) meta.Session {
			heartbeat(t, m, "a", s, meta.Delta{}, nil, []meta.TaskResult{{ID: o.ID, OK: true}})
			return s
		}, 1, 0},
		{"not acknowledged in time", func(t *testing.T, m *Master, clk *fakeClock, s meta.Session, _ meta.Task) meta.Session {
			clk.Advance(m.Options().Promotion.TaskTimeout + 1)
			heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
			return s
		}, 0, 1},
		{"node re-registers", func(t *testing.T, m *Master, _ *fakeClock, _ meta.Session, _ meta.Task) meta.Session {
			return register(t, m, info("a", 1000, 0), inv(ram("t", ids(1, 10)...)))
		}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: time.Hour, HighWatermark: 0.99, LowWatermark: 0.5})
			s := register(t, m, info("a", 1000, 0), inv(ram("t", ids(1, 9)...)))
			r := heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 10)}, nil, nil)
			if len(r.Tasks) != 5 {
				t.Fatalf("%d orders, want 5", len(r.Tasks))
			}
			// Withdraw every order but the first by confirming them.
			var gone []meta.ItemKey
			for _, o := range r.Tasks[1:] {
				gone = append(gone, meta.ItemKey{Key: o.Key, Tier: meta.TierRAM})
			}
			heartbeat(t, m, "a", s, meta.Delta{Removed: gone}, nil, nil)
			if r := lookup(t, m, "t", false, r.Tasks[0].Key.ID); r.Hit != 0 {
				t.Fatal("the ordered-out replica is visible")
			}
			s = tc.act(t, m, clk, s, r.Tasks[0])
			if r := lookup(t, m, "t", false, r.Tasks[0].Key.ID); r.Hit != 1 {
				t.Error("the withdrawn order's replica is still hidden")
			}
			st := m.Stats()
			if st.EvictFailed != tc.failed || st.EvictExpired != tc.exp {
				t.Errorf("failed %d expired %d, want %d %d", st.EvictFailed, st.EvictExpired, tc.failed, tc.exp)
			}
			if err := m.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRecencyResolution checks that a leased lookup's access is recorded at
// most once per replica per RecencyResolution.
func TestRecencyResolution(t *testing.T) {
	tests := []struct {
		resolution time.Duration
		want       string
	}{
		{0, "drop:1"},               // default 100 ms: the second access to 1 is merged
		{time.Nanosecond, "drop:2"}, // every access counts: 1 is more recent than 2
		{40 * time.Millisecond, "drop:2"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.resolution), func(t *testing.T) {
			m, clk := newTest(t, Options{NodeTTL: time.Hour, RecencyResolution: tc.resolution, HighWatermark: 0.25, LowWatermark: 0.2})
			s := register(t, m, info("a", 1000, 0), inv(ram("t", 1, 2)))
			lookup(t, m, "t", true, 1)
			lookup(t, m, "t", true, 2)
			clk.Advance(50 * time.Millisecond)
			lookup(t, m, "t", true, 1)
			clk.Advance(m.Options().LeaseTTL)
			r := heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 3)}, nil, nil)
			if got := taskString(r.Tasks); got != tc.want {
				t.Errorf("victim %q, want %q", got, tc.want)
			}
		})
	}
}
