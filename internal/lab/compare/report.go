package compare

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

// Published anchors from Mooncake (FAST'25), keyed by trace name. They are
// printed beside our figures; docs/design.md, "Published anchors", lists
// their sources.
type anchors struct {
	fig9At3M     float64 // share of the maximum hit ratio reached by a 3M-token cache
	fig10Local   float64 // local token hit ratio, 10 × 3M tokens
	fig10Global  float64 // global token hit ratio
	fig10Prefill float64 // global/local prefill time per request
}

func paper(trace string) (anchors, bool) {
	switch trace {
	case "conversation":
		return anchors{0.41, 0.168, 0.373, 0.76}, true
	case "synthetic":
		return anchors{0.46, 0.263, 0.621, 0.52}, true
	}
	return anchors{}, false
}

// Fig 5 of the paper: conversation trace, average TTFT by scheduler.
var fig5Paper = map[string]float64{
	"local rr":           19.65, // "random"
	"local least-loaded": 5.27,  // "load balancing"
	"local cache-aware":  3.58,
	"global cache-aware": 3.07,
}

// Fig5Arms names the arms of the scheduler comparison, in the paper's order.
var fig5Arms = []string{"local rr", "local least-loaded", "local cache-aware", "global cache-aware"}

// Number formats of the tables: one per kind of quantity, so a column
// never mixes two (report.CheckNumberFormats).
func pct(v float64) string  { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }
func secs(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// perSec formats a rate (requests per second, rate multipliers) with two
// decimals.
func perSec(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// fixed formats v with dec decimals.
func fixed(v float64, dec int) string { return strconv.FormatFloat(v, 'f', dec, 64) }

// pctFormat labels a bar chart's values given in percent.
func pctFormat(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "%" }

// num formats v with four significant digits, never in exponent form for
// the magnitudes a report shows.
func num(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// TraceName derives a short trace name from a file path:
// ".../conversation_trace.jsonl" → "conversation".
func TraceName(path string) string {
	b := filepath.Base(path)
	b = strings.TrimSuffix(b, filepath.Ext(b))
	return strings.TrimSuffix(b, "_trace")
}

// sim returns the row of arm name on trace t, or nil.
func (r *Result) sim(t, arm string) *SimRow {
	for i := range r.Sim {
		if r.Sim[i].Trace == t && r.Sim[i].Arm.Name == arm {
			return &r.Sim[i]
		}
	}
	return nil
}

// Fig10Row is the local-vs-global comparison of one trace and routing.
type Fig10Row struct {
	Trace, Routing              string
	Local, Global               float64 // token hit ratio
	PrefillLocal, PrefillGlobal float64
}

// Fig10 returns the local-vs-global rows (routing rr and cache-aware).
func (r *Result) Fig10() []Fig10Row {
	var rows []Fig10Row
	for _, t := range r.Names {
		for _, routing := range []string{"rr", "cache-aware"} {
			l, g := r.sim(t, "local "+routing), r.sim(t, "global "+routing)
			if l == nil || g == nil {
				continue
			}
			rows = append(rows, Fig10Row{t, routing, l.Summary.TokenHitRatio, g.Summary.TokenHitRatio,
				l.Summary.PrefillMean, g.Summary.PrefillMean})
		}
	}
	return rows
}

func ratioStr(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return timesShort(a / b)
}

// timesShort formats a ratio as "2.22×".
func timesShort(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }

// policyLabel names a policy in the Fig 9 figures and tables, marking
// ours.
func policyLabel(p string) string {
	if p == Ours {
		return p + " (ours)"
	}
	return p
}

// Report lays the result out as a report: one section per experiment.
func (r *Result) Report() *report.Report {
	rep := &report.Report{
		Title: "kvpool: recompute vs local vs global KV caching (model time)",
		Intro: fmt.Sprintf("Simulated with the %s cost model: %d prefill instances × %d RAM blocks (%s tokens) each, "+
			"NIC %g Gbps per instance unless stated, arrival rate × %g, TTFT SLO %g s. "+
			"Paper figures are Mooncake (FAST'25); see the notes where ours differ.",
			r.Options.Profile, r.Options.Instances, r.Options.RAMBlocks, num(float64(r.Options.RAMBlocks*512)),
			r.Options.NICGbps, r.Options.RateMultiplier, r.Options.SLOSeconds),
	}
	rep.Sections = append(rep.Sections, r.traceSection(), r.fig9Section(), r.fig10Section(),
		r.fig5Section(), r.cdfSection(), r.fig13Section())
	if len(r.Goodput) > 0 {
		rep.Sections = append(rep.Sections, r.goodputSection())
	}
	if len(r.Live) > 0 {
		rep.Sections = append(rep.Sections, LiveSection(r.Live, ""), LiveCDFSection(r.Live, ""))
	}
	if len(r.LiveSweep) > 0 {
		rep.Sections = append(rep.Sections, LiveSweepSection(r.LiveSweep))
	}
	return rep
}

func (r *Result) traceSection() report.Section {
	t := report.Table{Caption: "The traces", Columns: []string{"trace", "requests", "span (s)", "rate (req/s)",
		"avg in", "avg out", "unique blocks", "used once", "infinite-cache token hit ratio"}}
	for i, s := range r.Traces {
		t.Rows = append(t.Rows, []string{r.Names[i], strconv.Itoa(s.Requests), fixed(s.SpanSeconds, 0), perSec(s.RatePerSecond),
			fixed(s.Input.Mean, 0), fixed(s.Output.Mean, 0), strconv.FormatInt(s.UniqueBlocks, 10), pct(s.UsedOnceShare),
			pct(s.InfiniteCache.TokenRatio)})
	}
	return report.Section{Title: "Traces", Tables: []report.Table{t}}
}

func (r *Result) fig9Section() report.Section {
	sec := report.Section{Title: "Hit ratio vs capacity (Fig 9 analogue)",
		Text: "One global cache, request order only (`kvpool hitrate`). The dashed line is the infinite cache. " +
			"Belady is the offline optimum with bypass: the ceiling for any online policy. " +
			"kvchain (ours) is this project's policy (docs/policy.md)."}
	for ti, t := range r.Names {
		var policies []string
		var caps []int
		for _, h := range r.HitRatio {
			if h.Trace != t {
				continue
			}
			if !slices.Contains(policies, h.Policy) {
				policies = append(policies, h.Policy)
			}
			if !slices.Contains(caps, h.Capacity) {
				caps = append(caps, h.Capacity)
			}
		}
		chart := &plot.Chart{Title: t + ": token hit ratio vs cache capacity", XLabel: "capacity (blocks of 512 tokens)",
			YLabel: "token hit ratio (%)", XLog: true, YMin: new(0.0)}
		chart.HLines = []plot.HLine{{Y: 100 * r.Traces[ti].InfiniteCache.TokenRatio, Label: "infinite cache"}}
		tab := report.Table{Caption: t + ": token hit ratio by policy and capacity (blocks)", Columns: append([]string{"policy"}, intStrings(caps)...)}
		for _, p := range policies {
			s := plot.Series{Name: policyLabel(p), Dashed: p == "belady"}
			row := []string{policyLabel(p)}
			for _, h := range r.HitRatio {
				if h.Trace == t && h.Policy == p {
					s.X = append(s.X, float64(h.Capacity))
					s.Y = append(s.Y, 100*h.TokenHitRatio)
					row = append(row, pct(h.TokenHitRatio))
				}
			}
			chart.Series = append(chart.Series, s)
			tab.Rows = append(tab.Rows, row)
		}
		sec.Figures = append(sec.Figures, report.Figure{File: "fig9_" + fileSafe(t) + ".svg",
			Caption: t + ": token hit ratio vs capacity per policy", Render: chart.LineSVG})
		sec.Tables = append(sec.Tables, tab)
	}
	if at := r.fig9At3M(); len(at.Rows) > 0 {
		sec.Tables = append(sec.Tables, at)
	}
	return sec
}

// fig9At3M compares the share of the maximum hit ratio an LRU cache of 3M
// tokens reaches with the paper's.
func (r *Result) fig9At3M() report.Table {
	t := report.Table{Caption: "Share of the infinite-cache hit ratio reached by LRU at 5,859 blocks (3M tokens)",
		Columns: []string{"trace", "LRU @3M", "infinite", "share (ours)", "share (paper)"}}
	for ti, name := range r.Names {
		for _, h := range r.HitRatio {
			if h.Trace == name && h.Policy == "lru" && h.Capacity == 5859 {
				inf := r.Traces[ti].InfiniteCache.TokenRatio
				paperShare := "–"
				if a, ok := paper(name); ok {
					paperShare = pct(a.fig9At3M)
				}
				t.Rows = append(t.Rows, []string{name, pct(h.TokenHitRatio), pct(inf), ratioPct(h.TokenHitRatio, inf), paperShare})
			}
		}
	}
	return t
}

func ratioPct(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return pct(a / b)
}

func (r *Result) fig10Section() report.Section {
	sec := report.Section{Title: "Local vs global cache (Fig 10 analogue)",
		Text: fmt.Sprintf("%d instances × %d blocks of RAM each, LRU, timed simulator. Local: an instance reuses only its own cache. "+
			"Global: one index over all caches; a remote hit is fetched over the network and stored locally.", r.Options.Instances, r.Options.RAMBlocks)}
	bars := &plot.BarChart{Title: "Token hit ratio: local vs global", YLabel: "token hit ratio (%)", YMin: new(0.0),
		Format: pctFormat}
	local := plot.BarSeries{Name: "local"}
	global := plot.BarSeries{Name: "global"}
	tab := report.Table{Caption: "Token hit ratio and prefill time per request, local vs global",
		Columns: []string{"trace", "routing", "local", "global", "global/local", "paper local→global", "paper ratio",
			"prefill global/local", "paper prefill ratio"}}
	for _, row := range r.Fig10() {
		bars.Groups = append(bars.Groups, row.Trace+" "+row.Routing)
		local.Values = append(local.Values, 100*row.Local)
		global.Values = append(global.Values, 100*row.Global)
		pl, pr, pp := "–", "–", "–"
		if a, ok := paper(row.Trace); ok {
			pl, pr, pp = pct(a.fig10Local)+" → "+pct(a.fig10Global), ratioStr(a.fig10Global, a.fig10Local), timesShort(a.fig10Prefill)
		}
		tab.Rows = append(tab.Rows, []string{row.Trace, row.Routing, pct(row.Local), pct(row.Global),
			ratioStr(row.Global, row.Local), pl, pr, ratioStr(row.PrefillGlobal, row.PrefillLocal), pp})
	}
	bars.Series = []plot.BarSeries{local, global}
	sec.Figures = []report.Figure{{File: "fig10_local_vs_global.svg", Caption: "Token hit ratio, local vs global, per trace and routing", Render: bars.SVG}}
	sec.Tables = []report.Table{tab}
	return sec
}

func (r *Result) fig5Section() report.Section {
	sec := report.Section{Title: "Average TTFT by scheduler (Fig 5 analogue)",
		Text: "rr stands in for the paper's random scheduler, least-loaded for its load balancing."}
	cols := []string{"arm"}
	for _, t := range r.Names {
		cols = append(cols, t+" mean TTFT (s)", t+" p90 (s)")
	}
	cols = append(cols, "paper, conversation (s)")
	tab := report.Table{Caption: "Mean and p90 TTFT (model seconds) by scheduler", Columns: cols}
	for _, arm := range append([]string{"recompute"}, fig5Arms...) {
		row := []string{arm}
		for _, t := range r.Names {
			if s := r.sim(t, arm); s != nil {
				row = append(row, secs(s.Summary.TTFTMean), secs(s.Summary.TTFTP90))
			} else {
				row = append(row, "–", "–")
			}
		}
		if v, ok := fig5Paper[arm]; ok {
			row = append(row, secs(v))
		} else {
			row = append(row, "–")
		}
		tab.Rows = append(tab.Rows, row)
	}
	sec.Tables = []report.Table{tab}
	return sec
}

func (r *Result) cdfSection() report.Section {
	sec := report.Section{Title: "TTFT distribution per arm"}
	for _, t := range r.Names {
		chart := &plot.Chart{Title: t + ": TTFT CDF", XLabel: "TTFT (model s)", YLabel: "share of requests", XLog: true,
			YMin: new(0.0), YMax: new(1.0)}
		var zeros []string
		for _, arm := range []string{"recompute", "local cache-aware", "global cache-aware"} {
			s := r.sim(t, arm)
			if s == nil || len(s.TTFTs) == 0 {
				continue
			}
			chart.Series = append(chart.Series, cdfSeries(arm, s.TTFTs))
			if z := zeroTTFTs(s.TTFTs); z > 0 {
				zeros = append(zeros, fmt.Sprintf("%s %d of %d", arm, z, len(s.TTFTs)))
			}
		}
		sec.Figures = append(sec.Figures, report.Figure{File: "ttft_cdf_" + fileSafe(t) + ".svg",
			Caption: t + ": TTFT CDF per arm" + zeroNote(zeros), Render: chart.StepSVG})
	}
	return sec
}

// cdfPoints bounds a CDF plot's size: more points than this are thinned to
// evenly spaced quantiles (a 720-pixel-wide plot cannot show more).
const cdfPoints = 400

// cdfSeries is the empirical CDF of sorted (ascending) for a log x axis.
// A TTFT of 0 (every prompt token was a hit) has no place on a log axis:
// those requests are counted, so the curve starts at their share at the
// smallest positive TTFT, but not drawn, so the axis starts at the decade
// of the smallest positive TTFT instead of at an arbitrary floor.
func cdfSeries(name string, sorted []float64) plot.Series {
	s := plot.Series{Name: name}
	n := len(sorted)
	first := zeroTTFTs(sorted)
	step := max(1, (n-first)/cdfPoints)
	for i := first; i < n; i += step {
		s.X = append(s.X, sorted[i])
		s.Y = append(s.Y, float64(i+1)/float64(n))
	}
	if last := n - 1; last >= first && (last-first)%step != 0 {
		s.X = append(s.X, sorted[last])
		s.Y = append(s.Y, 1)
	}
	return s
}

// zeroTTFTs counts the leading non-positive values of sorted.
func zeroTTFTs(sorted []float64) int {
	n := 0
	for n < len(sorted) && sorted[n] <= 0 {
		n++
	}
	return n
}

// zeroNote is the caption note for CDFs with zero TTFTs.
func zeroNote(zeros []string) string {
	if len(zeros) == 0 {
		return ""
	}
	return " (TTFT 0, the whole prompt cached, cannot be drawn on a log axis; those requests start the curve above 0: " +
		strings.Join(zeros, ", ") + ")"
}

func (r *Result) fig13Section() report.Section {
	sec := report.Section{Title: "Average TTFT vs network bandwidth (Fig 13 analogue)",
		Text: "Global mode at each NIC bandwidth, with cache-aware and with round-robin routing; the dashed line is recompute (no cache). " +
			"Paper (synthetic trace): below 2 s above ~100 Gbps vs ≈2.6 s recompute; ≈5.1 s at 24 Gbps."}
	tab := report.Table{Caption: "Mean TTFT (model s) vs NIC bandwidth", Columns: []string{"trace", "routing"}}
	for _, bw := range r.Options.Bandwidths {
		tab.Columns = append(tab.Columns, num(bw)+" Gbps")
	}
	tab.Columns = append(tab.Columns, "recompute")
	for _, t := range r.Names {
		chart := &plot.Chart{Title: t + ": mean TTFT vs NIC bandwidth", XLabel: "NIC bandwidth per instance (Gbps)",
			YLabel: "mean TTFT (model s)", XLog: true, YMin: new(0.0)}
		recompute := "–"
		if rc := r.sim(t, "recompute"); rc != nil {
			chart.HLines = []plot.HLine{{Y: rc.Summary.TTFTMean, Label: "recompute"}}
			recompute = secs(rc.Summary.TTFTMean)
		}
		for _, routing := range bandwidthRoutings {
			s := plot.Series{Name: "global " + string(routing)}
			row := []string{t, string(routing)}
			for _, bw := range r.Options.Bandwidths {
				if sr := r.sim(t, bandwidthArm(routing, bw, r.Options.NICGbps).Name); sr != nil {
					s.X = append(s.X, bw)
					s.Y = append(s.Y, sr.Summary.TTFTMean)
					row = append(row, secs(sr.Summary.TTFTMean))
				} else {
					row = append(row, "–")
				}
			}
			chart.Series = append(chart.Series, s)
			tab.Rows = append(tab.Rows, append(row, recompute))
		}
		sec.Figures = append(sec.Figures, report.Figure{File: "fig13_" + fileSafe(t) + ".svg", Caption: t + ": mean TTFT vs bandwidth", Render: chart.LineSVG})
	}
	sec.Tables = []report.Table{tab}
	return sec
}

func (r *Result) goodputSection() report.Section {
	sec := report.Section{Title: "Goodput per arm",
		Text: fmt.Sprintf("Highest arrival rate (trace rate × multiplier, found by bisection) at which ≥ 90%% of requests meet the %g s TTFT SLO.", r.Options.SLOSeconds)}
	bars := &plot.BarChart{Title: "Goodput (requests/s within SLO)", YLabel: "requests/s", YMin: new(0.0)}
	tab := report.Table{Caption: "Goodput", Columns: []string{"trace", "arm", "rate multiplier", "goodput (req/s)", "vs recompute"}}
	arms := goodputArms(r.Options.NICGbps)
	series := make([]plot.BarSeries, len(arms))
	for i, a := range arms {
		series[i].Name = a.Name
	}
	for _, t := range r.Names {
		bars.Groups = append(bars.Groups, t)
		var base float64
		for i, a := range arms {
			v := 0.0
			for _, g := range r.Goodput {
				if g.Trace == t && g.Arm.Name == a.Name {
					v = g.ReqPerSec
					if a.Name == "recompute" {
						base = v
					}
					tab.Rows = append(tab.Rows, []string{t, a.Name, perSec(g.Multiplier), perSec(g.ReqPerSec), ratioStr(g.ReqPerSec, base)})
				}
			}
			series[i].Values = append(series[i].Values, v)
		}
	}
	bars.Series = series
	sec.Figures = []report.Figure{{File: "goodput.svg", Caption: "Goodput per arm and trace", Render: bars.SVG}}
	sec.Tables = []report.Table{tab}
	return sec
}

// Write writes the report directory: index.html, report.md, the figures,
// summary.json (the whole result), summary.csv (one row per timed run) and
// hitrate.csv (the Fig 9 sweep).
func Write(dir string, r *Result) error {
	if err := report.Write(dir, r.Report()); err != nil {
		return err
	}
	if err := report.WriteJSON(filepath.Join(dir, "summary.json"), r); err != nil {
		return err
	}
	hdr := []string{"trace", "arm", "mode", "routing", "nic_gbps", "token_hit_ratio", "block_hit_ratio",
		"ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "prefill_mean_s", "slo_attainment_10s",
		"slo_attainment_30s", "bytes_net", "bytes_ssd_read", "fetches_skipped"}
	var rows [][]string
	for _, s := range r.Sim {
		m := s.Summary
		rows = append(rows, []string{s.Trace, s.Arm.Name, string(s.Arm.Mode), string(s.Arm.Routing), num(s.Arm.NICGbps),
			f6(m.TokenHitRatio), f6(m.BlockHitRatio), f6(m.TTFTMean), f6(m.TTFTP50), f6(m.TTFTP90), f6(m.TTFTP99),
			f6(m.PrefillMean), f6(m.SLOAttainment10s), f6(m.SLOAttainment30s), strconv.FormatInt(m.BytesNet, 10),
			strconv.FormatInt(m.BytesSSDRead, 10), strconv.Itoa(m.FetchesSkipped)})
	}
	if err := report.WriteCSV(filepath.Join(dir, "summary.csv"), hdr, rows); err != nil {
		return err
	}
	if len(r.Live) > 0 {
		if err := WriteLiveCSV(filepath.Join(dir, "live.csv"), r.Live); err != nil {
			return err
		}
	}
	rows = rows[:0]
	for _, h := range r.HitRatio {
		rows = append(rows, []string{h.Trace, h.Policy, strconv.Itoa(h.Capacity), f6(h.TokenHitRatio), f6(h.BlockHitRatio)})
	}
	return report.WriteCSV(filepath.Join(dir, "hitrate.csv"), []string{"trace", "policy", "capacity", "token_hit_ratio", "block_hit_ratio"}, rows)
}

// Markdown writes the headline tables (Fig 10 and Fig 5) as Markdown, for
// the terminal and the README.
func (r *Result) Markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| trace | routing | local | global | global/local | paper |\n|---|---|---:|---:|---:|---|\n")
	for _, row := range r.Fig10() {
		p := "–"
		if a, ok := paper(row.Trace); ok {
			p = fmt.Sprintf("%s → %s (%s)", pct(a.fig10Local), pct(a.fig10Global), ratioStr(a.fig10Global, a.fig10Local))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.Trace, row.Routing, pct(row.Local), pct(row.Global), ratioStr(row.Global, row.Local), p)
	}
	b.WriteString("\n| trace | arm | token hit | mean TTFT (s) | p90 TTFT (s) | SLO 30 s |\n|---|---|---:|---:|---:|---:|\n")
	for _, s := range r.Sim {
		if strings.Contains(s.Arm.Name, "@") {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.Trace, s.Arm.Name, pct(s.Summary.TokenHitRatio),
			secs(s.Summary.TTFTMean), secs(s.Summary.TTFTP90), pct(s.Summary.SLOAttainment30s))
	}
	if len(r.Live) > 0 {
		b.WriteString("\n")
		LiveMarkdown(&b, r.Live)
	}
	if len(r.LiveSweep) > 0 {
		sec := LiveSweepSection(r.LiveSweep)
		b.WriteString("\n**" + sec.Title + "**\n\n")
		if err := report.WriteMarkdownTable(&b, sec.Tables[0]); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func f6(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

func intStrings(v []int) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = strconv.Itoa(x)
	}
	return out
}
