package validate

import (
	"context"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"

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
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not name %s", err, tt.want)
			}
		})
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	if _, err := Run(context.Background(), nil, Config{}); err == nil || !strings.Contains(err.Error(), "no requests") {
		t.Fatalf("empty trace: error %v", err)
	}
	if _, err := Run(context.Background(), nil, Config{Nodes: -3}); err == nil || !strings.Contains(err.Error(), "Nodes") {
		t.Fatalf("bad config: error %v", err)
	}
}

func TestJudge(t *testing.T) {
	summary := func(hit, ttft float64) sim.Summary { return sim.Summary{TokenHitRatio: hit, TTFTMean: ttft} }
	live := func(hit, ttft float64, wrong int64, completed int, partial bool) replay.Summary {
		return replay.Summary{Summary: summary(hit, ttft), WrongBlocks: wrong, Completed: completed, Partial: partial, KeptUp: true}
	}
	tests := []struct {
		name     string
		skipTTFT bool
		sim      sim.Summary
		live     replay.Summary
		failed   []string // names of the failing checks
	}{
		{"agree", false, summary(0.30, 2.0), live(0.31, 2.2, 0, 10, false), nil},
		{"hit off by 3 points", false, summary(0.30, 2.0), live(0.27, 2.0, 0, 10, false), []string{"token hit ratio"}},
		{"ttft off by 25%", false, summary(0.30, 2.0), live(0.30, 2.5, 0, 10, false), []string{"mean TTFT"}},
		{"ttft off but not judged", true, summary(0.30, 2.0), live(0.30, 2.5, 0, 10, false), nil},
		{"wrong blocks", false, summary(0.30, 2.0), live(0.30, 2.0, 1, 10, false), []string{"verified blocks"}},
		{"partial", false, summary(0.30, 2.0), live(0.30, 2.0, 0, 7, true), []string{"complete"}},
		{"sim ttft zero", false, summary(0, 0), live(0, 0.1, 0, 10, false), []string{"mean TTFT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Config: Config{SkipTTFT: tt.skipTTFT}.WithDefaults(), Requests: 10, Sim: tt.sim, Live: tt.live}
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
			if r.Pass != (len(tt.failed) == 0) || (r.Err() == nil) != r.Pass {
				t.Fatalf("Pass %v, Err %v with failures %v", r.Pass, r.Err(), tt.failed)
			}
			var b strings.Builder
			if err := WriteTable(&b, []*Report{r}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(b.String(), "\nFAIL "); got != len(tt.failed) {
				t.Fatalf("table lists %d failures, want %d:\n%s", got, len(tt.failed), b.String())
			}
		})
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
