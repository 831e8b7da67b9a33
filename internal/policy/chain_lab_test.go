package policy_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/lab/tracesample"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
	"github.com/kvpool/kvpool/trace/tracetest"
)

// TestChainLab is the tuning and reporting harness of docs/policy.md, not a
// check: it prints token hit ratios of kvchain variants and the baselines
// on the first half of each published trace (tuning), the second half and
// the whole trace (reporting). Run with KVCHAIN_LAB=1 go test -run
// TestChainLab -v ./internal/policy. KVCHAIN_LAB_VARIANTS (comma-separated
// variant names) and KVCHAIN_LAB_TRACES (comma-separated trace names)
// restrict the run.
func TestChainLab(t *testing.T) {
	if os.Getenv("KVCHAIN_LAB") == "" {
		t.Skip("lab harness; set KVCHAIN_LAB=1 to run")
	}
	type variant struct {
		name string
		opts policy.ChainOptions
	}
	variants := []variant{
		{"kvchain", policy.ChainOptions{}},
		{"-chain", policy.ChainOptions{DisableChainOrder: true}},
		{"-tail", policy.ChainOptions{DisableTailDemotion: true}},
		{"-prob", policy.ChainOptions{DisableProbation: true}},
		{"-sketch", policy.ChainOptions{DisableSketch: true}},
		{"-duel", policy.ChainOptions{DisableDuel: true}},
		{"s2", policy.ChainOptions{SmallPercent: 2}},
		{"s10", policy.ChainOptions{SmallPercent: 10}},
		{"s20", policy.ChainOptions{SmallPercent: 20}},
		{"g100", policy.ChainOptions{GhostPercent: 100}},
		{"sk500", policy.ChainOptions{SketchPercent: 500}},
		{"sk2000", policy.ChainOptions{SketchPercent: 2000}},
		{"d8", policy.ChainOptions{DuelSample: 8}},
		{"w8", policy.ChainOptions{DuelWindow: 8}},
		{"s1", policy.ChainOptions{SmallPercent: 1}},
		{"s3", policy.ChainOptions{SmallPercent: 3}},
		{"s1d8", policy.ChainOptions{SmallPercent: 1, DuelSample: 8}},
		{"s1sk2000", policy.ChainOptions{SmallPercent: 1, SketchPercent: 2000}},
	}
	if only := os.Getenv("KVCHAIN_LAB_VARIANTS"); only != "" {
		keep := variants[:0]
		for _, v := range variants {
			if strings.Contains(","+only+",", ","+v.name+",") {
				keep = append(keep, v)
			}
		}
		variants = keep
	}
	traces := []string{"conversation", "synthetic", "gen-chat", "gen-long"}
	if only := os.Getenv("KVCHAIN_LAB_TRACES"); only != "" {
		traces = strings.Split(only, ",")
	}
	baselines := []string{"lru", "lfu", "s3fifo", "arc", "belady"}
	for _, name := range traces {
		all, ok := labTrace(t, name)
		if !ok {
			continue
		}
		half := all[len(all)-1].Timestamp / 2
		first, err := tracesample.Sample(all, tracesample.Options{ToMs: half})
		if err != nil {
			t.Fatal(err)
		}
		second, err := tracesample.Sample(all, tracesample.Options{FromMs: half})
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range []struct {
			name string
			reqs []trace.Request
		}{{"first", first}, {"second", second}, {"whole", all}} {
			for _, c := range []int{2000, 5000, 10000} {
				got := map[string]float64{}
				var line strings.Builder
				fmt.Fprintf(&line, "%s %s %5d:", name, part.name, c)
				for _, s := range baselines {
					spec, _ := policy.ParseSpec(s)
					res, err := hitrate.Run(part.reqs, hitrate.Options{Policy: spec, Capacity: c})
					if err != nil {
						t.Fatal(err)
					}
					got[s] = res.TokenHitRatio
					fmt.Fprintf(&line, " %s=%.2f", s, 100*res.TokenHitRatio)
				}
				best := max(got["lru"], got["lfu"], got["s3fifo"], got["arc"])
				for _, v := range variants {
					ev, err := policy.NewChainWith(c, v.opts)
					if err != nil {
						t.Fatal(err)
					}
					r := tokenHitRatio(part.reqs, policy.NewCache(c, ev, nil))
					gap := (r - got["lru"]) / (got["belady"] - got["lru"])
					fmt.Fprintf(&line, " %s=%.2f(gap %.0f%%, vs best %+.2f)", v.name, 100*r, 100*gap, 100*(r-best))
				}
				t.Log(line.String())
			}
		}
	}
}

