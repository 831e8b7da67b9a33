package nodemetrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/kvpool/kvpool/internal/node/pacer"
	"github.com/kvpool/kvpool/internal/tier"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func fakeSnapshot() Snapshot {
	return Snapshot{
		RAM: tier.Stats{
			Blocks: 10, Bytes: 2560, HeldBytes: 40960, CapacityBytes: 1 << 30,
			Hits: 7, Misses: 3, BytesIn: 4096, BytesOut: 1792,
			EvictAttempts: 5, Evicted: 4, Corruptions: 0, IOErrors: 0,
		},
		SSD: tier.Stats{
			Blocks: 20, Bytes: 5120, HeldBytes: 81920, CapacityBytes: 64 << 30,
			Hits: 2, Misses: 1, BytesIn: 8192, BytesOut: 512,
			EvictAttempts: 9, Evicted: 8, Corruptions: 1, IOErrors: 2,
		},
		SSDEnabled: true,
		Store:      StoreStats{Demotions: 6, DemotionFailures: 1, PromotionsCompleted: 2, PromotionsFailed: 3},
		PacerWait:  [pacer.NumPaths]time.Duration{pacer.NetEgress: 1500 * time.Millisecond, pacer.SSDRead: 250 * time.Millisecond},
		Requests: []RequestCount{
			{Op: "get", Status: "ok", Count: 9},
			{Op: "get", Status: "not_found", Count: 3},
			{Op: "put", Status: "ok", Count: 4},
			{Op: "get", Status: "ok", Count: 1}, // merged with the first row
		},
	}
}

const wantFake = `
# HELP kvpool_node_demotion_failures_total Demotions that failed (the block was dropped).
# TYPE kvpool_node_demotion_failures_total counter
kvpool_node_demotion_failures_total 1
# HELP kvpool_node_demotions_total Blocks demoted RAM→SSD when the RAM tier evicted them.
# TYPE kvpool_node_demotions_total counter
kvpool_node_demotions_total 6
# HELP kvpool_node_pacer_wait_seconds_total Time spent waiting in a path's pacer, summed over callers.
# TYPE kvpool_node_pacer_wait_seconds_total counter
kvpool_node_pacer_wait_seconds_total{path="net_egress"} 1.5
kvpool_node_pacer_wait_seconds_total{path="net_ingress"} 0
kvpool_node_pacer_wait_seconds_total{path="ssd_read"} 0.25
kvpool_node_pacer_wait_seconds_total{path="ssd_write"} 0
# HELP kvpool_node_promotions_completed_total Blocks promoted SSD→RAM on hit.
# TYPE kvpool_node_promotions_completed_total counter
kvpool_node_promotions_completed_total 2
# HELP kvpool_node_promotions_failed_total Promotions started that failed.
# TYPE kvpool_node_promotions_failed_total counter
kvpool_node_promotions_failed_total 3
# HELP kvpool_node_requests_total Data-plane requests by operation and outcome.
# TYPE kvpool_node_requests_total counter
kvpool_node_requests_total{op="get",status="not_found"} 3
kvpool_node_requests_total{op="get",status="ok"} 10
kvpool_node_requests_total{op="put",status="ok"} 4
# HELP kvpool_node_tier_bytes_in_total Payload bytes written to the tier.
# TYPE kvpool_node_tier_bytes_in_total counter
kvpool_node_tier_bytes_in_total{tier="ram"} 4096
kvpool_node_tier_bytes_in_total{tier="ssd"} 8192
# HELP kvpool_node_tier_bytes_out_total Payload bytes read from the tier.
# TYPE kvpool_node_tier_bytes_out_total counter
kvpool_node_tier_bytes_out_total{tier="ram"} 1792
kvpool_node_tier_bytes_out_total{tier="ssd"} 512
# HELP kvpool_node_tier_capacity_bytes The tier's configured capacity in bytes.
# TYPE kvpool_node_tier_capacity_bytes gauge
kvpool_node_tier_capacity_bytes{tier="ram"} 1.073741824e+09
kvpool_node_tier_capacity_bytes{tier="ssd"} 6.8719476736e+10
# HELP kvpool_node_tier_corruptions_total Stored copies that failed their checksum or header check (dropped, served as misses).
# TYPE kvpool_node_tier_corruptions_total counter
kvpool_node_tier_corruptions_total{tier="ram"} 0
kvpool_node_tier_corruptions_total{tier="ssd"} 1
# HELP kvpool_node_tier_enabled Whether the tier is on (1) or off (0).
# TYPE kvpool_node_tier_enabled gauge
kvpool_node_tier_enabled{tier="ram"} 1
kvpool_node_tier_enabled{tier="ssd"} 1
# HELP kvpool_node_tier_evictions_attempted_total Eviction victims chosen.
# TYPE kvpool_node_tier_evictions_attempted_total counter
kvpool_node_tier_evictions_attempted_total{tier="ram"} 5
kvpool_node_tier_evictions_attempted_total{tier="ssd"} 9
# HELP kvpool_node_tier_evictions_freed_total Blocks actually freed by eviction.
# TYPE kvpool_node_tier_evictions_freed_total counter
kvpool_node_tier_evictions_freed_total{tier="ram"} 4
kvpool_node_tier_evictions_freed_total{tier="ssd"} 8
# HELP kvpool_node_tier_held_bytes Bytes of the tier's memory or disk the resident objects occupy (chunks or pages, names and metadata included); held_bytes / resident_bytes is the tier's space overhead.
# TYPE kvpool_node_tier_held_bytes gauge
kvpool_node_tier_held_bytes{tier="ram"} 40960
kvpool_node_tier_held_bytes{tier="ssd"} 81920
# HELP kvpool_node_tier_hits_total Gets the tier served.
# TYPE kvpool_node_tier_hits_total counter
kvpool_node_tier_hits_total{tier="ram"} 7
kvpool_node_tier_hits_total{tier="ssd"} 2
# HELP kvpool_node_tier_io_errors_total Read and write errors from the device.
# TYPE kvpool_node_tier_io_errors_total counter
kvpool_node_tier_io_errors_total{tier="ram"} 0
kvpool_node_tier_io_errors_total{tier="ssd"} 2
# HELP kvpool_node_tier_misses_total Gets the tier could not serve (absent, corrupt or failed).
# TYPE kvpool_node_tier_misses_total counter
kvpool_node_tier_misses_total{tier="ram"} 3
kvpool_node_tier_misses_total{tier="ssd"} 1
# HELP kvpool_node_tier_resident_blocks Blocks resident in the tier.
# TYPE kvpool_node_tier_resident_blocks gauge
kvpool_node_tier_resident_blocks{tier="ram"} 10
kvpool_node_tier_resident_blocks{tier="ssd"} 20
# HELP kvpool_node_tier_resident_bytes Payload bytes resident in the tier.
# TYPE kvpool_node_tier_resident_bytes gauge
kvpool_node_tier_resident_bytes{tier="ram"} 2560
kvpool_node_tier_resident_bytes{tier="ssd"} 5120
`

