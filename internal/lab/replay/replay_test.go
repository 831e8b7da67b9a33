package replay

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/payload"
	"github.com/kvpool/kvpool/trace"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name  string
		o     Options
		field string // "" = valid
	}{
		{"defaults", Options{Master: "m:1"}, ""},
		{"no master", Options{}, "Master"},
		{"bad mode", Options{Master: "m:1", Mode: "cloud"}, "Mode"},
		{"bad routing", Options{Master: "m:1", Routing: "random"}, "Routing"},
		{"tiny payload", Options{Master: "m:1", PayloadBytes: 4}, "PayloadBytes"},
		{"negative speed", Options{Master: "m:1", Speed: -1}, "Speed"},
		{"infinite nic", Options{Master: "m:1", NICGbps: math.Inf(1)}, "NICGbps"},
		{"bad prefill", Options{Master: "m:1", Prefill: "gpu"}, "Prefill"},
		{"bad verify", Options{Master: "m:1", Verify: "none"}, "Verify"},
		{"negative ram", Options{Master: "m:1", RAMBlocks: -1}, "RAMBlocks"},
		{"unknown policy", Options{Master: "m:1", Policy: "nosuch"}, "Policy"},
		{"future policy", Options{Master: "m:1", Policy: "belady"}, "Policy"},
		{"bad tenant", Options{Master: "m:1", Tenant: strings.Repeat("x", 1000)}, "Tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if option.Field(err) != tt.field {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.field)
			}
		})
	}
}

func TestPacerRates(t *testing.T) {
	o := Options{Master: "m", PayloadBytes: 160 << 20, Speed: 1, NICGbps: 100, SSDGBps: 4}
	net, ssd := o.PacerRates()
	// A payload of one model block at speed 1: the model bandwidths.
	if math.Abs(net-12.5e9) > 1 || math.Abs(ssd-4e9) > 1 {
		t.Fatalf("rates %g, %g; want 12.5e9, 4e9", net, ssd)
	}
	o.PayloadBytes, o.Speed = 80<<20, 50 // r = 1/2, S = 50
	net, _ = o.PacerRates()
	if math.Abs(net-12.5e9*25) > 1 {
		t.Fatalf("net rate %g; want %g", net, 12.5e9*25)
	}
	args := strings.Join(o.NodeArgs(), " ")
	if !strings.Contains(args, "--pacers-net-egress 312500000000B/s") || !strings.Contains(args, "--ram-policy lru") {
		t.Fatalf("NodeArgs = %s", args)
	}
}

// req builds a request of n tokens whose keys are 1..blocks.
func req(n int) trace.Request {
	r := trace.Request{InputLength: n, OutputLength: 1}
	for i := range trace.Blocks(n) {
		r.HashIDs = append(r.HashIDs, uint64(i+1))
	}
	return r
}

