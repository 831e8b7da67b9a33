package validate

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"

	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"zero", Config{}, ""},
		{"negative nodes", Config{Nodes: -1}, "Nodes"},
		{"bad hit tolerance", Config{HitTolerance: 2}, "HitTolerance"},
		{"bad ttft tolerance", Config{TTFTTolerance: -1}, "TTFTTolerance"},
		{"bad mode", Config{Mode: "cloud"}, "Mode"},
		{"bad speed", Config{Speed: -1}, "Speed"},
		{"tiny payload", Config{PayloadBytes: 4}, "PayloadBytes"},
		{"unknown policy", Config{Policy: "no-such-policy"}, "no-such-policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || option.Field(err) != tt.want && !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not name %s", err, tt.want)
			}
		})
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	if _, err := Run(context.Background(), nil, Config{}); err == nil || !strings.Contains(err.Error(), "no requests") {
		t.Fatalf("empty trace: error %v", err)
	}
	if _, err := Run(context.Background(), nil, Config{Nodes: -3}); option.Field(err) != "Nodes" {
		t.Fatalf("bad config: error %v", err)
	}
}

func TestJudge(t *testing.T) {
	summary := func(hit, ttft float64) sim.Summary { return sim.Summary{TokenHitRatio: hit, TTFTMean: ttft} }
	live := func(hit, ttft float64, wrong int64, completed int, partial bool) replay.Summary {
		return replay.Summary{Summary: summary(hit, ttft), WrongBlocks: wrong, Completed: completed, Partial: partial, KeptUp: true}
	}
	// lagging sets the run's speed (50) and lag p99; late is the run's
	// Lateness (live seconds), passed on in the test case.
	lagging := func(l replay.Summary, late, p99 float64) replay.Summary {
		l.LagP50, l.LagP99, l.Speed = late, p99, 50
		l.KeptUp = p99 <= replay.MaxLagP99.Seconds()
		return l
	}
	tests := []struct {
		name     string
		skipTTFT bool
		sim      sim.Summary
		live     replay.Summary
		failed   []string // names of the failing checks
		verdict  Verdict
	}{
		{"agree", false, summary(0.30, 2.0), live(0.31, 2.2, 0, 10, false), nil, VerdictPass},
		{"hit off by 3 points", false, summary(0.30, 2.0), live(0.27, 2.0, 0, 10, false), []string{"token hit ratio"}, VerdictFail},
		{"ttft off by 25%", false, summary(0.30, 2.0), live(0.30, 2.5, 0, 10, false), []string{"mean TTFT"}, VerdictFail},
		{"ttft off but not judged", true, summary(0.30, 2.0), live(0.30, 2.5, 0, 10, false), nil, VerdictPass},
		{"wrong blocks", false, summary(0.30, 2.0), live(0.30, 2.0, 1, 10, false), []string{"verified blocks"}, VerdictFail},
		{"partial", false, summary(0.30, 2.0), live(0.30, 2.0, 0, 7, true), []string{"complete"}, VerdictFail},
		{"sim ttft zero", false, summary(0, 0), live(0, 0.1, 0, 10, false), []string{"mean TTFT"}, VerdictFail},
		// A run that did not keep up has its TTFT reported, not judged.
		{"lag p99 over the bound: inconclusive", false, summary(0.30, 2.0), lagging(live(0.30, 2.5, 0, 10, false), 0.001, 0.050), nil, VerdictInconclusive},
		{"lateness over the budget: inconclusive", false, summary(0.30, 2.0), lagging(live(0.30, 2.5, 0, 10, false), 0.003, 0.005), nil, VerdictInconclusive},
		{"lagging and agreeing: still inconclusive", false, summary(0.30, 2.0), lagging(live(0.30, 2.0, 0, 10, false), 0.001, 0.050), nil, VerdictInconclusive},
		// Far behind (lag p99 over replay.MaxLagP99), blocks are stored
		// late and the hit ratio is not judged either.
		{"far behind with a hit disagreement: inconclusive", false, summary(0.30, 2.0), lagging(live(0.27, 2.5, 0, 10, false), 0.001, 0.050), nil, VerdictInconclusive},
		{"far behind, hit disagreement, ttft skipped: inconclusive", true, summary(0.30, 2.0), lagging(live(0.27, 2.0, 0, 10, false), 0.001, 0.050), nil, VerdictInconclusive},
		// Kept up by the replayer's bound, but a lateness over the TTFT
		// budget: the hit ratio is judged, the TTFT is not.
		{"lateness over the budget with a hit disagreement: fail", false, summary(0.30, 2.0), lagging(live(0.27, 2.5, 0, 10, false), 0.003, 0.005), []string{"token hit ratio"}, VerdictFail},
		{"lagging with wrong blocks: fail", false, summary(0.30, 2.0), lagging(live(0.30, 2.0, 2, 10, false), 0.001, 0.050), []string{"verified blocks"}, VerdictFail},
		{"lagging, ttft skipped: pass", true, summary(0.30, 2.0), lagging(live(0.30, 2.5, 0, 10, false), 0.001, 0.050), nil, VerdictPass},
		{"small lateness: judged", false, summary(0.30, 2.0), lagging(live(0.30, 2.5, 0, 10, false), 0.0001, 0.005), []string{"mean TTFT"}, VerdictFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Config: Config{SkipTTFT: tt.skipTTFT}.WithDefaults(), Requests: 10, Sim: tt.sim, Live: tt.live, Lateness: tt.live.LagP50}
			r.judge()
			var failed []string
			for _, c := range r.Checks {
				if !c.Pass {
					failed = append(failed, c.Name)
				}
			}
			if strings.Join(failed, ",") != strings.Join(tt.failed, ",") {
				t.Fatalf("failed checks %v, want %v (%+v)", failed, tt.failed, r.Checks)
			}
			if r.Verdict != tt.verdict {
				t.Fatalf("verdict %s, want %s (%+v)", r.Verdict, tt.verdict, r.Checks)
			}
			if r.Pass != (tt.verdict == VerdictPass) || (r.Err() == nil) != r.Pass {
				t.Fatalf("Pass %v, Err %v with verdict %s", r.Pass, r.Err(), r.Verdict)
			}
			if inc := errors.Is(r.Err(), ErrInconclusive); inc != (tt.verdict == VerdictInconclusive) {
				t.Fatalf("Err %v wraps ErrInconclusive: %v; verdict %s", r.Err(), inc, r.Verdict)
			}
			if tt.verdict == VerdictInconclusive && (r.SuggestedSpeed < MinSpeed || r.SuggestedSpeed > r.Live.Speed/2 || r.Reason == "") {
				t.Fatalf("inconclusive with suggested speed %g (run at %g) and reason %q", r.SuggestedSpeed, r.Live.Speed, r.Reason)
			}
			var b strings.Builder
			if err := WriteTable(&b, []*Report{r}); err != nil {
				t.Fatal(err)
			}
			// An interrupted run's table gives it no verdict and lists no
			// failure (its Verdict stays FAIL: the "complete" check).
			wantFailed, wantCell := len(tt.failed), string(tt.verdict)
			if tt.live.Partial {
				wantFailed, wantCell = 0, Interrupted
			}
			if got := strings.Count(b.String(), "\nFAIL "); got != wantFailed {
				t.Fatalf("table lists %d failures, want %d:\n%s", got, wantFailed, b.String())
			}
			if !strings.Contains(b.String(), "| "+wantCell+" |") {
				t.Fatalf("table lacks the verdict %s:\n%s", wantCell, b.String())
			}
		})
	}
}

