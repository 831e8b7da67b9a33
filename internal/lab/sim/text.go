package sim

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes s as a short aligned, human-readable report.
func (s *Summary) WriteText(w io.Writer) error {
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	ssd := "no SSD"
	if s.SSDBlocks > 0 {
		ssd = fmt.Sprintf("%d SSD blocks", s.SSDBlocks)
	}
	prefetch := "prefetch"
	if !s.Prefetch {
		prefetch = "no prefetch"
	}
	if s.Reject {
		prefetch += ", reject over SLO"
	}
	lines := [][2]string{
		{"cluster", fmt.Sprintf("%d instances × %d RAM blocks, %s; policy %s", s.Instances, s.RAMBlocks, ssd, s.Policy)},
		{"scheduling", fmt.Sprintf("%s mode, %s routing, %s; rate ×%g", s.Mode, s.Routing, prefetch, s.RateMultiplier)},
		{"hardware", fmt.Sprintf("%s; NIC %g Gbps, SSD %g GB/s per instance", s.Profile, s.NICGbps, s.SSDGBps)},
		{"requests", fmt.Sprintf("%d (served %d, rejected %d) over %.1f s of model time", s.Requests, s.Served, s.Rejected, s.Duration)},
		{"token hit ratio", fmt.Sprintf("%s = local RAM %s + local SSD %s + remote RAM %s + remote SSD %s",
			pct(s.TokenHitRatio), pct(s.TokenHitRatioLocalRAM), pct(s.TokenHitRatioLocalSSD),
			pct(s.TokenHitRatioRemoteRAM), pct(s.TokenHitRatioRemoteSSD))},
		{"block hit ratio", pct(s.BlockHitRatio)},
		{"bytes moved", fmt.Sprintf("network %s, SSD read %s, SSD write %s", bytesText(s.BytesNet), bytesText(s.BytesSSDRead), bytesText(s.BytesSSDWrite))},
		{"TTFT", fmt.Sprintf("mean %.3f s, p50 %.3f s, p90 %.3f s, p99 %.3f s, max %.3f s", s.TTFTMean, s.TTFTP50, s.TTFTP90, s.TTFTP99, s.TTFTMax)},
		{"per request", fmt.Sprintf("queue %.3f s, transfer %.3f s, prefill %.3f s (mean); prefill total %.1f s", s.QueueMean, s.TransferMean, s.PrefillMean, s.PrefillTotal)},
		{"SLO attainment", fmt.Sprintf("%s within %g s; %s within 10 s; %s within 30 s", pct(s.SLOAttainment), s.SLO, pct(s.SLOAttainment10s), pct(s.SLOAttainment30s))},
		{"skipped loads", fmt.Sprintf("%d remote fetches, %d SSD reads (recomputing was faster)", s.FetchesSkipped, s.SSDReadsSkipped)},
	}
	if s.Routing == RoutingJoint || s.Replication == ReplicateHot || s.EvictRedundantFirst {
		lines = append(lines, [2]string{"joint", fmt.Sprintf("replication %s (hot at %d asks), redundant first %t; %d replicas skipped, %d redundant evictions, %d late-bound blocks",
			s.Replication, s.HotAccesses, s.EvictRedundantFirst, s.ReplicasSkipped, s.RedundantEvictions, s.LateBoundBlocks)})
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-16s %s\n", l[0], l[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// bytesText formats a byte count with a decimal unit.
func bytesText(n int64) string {
	v := float64(n)
	for _, u := range []string{"B", "kB", "MB", "GB", "TB"} {
		if v < 1000 || u == "TB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", v, u)
		}
		v /= 1000
	}
	return fmt.Sprintf("%d B", n)
}