// TestMakePlan checks the replayer's side of planning: a lookup's
// replicas become the planner's holders (worker index and tier, up to the
// first block with no replica on a known worker), and the simulator's
// planner, reading the live view, plans from them.
func TestMakePlan(t *testing.T) {
	ram := func(n string) client.Location { return client.Location{Node: n, Tier: client.TierRAM} }
	ssd := func(n string) client.Location { return client.Location{Node: n, Tier: client.TierSSD} }
	from := func(i int32, tier sim.Tier) sim.Holder { return sim.Holder{Inst: i, Tier: tier} }
	tests := []struct {
		name       string
		mode       sim.Mode
		nic        float64
		reps       [][]client.Location
		worker     int
		wantPrefix int
		wantRAM    int
		wantFetch  []sim.Fetch
	}{
		{"recompute ignores the cache", sim.ModeRecompute, 100, [][]client.Location{{ram("a")}}, 0, 0, 0, nil},
		{"local RAM prefix planned without fetches", sim.ModeGlobal, 100, [][]client.Location{{ram("a")}, {ram("a")}}, 0, 2, 2, nil},
		{"remote block fetched in global mode", sim.ModeGlobal, 100, [][]client.Location{{ram("a")}, {ram("b")}}, 0, 2, 1,
			[]sim.Fetch{{Block: 1, From: from(1, sim.TierRAM)}}},
		{"remote block ignored in local mode", sim.ModeLocal, 100, [][]client.Location{{ram("a")}, {ram("b")}}, 0, 1, 1, nil},
		{"local SSD read", sim.ModeLocal, 100, [][]client.Location{{ssd("a")}}, 0, 1, 0,
			[]sim.Fetch{{Block: 0, From: from(0, sim.TierSSD)}}},
		{"local SSD before remote RAM", sim.ModeGlobal, 100, [][]client.Location{{ram("a"), ssd("b")}}, 1, 1, 0,
			[]sim.Fetch{{Block: 0, From: from(1, sim.TierSSD)}}},
		{"remote RAM before remote SSD", sim.ModeGlobal, 100, [][]client.Location{{ssd("b"), ram("b")}}, 0, 1, 0,
			[]sim.Fetch{{Block: 0, From: from(1, sim.TierRAM)}}},
		{"unknown node ends the prefix", sim.ModeGlobal, 100, [][]client.Location{{ram("a")}, {ram("z")}, {ram("a")}}, 0, 1, 1, nil},
		{"slow network: recompute instead", sim.ModeGlobal, 0.001, [][]client.Location{{ram("b")}, {ram("b")}}, 0, 0, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Master: "m", Mode: tt.mode, NICGbps: tt.nic}.WithDefaults()
			r := &runner{o: o, nodeIdx: map[string]int{"a": 0, "b": 1}, active: make([]int, 6),
				workers: []*worker{{i: 0}, {i: 1}},
				plan:    sim.NewPlanner(sim.PlanOptions{Mode: o.Mode, Routing: o.Routing, Instances: 2, Profile: o.Profile})}
			rq := req(8192)
			var p sim.Plan
			r.plan.Plan(liveView{r}, r.holders(tt.reps), tt.worker, &rq, &p)
			if p.Prefix != tt.wantPrefix || p.HitBlocks[sim.LocalRAM] != tt.wantRAM || len(p.Fetches) != len(tt.wantFetch) {
				t.Fatalf("plan prefix %d, local RAM %d, fetch %v; want %d, %d, %v", p.Prefix, p.HitBlocks[sim.LocalRAM], p.Fetches, tt.wantPrefix, tt.wantRAM, tt.wantFetch)
			}
			for i := range p.Fetches {
				if p.Fetches[i] != tt.wantFetch[i] {
					t.Fatalf("fetch %v, want %v", p.Fetches, tt.wantFetch)
				}
			}
			if want := o.Profile.PrefillSeconds(8192, tt.wantPrefix*trace.BlockTokens); math.Abs(p.Prefill-want) > 1e-12 {
				t.Errorf("prefill %g, want %g", p.Prefill, want)
			}
		})
	}
}

