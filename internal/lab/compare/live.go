package compare

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/lab/plot"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/report"
	"github.com/kvpool/kvpool/internal/lab/sim"
)

// LiveRow is one arm run live (on a real local cluster) and in the
// simulator, on the same subsample of a trace and the same configuration.
type LiveRow struct {
	Trace string `json:"trace"`
	Arm   Arm    `json:"arm"`
	// Sim and Live are the two runs' summaries (model seconds).
	Sim  sim.Summary    `json:"sim"`
	Live replay.Summary `json:"live"`
	// SimTTFTs and LiveTTFTs are the served requests' TTFTs (model
	// seconds), ascending.
	SimTTFTs  []float64 `json:"-"`
	LiveTTFTs []float64 `json:"-"`
	// Verdict is the live/sim validation's verdict on the row (PASS,
	// FAIL or INCONCLUSIVE, or "interrupted" for a live run cut short;
	// package validate), KeptUp whether the live
	// run kept up with its arrival schedule by the validation's
	// definition, and Reason why not.
	Verdict string `json:"verdict"`
	KeptUp  bool   `json:"kept_up"`
	Reason  string `json:"reason,omitempty"`
	// Net is the live run's network mode ("" when the LiveFunc's own).
	Net replay.NetMode `json:"net,omitempty"`
}

// KeptUpText explains the "kept up" column of the live tables: what it
// measures and why its bounds are what they are. maxLag is the
// replayer's bound on the dispatch lag p99 (replay.MaxLagP99) and speed
// the live runs' time compression.
func KeptUpText(maxLag time.Duration, speed float64) string {
	ms := 1e3 * maxLag.Seconds()
	return fmt.Sprintf("\"Kept up\" says whether the machine ran the live arm on its schedule, so that its TTFTs measure the store "+
		"and not the machine's lateness: the dispatcher's lag p99 (how late, in live time, requests were started after their "+
		"scheduled arrivals) at most %g ms, one heartbeat of the replay's cluster (the index already shows a stored block up to "+
		"a heartbeat late), and the requests' mean lateness (dispatch lag plus prefill timers waking late) at most "+
		"a quarter of the mean-TTFT tolerance in model seconds. A request started L late is L × speed late in model time: "+
		"%g ms at speed %g is %.2g model s on the slowest 1%% of requests. An arm that did not keep up has its mean TTFT "+
		"(and, past the lag bound, a disagreeing hit ratio) reported but not judged: it is INCONCLUSIVE, not FAIL; rerun it at a lower --speed.",
		ms, ms, speed, ms*speed/1e3)
}

// LiveFunc runs arm a on trace t live and in the simulator. It is
// injected by the caller (kvpool compare --live sets one built on package
// validate) so that this package stays free of processes and real time:
// it chooses the subsample, starts and stops the cluster, and fills every
// field of the row but Trace and Arm.
//
// net is the live run's network mode; "" leaves the LiveFunc's own.
type LiveFunc func(ctx context.Context, t Trace, a Arm, net replay.NetMode) (LiveRow, error)

// LiveArms returns the arms run live by default: recompute, local with
// round-robin and with cache-aware routing, and global cache-aware.
func LiveArms() []Arm {
	nic := float64(sim.DefaultNICGbps)
	return []Arm{
		{"recompute", sim.ModeRecompute, sim.RoutingLeastLoaded, nic},
		{"local rr", sim.ModeLocal, sim.RoutingRoundRobin, nic},
		{"local cache-aware", sim.ModeLocal, sim.RoutingCacheAware, nic},
		{"global cache-aware", sim.ModeGlobal, sim.RoutingCacheAware, nic},
	}
}

// runLive runs every live arm on every trace, one at a time (a live run
// uses real time and the whole machine, so live runs never overlap).
func runLive(ctx context.Context, o Options, res *Result) error {
	arms := o.LiveArms
	if len(arms) == 0 {
		arms = LiveArms()
	}
	for _, t := range o.Traces {
		for _, a := range arms {
			if err := ctx.Err(); err != nil {
				return err
			}
			row, err := liveRow(ctx, o, t, a, "")
			if err != nil {
				return err
			}
			res.Live = append(res.Live, row)
		}
	}
	nets := o.LiveNets
	if len(nets) == 0 {
		nets = []replay.NetMode{""}
	}
	for _, t := range o.Traces {
		for _, bw := range o.LiveBandwidths {
			for _, net := range nets {
				if err := ctx.Err(); err != nil {
					return err
				}
				row, err := liveRow(ctx, o, t, sweepArm(bw), net)
				if err != nil {
					return err
				}
				res.LiveSweep = append(res.LiveSweep, row)
			}
		}
	}
	return nil
}

