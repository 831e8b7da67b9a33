package policylab

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// req builds a request whose input covers its blocks exactly.
func req(ts int64, ids ...uint64) trace.Request {
	return trace.Request{Timestamp: ts, InputLength: len(ids) * trace.BlockTokens, OutputLength: 1, HashIDs: ids}
}

// gen returns a small generated chat trace.
func gen(t *testing.T, seed uint64, n int) []trace.Request {
	t.Helper()
	o := tracegen.ChatOptions()
	o.Seed, o.Requests = seed, n
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

func TestSplitHalves(t *testing.T) {
	tests := []struct {
		name         string
		reqs         []trace.Request
		half         int64
		first        []int64 // timestamps of the first half
		second       []int64 // shifted timestamps of the second half
		wantErrMatch string
	}{
		{name: "from zero", reqs: []trace.Request{req(0, 1), req(3, 2), req(4, 3), req(5, 4), req(10, 5)},
			half: 5, first: []int64{0, 3, 4}, second: []int64{0, 5}},
		{name: "offset start", reqs: []trace.Request{req(100, 1), req(100, 2), req(149, 3), req(150, 4), req(200, 5)},
			half: 150, first: []int64{100, 100, 149}, second: []int64{0, 50}},
		{name: "empty", reqs: nil, wantErrMatch: "no requests"},
		{name: "unsorted", reqs: []trace.Request{req(5, 1), req(4, 2)}, wantErrMatch: "request 1 (timestamp 4) is before request 0"},
		{name: "too short", reqs: []trace.Request{req(7, 1), req(8, 2)}, wantErrMatch: "spans 1 ms"},
		{name: "negative", reqs: []trace.Request{req(-3, 1), req(8, 2)}, wantErrMatch: "negative"},
	}
	ts := func(rs []trace.Request) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.Timestamp)
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second, half, err := SplitHalves(tt.reqs)
			if tt.wantErrMatch != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrMatch) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErrMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if half != tt.half || !slices.Equal(ts(first), tt.first) || !slices.Equal(ts(second), tt.second) {
				t.Fatalf("half %d first %v second %v, want %d %v %v", half, ts(first), ts(second), tt.half, tt.first, tt.second)
			}
			if len(first)+len(second) != len(tt.reqs) {
				t.Fatalf("halves hold %d+%d requests of %d", len(first), len(second), len(tt.reqs))
			}
		})
	}
}

func TestSplitHalvesOfGeneratedTraceIsByTime(t *testing.T) {
	all := gen(t, 1, 400)
	first, second, half, err := SplitHalves(all)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 || len(second) == 0 || len(first)+len(second) != len(all) {
		t.Fatalf("halves %d + %d of %d", len(first), len(second), len(all))
	}
	if want := all[0].Timestamp + (all[len(all)-1].Timestamp-all[0].Timestamp)/2; half != want {
		t.Fatalf("half at %d ms, want %d", half, want)
	}
	for i, r := range first {
		if r.Timestamp >= half || !slices.Equal(r.HashIDs, all[i].HashIDs) {
			t.Fatalf("first half request %d: timestamp %d (half %d) or keys differ from the trace", i, r.Timestamp, half)
		}
	}
	for i, r := range second {
		orig := all[len(first)+i]
		if orig.Timestamp < half || r.Timestamp != orig.Timestamp-half || !slices.Equal(r.HashIDs, orig.HashIDs) {
			t.Fatalf("second half request %d: timestamp %d from %d (half %d)", i, r.Timestamp, orig.Timestamp, half)
		}
	}
}

