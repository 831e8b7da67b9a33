package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/trace"
	"github.com/kvpool/kvpool/trace/tracetest"
)

func smallTrace(t *testing.T, seed uint64) Trace {
	t.Helper()
	o := tracegen.ChatOptions()
	o.Seed, o.Requests = seed, 300
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return Trace{Name: "gen", Requests: reqs}
}

func smallOptions(tr ...Trace) Options {
	return Options{
		Traces:     tr,
		Capacities: []int{50, 200},
		Policies:   []string{"lru", "belady"},
		Instances:  3,
		RAMBlocks:  100,
		Bandwidths: []float64{24, 100},
		Workers:    2,
	}
}

func TestRunWritesReport(t *testing.T) {
	res, err := Run(context.Background(), smallOptions(smallTrace(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	// 2 policies × 2 capacities; 6 fixed arms + 1 extra bandwidth × 2 routings; 3 goodput arms.
	if len(res.HitRatio) != 4 || len(res.Sim) != 8 || len(res.Goodput) != 3 {
		t.Fatalf("got %d hit-ratio rows, %d sim rows, %d goodput rows", len(res.HitRatio), len(res.Sim), len(res.Goodput))
	}
	for _, h := range res.HitRatio {
		if h.TokenHitRatio < 0 || h.TokenHitRatio > res.Traces[0].InfiniteCache.TokenRatio+1e-12 {
			t.Errorf("%s@%d: token hit ratio %g outside [0, infinite cache %g]", h.Policy, h.Capacity, h.TokenHitRatio, res.Traces[0].InfiniteCache.TokenRatio)
		}
	}
	// Belady is the ceiling of every policy at the same capacity.
	for _, c := range []int{50, 200} {
		var lru, opt float64
		for _, h := range res.HitRatio {
			if h.Capacity == c && h.Policy == "lru" {
				lru = h.BlockHitRatio
			}
			if h.Capacity == c && h.Policy == "belady" {
				opt = h.BlockHitRatio
			}
		}
		if lru > opt {
			t.Errorf("capacity %d: lru block hit ratio %g above belady %g", c, lru, opt)
		}
	}
	if rc := res.sim("gen", "recompute"); rc == nil || rc.Summary.TokenHitRatio != 0 || len(rc.TTFTs) != 300 {
		t.Fatalf("recompute arm: %+v", rc)
	}
	if g := res.sim("gen", "global cache-aware"); g == nil || g.Summary.TokenHitRatio == 0 {
		t.Fatal("global arm found no hits on a trace with shared prefixes")
	}

	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "report.md", "summary.json", "summary.csv", "hitrate.csv",
		"fig9_gen.svg", "fig10_local_vs_global.svg", "ttft_cdf_gen.svg", "fig13_gen.svg", "goodput.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: missing or empty (%v)", f, err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "summary.csv"))
	if n := strings.Count(string(csv), "\n"); n != 1+len(res.Sim) {
		t.Errorf("summary.csv has %d lines, want %d", n, 1+len(res.Sim))
	}
	var back Result
	js, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err := json.Unmarshal(js, &back); err != nil || len(back.Sim) != len(res.Sim) {
		t.Fatalf("summary.json does not round-trip: %v", err)
	}
	var md bytes.Buffer
	if err := res.Markdown(&md); err != nil || !strings.Contains(md.String(), "| gen | global cache-aware |") {
		t.Fatalf("markdown: %v\n%s", err, md.String())
	}
}

func TestRunDeterministic(t *testing.T) {
	o := smallOptions(smallTrace(t, 2))
	o.SkipGoodput = true
	a, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Workers = 1
	b, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("two runs with different worker counts differ")
	}
}

func TestValidate(t *testing.T) {
	tr := smallTrace(t, 3)
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no traces", func(o *Options) { o.Traces = nil }, "Traces"},
		{"empty trace", func(o *Options) { o.Traces = []Trace{{Name: "x"}} }, "no requests"},
		{"bad capacity", func(o *Options) { o.Capacities = []int{0} }, "Capacities"},
		{"bad policy", func(o *Options) { o.Policies = []string{"nope"} }, "Policies"},
		{"bad bandwidth", func(o *Options) { o.Bandwidths = []float64{-1} }, "Bandwidths"},
	}
	for _, c := range cases {
		o := smallOptions(tr)
		c.mod(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, smallOptions(smallTrace(t, 4))); err == nil {
		t.Fatal("a cancelled run returned no error")
	}
}

// sharedTrace reads a published trace from $KVPOOL_TRACE_DIR, or skips
// (see trace/tracetest).
func sharedTrace(t *testing.T, name string) Trace {
	t.Helper()
	reqs, err := trace.ReadFile(tracetest.Path(t, trace.FileName(name)), trace.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return Trace{Name: name, Requests: reqs}
}

// TestFig10GlobalBeatsLocal pins the lab's first acceptance bar: in the Fig 10
// configuration (10 instances × 5,859 blocks) the global arm's token hit
// ratio is above the local arm's on both published traces, for round-robin
// and for cache-aware routing.
func TestFig10GlobalBeatsLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("full-trace simulation")
	}
	o := Options{Traces: []Trace{sharedTrace(t, "conversation"), sharedTrace(t, "synthetic")},
		Capacities: []int{1}, Policies: []string{"lru"}, Bandwidths: []float64{100}, SkipGoodput: true}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	rows := res.Fig10()
	if len(rows) != 4 {
		t.Fatalf("got %d Fig 10 rows, want 4", len(rows))
	}
	for _, r := range rows {
		if !(r.Global > r.Local) {
			t.Errorf("%s %s: global %.4f is not above local %.4f", r.Trace, r.Routing, r.Global, r.Local)
		}
		t.Logf("%s %s: local %.1f%% global %.1f%% (%.2f×)", r.Trace, r.Routing, 100*r.Local, 100*r.Global, r.Global/r.Local)
	}
}