func TestOutcome(t *testing.T) {
	o := Options{Master: "m"}.WithDefaults()
	r := &runner{o: o, order: []int{7}}
	rq := req(4*trace.BlockTokens - 100) // 4 blocks, the last one partial
	bb := o.Profile.BlockBytes()
	f := func(block int, src int32, tier sim.Tier) sim.Fetch {
		return sim.Fetch{Block: block, From: sim.Holder{Inst: src, Tier: tier}}
	}
	tests := []struct {
		name      string
		plan      sim.Plan
		loaded    []bool
		fromRAM   []bool
		localOK   []bool // of the plan's local RAM blocks; nil: as planned
		wantHits  [4]int
		wantNet   int64
		wantSSD   int64
		wantReuse int
	}{
		{"all local RAM", sim.Plan{Prefix: 2}, nil, nil, nil, [4]int{1024, 0, 0, 0}, 0, 0, 1024},
		{"all local RAM verified", sim.Plan{Prefix: 2}, nil, nil, []bool{true, true}, [4]int{1024, 0, 0, 0}, 0, 0, 1024},
		{"wrong local RAM block cuts the prefix", sim.Plan{Prefix: 3}, nil, nil, []bool{true, false, true}, [4]int{512, 0, 0, 0}, 0, 0, 512},
		{"remote RAM and remote SSD", sim.Plan{Prefix: 4, Fetches: []sim.Fetch{f(1, 1, sim.TierRAM), f(2, 1, sim.TierRAM), f(3, 2, sim.TierSSD)}},
			[]bool{true, true, true}, []bool{true, true, false}, nil, [4]int{512, 0, 1024, 412}, 3 * bb, bb, 4*512 - 100},
		{"failed local block before a remote one", sim.Plan{Prefix: 2, Fetches: []sim.Fetch{f(1, 1, sim.TierRAM)}},
			[]bool{true}, []bool{true}, []bool{false}, [4]int{0, 0, 0, 0}, bb, 0, 0},
		{"failed load cuts the prefix", sim.Plan{Prefix: 3, Fetches: []sim.Fetch{f(0, 0, sim.TierSSD), f(1, 1, sim.TierRAM), f(2, 1, sim.TierRAM)}},
			[]bool{true, false, true}, []bool{false, false, true}, nil, [4]int{0, 512, 0, 0}, bb, bb, 512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &job{k: 0, req: &rq, arrival: 1.5, worker: 0, plan: tt.plan, loaded: tt.loaded, fromRAM: tt.fromRAM}
			j.local = localRAM(&j.plan)
			rec, reused := r.outcome(j, tt.localOK)
			if rec.ID != 7 || rec.Arrival != 1.5 || rec.Blocks != 4 || rec.InputTokens != rq.InputLength {
				t.Fatalf("record header %+v", rec)
			}
			if rec.HitTokens != tt.wantHits || rec.BytesNet != tt.wantNet || rec.BytesSSDRead != tt.wantSSD || reused != tt.wantReuse {
				t.Fatalf("hits %v net %d ssd %d reused %d; want %v %d %d %d", rec.HitTokens, rec.BytesNet, rec.BytesSSDRead, reused,
					tt.wantHits, tt.wantNet, tt.wantSSD, tt.wantReuse)
			}
		})
	}
}

func TestLagPercentiles(t *testing.T) {
	var lags []time.Duration
	for i := range 100 {
		lags = append(lags, time.Duration(i+1)*time.Millisecond)
	}
	p50, p99 := lagPercentiles(lags)
	if p50 != 0.050 || p99 != 0.099 {
		t.Fatalf("p50 %g p99 %g, want 0.050 0.099", p50, p99)
	}
	if p50, p99 := lagPercentiles(nil); p50 != 0 || p99 != 0 {
		t.Fatalf("empty: %g %g", p50, p99)
	}
}

