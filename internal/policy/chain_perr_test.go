package policy_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

func TestChainPredictionErrorValidate(t *testing.T) {
	for _, perr := range []float64{-0.1, 1.01, math.NaN(), math.Inf(1)} {
		err := policy.ChainOptions{PredictionError: perr}.Validate()
		if err == nil || !strings.Contains(err.Error(), "PredictionError") {
			t.Errorf("PredictionError %v: Validate = %v, want an error naming PredictionError", perr, err)
		}
	}
	for _, perr := range []float64{0, 0.5, 1} {
		if err := (policy.ChainOptions{PredictionError: perr}).Validate(); err != nil {
			t.Errorf("PredictionError %v: Validate = %v", perr, err)
		}
	}
}

// TestChainPredictionErrorFlips pins which decisions PredictionError
// flips: with p = 1 every admission goes to the other queue and every
// demoted tail goes to the protected head instead.
func TestChainPredictionErrorFlips(t *testing.T) {
	t.Run("admission", func(t *testing.T) {
		for _, tt := range []struct{ perr float64 }{{0}, {1}} {
			p := mustChain(t, policy.ChainOptions{DisableDuel: true, DisableTailDemotion: true, PredictionError: tt.perr})
			c := policy.NewCache(8, p, nil)
			c.Access(policy.Access{Key: 1})
			for k := range policy.Key(12) { // push 1 out of probation (or not)
				c.Access(policy.Access{Key: 100 + k})
			}
			c.Access(policy.Access{Key: 1}) // a ghost (perr 0) or a miss
			c.Access(policy.Access{Key: 2})
			st := p.Stats()
			// perr 0: 1 and 2 and the 12 fillers are unproven (14 in
			// probation), 1 returns as a ghost. perr 1: every first-seen key
			// goes to the protected queue; 1, evicted from there, is no
			// ghost but the sketch has seen it, and that admission flips
			// to probation.
			want := policy.ChainStats{ProbationInserts: 14, GhostPromotions: 1, Decisions: 15}
			if tt.perr == 1 {
				want = policy.ChainStats{ProbationInserts: 1, Decisions: 15, Flipped: 15}
			}
			if st != want {
				t.Errorf("perr %v: stats %+v, want %+v", tt.perr, st, want)
			}
		}
	})
	t.Run("tail", func(t *testing.T) {
		tests := []struct {
			name   string
			opts   policy.ChainOptions
			order  []policy.Key // victims after the second request starts
			demote int64
		}{
			{"demote", policy.ChainOptions{DisableProbation: true}, []policy.Key{3, 10, 2}, 1},
			{"flipped", policy.ChainOptions{DisableProbation: true, PredictionError: 1}, []policy.Key{10, 2, 3}, 0},
			{"off", policy.ChainOptions{DisableProbation: true, DisableTailDemotion: true}, []policy.Key{10, 3, 2}, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := mustChain(t, tt.opts)
				p.Insert(access(10, 0, 0))
				for i, k := range []policy.Key{1, 2, 3} {
					p.Insert(access(k, k-1, i))
				}
				p.Hit(access(1, 0, 0)) // the next request starts
				var got []policy.Key
				for range 3 {
					k, _ := p.Victim()
					got = append(got, k)
					p.Remove(k)
				}
				if !slices.Equal(got, tt.order) {
					t.Errorf("victims %v, want %v", got, tt.order)
				}
				if st := p.Stats(); st.Demotions != tt.demote {
					t.Errorf("stats %+v, want %d demotions", st, tt.demote)
				}
			})
		}
	})
}