// sweepArm is the arm of the live Fig 13 sweep at nic Gbps: global mode,
// round-robin routing.
func sweepArm(nic float64) Arm {
	return Arm{fmt.Sprintf("global rr @%g Gbps", nic), sim.ModeGlobal, sim.RoutingRoundRobin, nic}
}

// liveRow runs arm a on trace t live with network net and reports it on
// o.Progress.
func liveRow(ctx context.Context, o Options, t Trace, a Arm, net replay.NetMode) (LiveRow, error) {
	row, err := o.Live(ctx, t, a, net)
	label := a.Name
	if net != "" {
		label += ", net " + string(net)
	}
	if err != nil {
		return row, fmt.Errorf("%s: live %s: %w", t.Name, label, err)
	}
	row.Trace, row.Arm, row.Net = t.Name, a, net
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s: live %s: token hit %s live / %s sim, mean TTFT %s s live / %s s sim\n",
			t.Name, label, pct(row.Live.TokenHitRatio), pct(row.Sim.TokenHitRatio),
			secs(row.Live.TTFTMean), secs(row.Sim.TTFTMean))
	}
	return row, nil
}

// LiveSection lays out live-vs-simulated rows: a table (LiveTable) and
// bar charts of the token hit ratio and the mean TTFT, live next to
// simulated. filePrefix keeps its figure names unique in a report.
func LiveSection(rows []LiveRow, filePrefix string) report.Section {
	sec := report.Section{Title: "Live vs simulated",
		Text: "Each arm replayed live on a fresh local cluster (real processes, real TCP, real bytes, every cache hit read and verified " +
			"before it is reused) under the scale model, and simulated on the same requests and configuration. Times are model seconds. " +
			"Validation bounds: token hit ratio within 2 points, mean TTFT within 20%, 0 wrong blocks. " +
			"Verified hits are the planned hits read and checked (key, checksum and, with full verification, every byte against " +
			"the block's regenerated payload), local ones too; wrong blocks are those that failed, never reused. " +
			"Live bytes read and written are the real payload bytes the replayer read from (every hit, local and remote) and wrote to the nodes; " +
			"sim network bytes are the simulator's transfers between instances in model units (KV-cache bytes, not payload bytes).\n\n" +
			KeptUpText(replay.MaxLagP99, liveSpeed(rows))}
	hits := &plot.BarChart{Title: "Token hit ratio: live vs simulated", YLabel: "token hit ratio (%)", YMin: new(0.0),
		Format: pctFormat}
	ttft := &plot.BarChart{Title: "Mean TTFT: live vs simulated", YLabel: "mean TTFT (model s)", YMin: new(0.0), Format: secs}
	hs, hl := plot.BarSeries{Name: "sim"}, plot.BarSeries{Name: "live"}
	ts, tl := plot.BarSeries{Name: "sim"}, plot.BarSeries{Name: "live"}
	multi := !oneTrace(rows)
	for _, r := range rows {
		s, l := r.Sim, r.Live
		group := r.Arm.Name
		if multi {
			group = r.Trace + " " + group
		}
		hits.Groups = append(hits.Groups, group)
		ttft.Groups = append(ttft.Groups, group)
		hs.Values, hl.Values = append(hs.Values, 100*s.TokenHitRatio), append(hl.Values, 100*l.TokenHitRatio)
		ts.Values, tl.Values = append(ts.Values, s.TTFTMean), append(tl.Values, l.TTFTMean)
	}
	hits.Series = []plot.BarSeries{hs, hl}
	ttft.Series = []plot.BarSeries{ts, tl}
	if len(rows) > 0 {
		sec.Figures = []report.Figure{
			{File: filePrefix + "live_hit_ratio.svg", Caption: "Token hit ratio per arm, live vs simulated", Render: hits.SVG},
			{File: filePrefix + "live_ttft.svg", Caption: "Mean TTFT per arm (model seconds), live vs simulated", Render: ttft.SVG},
		}
	}
	sec.Tables = []report.Table{LiveTable(rows)}
	return sec
}