func TestRenderProgress(t *testing.T) {
	tests := []struct {
		p    progressState
		want []string
	}{
		{progressState{all: 10}, []string{"[", "0%", "ETA ?", "0/10 done"}},
		{progressState{elapsed: 10 * time.Second, done: 5, all: 10, fraction: 0.5, hitRatio: 0.25, ttftP50: 1.5},
			[]string{"50%", "ETA 10s", "5/10 done", "hit 25.0%", "TTFT p50 1.50s", "[============            ]"}},
		{progressState{elapsed: time.Second, done: 10, all: 10, fraction: 2}, []string{"100%", "ETA 0s"}},
	}
	for _, tt := range tests {
		got := renderProgress(tt.p)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("renderProgress(%+v) = %q, missing %q", tt.p, got, w)
			}
		}
		if strings.ContainsAny(got, "\r\n") {
			t.Errorf("progress line %q has a carriage return or a newline", got)
		}
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	bad := req(1000)
	bad.HashIDs = bad.HashIDs[:1]
	tests := []struct {
		name string
		reqs []trace.Request
		o    Options
		want string
	}{
		{"no requests", nil, Options{Master: "127.0.0.1:1"}, "no requests"},
		{"bad hash ids", []trace.Request{bad}, Options{Master: "127.0.0.1:1"}, "request 0"},
		{"bad option", []trace.Request{req(10)}, Options{Master: "127.0.0.1:1", Speed: -2}, "speed:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.reqs, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// testTrace is a small chat trace with shared system prompts and
// multi-turn sessions, light enough for two workers.
func testTrace(t *testing.T, n int) []trace.Request {
	t.Helper()
	o := tracegen.ChatOptions()
	o.Requests, o.Rate, o.SystemPrompts, o.ThinkTime = n, 0.8, 4, 15*time.Second
	o.Input.Mean = 3000
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestReject checks that a live replay admits with the simulator's rule:
// under an SLO no request can meet, the planner turns every one away at
// arrival, live as in the simulator, and none runs or stores anything.
func TestReject(t *testing.T) {
	reqs := testTrace(t, 20)
	o := Options{PayloadBytes: 16 << 10, RAMBlocks: 100, Reject: true, SLOSeconds: 1e-9}
	o.Master = startRig(t, 2, o)
	res, err := Run(context.Background(), reqs, o)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Completed != len(reqs) || s.Rejected != len(reqs) || s.Served != 0 || !s.Reject || s.LiveBytesStored != 0 {
		t.Fatalf("completed %d, rejected %d, served %d (reject %v), stored %d B; want all %d rejected, nothing stored",
			s.Completed, s.Rejected, s.Served, s.Reject, s.LiveBytesStored, len(reqs))
	}
	sr, err := sim.Run(context.Background(), reqs, sim.Options{Instances: 2, RAMBlocks: o.RAMBlocks, Reject: true, SLOSeconds: o.SLOSeconds})
	if err != nil {
		t.Fatal(err)
	}
	if sr.Summary.Rejected != s.Rejected {
		t.Errorf("sim rejected %d, live %d", sr.Summary.Rejected, s.Rejected)
	}
}

// TestLiveAgainstSim replays a generated trace on an in-process cluster
// of two nodes in local and global mode and compares with the simulator.
func TestLiveAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("live replay in -short mode")
	}
	reqs := testTrace(t, 100)
	// Speed 25: slow enough that a busy 2-core CI machine keeps up with the
	// arrivals; when it still cannot (lag p99 over MaxLagP99), the run says
	// so and the comparison with the simulator is not judged — completion
	// and zero wrong blocks always are.
	base := Options{PayloadBytes: 16 << 10, Speed: 25, RAMBlocks: 4000, Verify: VerifyFull, Routing: sim.RoutingCacheAware}
	ratios := map[sim.Mode]float64{}
	judged := true
	for _, mode := range []sim.Mode{sim.ModeLocal, sim.ModeGlobal} {
		t.Run(string(mode), func(t *testing.T) {
			o := base
			o.Mode = mode
			o.Master = startRig(t, 2, o)
			var progress strings.Builder
			o.Progress = &progress
			res, err := Run(context.Background(), reqs, o)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			t.Logf("live %s: hit %.4f ttft mean %.3f p50 %.3f lag p99 %.2f ms, %d wrong, %d fetch fail, %d put fail, first error %q",
				mode, s.TokenHitRatio, s.TTFTMean, s.TTFTP50, s.LagP99*1e3, s.WrongBlocks, s.FetchFailures, s.PutFailures, s.FirstError)
			if s.Partial || s.Completed != len(reqs) || len(res.Records) != len(reqs) || len(res.Live) != len(reqs) {
				t.Fatalf("completed %d of %d (partial %v)", s.Completed, len(reqs), s.Partial)
			}
			if s.WrongBlocks != 0 || s.CorruptBlocks != 0 {
				t.Fatalf("%d wrong and %d corrupt blocks", s.WrongBlocks, s.CorruptBlocks)
			}
			if !strings.Contains(progress.String(), "100/100 done") || strings.Contains(progress.String(), "\r") {
				t.Errorf("progress output lacks the final line, or redraws lines off a terminal: %q", progress.String())
			}
			if !s.KeptUp {
				t.Logf("the machine could not keep up (dispatch lag p99 %.1f ms > %v): live vs sim not judged", s.LagP99*1e3, MaxLagP99)
				judged = false
				return
			}
			sr, err := sim.Run(context.Background(), reqs, sim.Options{Instances: 2, RAMBlocks: o.RAMBlocks, Mode: mode, Routing: o.Routing})
			if err != nil {
				t.Fatal(err)
			}
			ss := sr.Summary
			t.Logf("sim  %s: hit %.4f ttft mean %.3f p50 %.3f", mode, ss.TokenHitRatio, ss.TTFTMean, ss.TTFTP50)
			if d := math.Abs(s.TokenHitRatio - ss.TokenHitRatio); d > 0.05 {
				t.Errorf("live token hit ratio %.4f vs sim %.4f: differ by %.4f > 0.05", s.TokenHitRatio, ss.TokenHitRatio, d)
			}
			ratios[mode] = s.TokenHitRatio
		})
	}
	if judged && (ratios[sim.ModeGlobal] <= 0 || ratios[sim.ModeGlobal] < ratios[sim.ModeLocal]) {
		t.Errorf("global hit ratio %.4f, local %.4f: want global > 0 and >= local", ratios[sim.ModeGlobal], ratios[sim.ModeLocal])
	}
}

// TestRunCancelled cuts a replay short: it returns the completed requests
// with Partial set and no error.
func TestRunCancelled(t *testing.T) {
	if testing.Short() {
		t.Skip("live replay in -short mode")
	}
	reqs := testTrace(t, 100)
	o := Options{PayloadBytes: 16 << 10, Speed: 10, RAMBlocks: 4000}
	o.Master = startRig(t, 2, o)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, reqs, o)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if !s.Partial || s.Completed >= len(reqs) || s.Completed != len(res.Records) || s.Requests != s.Completed {
		t.Fatalf("partial %v, completed %d of %d, %d records, summary over %d", s.Partial, s.Completed, len(reqs), len(res.Records), s.Requests)
	}
}

