package master

import (
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

func keys(tenant string, ids ...uint64) []block.Key {
	out := make([]block.Key, len(ids))
	for i, id := range ids {
		out[i] = key(tenant, id)
	}
	return out
}

func promotions(ts []meta.Task) []meta.Task {
	var out []meta.Task
	for _, t := range ts {
		if t.Kind == meta.TaskPromote {
			out = append(out, t)
		}
	}
	return out
}

func checkPromo(t *testing.T, m *Master, want PromotionStats) {
	t.Helper()
	got := m.PromotionStats()
	if got != want {
		t.Fatalf("promotion stats\n got %+v\nwant %+v", got, want)
	}
}

func TestPromotionSecondTouch(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	s := register(t, m, info("a", 10000, 10000), inv(ssd("t", 1, 2), ram("t", 3)))

	r := heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 1), nil)
	if len(r.Tasks) != 0 {
		t.Fatalf("first touch promoted: %q", taskString(r.Tasks))
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 1})

	r = heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 1), nil)
	if got := taskString(r.Tasks); got != "promote:1" {
		t.Fatalf("second touch: %q, want promote:1", got)
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 1, Admitted: 1, InFlight: 1})

	// Reports while it is in flight, and of a block already in RAM, are
	// ignored.
	heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 1, 3), nil)
	checkPromo(t, m, PromotionStats{RejectedFrequency: 1, Admitted: 1, InFlight: 1, Ignored: 2})

	// The node copies it to RAM and reports.
	heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 1)}, nil, []meta.TaskResult{{ID: r.Tasks[0].ID, OK: true, Bytes: 100}})
	checkPromo(t, m, PromotionStats{RejectedFrequency: 1, Admitted: 1, Completed: 1, CompletedBytes: 100, Ignored: 2})
	if l := lookup(t, m, "t", false, 1); layout(l) != "a:ram,a:ssd" {
		t.Errorf("after promotion: %q", layout(l))
	}

	// A failed promotion.
	heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 2), nil)
	r = heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 2), nil)
	heartbeat(t, m, "a", s, meta.Delta{}, nil, []meta.TaskResult{{ID: r.Tasks[0].ID}})
	checkPromo(t, m, PromotionStats{RejectedFrequency: 2, Admitted: 2, Completed: 1, CompletedBytes: 100, Failed: 1, Ignored: 2})
}

func TestPromotionThreshold(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour, Promotion: PromotionOptions{Threshold: 3}})
	s := register(t, m, info("a", 10000, 10000), nil)
	for i, want := range []int{0, 0, 1} {
		r := heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 7), nil)
		if got := len(promotions(r.Tasks)); got != want {
			t.Fatalf("touch %d: %d promotions, want %d", i+1, got, want)
		}
	}
	// Hits are counted per node: b's first touch of t/7 is a first touch.
	sb := register(t, m, info("b", 10000, 10000), nil)
	if r := heartbeat(t, m, "b", sb, meta.Delta{}, keys("t", 7), nil); len(r.Tasks) != 0 {
		t.Fatalf("b promoted on its first touch")
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 3, Admitted: 1, InFlight: 1})
}

func TestPromotionWatermark(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour, HighWatermark: 1, LowWatermark: 0.99})
	// 800 of 1000 bytes: one more block reaches 90% (allowed), two exceed it.
	s := register(t, m, info("a", 1000, 10000), inv(ram("t", ids(1, 8)...), ssd("t", 11, 12)))
	r := heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 11, 12, 11, 12), nil)
	if got := taskString(r.Tasks); got != "promote:11" {
		t.Fatalf("got %q, want promote:11 (12 would pass the RAM watermark)", got)
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 2, Admitted: 1, InFlight: 1, RejectedWatermark: 1})
	// A node without RAM never takes promotions.
	sb := register(t, m, info("b", 0, 10000), inv(ssd("t", 1)))
	heartbeat(t, m, "b", sb, meta.Delta{}, keys("t", 1, 1), nil)
	checkPromo(t, m, PromotionStats{RejectedFrequency: 3, Admitted: 1, InFlight: 1, RejectedWatermark: 2})
}

func TestPromotionQueueCap(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour, Promotion: PromotionOptions{QueueCap: 2, MaxPerHeartbeat: 1}})
	s := register(t, m, info("a", 100000, 100000), nil)
	r := heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 1, 1, 2, 2, 3, 3, 4, 4), nil)
	if got := taskString(r.Tasks); got != "promote:1" {
		t.Fatalf("first reply %q, want promote:1", got)
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 4, Admitted: 2, RejectedCap: 2, InFlight: 2, Queued: 1})
	// One slot in the queue now: 3 gets in, 4 does not.
	r = heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 3, 4), nil)
	if got := taskString(r.Tasks); got != "promote:2" {
		t.Fatalf("second reply %q, want promote:2", got)
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 4, Admitted: 3, RejectedCap: 3, InFlight: 3, Queued: 1})
}

