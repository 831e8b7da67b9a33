package masterserver

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/meta"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollector(t *testing.T) {
	// A frozen clock: the leases below must still be active at the scrape
	// however slow the machine.
	m := newMaster(t, master.Options{NodeTTL: time.Hour, Clock: frozenClock{time.Unix(1e9, 0)}})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(m)); err != nil {
		t.Fatal(err)
	}
	ni := meta.NodeInfo{ID: "a", Addr: "a:7000", RAMBytes: 1000, SSDBytes: 10000, BlockSize: 100}
	inv := slices.Concat(items("t", meta.TierRAM, 100, 1, 2, 3, 4, 5, 6, 7, 8), items("t", meta.TierSSD, 100, 11, 12, 13))
	reg1, err := m.Register(ni, inv, meta.NodeUsage{})
	if err != nil {
		t.Fatal(err)
	}
	var hits []block.Key
	for _, id := range []uint64{11, 11, 12, 12, 13, 13} {
		hits = append(hits, block.Key{Tenant: "t", ID: id})
	}
	r, err := m.Heartbeat("a", reg1.Session, meta.Delta{}, meta.NodeUsage{}, hits, nil) // admits 11; 12 passes the watermark
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tasks) != 1 || r.Tasks[0].Kind != meta.TaskPromote {
		t.Fatalf("heartbeat tasks %+v, want one promotion", r.Tasks)
	}
	done := []meta.TaskResult{{ID: r.Tasks[0].ID, OK: true, Bytes: 100}}
	if _, err := m.Heartbeat("a", reg1.Session, meta.Delta{Added: items("t", meta.TierRAM, 100, 11)}, meta.NodeUsage{}, nil, done); err != nil {
		t.Fatal(err)
	}
	var lr meta.LookupResult
	if err := m.Lookup("t", []uint64{1, 2, 3}, true, &lr); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP master_promotion_admitted_total SSD-to-RAM promotions admitted.
# TYPE master_promotion_admitted_total counter
master_promotion_admitted_total 1
# HELP master_promotion_completed_bytes_total Bytes moved by completed SSD-to-RAM promotions.
# TYPE master_promotion_completed_bytes_total counter
master_promotion_completed_bytes_total 100
# HELP master_promotion_completed_total SSD-to-RAM promotions the node reported completed.
# TYPE master_promotion_completed_total counter
master_promotion_completed_total 1
# HELP master_promotion_expired_total SSD-to-RAM promotions not acknowledged in time or dropped with their node.
# TYPE master_promotion_expired_total counter
master_promotion_expired_total 0
# HELP master_promotion_failed_total SSD-to-RAM promotions the node reported failed.
# TYPE master_promotion_failed_total counter
master_promotion_failed_total 0
# HELP master_promotion_in_flight SSD-to-RAM promotions admitted and not yet completed, failed or expired.
# TYPE master_promotion_in_flight gauge
master_promotion_in_flight 0
# HELP master_promotion_rejected_cap_total Promotions refused because the node's promotion queue was full.
# TYPE master_promotion_rejected_cap_total counter
master_promotion_rejected_cap_total 0
# HELP master_promotion_rejected_frequency_total SSD-hit reports of blocks below the promotion threshold.
# TYPE master_promotion_rejected_frequency_total counter
master_promotion_rejected_frequency_total 3
# HELP master_promotion_rejected_watermark_total Promotions refused because the node's RAM was at its watermark.
# TYPE master_promotion_rejected_watermark_total counter
master_promotion_rejected_watermark_total 2
`
	promoNames := []string{
		"master_promotion_in_flight",
		"master_promotion_admitted_total",
		"master_promotion_completed_total",
		"master_promotion_completed_bytes_total",
		"master_promotion_rejected_frequency_total",
		"master_promotion_rejected_watermark_total",
		"master_promotion_rejected_cap_total",
		"master_promotion_failed_total",
		"master_promotion_expired_total",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), promoNames...); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var gotPromo []string
	for _, mf := range mfs {
		name := mf.GetName()
		switch {
		case strings.HasPrefix(name, "master_promotion_"):
			gotPromo = append(gotPromo, name)
		case !strings.HasPrefix(name, "kvpool_master_"):
			t.Errorf("metric %s has neither prefix master_promotion_ nor kvpool_master_", name)
		}
	}
	// Every promotion series keeps Mooncake's prefix, kvpool's own two
	// (ignored, queued) included.
	allPromo := append(slices.Clone(promoNames), "master_promotion_ignored_total", "master_promotion_queued")
	slices.Sort(gotPromo)
	slices.Sort(allPromo)
	if !slices.Equal(gotPromo, allPromo) {
		t.Errorf("master_promotion_ metrics\n got %v\nwant %v", gotPromo, allPromo)
	}
	for name, want := range map[string]float64{
		"kvpool_master_nodes_live":            1,
		"kvpool_master_ram_replicas":          9,
		"kvpool_master_lookup_keys_total":     3,
		"kvpool_master_leases_active":         3,
		"kvpool_master_lookup_hit_keys_total": 3,
	} {
		if got := gathered(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

func gathered(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not gathered", name)
	return 0
}

// frozenClock is a master.Clock that never moves.
type frozenClock struct{ t time.Time }

func (c frozenClock) Now() time.Time { return c.t }