// labTrace returns a published trace (false when absent) or a generated
// one: gen-chat is tracegen.ChatOptions, gen-long has 3 turns per session
// on average and half the new tokens per turn.
func labTrace(t *testing.T, name string) ([]trace.Request, bool) {
	t.Helper()
	gen := tracegen.ChatOptions()
	gen.Requests = 12000
	switch name {
	case "gen-chat":
	case "gen-long":
		gen.Seed, gen.MeanTurns, gen.Input = 7, 3, tracegen.LengthDist{Mean: 3000, Sigma: 1}
	default:
		path, err := tracetest.Find(trace.FileName(name))
		if err != nil {
			t.Logf("trace %s: %v", name, err)
			return nil, false
		}
		all, err := trace.ReadFile(path, trace.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return all, true
	}
	all, err := tracegen.Generate(gen)
	if err != nil {
		t.Fatal(err)
	}
	return all, true
}

// tokenHitRatio replays reqs (in trace order) through c as hitrate.Run does
// and returns the token hit ratio, for a cache built by hand.
func tokenHitRatio(reqs []trace.Request, c *policy.Cache) float64 {
	var hit, in, tm int64
	for _, r := range reqs {
		h := 0
		for h < len(r.HashIDs) && c.Contains(r.HashIDs[h]) {
			h++
		}
		for i, k := range r.HashIDs {
			a := policy.Access{Key: k, Hint: block.Hint{Depth: i}, Time: tm}
			if i > 0 {
				a.Parent = r.HashIDs[i-1]
			}
			tm++
			c.Access(a)
		}
		hit += int64(r.HitTokens(h))
		in += int64(r.InputLength)
	}
	if in == 0 {
		return 0
	}
	return float64(hit) / float64(in)
}

// TestChainPredictorLab measures kvchain's own prediction error and the
// token hit ratio under injected error (docs/policy.md, "Prediction
// error"). Run with KVCHAIN_LAB=1 go test -run TestChainPredictorLab -v
// ./internal/policy; KVCHAIN_LAB_TRACES restricts the traces.
func TestChainPredictorLab(t *testing.T) {
	if os.Getenv("KVCHAIN_LAB") == "" {
		t.Skip("lab harness; set KVCHAIN_LAB=1 to run")
	}
	traces := []string{"conversation", "synthetic"}
	if only := os.Getenv("KVCHAIN_LAB_TRACES"); only != "" {
		traces = strings.Split(only, ",")
	}
	pct := func(a, b int64) float64 {
		if b == 0 {
			return 0
		}
		return 100 * float64(a) / float64(b)
	}
	for _, name := range traces {
		reqs, ok := labTrace(t, name)
		if !ok {
			continue
		}
		// Trace-level: is a request's last block (the one tail demotion
		// demotes) ever accessed again?
		last := map[policy.Key]int{}
		for i, r := range reqs {
			for _, k := range r.HashIDs {
				last[k] = i
			}
		}
		var tails, tailsReused int64
		for i, r := range reqs {
			if n := len(r.HashIDs); n > 1 {
				tails++
				if last[r.HashIDs[n-1]] > i {
					tailsReused++
				}
			}
		}
		t.Logf("%s: last blocks of multi-block requests reused later: %.2f%% of %d", name, pct(tailsReused, tails), tails)
		for _, c := range []int{2000, 5000, 10000} {
			var line strings.Builder
			fmt.Fprintf(&line, "%s %5d:", name, c)
			for _, perr := range []float64{0, 0.05, 0.1, 0.2, 0.5, 1} {
				ev, err := policy.NewChainWith(c, policy.ChainOptions{PredictionError: perr, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				r := tokenHitRatio(reqs, policy.NewCache(c, ev, nil))
				st := ev.Stats()
				fmt.Fprintf(&line, " perr=%g: %.2f%%", perr, 100*r)
				if perr == 0 {
					fmt.Fprintf(&line, " [demoted hit %.2f%% of %d; sketch-promoted never hit %.1f%% of %d; ghost-promoted never hit %.1f%% of %d; probation hit %.1f%% of %d]",
						pct(st.DemotedHits, st.Demotions), st.Demotions,
						100-pct(st.SketchPromotedHits, st.SketchPromotions), st.SketchPromotions,
						100-pct(st.GhostPromotedHits, st.GhostPromotions), st.GhostPromotions,
						pct(st.ProbationHits, st.ProbationInserts), st.ProbationInserts)
				}
			}
			t.Log(line.String())
		}
	}
}