func TestScrapeMatchesSnapshot(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(reg, fakeSnapshot); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantFake)); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestSSDOffOmitsSSDSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := fakeSnapshot()
	s.SSDEnabled = false
	if _, err := New(reg, func() Snapshot { return s }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP kvpool_node_tier_enabled Whether the tier is on (1) or off (0).
# TYPE kvpool_node_tier_enabled gauge
kvpool_node_tier_enabled{tier="ram"} 1
kvpool_node_tier_enabled{tier="ssd"} 0
# HELP kvpool_node_tier_hits_total Gets the tier served.
# TYPE kvpool_node_tier_hits_total counter
kvpool_node_tier_hits_total{tier="ram"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kvpool_node_tier_enabled", "kvpool_node_tier_hits_total"); err != nil {
		t.Error(err)
	}
}

// TestTwoNodesInOneProcess: each collector reports its own node, on its
// own registry; nothing leaks through shared state.
func TestTwoNodesInOneProcess(t *testing.T) {
	type node struct {
		reg  *prometheus.Registry
		mu   sync.Mutex
		snap Snapshot
	}
	nodes := []*node{{reg: prometheus.NewRegistry()}, {reg: prometheus.NewRegistry()}}
	for i, n := range nodes {
		n.snap.RAM.Hits = uint64(100 * (i + 1))
		if _, err := New(n.reg, func() Snapshot { n.mu.Lock(); defer n.mu.Unlock(); return n.snap }); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	nodes[1].mu.Lock()
	nodes[1].snap.RAM.Hits = 250 // read at scrape time, not at New
	nodes[1].mu.Unlock()
	for i, want := range []string{"100", "250"} {
		exp := "# HELP kvpool_node_tier_hits_total Gets the tier served.\n# TYPE kvpool_node_tier_hits_total counter\n" +
			`kvpool_node_tier_hits_total{tier="ram"} ` + want + "\n"
		if err := testutil.GatherAndCompare(nodes[i].reg, strings.NewReader(exp), "kvpool_node_tier_hits_total"); err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
	// A node-label wrapper shares one registry between nodes.
	shared := prometheus.NewRegistry()
	for _, name := range []string{"a", "b"} {
		if _, err := New(prometheus.WrapRegistererWith(prometheus.Labels{"node": name}, shared), fakeSnapshot); err != nil {
			t.Fatalf("node %s on a shared registry: %v", name, err)
		}
	}
	if n, err := testutil.GatherAndCount(shared, "kvpool_node_demotions_total"); err != nil || n != 2 {
		t.Errorf("shared registry has %d demotion series (%v), want 2", n, err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, fakeSnapshot); err == nil {
		t.Error("New(nil registry) succeeded")
	}
	if _, err := New(prometheus.NewRegistry(), nil); err == nil {
		t.Error("New(nil snapshot) succeeded")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(reg, fakeSnapshot); err != nil {
		t.Fatal(err)
	}
	_, err := New(reg, fakeSnapshot)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Errorf("second New on one registry = %v, want AlreadyRegisteredError", err)
	}
}

func TestBadLabelIsAScrapeErrorNotAPanic(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := Snapshot{Requests: []RequestCount{{Op: "get\xff", Status: "ok", Count: 1}}}
	if _, err := New(reg, func() Snapshot { return s }); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err == nil {
		t.Error("Gather with an invalid UTF-8 label succeeded")
	}
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("/metrics with a gathering error: status %d, want 500", rec.Code)
	}
}

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestMux(t *testing.T) {
	const token = "s3cr3t-T0KEN-abcdefghijklmnop"
	reg := prometheus.NewRegistry()
	if _, err := New(reg, fakeSnapshot); err != nil {
		t.Fatal(err)
	}
	healthy := true
	check := func(ctx context.Context) error {
		if ctx == nil {
			return errors.New("no context")
		}
		if !healthy {
			return errors.New("ssd tier closed")
		}
		return nil
	}
	mux := NewMux(reg, check)

	code, body := get(t, mux, http.MethodGet, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d", code)
	}
	for _, want := range []string{
		`kvpool_node_tier_hits_total{tier="ram"} 7`,
		`kvpool_node_pacer_wait_seconds_total{path="net_egress"} 1.5`,
		`kvpool_node_requests_total{op="get",status="ok"} 10`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, token) || strings.Contains(body, "go_goroutines") {
		t.Error("/metrics carries a secret or the global registry's series")
	}

	if code, body := get(t, mux, http.MethodGet, "/health"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/health healthy: %d %q", code, body)
	}
	healthy = false
	if code, body := get(t, mux, http.MethodGet, "/health"); code != http.StatusServiceUnavailable || !strings.Contains(body, "ssd tier closed") {
		t.Errorf("/health unhealthy: %d %q", code, body)
	}
	if code, _ := get(t, mux, http.MethodPost, "/health"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /health: status %d, want 405", code)
	}
	if code, body := get(t, Health(nil), http.MethodHead, "/health"); code != http.StatusOK {
		t.Errorf("HEAD /health with no check: %d %q", code, body)
	}
}

// TestConcurrentScrapes runs scrapes in parallel with snapshot updates
// (-race checks the collector adds no shared state of its own).
func TestConcurrentScrapes(t *testing.T) {
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	snap := fakeSnapshot()
	if _, err := New(reg, func() Snapshot { mu.Lock(); defer mu.Unlock(); return snap }); err != nil {
		t.Fatal(err)
	}
	h := Handler(reg)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if code, _ := get(t, h, http.MethodGet, "/metrics"); code != http.StatusOK {
					t.Errorf("status %d", code)
					return
				}
				mu.Lock()
				snap.RAM.Hits++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	want := "# HELP kvpool_node_tier_hits_total Gets the tier served.\n# TYPE kvpool_node_tier_hits_total counter\n" +
		`kvpool_node_tier_hits_total{tier="ram"} 87` + "\n" + `kvpool_node_tier_hits_total{tier="ssd"} 2` + "\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kvpool_node_tier_hits_total"); err != nil {
		t.Errorf("after 80 updates: %v", err)
	}
}

func BenchmarkScrape(b *testing.B) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, fakeSnapshot); err != nil {
		b.Fatal(err)
	}
	h := Handler(reg)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		n = rec.Body.Len()
	}
	b.ReportMetric(float64(n), "bytes/scrape")
}
