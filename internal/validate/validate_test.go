package validate

import (
	"context"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/replay"
	"github.com/kvpool/kvpool/internal/sim"
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
