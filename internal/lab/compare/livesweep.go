package compare

import (
	"fmt"
	"slices"

	"github.com/kvpool/kvpool/internal/lab/plot"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/report"
)

// DefaultLiveBandwidths are the NIC bandwidths (Gbps) of the live Fig 13
// sweep when kvpool compare --live --net kernel is given none: from below
// to above where the simulator's round-robin curve flattens (≈100 Gbps,
// README "Fig 13 analogue"), a factor of two apart.
func DefaultLiveBandwidths() []float64 { return []float64{12, 24, 50, 100, 200} }

// LiveSweepSection lays out the live Fig 13 sweep (Result.LiveSweep): per
// trace, a chart of mean TTFT against NIC bandwidth, simulated and live in
// each network mode, with p90 beside, and a table with the live link rate
// each bandwidth became under the scale model.
func LiveSweepSection(rows []LiveRow) report.Section {
	sec := report.Section{Title: "Live TTFT vs link bandwidth (Fig 13 analogue, live)",
		Text: "Global mode with round-robin routing (where the network matters most) at each NIC bandwidth, on the live " +
			"subsample: simulated, live with the nodes' pacers (every process on one loopback), and live with kernel " +
			"links (each node and its prefill worker on a network host of its own, the link's rate enforced by the kernel (htb), " +
			"remote reads crossing two links and TCP's congestion control). The live link rate is the model bandwidth under " +
			"the scale model (bandwidth × payload / model block bytes × speed). Times are model seconds; a live run that " +
			"did not keep up is marked, and its TTFTs say more about the machine than about the network."}
	tab := report.Table{Caption: "Mean and p90 TTFT (model s) vs NIC bandwidth",
		Columns: []string{"trace", "NIC (Gbps)", "live link (MB/s)", "network", "sim mean", "live mean", "Δ", "sim p90", "live p90", "kept up", "wrong blocks"}}
	var traces []string
	for _, r := range rows {
		if !slices.Contains(traces, r.Trace) {
			traces = append(traces, r.Trace)
		}
	}
	for _, t := range traces {
		chart := &plot.Chart{Title: t + ": mean TTFT vs NIC bandwidth, live and simulated", XLabel: "NIC bandwidth per instance (Gbps)",
			YLabel: "TTFT (model s)", XLog: true, YMin: new(0.0)}
		simMean, simP90 := plot.Series{Name: "sim mean"}, plot.Series{Name: "sim p90"}
		byNet := map[replay.NetMode]*[2]plot.Series{}
		var nets []replay.NetMode
		for _, r := range rows {
			if r.Trace != t {
				continue
			}
			bw := r.Arm.NICGbps
			if !slices.Contains(simMean.X, bw) {
				simMean.X, simMean.Y = append(simMean.X, bw), append(simMean.Y, r.Sim.TTFTMean)
				simP90.X, simP90.Y = append(simP90.X, bw), append(simP90.Y, r.Sim.TTFTP90)
			}
			s := byNet[r.Net]
			if s == nil {
				name := netName(r.Net)
				s = &[2]plot.Series{{Name: "live " + name + " mean"}, {Name: "live " + name + " p90"}}
				byNet[r.Net] = s
				nets = append(nets, r.Net)
			}
			s[0].X, s[0].Y = append(s[0].X, bw), append(s[0].Y, r.Live.TTFTMean)
			s[1].X, s[1].Y = append(s[1].X, bw), append(s[1].Y, r.Live.TTFTP90)
			link, _ := replay.Options{NICGbps: bw, PayloadBytes: r.Live.PayloadBytes, Speed: r.Live.Speed}.PacerRates()
			kept := "yes"
			if !r.KeptUp {
				kept = "no"
			}
			tab.Rows = append(tab.Rows, []string{t, num(bw), fmt.Sprintf("%.1f", link/1e6), netName(r.Net),
				secs(r.Sim.TTFTMean), secs(r.Live.TTFTMean), relDelta(r.Live.TTFTMean, r.Sim.TTFTMean),
				secs(r.Sim.TTFTP90), secs(r.Live.TTFTP90), kept, fmt.Sprint(r.Live.WrongBlocks)})
		}
		chart.Series = append(chart.Series, simMean, simP90)
		for _, n := range nets {
			chart.Series = append(chart.Series, byNet[n][0], byNet[n][1])
		}
		sec.Figures = append(sec.Figures, report.Figure{File: "fig13_live_" + fileSafe(t) + ".svg",
			Caption: t + ": TTFT vs bandwidth, live (pacers, kernel links) and simulated", Render: chart.LineSVG})
	}
	sec.Tables = []report.Table{tab}
	return sec
}

// netName names a network mode in the report ("" is the live runs'
// default, the pacers).
func netName(n replay.NetMode) string {
	switch n {
	case replay.NetKernel:
		return "kernel links"
	default:
		return "pacers"
	}
}

// relDelta is (live − sim) / sim as a signed percentage, or "–".
func relDelta(live, sim float64) string {
	if sim == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100*(live-sim)/sim)
}