// TestSuggestedSpeed checks the speed an inconclusive run proposes: at
// most half its own, lower when a lag was far over its bound but not
// below an eighth, a whole number, never below MinSpeed.
func TestSuggestedSpeed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		speed     float64
		late, p99 float64 // Lateness and lag p99, live seconds
		want      float64
	}{
		{"just over: half", 50, 0.0001, 1.1 * replay.MaxLagP99.Seconds(), 25},
		{"p99 five times over: a fifth", 50, 0.0001, 5 * replay.MaxLagP99.Seconds(), 10},
		// budget 0.25 × 0.2 × 2 s = 0.1 model s; 0.01 s of lateness fits
		// it at speed 10.
		{"lateness over the budget", 50, 0.010, 0.009, 10},
		{"overloaded: an eighth at a time", 3000, 0.1, 0.2, 375},
		{"never below real time", 2, 0.5, 5, MinSpeed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := replay.Summary{Speed: tc.speed, LagP99: tc.p99}
			if got := SuggestedSpeed(l, tc.late, 2.0, DefaultTTFTTolerance); got != tc.want {
				t.Fatalf("SuggestedSpeed = %g, want %g", got, tc.want)
			}
		})
	}
}

// TestSuiteOptionsValidate checks RunSuite's refusal of an empty suite (it
// runs clusters otherwise, which the cmd/kvpool tests cover).
func TestSuiteOptionsValidate(t *testing.T) {
	if _, err := RunSuite(context.Background(), SuiteOptions{}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "no configuration") {
		t.Fatalf("empty suite: %v", err)
	}
	o := SuiteOptions{Configs: []Config{{}}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "no requests") {
		t.Fatalf("suite without requests: %v", err)
	}
	o.Configs = []Config{{Nodes: -1}}
	if err := o.Validate(); option.Field(err) != "Nodes" {
		t.Fatalf("suite with a bad config: %v", err)
	}
}

