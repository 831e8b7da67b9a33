package policylab

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kvpool/kvpool/internal/lab/plot"
	"github.com/kvpool/kvpool/internal/lab/report"
)

// The policy targets for the subject against the LRU→Belady gap
// (docs/policy.md, "Results").
const (
	// TargetGap is the goal: half the gap in every cell.
	TargetGap = 0.5
	// TargetGapMinimum is the minimum: 30% of the gap at 2,000 and 5,000
	// blocks on the conversation trace.
	TargetGapMinimum = 0.3
	// vsBestSlack is how far below the best baseline still counts as "not
	// below": half a hundredth of a point, the rounding of the tables.
	vsBestSlack = 0.00005
)

// targetMinimumCells reports whether a cell is one the minimum target
// names: the conversation trace at 2,000 or 5,000 blocks.
func targetMinimumCells(r GapRow) bool {
	return r.Trace == "conversation" && (r.Capacity == 2000 || r.Capacity == 5000)
}

// number formatting for tables.
func pct2(v float64) string { return strconv.FormatFloat(100*v, 'f', 2, 64) }
func pct1(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }
func points(v float64) string {
	s := strconv.FormatFloat(100*v, 'f', 2, 64)
	if s == "-0.00" {
		s = "0.00"
	}
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// fixed2 formats rates, rate multipliers and seconds with two decimals;
// ratio formats a ratio as "1.05×". One format per kind of quantity keeps
// every column to one format (report.CheckNumberFormats).
func fixed2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func ratio(v float64) string  { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }
func f6(v float64) string     { return strconv.FormatFloat(v, 'f', 6, 64) }

func (r GapRow) gapString() string {
	if !r.GapDefined {
		return "n/a"
	}
	return strconv.FormatFloat(100*r.GapClosed, 'f', 0, 64) + "%"
}

func metString(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// halfGapMet reports the goal for a cell ("n/a" when gap is undefined).
func (r GapRow) halfGapMet() string {
	if !r.GapDefined {
		return "n/a"
	}
	return metString(r.GapClosed >= TargetGap)
}

func (r GapRow) notBelowBest() bool { return r.VsBest >= -vsBestSlack }

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// partLabel names a row's part in tables.
func partLabel(g GapRow) string {
	if g.Tuning {
		return g.Part + " (tuning)"
	}
	return g.Part
}

// Report lays the result out as a report: one section per experiment.
func (r *Result) Report() *report.Report {
	return &report.Report{
		Title: "kvpool: the cache policy report",
		Intro: fmt.Sprintf("Subject `%s` against the baselines %s, the extra %s and the offline optimum `%s`. "+
			"Order-only runs replay one global cache in request order (`kvpool hitrate` semantics); timed runs use the simulator (%s). "+
			"Token hit ratios in percent, differences in percentage points.",
			r.Setup.Subject, strings.Join(r.Setup.Baselines, ", "), strings.Join(r.Setup.Extra, ", "), r.Setup.Oracle, r.Setup.SimSummary),
		Sections: r.Sections(),
	}
}

// Sections returns the report's sections: the gap table, robustness (a),
// (b) and (c), then any joint-routing sections.
func (r *Result) Sections() []report.Section {
	secs := []report.Section{r.gapSection(), r.noiseSection()}
	if r.Tenants != nil {
		secs = append(secs, r.tenantSection())
	} else {
		secs = append(secs, report.Section{Title: "Robustness (b): two tenants sharing one pool",
			Text: "Not run: it needs two traces (tenant A and tenant B) and this run had one."})
	}
	secs = append(secs, r.unseenSection())
	return append(secs, r.Joint...)
}

// gapColumns are the gap table's columns for the setup.
func (r *Result) gapColumns() []string {
	cols := []string{"trace", "part", "blocks"}
	cols = append(cols, r.policyColumns()...)
	return append(cols, "gap closed", "vs best", "best baseline", "≥ 50% of gap", "≥ best")
}

// policyColumns are the specs in gap-table order.
func (r *Result) policyColumns() []string {
	var out []string
	for _, p := range slices.Concat([]string{Reference}, r.Setup.Baselines, r.Setup.Extra, []string{r.Setup.Oracle, r.Setup.Subject}) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func (r *Result) gapTableRow(g GapRow) []string {
	row := []string{g.Trace, partLabel(g), strconv.Itoa(g.Capacity)}
	for _, p := range r.policyColumns() {
		row = append(row, pct2(g.TokenHitRatio[p]))
	}
	return append(row, g.gapString(), points(g.VsBest), g.BestPolicy, g.halfGapMet(), metString(g.notBelowBest()))
}

// gapTable returns the rows that keep selects, in result order with the
// parts ordered whole, second, first.
func (r *Result) gapTable(caption string, keep func(GapRow) bool) report.Table {
	t := report.Table{Caption: caption, Columns: r.gapColumns()}
	for _, ti := range r.Traces {
		for _, part := range []string{PartWhole, PartSecond, PartFirst} {
			for _, g := range r.Gap {
				if g.Trace == ti.Name && g.Part == part && keep(g) {
					t.Rows = append(t.Rows, r.gapTableRow(g))
				}
			}
		}
	}
	return t
}

// target is one of the policy targets evaluated over some cells.
type target struct {
	name, scope string
	cells       func(GapRow) bool
	met         func(GapRow) (ok, applies bool)
}

func (r *Result) targets() []target {
	gapAt := func(min float64) func(GapRow) (bool, bool) {
		return func(g GapRow) (bool, bool) { return g.GapDefined && g.GapClosed >= min, g.GapDefined }
	}
	notBelow := func(g GapRow) (bool, bool) { return g.notBelowBest(), true }
	published := func(g GapRow) bool { return !g.Generated && !g.Unseen }
	return []target{
		{"≥ 30% of the gap (minimum)", "conversation, 2,000 and 5,000 blocks", func(g GapRow) bool { return published(g) && targetMinimumCells(g) }, gapAt(TargetGapMinimum)},
		{"≥ 50% of the gap (goal)", "published traces, tuned capacities", published, gapAt(TargetGap)},
		{"never below the best baseline", "published traces, tuned capacities", published, notBelow},
		{"never below the best baseline", "generated traces, tuned capacities", func(g GapRow) bool { return g.Generated && !g.Unseen }, notBelow},
		{"never below the best baseline", "published traces, unseen capacities", func(g GapRow) bool { return !g.Generated && g.Unseen }, notBelow},
		{"never below the best baseline", "generated traces, unseen capacities", func(g GapRow) bool { return g.Generated && g.Unseen }, notBelow},
	}
}

// targetVerdict counts the cells of t in the given parts.
func (r *Result) targetVerdict(t target, parts ...string) string {
	n, met := 0, 0
	for _, g := range r.Gap {
		if !t.cells(g) || !slices.Contains(parts, g.Part) {
			continue
		}
		ok, applies := t.met(g)
		if !applies {
			continue
		}
		n++
		if ok {
			met++
		}
	}
	switch {
	case n == 0:
		return "n/a"
	case met == n:
		return fmt.Sprintf("**met** (%d of %d)", met, n)
	}
	return fmt.Sprintf("not met (%d of %d)", met, n)
}

// TargetsTable is the verdict on every target: over the held-out parts
// (second half and whole) and over the tuning half.
func (r *Result) TargetsTable() report.Table {
	t := report.Table{Caption: "Targets for " + r.Setup.Subject + ": cells met of cells where the target applies",
		Columns: []string{"target", "cells", "held out (second half, whole)", "first half"}}
	for _, tg := range r.targets() {
		t.Rows = append(t.Rows, []string{tg.name, tg.scope, r.targetVerdict(tg, PartSecond, PartWhole), r.targetVerdict(tg, PartFirst)})
	}
	return t
}

func (r *Result) traceTable() report.Table {
	t := report.Table{Caption: "Traces and their halves (split at half the span by time; each half starts cold)",
		Columns: []string{"trace", "kind", "requests", "split at (s)", "first half", "second half"}}
	for _, ti := range r.Traces {
		kind := "published"
		if ti.Generated {
			kind = "generated: " + ti.About
		}
		if ti.Tuned {
			kind += " (tuned on its first half)"
		}
		t.Rows = append(t.Rows, []string{ti.Name, kind, strconv.Itoa(ti.Requests), strconv.FormatFloat(float64(ti.HalfMs)/1000, 'f', 0, 64),
			strconv.Itoa(ti.FirstRequests), strconv.Itoa(ti.SecondRequests)})
	}
	return t
}

func (r *Result) gapSection() report.Section {
	sec := report.Section{Title: "Gap to Belady: tuning half, held-out half, whole trace",
		Text: fmt.Sprintf("Token hit ratio (%%) of every policy, one global cache, request order only. "+
			"Gap closed = (%[1]s − lru) / (%[2]s − lru), n/a when %[2]s − lru is under half a point. "+
			"vs best = %[1]s minus the best of %[3]s, in points. "+
			"%[1]s was tuned on the first half (by time) of the published traces, gen-chat and gen-long at these capacities "+
			"(docs/policy.md; rows marked \"tuning\"); the second half and the whole trace are the report, and "+
			"gen-prompts and gen-deep were not used for tuning at all. The targets (docs/policy.md): at least 30%% of the gap at "+
			"2,000 and 5,000 blocks on the conversation trace (minimum), half of it everywhere (goal), and never below the best baseline.",
			r.Setup.Subject, r.Setup.Oracle, strings.Join(r.Setup.Baselines, ", ")),
	}
	sec.Tables = append(sec.Tables, r.TargetsTable(), r.traceTable(),
		r.gapTable("Published traces, tuned capacities", func(g GapRow) bool { return !g.Generated && !g.Unseen }))
	if slices.ContainsFunc(r.Gap, func(g GapRow) bool { return g.Generated }) {
		sec.Tables = append(sec.Tables, r.gapTable("Generated traces (tracegen), tuned capacities", func(g GapRow) bool { return g.Generated && !g.Unseen }))
	}
	sec.Figures = r.gapFigures()
	return sec
}

// gapFigures plot gap closed and vs best against capacity for the whole
// traces, tuned and unseen capacities alike.
func (r *Result) gapFigures() []report.Figure {
	gap := &plot.Chart{Title: r.Setup.Subject + ": share of the LRU→Belady gap closed (whole traces)",
		XLabel: "capacity (blocks of 512 tokens)", YLabel: "gap closed (%)", XLog: true}
	vs := &plot.Chart{Title: r.Setup.Subject + " minus the best baseline (whole traces)",
		XLabel: "capacity (blocks of 512 tokens)", YLabel: "token hit ratio difference (points)", XLog: true,
		HLines: []plot.HLine{{Y: 0, Label: "best baseline"}}}
	gap.HLines = []plot.HLine{{Y: 100 * TargetGapMinimum, Label: "minimum target 30%"}, {Y: 100 * TargetGap, Label: "goal 50%"}}
	for _, ti := range r.Traces {
		sg := plot.Series{Name: ti.Name, Dashed: ti.Generated}
		sv := plot.Series{Name: ti.Name, Dashed: ti.Generated}
		for _, g := range r.Gap {
			if g.Trace != ti.Name || g.Part != PartWhole {
				continue
			}
			y := math.NaN()
			if g.GapDefined {
				y = 100 * g.GapClosed
			}
			sg.X, sg.Y = append(sg.X, float64(g.Capacity)), append(sg.Y, y)
			sv.X, sv.Y = append(sv.X, float64(g.Capacity)), append(sv.Y, 100*g.VsBest)
		}
		gap.Series = append(gap.Series, sg)
		vs.Series = append(vs.Series, sv)
	}
	return []report.Figure{
		{File: "policy_gap_closed.svg", Caption: "Gap closed vs capacity, whole traces (dashed: generated; gaps where Belady − LRU < 0.5 points)", Render: gap.LineSVG},
		{File: "policy_vs_best.svg", Caption: "Subject minus the best baseline vs capacity, whole traces", Render: vs.LineSVG},
	}
}

// ref returns the reference row of policy p on trace t, or nil.
func (r *Result) ref(t, p string) *NoiseRef {
	for i := range r.Refs {
		if r.Refs[i].Trace == t && r.Refs[i].Policy == p {
			return &r.Refs[i]
		}
	}
	return nil
}

// bestRef returns the best baseline on trace t by hit ratio and, among
// those with a goodput, by goodput.
func (r *Result) bestRef(t string) (byHit, byGoodput *NoiseRef) {
	for i := range r.Refs {
		f := &r.Refs[i]
		if f.Trace != t || !slices.Contains(r.Setup.Baselines, f.Policy) {
			continue
		}
		if byHit == nil || f.TokenHitRatio > byHit.TokenHitRatio {
			byHit = f
		}
		if f.Goodput != nil && (byGoodput == nil || f.Goodput.ReqPerSec > byGoodput.Goodput.ReqPerSec) {
			byGoodput = f
		}
	}
	return byHit, byGoodput
}

func (r *Result) noiseTraces() []string {
	var out []string
	for _, n := range r.Noise {
		if !slices.Contains(out, n.Trace) {
			out = append(out, n.Trace)
		}
	}
	return out
}

func (r *Result) noiseSection() report.Section {
	sec := report.Section{Title: "Robustness (a): wrong reuse predictions",
		Text: fmt.Sprintf("`%s` with a fraction p of its reuse predictions replaced by their opposite (spec `%s`; "+
			"the flipped decisions are admission to probation vs the protected queue and tail demotion, see `internal/policy/chain.go`). "+
			"Hit ratio: order-only, one cache of %d blocks. Goodput: the timed cluster (%s), highest arrival rate with ≥ 90%% of requests within the SLO, "+
			"found by bisection (2%% steps). Flat lines: LRU and the best baseline in the same setting. "+
			"p = 1 is not the worst case: a predictor that is always wrong is a consistent (inverted) rule, whereas p near 0.5 is a coin flip.",
			r.Setup.Subject, NoiseSpec(r.Setup.Subject, 0.2, r.Setup.NoiseSeed), r.Setup.NoiseCapacity, r.Setup.SimSummary)}
	tab := report.Table{Caption: "Token hit ratio and goodput vs injected prediction error",
		Columns: []string{"trace", "p", "token hit (%)", "vs p = 0", "vs lru", "vs best", "goodput (req/s)", "goodput / lru", "goodput / best", "sim token hit at trace rate (%)"}}
	refs := report.Table{Caption: "References in the same settings",
		Columns: []string{"trace", "policy", "token hit (%)", "goodput (req/s)", "rate multiplier", "sim token hit at trace rate (%)", "sim mean TTFT (s)"}}
	for _, t := range r.noiseTraces() {
		lru := r.ref(t, Reference)
		bestHit, bestGood := r.bestRef(t)
		var p0 *NoiseRow
		hit := &plot.Chart{Title: t + ": token hit ratio vs prediction error (" + strconv.Itoa(r.Setup.NoiseCapacity) + " blocks)",
			XLabel: "injected prediction error p", YLabel: "token hit ratio (%)", YMin: new(0.0)}
		good := &plot.Chart{Title: t + ": goodput vs prediction error", XLabel: "injected prediction error p", YLabel: "goodput (req/s)", YMin: new(0.0)}
		sHit := plot.Series{Name: r.Setup.Subject + "(perr=p)"}
		sGood := plot.Series{Name: r.Setup.Subject + "(perr=p)"}
		for i := range r.Noise {
			n := &r.Noise[i]
			if n.Trace != t {
				continue
			}
			if p0 == nil && n.P == 0 {
				p0 = n
			}
			sHit.X, sHit.Y = append(sHit.X, n.P), append(sHit.Y, 100*n.TokenHitRatio)
			row := []string{t, fixed2(n.P), pct2(n.TokenHitRatio), "–", "–", "–", "–", "–", "–", "–"}
			if p0 != nil {
				row[3] = points(n.TokenHitRatio - p0.TokenHitRatio)
			}
			if lru != nil {
				row[4] = points(n.TokenHitRatio - lru.TokenHitRatio)
			}
			if bestHit != nil {
				row[5] = points(n.TokenHitRatio - bestHit.TokenHitRatio)
			}
			if g := n.Goodput; g != nil {
				sGood.X, sGood.Y = append(sGood.X, n.P), append(sGood.Y, g.ReqPerSec)
				row[6], row[9] = fixed2(g.ReqPerSec), pct2(g.TokenHitRatio)
				if lru != nil && lru.Goodput != nil && lru.Goodput.ReqPerSec > 0 {
					row[7] = ratio(g.ReqPerSec / lru.Goodput.ReqPerSec)
				}
				if bestGood != nil && bestGood.Goodput.ReqPerSec > 0 {
					row[8] = ratio(g.ReqPerSec / bestGood.Goodput.ReqPerSec)
				}
			}
			tab.Rows = append(tab.Rows, row)
		}
		hit.Series = []plot.Series{sHit}
		hit.HLines = refLines(lru, bestHit, func(f *NoiseRef) float64 { return 100 * f.TokenHitRatio })
		sec.Figures = append(sec.Figures, report.Figure{File: "policy_noise_hit_" + fileSafe(t) + ".svg",
			Caption: t + ": token hit ratio vs injected prediction error, with LRU and the best baseline", Render: hit.LineSVG})
		if len(sGood.X) > 0 {
			good.Series = []plot.Series{sGood}
			if lru != nil && lru.Goodput == nil {
				lru = nil
			}
			good.HLines = refLines(lru, bestGood, func(f *NoiseRef) float64 { return f.Goodput.ReqPerSec })
			sec.Figures = append(sec.Figures, report.Figure{File: "policy_noise_goodput_" + fileSafe(t) + ".svg",
				Caption: t + ": goodput vs injected prediction error, with LRU and the best baseline", Render: good.LineSVG})
		}
		for _, f := range r.Refs {
			if f.Trace != t {
				continue
			}
			row := []string{t, f.Policy, pct2(f.TokenHitRatio), "–", "–", "–", "–"}
			if g := f.Goodput; g != nil {
				row[3], row[4], row[5], row[6] = fixed2(g.ReqPerSec), fixed2(g.Multiplier), pct2(g.TokenHitRatio), fixed2(g.TTFTMean)
			}
			refs.Rows = append(refs.Rows, row)
		}
	}
	sec.Tables = []report.Table{tab, refs}
	return sec
}

// refLines returns the flat reference lines of a noise plot: LRU and the
// best baseline, or one line when LRU is the best (ties go to LRU).
func refLines(lru, best *NoiseRef, value func(*NoiseRef) float64) []plot.HLine {
	var out []plot.HLine
	switch {
	case best != nil && lru != nil && (best.Policy == Reference || value(best) == value(lru)):
		return []plot.HLine{{Y: value(lru), Label: "lru = best baseline"}}
	case lru != nil:
		out = append(out, plot.HLine{Y: value(lru), Label: "lru"})
	}
	if best != nil {
		out = append(out, plot.HLine{Y: value(best), Label: "best baseline (" + best.Policy + ")"})
	}
	return out
}

func (r *Result) tenantSection() report.Section {
	tr := r.Tenants
	var labels []string
	for i, n := range tr.Tenants {
		labels = append(labels, fmt.Sprintf("%c = %s (%d keys)", 'A'+i, n, tr.Keys[i]))
	}
	sec := report.Section{Title: "Robustness (b): two tenants sharing one pool",
		Text: fmt.Sprintf("Tenants %s share one cache of %d blocks (order-only). "+
			"Time alignment: each tenant's trace is shifted to start at 0 and cut to the shortest span (%s s), so both tenants are active, "+
			"each at its own arrival rate, for the whole merged run; ties in time go to tenant A first. "+
			"Key spaces are disjoint by construction: every (tenant, hash id) pair is renumbered to its own key. "+
			"Each tenant is also replayed alone with half the pool (%d blocks, a static partition) and with all of it. "+
			"Fairness is Jain's index of the tenants' shared hit ratios divided by their alone-with-half hit ratios "+
			"(1 = both get the same share of what a fair static split would give them).",
			strings.Join(labels, ", "), tr.Capacity, strconv.FormatFloat(float64(tr.WindowMs)/1000, 'f', 0, 64), tr.Capacity/2)}
	tab := report.Table{Caption: "Token hit ratio per tenant: shared vs alone", Columns: []string{"policy", "tenant", "requests",
		"shared (%)", "alone, half pool (%)", "alone, whole pool (%)", "shared / alone-half"}}
	fair := report.Table{Caption: "Whole-pool hit ratio and fairness", Columns: []string{"policy", "pool token hit (%)", "Jain's index"}}
	bars := &plot.BarChart{Title: "Shared hit ratio / alone-with-half-the-pool hit ratio", YLabel: "normalised token hit ratio", YMin: new(0.0),
		HLines: []plot.HLine{{Y: 1, Label: "static half split"}}}
	series := make([]plot.BarSeries, len(tr.Tenants))
	for i, n := range tr.Tenants {
		series[i].Name = fmt.Sprintf("%c: %s", 'A'+i, n)
	}
	for _, f := range tr.Fairness {
		bars.Groups = append(bars.Groups, f.Policy)
		jain := "n/a"
		if f.JainDefined {
			jain = strconv.FormatFloat(f.Jain, 'f', 3, 64)
		}
		fair.Rows = append(fair.Rows, []string{f.Policy, pct2(f.SharedTokenHitRatio), jain})
		for i, n := range tr.Tenants {
			v := math.NaN()
			for _, row := range tr.Rows {
				if row.Policy != f.Policy || row.Tenant != n {
					continue
				}
				norm := "n/a"
				if x, ok := row.Normalised(); ok {
					v, norm = x, strconv.FormatFloat(x, 'f', 3, 64)
				}
				tab.Rows = append(tab.Rows, []string{row.Policy, row.Label + ": " + row.Tenant, strconv.Itoa(row.Shared.Requests),
					pct2(row.Shared.TokenHitRatio()), pct2(row.SoloHalf.TokenHitRatio()), pct2(row.SoloWhole.TokenHitRatio()), norm})
			}
			series[i].Values = append(series[i].Values, v)
		}
	}
	bars.Series = series
	sec.Figures = []report.Figure{{File: "policy_tenants.svg", Caption: "Each tenant's shared hit ratio relative to alone with half the pool, per policy", Render: bars.SVG}}
	sec.Tables = []report.Table{tab, fair}
	return sec
}

func (r *Result) unseenSection() report.Section {
	sec := report.Section{Title: "Robustness (c): capacities and node counts not used for tuning",
		Text: fmt.Sprintf("Order-only at capacities kvchain was not tuned at (%s blocks), same columns as the gap table. "+
			"Then the timed cluster at node counts other than Fig 10's %d (same per-node RAM), global pool with cache-aware routing: "+
			"goodput, and the token hit ratio and mean TTFT at the trace's own rate.",
			joinInts(r.Setup.UnseenCapacities), r.Setup.Sim.Instances)}
	sec.Tables = append(sec.Tables,
		r.gapTable("Published traces, unseen capacities", func(g GapRow) bool { return !g.Generated && g.Unseen }))
	if slices.ContainsFunc(r.Gap, func(g GapRow) bool { return g.Generated && g.Unseen }) {
		sec.Tables = append(sec.Tables, r.gapTable("Generated traces, unseen capacities (whole traces)", func(g GapRow) bool {
			return g.Generated && g.Unseen && g.Part == PartWhole
		}))
	}
	if len(r.Nodes) == 0 {
		sec.Text += "\n\nThe timed node-count runs were skipped."
		return sec
	}
	tab := report.Table{Caption: "Timed cluster by node count", Columns: []string{"trace", "nodes", "RAM blocks per node", "policy",
		"goodput (req/s)", "rate multiplier", "vs lru", "token hit at trace rate (%)", "mean TTFT at trace rate (s)"}}
	var traces []string
	for _, n := range r.Nodes {
		if !slices.Contains(traces, n.Trace) {
			traces = append(traces, n.Trace)
		}
	}
	for _, t := range traces {
		chart := &plot.Chart{Title: t + ": goodput vs node count", XLabel: "prefill nodes", YLabel: "goodput (req/s)", YMin: new(0.0)}
		var policies []string
		for _, n := range r.Nodes {
			if n.Trace == t && !slices.Contains(policies, n.Policy) {
				policies = append(policies, n.Policy)
			}
		}
		for _, p := range policies {
			type pt struct{ x, y float64 }
			var pts []pt
			for _, n := range r.Nodes {
				if n.Trace == t && n.Policy == p {
					pts = append(pts, pt{float64(n.Nodes), n.Goodput.ReqPerSec})
				}
			}
			if f := r.ref(t, p); f != nil && f.Goodput != nil { // the Fig 10 cluster itself
				pts = append(pts, pt{float64(r.Setup.Sim.Instances), f.Goodput.ReqPerSec})
			}
			slices.SortFunc(pts, func(a, b pt) int { return int(a.x - b.x) })
			s := plot.Series{Name: p}
			for _, q := range pts {
				s.X, s.Y = append(s.X, q.x), append(s.Y, q.y)
			}
			chart.Series = append(chart.Series, s)
		}
		sec.Figures = append(sec.Figures, report.Figure{File: "policy_nodes_" + fileSafe(t) + ".svg",
			Caption: t + ": goodput vs node count per policy (the middle point, where present, is the Fig 10 cluster of robustness (a))", Render: chart.LineSVG})
		for _, n := range r.Nodes {
			if n.Trace != t {
				continue
			}
			vs := "–"
			for _, m := range r.Nodes {
				if m.Trace == t && m.Nodes == n.Nodes && m.Policy == Reference && m.Goodput.ReqPerSec > 0 {
					vs = ratio(n.Goodput.ReqPerSec / m.Goodput.ReqPerSec)
				}
			}
			tab.Rows = append(tab.Rows, []string{t, strconv.Itoa(n.Nodes), strconv.Itoa(n.RAMBlocks), n.Policy, fixed2(n.Goodput.ReqPerSec),
				fixed2(n.Goodput.Multiplier), vs, pct2(n.Goodput.TokenHitRatio), fixed2(n.Goodput.TTFTMean)})
		}
	}
	sec.Tables = append(sec.Tables, tab)
	return sec
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " / ")
}

// Write writes the report directory: index.html, report.md, the figures,
// summary.json (the whole result) and one CSV per experiment: gap.csv,
// noise.csv, tenants.csv (when run) and nodes.csv.
func Write(dir string, r *Result) error {
	if err := report.Write(dir, r.Report()); err != nil {
		return err
	}
	if err := report.WriteJSON(filepath.Join(dir, "summary.json"), r); err != nil {
		return err
	}
	policies := r.policyColumns()
	hdr := append([]string{"trace", "generated", "part", "capacity", "unseen_capacity"}, policies...)
	hdr = append(hdr, "gap_closed", "vs_best", "best_baseline")
	var rows [][]string
	for _, g := range r.Gap {
		row := []string{g.Trace, strconv.FormatBool(g.Generated), g.Part, strconv.Itoa(g.Capacity), strconv.FormatBool(g.Unseen)}
		for _, p := range policies {
			row = append(row, f6(g.TokenHitRatio[p]))
		}
		gap := ""
		if g.GapDefined {
			gap = f6(g.GapClosed)
		}
		rows = append(rows, append(row, gap, f6(g.VsBest), g.BestPolicy))
	}
	if err := report.WriteCSV(filepath.Join(dir, "gap.csv"), hdr, rows); err != nil {
		return err
	}
	rows = nil
	goodCells := func(g *Goodput) []string {
		if g == nil {
			return []string{"", "", "", ""}
		}
		return []string{f6(g.ReqPerSec), f6(g.Multiplier), f6(g.TokenHitRatio), f6(g.TTFTMean)}
	}
	for _, n := range r.Noise {
		rows = append(rows, append([]string{n.Trace, n.Spec, f6(n.P), f6(n.TokenHitRatio)}, goodCells(n.Goodput)...))
	}
	for _, f := range r.Refs {
		rows = append(rows, append([]string{f.Trace, f.Policy, "", f6(f.TokenHitRatio)}, goodCells(f.Goodput)...))
	}
	if err := report.WriteCSV(filepath.Join(dir, "noise.csv"), []string{"trace", "policy", "p", "token_hit_ratio",
		"goodput_req_per_s", "goodput_rate_multiplier", "sim_token_hit_ratio", "sim_ttft_mean_s"}, rows); err != nil {
		return err
	}
	if tr := r.Tenants; tr != nil {
		rows = nil
		for _, t := range tr.Rows {
			norm := ""
			if v, ok := t.Normalised(); ok {
				norm = f6(v)
			}
			rows = append(rows, []string{t.Policy, t.Label, t.Tenant, strconv.Itoa(t.Shared.Requests), f6(t.Shared.TokenHitRatio()),
				f6(t.SoloHalf.TokenHitRatio()), f6(t.SoloWhole.TokenHitRatio()), norm})
		}
		if err := report.WriteCSV(filepath.Join(dir, "tenants.csv"), []string{"policy", "label", "tenant", "requests",
			"shared_token_hit_ratio", "alone_half_token_hit_ratio", "alone_whole_token_hit_ratio", "normalised"}, rows); err != nil {
			return err
		}
	}
	rows = nil
	for _, n := range r.Nodes {
		rows = append(rows, append([]string{n.Trace, strconv.Itoa(n.Nodes), strconv.Itoa(n.RAMBlocks), n.Policy}, goodCells(&n.Goodput)...))
	}
	return report.WriteCSV(filepath.Join(dir, "nodes.csv"), []string{"trace", "nodes", "ram_blocks", "policy",
		"goodput_req_per_s", "goodput_rate_multiplier", "sim_token_hit_ratio", "sim_ttft_mean_s"}, rows)
}

// Markdown writes the headline tables (targets, the published traces' gap
// table at the tuned capacities, fairness) as Markdown, for the terminal
// and the README.
func (r *Result) Markdown(w io.Writer) error {
	var b strings.Builder
	tables := []report.Table{r.TargetsTable(),
		r.gapTable("Published traces, tuned capacities", func(g GapRow) bool { return !g.Generated && !g.Unseen })}
	if r.Tenants != nil {
		tables = append(tables, r.tenantSection().Tables...)
	}
	for i, t := range tables {
		if i > 0 {
			b.WriteString("\n")
		}
		writeTableMD(&b, t)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTableMD writes t as a GitHub pipe table with its caption in bold.
func writeTableMD(b *strings.Builder, t report.Table) {
	fmt.Fprintf(b, "**%s**\n\n", t.Caption)
	_ = report.WriteMarkdownTable(b, t) // a strings.Builder does not fail
}