// liveSpeed is the live runs' speed (the first row's; 0 with no rows).
func liveSpeed(rows []LiveRow) float64 {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Live.Speed
}

// keptUp is row r's "kept up" cell: yes or no, and partial when the run
// was interrupted.
func keptUp(r LiveRow) string {
	kept := "yes"
	if !r.KeptUp {
		kept = "no"
	}
	if r.Live.Partial {
		kept += " (partial)"
	}
	return kept
}

// oneTrace reports whether rows (at least one) all come from one trace.
func oneTrace(rows []LiveRow) bool {
	for _, r := range rows {
		if r.Trace != rows[0].Trace {
			return false
		}
	}
	return len(rows) > 0
}

// Live table column names, shared by the report and the terminal table
// so that each metric has one name everywhere.
const (
	colVerifiedHits     = "verified hits"
	colLiveBytesRead    = "live bytes read"
	colLiveBytesWritten = "live bytes written"
	colSimNetBytes      = "sim network bytes (model)"
)

// LiveTable is the live-vs-simulated table, one row per arm: token hit
// ratio, mean and p90 TTFT simulated and live, verified hits and wrong
// blocks, the live
// payload bytes read and written, the simulator's network bytes, the
// dispatch lag p99, whether the machine kept up and the verdict; the
// trace column is
// left out when every row has the same trace. Byte counts are
// humanised (report.Bytes); WriteLiveCSV keeps them exact.
func LiveTable(rows []LiveRow) report.Table {
	tab := liveTable(rows)
	if oneTrace(rows) {
		// One trace (the demo): name it in the caption, not in every row,
		// so that the table fits a 1280 px window.
		tab = tab.Select(tab.Columns[1:]...)
		tab.Caption = "Live vs simulated on " + rows[0].Trace + ", per arm (model seconds)"
	}
	return tab
}

// liveTable is LiveTable with the trace column always present.
func liveTable(rows []LiveRow) report.Table {
	tab := report.Table{Caption: "Live vs simulated, per arm (model seconds)",
		Columns: []string{"trace", "arm", "requests", "sim token hit", "live token hit", "sim mean TTFT (s)", "live mean TTFT (s)",
			"sim p90 TTFT (s)", "live p90 TTFT (s)", colVerifiedHits, "wrong blocks", colLiveBytesRead, colLiveBytesWritten, colSimNetBytes,
			"lag p99 (ms)", "kept up", "verdict"}}
	for _, r := range rows {
		s, l := r.Sim, r.Live
		tab.Rows = append(tab.Rows, []string{r.Trace, r.Arm.Name, strconv.Itoa(s.Requests), pct(s.TokenHitRatio), pct(l.TokenHitRatio),
			secs(s.TTFTMean), secs(l.TTFTMean), secs(s.TTFTP90), secs(l.TTFTP90), strconv.FormatInt(l.VerifiedHits, 10),
			strconv.FormatInt(l.WrongBlocks, 10), report.Bytes(l.LiveBytesRead), report.Bytes(l.LiveBytesStored), report.Bytes(s.BytesNet),
			fixed(1e3*l.LagP99, 1), keptUp(r), r.Verdict})
	}
	return tab
}