func TestPromotionBurst(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	max := m.Options().Promotion.MaxPerHeartbeat
	s := register(t, m, info("a", 1<<30, 1<<30), nil)
	var hits []block.Key
	for id := range uint64(100) {
		hits = append(hits, key("t", id), key("t", id))
	}
	seen := map[uint64]bool{}
	r := heartbeat(t, m, "a", s, meta.Delta{}, hits, nil)
	checkPromo(t, m, PromotionStats{RejectedFrequency: 100, Admitted: 100, InFlight: 100, Queued: 100 - int64(max)})
	for beat := 0; len(seen) < 100; beat++ {
		if beat > 0 {
			r = heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
		}
		p := promotions(r.Tasks)
		if len(p) > max || len(p) == 0 {
			t.Fatalf("heartbeat %d handed out %d promotions (max %d)", beat, len(p), max)
		}
		for _, tk := range p {
			if seen[tk.Key.ID] {
				t.Fatalf("t/%d handed out twice", tk.Key.ID)
			}
			seen[tk.Key.ID] = true
		}
		if beat > 100 {
			t.Fatal("never drained")
		}
	}
	if r := heartbeat(t, m, "a", s, meta.Delta{}, nil, nil); len(r.Tasks) != 0 {
		t.Fatalf("extra tasks after the burst: %q", taskString(r.Tasks))
	}
	if ps := m.PromotionStats(); ps.InFlight != 100 || ps.Queued != 0 {
		t.Fatalf("after handing out: %+v", ps)
	}
}

func TestPromotionExpiry(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, Promotion: PromotionOptions{MaxPerHeartbeat: 1}})
	timeout := m.Options().Promotion.TaskTimeout
	s := register(t, m, info("a", 100000, 100000), nil)
	r := heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 1, 1, 2, 2), nil)
	// t/1 is handed out, t/2 waits in the queue.
	clk.Advance(timeout)
	heartbeat(t, m, "a", s, meta.Delta{}, nil, nil) // hands out t/2
	checkPromo(t, m, PromotionStats{RejectedFrequency: 2, Admitted: 2, InFlight: 2})
	clk.Advance(time.Nanosecond)
	m.Expire()
	checkPromo(t, m, PromotionStats{RejectedFrequency: 2, Admitted: 2, InFlight: 1, Expired: 1})
	// A late result for the expired task is ignored.
	heartbeat(t, m, "a", s, meta.Delta{}, nil, []meta.TaskResult{{ID: r.Tasks[0].ID, OK: true, Bytes: 100}})
	checkPromo(t, m, PromotionStats{RejectedFrequency: 2, Admitted: 2, InFlight: 1, Expired: 1})
	if st := m.Stats(); st.ResultsIgnored != 1 {
		t.Errorf("ResultsIgnored = %d, want 1", st.ResultsIgnored)
	}
	// The node dies with one promotion in flight and one queued.
	heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 3, 3, 4, 4), nil)
	checkPromo(t, m, PromotionStats{RejectedFrequency: 4, Admitted: 4, InFlight: 3, Expired: 1, Queued: 1})
	clk.Advance(time.Hour + 1)
	if n := m.Expire(); n != 1 {
		t.Fatalf("Expire dropped %d nodes, want 1", n)
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 4, Admitted: 4, Expired: 4})
}

func TestPromotionDisabled(t *testing.T) {
	m, _ := newTest(t, Options{Promotion: PromotionOptions{Disabled: true}})
	s := register(t, m, info("a", 100000, 100000), nil)
	if r := heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 1, 1, 1), nil); len(r.Tasks) != 0 {
		t.Fatalf("disabled promotion handed out %q", taskString(r.Tasks))
	}
	checkPromo(t, m, PromotionStats{})
}

// TestPromotionSketchLazy checks that the promotion sketch is built at the
// first SSD hit counted, not with the master: a master whose nodes report
// none does not pay its 8 MiB.
func TestPromotionSketchLazy(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	s := register(t, m, info("a", 10000, 10000), inv(ssd("t", 1), ram("t", 2)))
	lookup(t, m, "t", true, 1, 2)
	heartbeat(t, m, "a", s, meta.Delta{}, nil, nil)
	m.sketchMu.Lock()
	built := m.sketch != nil
	m.sketchMu.Unlock()
	if built {
		t.Fatal("sketch built before any SSD hit was reported")
	}
	heartbeat(t, m, "a", s, meta.Delta{}, keys("t", 1), nil)
	m.sketchMu.Lock()
	built = m.sketch != nil
	m.sketchMu.Unlock()
	if !built {
		t.Fatal("no sketch after an SSD hit was counted")
	}
	checkPromo(t, m, PromotionStats{RejectedFrequency: 1})
}