func TestGapRowArithmetic(t *testing.T) {
	setup := Setup{Subject: "kvchain", Oracle: "belady", Baselines: []string{"lru", "lfu", "s3fifo", "arc"}}
	tests := []struct {
		name       string
		ratios     map[string]float64
		gap        float64
		defined    bool
		vsBest     float64
		bestPolicy string
	}{
		{"quarter of the gap", map[string]float64{"lru": 0.10, "lfu": 0.11, "s3fifo": 0.12, "arc": 0.09, "mooncake": 0.5, "belady": 0.30, "kvchain": 0.15},
			0.25, true, 0.03, "s3fifo"},
		{"below lru", map[string]float64{"lru": 0.20, "lfu": 0.21, "s3fifo": 0.19, "arc": 0.22, "belady": 0.40, "kvchain": 0.18},
			-0.1, true, -0.04, "arc"},
		{"gap too small", map[string]float64{"lru": 0.40, "lfu": 0.39, "s3fifo": 0.38, "arc": 0.40, "belady": 0.404, "kvchain": 0.401},
			0, false, 0.001, "lru"},
		{"exactly half a point", map[string]float64{"lru": 0.40, "lfu": 0.39, "s3fifo": 0.38, "arc": 0.38, "belady": 0.405, "kvchain": 0.405},
			1, true, 0.005, "lru"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := GapRow{TokenHitRatio: tt.ratios}
			g.fill(setup)
			if g.GapDefined != tt.defined || math.Abs(g.GapClosed-tt.gap) > 1e-9 {
				t.Fatalf("gap closed %v (defined %v), want %v (%v)", g.GapClosed, g.GapDefined, tt.gap, tt.defined)
			}
			if math.Abs(g.VsBest-tt.vsBest) > 1e-9 || g.BestPolicy != tt.bestPolicy {
				t.Fatalf("vs best %v (%s), want %v (%s); mooncake must not count as a baseline", g.VsBest, g.BestPolicy, tt.vsBest, tt.bestPolicy)
			}
			if g.Subject != tt.ratios["kvchain"] || g.Reference != tt.ratios["lru"] || g.Oracle != tt.ratios["belady"] {
				t.Fatalf("subject/reference/oracle %v %v %v", g.Subject, g.Reference, g.Oracle)
			}
		})
	}
}

func TestMergeKeepsTenantsDisjointAndAligned(t *testing.T) {
	// Both tenants use ids 1 and 2 for different blocks. A spans 0..40
	// (shifted from 1000), B spans 0..20: the window is 20 ms, so A's
	// request at 1040 is cut.
	a := []trace.Request{req(1000, 1, 2), req(1010, 1, 2, 3), req(1020, 1), req(1040, 1, 2)}
	b := []trace.Request{req(0, 1), req(10, 2, 1), req(20, 1, 2)}
	m, err := Merge([]Trace{{"a", a}, {"b", b}})
	if err != nil {
		t.Fatal(err)
	}
	if m.WindowMs != 20 {
		t.Fatalf("window %d ms, want 20", m.WindowMs)
	}
	if got, want := []int{len(m.Solo[0]), len(m.Solo[1])}, []int{3, 3}; !slices.Equal(got, want) {
		t.Fatalf("tenant requests %v, want %v", got, want)
	}
	if len(m.Requests) != 6 || len(m.Tenant) != 6 {
		t.Fatalf("merged %d requests, %d labels, want 6", len(m.Requests), len(m.Tenant))
	}
	// Order: by aligned time, ties tenant A first.
	if got, want := m.Tenant, []int{0, 1, 0, 1, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("tenant order %v, want %v", got, want)
	}
	keys := [2]map[uint64]bool{{}, {}}
	for i, r := range m.Requests {
		if i > 0 && r.Timestamp < m.Requests[i-1].Timestamp {
			t.Fatalf("request %d at %d ms after one at %d", i, r.Timestamp, m.Requests[i-1].Timestamp)
		}
		for _, k := range r.HashIDs {
			keys[m.Tenant[i]][k] = true
		}
	}
	for k := range keys[0] {
		if keys[1][k] {
			t.Fatalf("key %d is used by both tenants", k)
		}
	}
	if got := []int{len(keys[0]), len(keys[1])}; !slices.Equal(got, m.Keys) || !slices.Equal(got, []int{3, 2}) {
		t.Fatalf("distinct keys %v, Keys %v, want [3 2]", got, m.Keys)
	}
	// Within a tenant the renumbering is a bijection: equal ids stay equal.
	for ti, orig := range [][]trace.Request{a[:3], b} {
		seen := map[uint64]uint64{}
		for j, r := range m.Solo[ti] {
			if r.InputLength != orig[j].InputLength || len(r.HashIDs) != len(orig[j].HashIDs) {
				t.Fatalf("tenant %d request %d changed shape", ti, j)
			}
			for k, id := range orig[j].HashIDs {
				if prev, ok := seen[id]; ok && prev != r.HashIDs[k] {
					t.Fatalf("tenant %d: id %d became both %d and %d", ti, id, prev, r.HashIDs[k])
				}
				seen[id] = r.HashIDs[k]
			}
		}
	}
	// The inputs are untouched.
	if a[0].Timestamp != 1000 || a[0].HashIDs[0] != 1 || b[1].HashIDs[0] != 2 {
		t.Fatal("Merge modified its input")
	}
}

func TestMergeRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		tenants []Trace
		want    string
	}{
		{"one tenant", []Trace{{"a", []trace.Request{req(0, 1)}}}, "1 tenant(s)"},
		{"empty tenant", []Trace{{"a", []trace.Request{req(0, 1)}}, {"b", nil}}, `tenant 1 "b" has no requests`},
		{"unsorted", []Trace{{"a", []trace.Request{req(5, 1), req(2, 1)}}, {"b", []trace.Request{req(0, 1)}}}, "want trace order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Merge(tt.tenants); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestReplaySharedCountsAddUp(t *testing.T) {
	m, err := Merge([]Trace{{"a", gen(t, 2, 300)}, {"b", gen(t, 3, 200)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lru", "s3fifo", "arc", "kvchain"} {
		for _, capacity := range []int{0, 50, 400} {
			spec, err := policy.ParseSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			per, err := ReplayShared(m, spec, capacity)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := hitrate.Run(m.Requests, hitrate.Options{Policy: spec, Capacity: capacity})
			if err != nil {
				t.Fatal(err)
			}
			var sum Counts
			for ti, c := range per {
				if c.Requests != len(m.Solo[ti]) {
					t.Fatalf("%s@%d: tenant %d has %d requests, solo trace %d", name, capacity, ti, c.Requests, len(m.Solo[ti]))
				}
				sum.Requests += c.Requests
				sum.InputTokens += c.InputTokens
				sum.HitTokens += c.HitTokens
				sum.Blocks += c.Blocks
				sum.HitBlocks += c.HitBlocks
			}
			want := Counts{Requests: whole.Requests, InputTokens: whole.InputTokens, HitTokens: whole.HitTokens, Blocks: whole.Blocks, HitBlocks: whole.HitBlocks}
			if sum != want {
				t.Fatalf("%s@%d: tenants sum to %+v, hitrate.Run on the merged trace gives %+v", name, capacity, sum, want)
			}
			if capacity == 0 && sum.HitTokens != 0 {
				t.Fatalf("%s@0: %d hit tokens in a cache that holds nothing", name, sum.HitTokens)
			}
		}
	}
	if _, err := ReplayShared(m, policy.Spec{Eviction: "belady"}, 10); err == nil || !strings.Contains(err.Error(), "needs the future") {
		t.Fatalf("belady: err = %v, want a needs-the-future error", err)
	}
}

func TestJain(t *testing.T) {
	tests := []struct {
		x    []float64
		want float64
		ok   bool
	}{
		{[]float64{1, 1}, 1, true},
		{[]float64{2, 0}, 0.5, true},
		{[]float64{1, 3}, 16.0 / 20, true},
		{[]float64{0.5, 0.5, 0.5}, 1, true},
		{nil, 0, false},
		{[]float64{0, 0}, 0, false},
		{[]float64{1, -1}, 0, false},
	}
	for _, tt := range tests {
		got, ok := Jain(tt.x)
		if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, %v; want %v, %v", tt.x, got, ok, tt.want, tt.ok)
		}
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	tr := []Trace{{"a", []trace.Request{req(0, 1), req(10, 2)}}}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no traces", Options{}, "traces: none given"},
		{"empty trace", Options{Traces: []Trace{{"a", nil}}}, `traces: entry 0 "a": no requests`},
		{"duplicate name", Options{Traces: append(tr, tr[0])}, "used twice"},
		{"bad subject", Options{Traces: tr, Subject: "nope"}, "subject"},
		{"oracle subject", Options{Traces: tr, Subject: "belady"}, "subject: \"belady\" needs the future"},
		{"online oracle", Options{Traces: tr, Oracle: "lru"}, "oracle"},
		{"bad capacity", Options{Traces: tr, Capacities: []int{0}}, "capacities: 0"},
		{"bad unseen", Options{Traces: tr, UnseenCapacities: []int{-1}}, "unseen capacities: -1"},
		{"bad noise", Options{Traces: tr, NoiseLevels: []float64{1.5}}, "noise levels: 1.5"},
		{"nan noise", Options{Traces: tr, NoiseGoodputLevels: []float64{math.NaN()}}, "noise goodput levels"},
		{"no perr", Options{Traces: tr, Subject: "lru"}, "noise levels"},
		{"bad goodput trace", Options{Traces: tr, GoodputTraces: []string{"b"}}, `goodput traces: "b"`},
		{"bad nodes", Options{Traces: tr, NodeCounts: []int{0}}, "node counts: 0"},
		{"bad sim", Options{Traces: tr, Sim: sim.Options{Instances: -1}}, "sim"},
		{"bad workers", Options{Traces: tr, Workers: -1}, "workers"},
		{"bad tenant capacity", Options{Traces: tr, TenantCapacity: -5}, "tenant capacity"},
		{"bad generated", Options{Traces: tr, Generated: []Generated{{Name: "g", Options: tracegen.Options{Requests: -1}}}}, `generated: entry 0 "g"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			if _, err := Run(context.Background(), tt.opts); err == nil {
				t.Fatal("Run accepted options Validate rejects")
			}
		})
	}
	if err := (Options{Traces: tr}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// tinyOptions is a complete but small experiment set on two tiny traces.
func tinyOptions(t *testing.T) Options {
	small := tracegen.ChatOptions()
	small.Requests = 150
	return Options{
		Traces:           []Trace{{"conversation", gen(t, 4, 240)}, {"synthetic", gen(t, 5, 160)}},
		Generated:        []Generated{{Name: "gen-small", Options: small, About: "small chat"}},
		Capacities:       []int{20, 50},
		UnseenCapacities: []int{10, 50, 200}, // 50 is also tuned: it must stay a tuned row
		NoiseLevels:      []float64{0, 0.5, 1},
		// Goodput only at p = 1 and only on the first trace.
		NoiseGoodputLevels: []float64{1},
		NoiseCapacity:      30,
		TenantCapacity:     40,
		NodeCounts:         []int{2},
		Sim:                sim.Options{Instances: 3, RAMBlocks: 40},
		GoodputTraces:      []string{"conversation"},
		Workers:            2,
	}
}

func TestRunStructure(t *testing.T) {
	opts := tinyOptions(t)
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// Gap table: 3 traces × 3 parts × 4 distinct capacities.
	caps := []int{10, 20, 50, 200}
	if len(res.Gap) != 3*3*len(caps) {
		t.Fatalf("%d gap rows, want %d", len(res.Gap), 3*3*len(caps))
	}
	policies := []string{"lru", "lfu", "s3fifo", "arc", "mooncake", "kvchain", "belady"}
	for _, g := range res.Gap {
		if len(g.TokenHitRatio) != len(policies) {
			t.Fatalf("%s %s @%d: %d policies, want %d", g.Trace, g.Part, g.Capacity, len(g.TokenHitRatio), len(policies))
		}
		for _, p := range policies {
			v, ok := g.TokenHitRatio[p]
			if !ok || v < 0 || v > 1 {
				t.Fatalf("%s %s @%d: %s = %v (present %v)", g.Trace, g.Part, g.Capacity, p, v, ok)
			}
		}
		if wantUnseen := g.Capacity == 10 || g.Capacity == 200; g.Unseen != wantUnseen {
			t.Fatalf("capacity %d: unseen %v", g.Capacity, g.Unseen)
		}
		if g.Generated != (g.Trace == "gen-small") {
			t.Fatalf("%s: generated %v", g.Trace, g.Generated)
		}
		// Published traces are tuned on their first half; gen-small is not.
		if want := g.Part == PartFirst && !g.Generated; g.Tuning != want {
			t.Fatalf("%s %s: tuning %v, want %v", g.Trace, g.Part, g.Tuning, want)
		}
		check := GapRow{TokenHitRatio: g.TokenHitRatio}
		check.fill(res.Setup)
		if check.GapClosed != g.GapClosed || check.VsBest != g.VsBest || check.GapDefined != g.GapDefined {
			t.Fatalf("%s %s @%d: derived fields not from the ratios", g.Trace, g.Part, g.Capacity)
		}
		// The whole-trace LRU cell is exactly hitrate.Run's.
		if g.Part == PartWhole && g.Trace == "conversation" {
			r, err := hitrate.Run(opts.Traces[0].Requests, hitrate.Options{Capacity: g.Capacity})
			if err != nil {
				t.Fatal(err)
			}
			if r.TokenHitRatio != g.TokenHitRatio["lru"] {
				t.Fatalf("conversation whole @%d: lru %v, hitrate.Run %v", g.Capacity, g.TokenHitRatio["lru"], r.TokenHitRatio)
			}
		}
	}
	for _, ti := range res.Traces {
		if ti.FirstRequests+ti.SecondRequests != ti.Requests || ti.FirstRequests == 0 || ti.SecondRequests == 0 {
			t.Fatalf("%s: halves %d + %d of %d", ti.Name, ti.FirstRequests, ti.SecondRequests, ti.Requests)
		}
	}

	// Noise: 2 traces × 3 levels; goodput only at p = 1 on conversation.
	if len(res.Noise) != 6 {
		t.Fatalf("%d noise rows, want 6", len(res.Noise))
	}
	for _, n := range res.Noise {
		if want := n.Trace == "conversation" && n.P == 1; (n.Goodput != nil) != want {
			t.Fatalf("%s p=%v: goodput present %v, want %v", n.Trace, n.P, n.Goodput != nil, want)
		}
		if n.Spec != NoiseSpec("kvchain", n.P, 1) {
			t.Fatalf("spec %q", n.Spec)
		}
		if n.P == 0 {
			// No injected error is the plain subject.
			if ref := res.ref(n.Trace, "kvchain"); ref == nil || ref.TokenHitRatio != n.TokenHitRatio {
				t.Fatalf("%s: perr=0 gives %v, plain kvchain %+v", n.Trace, n.TokenHitRatio, ref)
			}
		}
	}
	// References: lru, lfu, s3fifo, arc and the plain subject per trace.
	if len(res.Refs) != 2*5 {
		t.Fatalf("%d references, want 10", len(res.Refs))
	}
	for _, f := range res.Refs {
		if (f.Goodput != nil) != (f.Trace == "conversation") {
			t.Fatalf("reference %s on %s: goodput present %v", f.Policy, f.Trace, f.Goodput != nil)
		}
		if f.Goodput != nil && (f.Goodput.ReqPerSec < 0 || f.Goodput.Multiplier < 0) {
			t.Fatalf("reference %s: goodput %+v", f.Policy, f.Goodput)
		}
	}

	// Tenants: 4 policies × 2 tenants; shared requests are the solo ones.
	tr := res.Tenants
	if tr == nil || len(tr.Rows) != 8 || len(tr.Fairness) != 4 {
		t.Fatalf("tenants %+v", tr)
	}
	for _, f := range tr.Fairness {
		var in, hit int64
		for _, row := range tr.Rows {
			if row.Policy != f.Policy {
				continue
			}
			if row.Shared.Requests != row.SoloHalf.Requests || row.SoloHalf.Requests != row.SoloWhole.Requests || row.Shared.InputTokens != row.SoloWhole.InputTokens {
				t.Fatalf("%s %s: shared and solo runs replay different requests: %+v", row.Policy, row.Tenant, row)
			}
			in += row.Shared.InputTokens
			hit += row.Shared.HitTokens
		}
		if got := (Counts{InputTokens: in, HitTokens: hit}).TokenHitRatio(); got != f.SharedTokenHitRatio {
			t.Fatalf("%s: pool hit ratio %v, tenants sum to %v", f.Policy, f.SharedTokenHitRatio, got)
		}
		if f.JainDefined && (f.Jain < 0.5-1e-12 || f.Jain > 1+1e-12) {
			t.Fatalf("%s: Jain's index %v outside [1/2, 1] for two tenants", f.Policy, f.Jain)
		}
	}

	// Nodes: 1 goodput trace × 1 node count × 3 policies.
	if len(res.Nodes) != 3 {
		t.Fatalf("%d node rows, want 3", len(res.Nodes))
	}
	for _, n := range res.Nodes {
		if n.Nodes != 2 || n.RAMBlocks != 40 || n.Trace != "conversation" {
			t.Fatalf("node row %+v", n)
		}
	}

	// The report is writable and holds every file.
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "report.md", "summary.json", "gap.csv", "noise.csv", "tenants.csv", "nodes.csv",
		"policy_gap_closed.svg", "policy_noise_hit_conversation.svg", "policy_noise_goodput_conversation.svg", "policy_tenants.svg",
		"policy_nodes_conversation.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Gap) != len(res.Gap) || back.Setup.Subject != "kvchain" {
		t.Fatalf("summary.json round trip: %d gap rows, subject %q", len(back.Gap), back.Setup.Subject)
	}
	// One number format per column, and the subject in every table and
	// figure that compares policies.
	rep := res.Report()
	if err := rep.CheckNumberFormats(); err != nil {
		t.Error(err)
	}
	for _, sec := range rep.Sections {
		for _, tab := range sec.Tables {
			if !slices.Contains(tab.Columns, "policy") && !slices.Contains(tab.Columns, "lru") {
				continue
			}
			found := slices.Contains(tab.Columns, "kvchain")
			for _, row := range tab.Rows {
				found = found || slices.Contains(row, "kvchain")
			}
			if !found {
				t.Errorf("%s: table %q compares policies without kvchain", sec.Title, tab.Caption)
			}
		}
	}
	var md strings.Builder
	if err := res.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| conversation | whole | 20 |") || !strings.Contains(md.String(), "Jain") {
		t.Fatalf("Markdown lacks the gap or fairness table:\n%s", md.String())
	}
}

func TestRunIsDeterministic(t *testing.T) {
	opts := tinyOptions(t)
	opts.SkipGoodput, opts.Generated, opts.Workers = true, nil, 2
	opts.SkipGenerated = true
	a, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Workers = 1
	b, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("two runs with 2 and 1 workers differ")
	}
	if len(a.Nodes) != 0 || slices.ContainsFunc(a.Noise, func(n NoiseRow) bool { return n.Goodput != nil }) {
		t.Fatal("SkipGoodput ran timed experiments")
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opts := tinyOptions(t)
	if _, err := Run(ctx, opts); err == nil {
		t.Fatal("Run on a cancelled context returned no error")
	}
}