// LiveCDFSection draws one TTFT CDF per arm, live and simulated.
func LiveCDFSection(rows []LiveRow, filePrefix string) report.Section {
	sec := report.Section{Title: "TTFT distribution per arm, live vs simulated"}
	for _, r := range rows {
		chart := &plot.Chart{Title: r.Trace + ", " + r.Arm.Name + ": TTFT CDF", XLabel: "TTFT (model s)",
			YLabel: "share of requests", XLog: true, YMin: new(0.0), YMax: new(1.0)}
		var zeros []string
		for _, side := range []struct {
			name  string
			ttfts []float64
		}{{"sim", r.SimTTFTs}, {"live", r.LiveTTFTs}} {
			if len(side.ttfts) == 0 {
				continue
			}
			chart.Series = append(chart.Series, cdfSeries(side.name, side.ttfts))
			if z := zeroTTFTs(side.ttfts); z > 0 {
				zeros = append(zeros, fmt.Sprintf("%s %d of %d", side.name, z, len(side.ttfts)))
			}
		}
		if len(chart.Series) == 0 {
			continue
		}
		sec.Figures = append(sec.Figures, report.Figure{File: filePrefix + "live_cdf_" + fileSafe(r.Trace+"_"+r.Arm.Name) + ".svg",
			Caption: r.Trace + ", " + r.Arm.Name + ": TTFT CDF, live vs simulated" + zeroNote(zeros), Render: chart.StepSVG})
	}
	return sec
}

// WriteLiveCSV writes one row per live arm: the simulated and live
// figures side by side.
func WriteLiveCSV(path string, rows []LiveRow) error {
	hdr := []string{"trace", "arm", "mode", "routing", "requests", "sim_token_hit_ratio", "live_token_hit_ratio",
		"sim_ttft_mean_s", "live_ttft_mean_s", "sim_ttft_p90_s", "live_ttft_p90_s", "verified_hits", "wrong_blocks", "corrupt_blocks",
		"sim_bytes_net", "live_bytes_read", "live_bytes_read_remote", "live_bytes_stored", "lag_p99_s", "kept_up", "partial",
		"verdict", "live_seconds"}
	var out [][]string
	for _, r := range rows {
		s, l := r.Sim, r.Live
		out = append(out, []string{r.Trace, r.Arm.Name, string(r.Arm.Mode), string(r.Arm.Routing), strconv.Itoa(s.Requests),
			f6(s.TokenHitRatio), f6(l.TokenHitRatio), f6(s.TTFTMean), f6(l.TTFTMean), f6(s.TTFTP90), f6(l.TTFTP90),
			strconv.FormatInt(l.VerifiedHits, 10), strconv.FormatInt(l.WrongBlocks, 10), strconv.FormatInt(l.CorruptBlocks, 10),
			strconv.FormatInt(s.BytesNet, 10), strconv.FormatInt(l.LiveBytesRead, 10), strconv.FormatInt(l.LiveBytesReadRemote, 10),
			strconv.FormatInt(l.LiveBytesStored, 10), f6(l.LagP99), strconv.FormatBool(r.KeptUp), strconv.FormatBool(l.Partial),
			r.Verdict, f6(l.LiveSeconds)})
	}
	return report.WriteCSV(path, hdr, out)
}

// LiveMarkdown writes the live-vs-simulated table as Markdown for the
// terminal: LiveTable's columns, with the same names, but the request
// count and the simulator's network bytes.
func LiveMarkdown(b *strings.Builder, rows []LiveRow) {
	t := liveTable(rows)
	_ = report.WriteMarkdownTable(b, t.Select("trace", "arm", "sim token hit", "live token hit", "sim mean TTFT (s)",
		"live mean TTFT (s)", "sim p90 TTFT (s)", "live p90 TTFT (s)", colVerifiedHits, "wrong blocks", colLiveBytesRead, colLiveBytesWritten,
		"lag p99 (ms)", "kept up", "verdict")) // a strings.Builder does not fail
}

// RunReport is kvpool compare --sim and --live: it runs o (Run), writes
// the report directory dir (Write), the Markdown summary and the report's
// path to out, and fails when a live arm received a wrong block.
func RunReport(ctx context.Context, o Options, dir string, out io.Writer) (*Result, error) {
	start := time.Now()
	res, err := Run(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := Write(dir, res); err != nil {
		return nil, err
	}
	if err := res.Markdown(out); err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(out, "\nreport: %s (%.1fs)\n", filepath.Join(dir, "index.html"), time.Since(start).Seconds()); err != nil {
		return nil, fmt.Errorf("compare: write the report's path: %w", err)
	}
	for _, l := range res.Live {
		if l.Live.WrongBlocks > 0 {
			return res, fmt.Errorf("compare: live %s on %s received %d wrong blocks", l.Arm.Name, l.Trace, l.Live.WrongBlocks)
		}
	}
	return res, nil
}