// TestWrongLocalBlockNeverDelivered stores, behind the replayer's back,
// blocks whose bytes are wrong for their keys in the RAM of the only node
// (a put through the client carries a checksum over the wrong bytes, so
// the node accepts them: only regenerating the payload tells). The
// replayer plans them as local RAM hits, reads them, catches every one,
// reuses none (the request is recomputed) and puts the right bytes back:
// a second replay reuses them, verified.
func TestWrongLocalBlockNeverDelivered(t *testing.T) {
	o := Options{PayloadBytes: 16 << 10, RAMBlocks: 100, Mode: sim.ModeLocal, Routing: sim.RoutingCacheAware, Verify: VerifyFull}
	o.Master = startRig(t, 1, o)
	ctx := context.Background()
	cl, err := client.New(ctx, client.Options{Master: o.Master, Tenant: DefaultTenant})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	nodes, err := cl.Nodes(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes %v, %v; want one", nodes, err)
	}
	rq := req(8 * trace.BlockTokens)
	wrong := make([][]byte, len(rq.HashIDs))
	for i, id := range rq.HashIDs {
		wrong[i] = payload.New(o.PayloadBytes, DefaultTenant, id+1000) // another block's bytes
	}
	res, err := cl.Access(ctx, client.Chain(rq.HashIDs, wrong), client.AccessOptions{Node: nodes[0].ID})
	if err != nil || res.Count(client.AccessStored) != len(rq.HashIDs) {
		t.Fatalf("store the wrong blocks: %v, statuses %v", err, res.Status)
	}
	if ok, err := cl.WaitIndexed(ctx, rq.HashIDs, 10*time.Second); !ok || err != nil {
		t.Fatalf("wrong blocks not indexed: %v, %v", ok, err)
	}

	first, err := Run(ctx, []trace.Request{rq}, o)
	if err != nil {
		t.Fatal(err)
	}
	s := first.Summary
	t.Logf("first replay: %d verified hits, %d wrong, hit tokens %v", s.VerifiedHits, s.WrongBlocks, first.Records[0].HitTokens)
	if s.WrongBlocks == 0 || s.VerifiedHits != 0 || first.Records[0].TotalHitTokens() != 0 {
		t.Fatalf("first replay: %d wrong blocks, %d verified hits, %d hit tokens; want the wrong blocks caught and none reused",
			s.WrongBlocks, s.VerifiedHits, first.Records[0].TotalHitTokens())
	}
	if s.LiveBytesReadRemote != 0 || s.LiveBytesRead == 0 {
		t.Errorf("read %d B, %d B remote: want local reads only", s.LiveBytesRead, s.LiveBytesReadRemote)
	}
	if want := o.WithDefaults().Profile.PrefillSeconds(rq.InputLength, 0); math.Abs(first.Records[0].Prefill-want) > 1e-9 {
		t.Errorf("prefill %g model s, want the full recompute's %g", first.Records[0].Prefill, want)
	}

	second, err := Run(ctx, []trace.Request{rq}, o)
	if err != nil {
		t.Fatal(err)
	}
	s = second.Summary
	t.Logf("second replay: %d verified hits, %d wrong, hit tokens %v", s.VerifiedHits, s.WrongBlocks, second.Records[0].HitTokens)
	if s.WrongBlocks != 0 || s.VerifiedHits == 0 || second.Records[0].HitTokens[sim.LocalRAM] == 0 {
		t.Fatalf("second replay: %d wrong blocks, %d verified hits, %d local hit tokens; want the replaced blocks reused, verified",
			s.WrongBlocks, s.VerifiedHits, second.Records[0].HitTokens[sim.LocalRAM])
	}
}