// TestRunLiveSweep: with LiveBandwidths the live runner also runs global
// rr at each bandwidth in each network mode, after the live arms, and the
// report gains the sweep's section, table and chart.
func TestRunLiveSweep(t *testing.T) {
	opts := smallOptions(smallTrace(t, 3))
	opts.SkipGoodput = true
	opts.LiveArms = []Arm{{"recompute", sim.ModeRecompute, sim.RoutingLeastLoaded, 100}}
	opts.LiveBandwidths = []float64{24, 200}
	opts.LiveNets = []replay.NetMode{replay.NetPacer, replay.NetKernel}
	var calls []string
	opts.Live = func(ctx context.Context, tr Trace, a Arm, net replay.NetMode) (LiveRow, error) {
		calls = append(calls, fmt.Sprintf("%s/%s/%g/%s", tr.Name, a.Name, a.NICGbps, net))
		var row LiveRow
		row.Sim.TTFTMean, row.Sim.TTFTP90 = 100/a.NICGbps, 200/a.NICGbps
		row.Live.TTFTMean, row.Live.TTFTP90 = 110/a.NICGbps, 220/a.NICGbps
		row.Live.PayloadBytes, row.Live.Speed, row.KeptUp = 32<<10, 25, true
		return row, nil
	}
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gen/recompute/100/", "gen/global rr @24 Gbps/24/pacer", "gen/global rr @24 Gbps/24/kernel",
		"gen/global rr @200 Gbps/200/pacer", "gen/global rr @200 Gbps/200/kernel"}
	if strings.Join(calls, ",") != strings.Join(want, ",") {
		t.Fatalf("live calls %v, want %v", calls, want)
	}
	if len(res.Live) != 1 || len(res.LiveSweep) != 4 || res.LiveSweep[1].Net != replay.NetKernel || res.LiveSweep[1].Arm.Routing != sim.RoutingRoundRobin {
		t.Fatalf("rows: %d live, %d sweep (%+v)", len(res.Live), len(res.LiveSweep), res.LiveSweep)
	}
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fig13_live_gen.svg")); err != nil {
		t.Errorf("missing the live Fig 13 chart: %v", err)
	}
	var md bytes.Buffer
	if err := res.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	// 24 Gbps at 32 KiB and speed 25: 3e9 B/s × 32 KiB / 160 MiB × 25 = 14.6 MB/s.
	for _, w := range []string{"Live TTFT vs link bandwidth", "| gen | 24 | 14.6 | kernel links | 4.17 | 4.58 | +10.0% | 8.33 | 9.17 | yes | 0 |", "| gen | 200 | 122.1 | pacers |"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("markdown lacks %q:\n%s", w, md.String())
		}
	}
}

// TestRunLive injects a fake live runner: Run calls it once per trace and
// live arm, in order, and the report gains the live section and files.
func TestRunLive(t *testing.T) {
	opts := smallOptions(smallTrace(t, 3))
	opts.SkipGoodput = true
	var calls []string
	opts.Live = func(ctx context.Context, tr Trace, a Arm, net replay.NetMode) (LiveRow, error) {
		if net != "" {
			t.Errorf("the live arms got network %q; want the runner's own", net)
		}
		calls = append(calls, tr.Name+"/"+a.Name)
		var row LiveRow
		row.Sim.TokenHitRatio, row.Live.TokenHitRatio = 0.25, 0.24
		row.Sim.TTFTMean, row.Live.TTFTMean = 2, 2.1
		row.SimTTFTs, row.LiveTTFTs = []float64{1, 2, 3}, []float64{1.1, 2.1, 3.1}
		return row, nil
	}
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gen/recompute", "gen/local rr", "gen/local cache-aware", "gen/global cache-aware"}
	if strings.Join(calls, ",") != strings.Join(want, ",") || len(res.Live) != len(want) {
		t.Fatalf("live calls %v (%d rows), want %v", calls, len(res.Live), want)
	}
	if res.Live[1].Trace != "gen" || res.Live[1].Arm.Name != "local rr" {
		t.Fatalf("row 1 is %s/%s", res.Live[1].Trace, res.Live[1].Arm.Name)
	}
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"live.csv", "live_hit_ratio.svg", "live_ttft.svg", "live_cdf_gen_global_cache-aware.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "Live vs simulated") {
		t.Error("index.html lacks the Live vs simulated section")
	}
	var md bytes.Buffer
	if err := res.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| gen | global cache-aware | 25.0% | 24.0% |") {
		t.Errorf("markdown lacks the live row:\n%s", md.String())
	}

	opts.Live = func(context.Context, Trace, Arm, replay.NetMode) (LiveRow, error) {
		return LiveRow{}, os.ErrDeadlineExceeded
	}
	if _, err := Run(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "live recompute") {
		t.Fatalf("failing live runner: error %v", err)
	}
}
