package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes results as an aligned table, one row each, followed by
// their notes.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tblock\tconns\tdepth\tbatch\tseconds\tops\tops/s\tGB/s\tp50 µs\tp99 µs\tmax µs\tpeak rss MiB\t")
	for _, r := range results {
		rss := "-"
		if r.RAMTierBytes > 0 {
			rss = fmt.Sprintf("%.1f (ram tier %.1f)", mib(r.RSSPeakBytes), mib(r.RAMTierBytes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.2f\t%d\t%.0f\t%.3f\t%.0f\t%.0f\t%.0f\t%s\t\n",
			r.Name, SizeName(r.Spec.BlockSize), r.Spec.Conns, r.Spec.Depth, r.Spec.Batch, r.Seconds, r.Ops,
			r.OpsPerSec, r.GBPerSec, r.P50Micros, r.P99Micros, r.MaxMicros, rss)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, r := range results {
		if x := r.Index; x != nil {
			if _, err := fmt.Fprintf(w, "index (%s): %d keys, %.1f bytes/key (%.1f after the run), built in %.1f s, full GC %.1f ms, %d GC cycles, GC pause p99 %.0f µs max %.0f µs, %.0f keys/s looked up (%.0f per CPU second)\n",
				r.Name, x.Keys, x.BytesPerKey, x.BytesPerKeyAfter, x.BuildSeconds, x.FullGCMillis, x.GCCycles, x.GCPauseP99Micros, x.GCPauseMaxMicros, r.OpsPerSec, x.KeysPerCPUSecond); err != nil {
				return fmt.Errorf("write table: %w", err)
			}
		}
		for _, n := range r.Notes {
			if _, err := fmt.Fprintf(w, "note (%s %s): %s\n", r.Name, SizeName(r.Spec.BlockSize), n); err != nil {
				return fmt.Errorf("write table: %w", err)
			}
		}
	}
	return nil
}

// WriteComparisons writes the ratio table of Compare.
func WriteComparisons(w io.Writer, cs []Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "block\tkvpool\tGB/s\tp99 µs\tvs\tGB/s\tp99 µs\tratio\tgoal\tmet\t")
	for _, c := range cs {
		ref := c.Reference
		if ref == "" {
			ref = c.Against
		}
		goal, met := "-", "-"
		if c.Goal > 0 {
			goal, met = fmt.Sprintf("%.1f", c.Goal), "not met"
			if c.Met {
				met = "met"
			}
		}
		if c.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.0f\t%s\t-\t-\t-\t%s\tskipped: %s\t\n",
				SizeName(c.BlockSize), c.Kvpool.Name, c.Kvpool.GBPerSec, c.Kvpool.P99Micros, ref, goal, c.Skipped)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.0f\t%s\t%.3f\t%.0f\t%.2f\t%s\t%s\t\n",
			SizeName(c.BlockSize), c.Kvpool.Name, c.Kvpool.GBPerSec, c.Kvpool.P99Micros, ref,
			c.Other.GBPerSec, c.Other.P99Micros, c.Ratio, goal, met)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write comparisons: %w", err)
	}
	seen := map[string]bool{}
	for _, c := range cs {
		for _, r := range []Result{c.Kvpool, c.Other} {
			for _, n := range r.Notes {
				line := fmt.Sprintf("note (%s %s): %s", r.Name, SizeName(r.Spec.BlockSize), n)
				if !seen[line] {
					seen[line] = true
					if _, err := fmt.Fprintln(w, line); err != nil {
						return fmt.Errorf("write comparisons: %w", err)
					}
				}
			}
		}
		if c.Kvpool.RAMTierBytes > 0 {
			k := c.Kvpool
			met := "met"
			if k.RSSPeakBytes-k.RSSBeforeBytes > k.RAMTierBytes+MemoryHeadroom {
				met = "not met"
			}
			line := fmt.Sprintf("memory (%s %s): whole-process peak RSS %.1f MiB (%.1f MiB before the node started) for a RAM tier of %.1f MiB; goal (peak − before) ≤ tier + 64 MiB: %s",
				k.Name, SizeName(c.BlockSize), mib(k.RSSPeakBytes), mib(k.RSSBeforeBytes), mib(k.RAMTierBytes), met)
			if !seen[line] {
				seen[line] = true
				if _, err := fmt.Fprintln(w, line); err != nil {
					return fmt.Errorf("write comparisons: %w", err)
				}
			}
		}
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// SizeName prints a byte count as "256KiB", "1MiB" or "1000B".
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return strings.TrimSpace(fmt.Sprintf("%dB", n))
	}
}