// TestLateness checks the average lateness: dispatch lag plus prefill
// overshoot (never negative), per completed request.
func TestLateness(t *testing.T) {
	res := &replay.Result{
		Summary: replay.Summary{Speed: 10},
		Records: []sim.Record{{Prefill: 1.0}, {Prefill: 2.0}},
		// Planned live prefills: 0.1 s and 0.2 s.
		Live: []replay.LiveRecord{{Lag: 0.002, Prefill: 0.104}, {Lag: 0, Prefill: 0.199}},
	}
	if got, want := Lateness(res), (0.002+0.004+0)/2; math.Abs(got-want) > 1e-12 {
		t.Fatalf("Lateness = %g, want %g", got, want)
	}
	if got := Lateness(&replay.Result{}); got != 0 {
		t.Fatalf("Lateness of an empty run = %g", got)
	}
}

// TestNodeKeys checks the relabelling the simulator runs on: each key
// becomes the node's policy key, distinct keys stay distinct, the input
// is not modified, and a label-blind policy (LRU) gets exactly the same
// hit ratio either way.
func TestNodeKeys(t *testing.T) {
	reqs := generated(t)
	orig := reqs[0].HashIDs[0]
	got := NodeKeys(reqs, "replay")
	if reqs[0].HashIDs[0] != orig {
		t.Fatal("NodeKeys modified its input")
	}
	seen := map[uint64]uint64{}
	for i := range reqs {
		if len(got[i].HashIDs) != len(reqs[i].HashIDs) || got[i].InputLength != reqs[i].InputLength || got[i].Timestamp != reqs[i].Timestamp {
			t.Fatalf("request %d changed shape", i)
		}
		for j, id := range reqs[i].HashIDs {
			k := got[i].HashIDs[j]
			if want := block.PolicyKey(block.Key{Tenant: "replay", ID: id}); k != want {
				t.Fatalf("request %d key %d: %x, want the policy key %x", i, j, k, want)
			}
			if prev, ok := seen[k]; ok && prev != id {
				t.Fatalf("ids %d and %d map to the same key", prev, id)
			}
			seen[k] = id
		}
	}
	o := sim.Options{Instances: 4, RAMBlocks: 50, Policy: "lru"}
	a, err := sim.Run(context.Background(), reqs, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.Run(context.Background(), got, o)
	if err != nil {
		t.Fatal(err)
	}
	if a.Summary.TokenHitRatio != b.Summary.TokenHitRatio || a.Summary.TokenHitRatio == 0 {
		t.Fatalf("LRU hit ratio %v on trace keys, %v on node keys; want equal and > 0", a.Summary.TokenHitRatio, b.Summary.TokenHitRatio)
	}
}

// generated returns a small generated chat trace.
func generated(t *testing.T) []trace.Request {
	t.Helper()
	o := tracegen.ChatOptions()
	o.Requests, o.Seed = 200, 3
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestSuiteInterrupted runs a suite whose context is already cancelled
// (Ctrl-C before or during the first configuration): the suite says it
// was interrupted and gives no verdict, and its error says so too rather
// than a bare "context canceled" from the simulator.
func TestSuiteInterrupted(t *testing.T) {
	o := tracegen.ChatOptions()
	o.Requests = 20
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out strings.Builder
	_, err = RunSuite(ctx, SuiteOptions{Requests: reqs, TraceName: "generated",
		Configs: []Config{{Mode: sim.ModeLocal}, {Mode: sim.ModeGlobal}}}, &out)
	if err == nil || !strings.Contains(err.Error(), "interrupted") || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want one saying the suite was interrupted", err)
	}
	if s := out.String(); !strings.Contains(s, "no verdict") || strings.Contains(s, "PASS") || strings.Contains(s, "FAIL") {
		t.Errorf("output of an interrupted suite:\n%s", s)
	}
}

// TestWriteTableInterrupted writes the table of a configuration whose
// live run was cut short: its row says interrupted, not FAIL, and no
// check of it is listed as a failure.
func TestWriteTableInterrupted(t *testing.T) {
	r := &Report{Config: Config{Name: "local"}.WithDefaults(), Requests: 10, Verdict: VerdictFail,
		Live:   replay.Summary{Partial: true, Completed: 4},
		Checks: []Check{{Name: "complete", Pass: false, Judged: true, Message: "4 of 10 requests completed live (interrupted)"}}}
	var b strings.Builder
	if err := WriteTable(&b, []*Report{r}); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); strings.Contains(s, "FAIL") || !strings.Contains(s, "| interrupted |") {
		t.Errorf("table:\n%s", s)
	}
}