// TestProgressLines runs a short replay with a line-mode progress
// writer that ticks often: every line is whole (no carriage return),
// counts finished requests, and the last one says all are done. Under
// -race it also checks that the progress goroutine reads the run's start
// only after it is set.
func TestProgressLines(t *testing.T) {
	reqs := testTrace(t, 10)
	o := Options{PayloadBytes: 16 << 10, RAMBlocks: 100, Speed: 200, ProgressLineEvery: time.Millisecond}
	o.Master = startRig(t, 1, o)
	var progress strings.Builder
	o.Progress = &progress
	if _, err := Run(context.Background(), reqs, o); err != nil {
		t.Fatal(err)
	}
	out := progress.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if strings.Contains(out, "\r") || !strings.HasSuffix(out, "\n") || len(lines) < 2 {
		t.Fatalf("progress %q: want whole lines, at least a tick and the final one", out)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "10/10 done") {
		t.Errorf("last progress line %q, want 10/10 done", last)
	}
}

// TestClusterOptionsMaxObject: a payload over the nodes' default max
// object size raises the cluster's, so that a live run's puts are not all
// refused as too large; a smaller one leaves the nodes' default.
func TestClusterOptionsMaxObject(t *testing.T) {
	for _, tc := range []struct {
		payload int
		want    int64
	}{{64 << 10, 0}, {64 << 20, 0}, {100 << 20, 100 << 20}} {
		co := ClusterOptions(2, Options{PayloadBytes: tc.payload, RAMBlocks: 8})
		if co.MaxObjectBytes != tc.want {
			t.Errorf("payload %d: MaxObjectBytes %d, want %d", tc.payload, co.MaxObjectBytes, tc.want)
		}
	}
}