// TestChainPredictionErrorRate checks that the seeded flips are
// deterministic, depend on the seed, happen at the requested rate, and
// that p = 0 is exactly the default policy.
func TestChainPredictionErrorRate(t *testing.T) {
	gen := tracegen.ChatOptions()
	gen.Requests = 1500
	reqs, err := tracegen.Generate(gen)
	if err != nil {
		t.Fatal(err)
	}
	run := func(spec string) (string, policy.ChainStats) {
		ev, err := policy.NewEviction(spec, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return hitPattern(reqs, policy.NewCache(1000, ev, nil)), ev.(*policy.Chain).Stats()
	}
	base, _ := run("kvchain")
	zero, zst := run("kvchain(perr=0,seed=9)")
	if zero != base || zst.Flipped != 0 {
		t.Errorf("perr=0 differs from kvchain (%d flips)", zst.Flipped)
	}
	a, ast := run("kvchain(perr=0.2,seed=1)")
	b, _ := run("kvchain(perr=0.2,seed=1)")
	c, _ := run("kvchain(perr=0.2,seed=2)")
	if a != b {
		t.Error("same seed, different hits")
	}
	if a == c || a == base {
		t.Error("seed or perr has no effect on hits")
	}
	// Thousands of decisions: a binomial rate within ±0.02 of 0.2.
	if rate := float64(ast.Flipped) / float64(ast.Decisions); ast.Decisions < 5000 || rate < 0.18 || rate > 0.22 {
		t.Errorf("flip rate %.3f (%d of %d decisions), want about 0.2", rate, ast.Flipped, ast.Decisions)
	}
}

// hitPattern replays reqs through c with chain hints and returns one
// letter per access (H hit, M miss).
func hitPattern(reqs []trace.Request, c *policy.Cache) string {
	var b strings.Builder
	var tm int64
	for _, r := range reqs {
		for i, k := range r.HashIDs {
			a := policy.Access{Key: k, Hint: block.Hint{Depth: i}, Time: tm}
			if i > 0 {
				a.Parent = r.HashIDs[i-1]
			}
			tm++
			if c.Access(a) {
				b.WriteByte('H')
			} else {
				b.WriteByte('M')
			}
		}
	}
	return b.String()
}

func TestSplitSpecs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"lru", []string{"lru"}},
		{"lru, kvchain(perr=0.2,seed=1),arc+cms", []string{"lru", "kvchain(perr=0.2,seed=1)", "arc+cms"}},
		{"kvchain(perr=0.1;seed=2),", []string{"kvchain(perr=0.1;seed=2)", ""}},
		{"a)b,c", []string{"a)b", "c"}},
	}
	for _, tt := range tests {
		if got := policy.SplitSpecs(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("SplitSpecs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNewEvictionParams(t *testing.T) {
	ev, err := policy.NewEviction("kvchain(perr=0.5,seed=3)", 10)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Name() != "kvchain" {
		t.Errorf("Name = %q", ev.Name())
	}
	spec, err := policy.ParseSpec("kvchain(perr=0.5)+second-hit")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spec.NewCache(10); err != nil {
		t.Errorf("NewCache(%v): %v", spec, err)
	}
	if spec.NeedsFuture() {
		t.Error("kvchain with parameters needs the future")
	}
	for _, bad := range []string{"kvchain(perr=2)", "kvchain(seed=x)", "arc(seed=1)", "kvchain(perr=0.1"} {
		if _, err := policy.NewEviction(bad, 10); err == nil {
			t.Errorf("NewEviction(%q) accepted", bad)
		}
	}
}

// TestChainProbationParam checks the probation spec parameter: off admits
// a first-seen key straight to the protected queue (so a one-pass scan
// evicts the oldest protected key, not the newcomer), on is the default.
func TestChainProbationParam(t *testing.T) {
	stats := func(spec string) policy.ChainStats {
		ev, err := policy.NewEviction(spec, 20)
		if err != nil {
			t.Fatal(err)
		}
		c := policy.NewCache(20, ev, nil)
		for k := range policy.Key(60) {
			c.Access(policy.Access{Key: k, Time: int64(k)})
		}
		return ev.(*policy.Chain).Stats()
	}
	if st := stats("kvchain(probation=off)"); st.ProbationInserts != 0 {
		t.Errorf("probation=off: %d probation inserts, want 0", st.ProbationInserts)
	}
	on, def := stats("kvchain(probation=on)"), stats("kvchain")
	if on.ProbationInserts == 0 || on != def {
		t.Errorf("probation=on: stats %+v, default %+v; want equal with probation inserts", on, def)
	}
	if _, err := policy.NewEviction("kvchain(probation=1)", 10); err == nil || !strings.Contains(err.Error(), "probation") {
		t.Errorf("probation=1: error %v, want one naming the parameter", err)
	}
}
