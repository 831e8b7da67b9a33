// Package demo is `kvpool demo`, the README's main command: it takes a
// window of the conversation trace (or of a generated one when no trace is
// on the search path), and for each of four arms — recompute, local LRU
// with round-robin routing, local with cache-aware routing, global
// cache-aware — replays it live on a fresh local cluster (a master and N
// node processes, every block verified byte for byte) and simulates it on
// the same configuration; then it prints the comparison and writes a
// report directory (index.html with bar charts and TTFT CDFs, report.md,
// summary.json, summary.csv).
//
// Every arm starts its own cluster and stops it before the next, so arms
// never share caches (a restart is simpler and surer than deleting every
// block, and costs under a second). The live/sim pair of an arm is one
// package validate run, so the demo's figures are exactly what
// `kvpool compare --validate` checks.
//
// When the context ends (Ctrl-C), the running arm stops with the requests
// completed so far, no further arm starts, every process is stopped, and
// the report is still written with the result marked partial.
package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/report"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/validate"
)

// Options configure a demo. The zero value of every field means its
// default; Validate names the first bad field.
type Options struct {
	// Trace chooses the requests.
	Trace TraceOptions
	// Cluster is the configuration of every arm; its Mode, Routing and
	// Name are set per arm. Zero fields take validate's defaults (4
	// nodes, 32 KiB payloads, speed 50, 5,859 RAM blocks per node: the
	// paper's 3M tokens, full verification).
	Cluster validate.Config
	// Arms are the arms run (default compare.LiveArms()).
	Arms []compare.Arm
	// Progress receives progress lines (nil: none); LiveProgress the
	// replayer's refreshing progress line (nil: none).
	Progress, LiveProgress io.Writer
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	if err := o.Trace.Validate(); err != nil {
		return err
	}
	c := o.Cluster
	c.Mode, c.Routing = sim.ModeGlobal, sim.RoutingCacheAware
	if err := c.Validate(); err != nil {
		return fmt.Errorf("demo: cluster: %w", err)
	}
	for i, a := range o.Arms {
		if a.Name == "" {
			return fmt.Errorf("demo: arm %d: empty name", i+1)
		}
		c.Mode, c.Routing = a.Mode, a.Routing
		if err := c.Validate(); err != nil {
			return fmt.Errorf("demo: arm %q: %w", a.Name, err)
		}
	}
	return nil
}

// Result is a demo's outcome.
type Result struct {
	// Trace is where the requests came from.
	Trace *Window `json:"trace"`
	// Requests is the number of requests per arm.
	Requests int `json:"requests"`
	// Rows hold one live/sim pair per completed (or interrupted) arm.
	Rows []compare.LiveRow `json:"arms"`
	// Checks holds the validation verdicts of each row (same order).
	Checks [][]validate.Check `json:"checks"`
	// Partial is set when the demo was interrupted.
	Partial bool `json:"partial"`
	// Seconds is the demo's wall-clock duration.
	Seconds float64 `json:"seconds"`
}

// Run runs the demo. It returns an error when the trace cannot be loaded
// or a cluster cannot be started; an interruption is not an error (see
// Result.Partial).
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	w, err := LoadWindow(opts.Trace)
	if err != nil {
		return nil, err
	}
	if w.Notice != "" {
		fmt.Fprintf(progress, "kvpool demo: NOTICE: %s\n", w.Notice)
	}
	res := &Result{Trace: w, Requests: len(w.Requests)}
	arms := opts.Arms
	if len(arms) == 0 {
		arms = compare.LiveArms()
	}
	base := opts.Cluster.WithDefaults()
	fmt.Fprintf(progress, "kvpool demo: %s, %d requests (%.0f s window from %.0f s, arrivals ×%g); %d nodes, payload %d B, speed %g, %d RAM blocks per node\n",
		w.Name, len(w.Requests), w.WindowSeconds, w.FromSeconds, w.Rate, base.Nodes, base.PayloadBytes, base.Speed, base.RAMBlocks)
	for i, a := range arms {
		if ctx.Err() != nil {
			res.Partial = true
			break
		}
		cfg := opts.Cluster
		cfg.Name, cfg.Mode, cfg.Routing, cfg.NICGbps = a.Name, a.Mode, a.Routing, a.NICGbps
		cfg.Progress = opts.LiveProgress
		fmt.Fprintf(progress, "kvpool demo: arm %d/%d %s: simulating, then a fresh cluster of %d nodes replays live\n", i+1, len(arms), a.Name, base.Nodes)
		t0 := time.Now()
		rep, err := validate.Run(ctx, w.Requests, cfg)
		if err != nil {
			if ctx.Err() != nil {
				res.Partial = true
				break
			}
			return nil, fmt.Errorf("demo: arm %s: %w", a.Name, err)
		}
		res.Rows = append(res.Rows, compare.LiveRow{Trace: w.Name, Arm: a, Sim: rep.Sim, Live: rep.Live,
			SimTTFTs: rep.SimTTFTs, LiveTTFTs: rep.LiveTTFTs})
		res.Checks = append(res.Checks, rep.Checks)
		res.Partial = res.Partial || rep.Live.Partial
		fmt.Fprintf(progress, "kvpool demo: arm %s done in %.1f s: token hit %.1f%% live / %.1f%% sim, mean TTFT %.2f s live / %.2f s sim, %d wrong blocks\n",
			a.Name, time.Since(t0).Seconds(), 100*rep.Live.TokenHitRatio, 100*rep.Sim.TokenHitRatio, rep.Live.TTFTMean, rep.Sim.TTFTMean, rep.Live.WrongBlocks)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// WrongBlocks returns the wrong blocks received over every arm.
func (r *Result) WrongBlocks() int64 {
	var n int64
	for _, row := range r.Rows {
		n += row.Live.WrongBlocks
	}
	return n
}

// WriteTable writes the comparison table (Markdown) and the verdicts.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	src := r.Trace.Name
	if r.Trace.Path != "" {
		src += " (" + r.Trace.Path + ")"
	}
	fmt.Fprintf(&b, "trace %s: %d requests, %.0f s window from %.0f s, arrivals ×%g\n\n", src, r.Requests,
		r.Trace.WindowSeconds, r.Trace.FromSeconds, r.Trace.Rate)
	compare.LiveMarkdown(&b, r.Rows)
	for i, row := range r.Rows {
		var bad []string
		for _, c := range r.Checks[i] {
			if !c.Pass {
				bad = append(bad, c.Name+": "+c.Message)
			}
		}
		if len(bad) > 0 {
			fmt.Fprintf(&b, "\nlive/sim disagreement on %s: %s", row.Arm.Name, strings.Join(bad, "; "))
		}
	}
	if r.Partial {
		b.WriteString("\nPARTIAL: interrupted; the figures cover what completed.")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("demo: write the table: %w", err)
	}
	return nil
}

// Report lays the result out as a report.
func (r *Result) Report() *report.Report {
	title := "kvpool demo: recompute vs local vs global KV caching, live and simulated"
	if r.Partial {
		title += " (PARTIAL)"
	}
	intro := fmt.Sprintf("Trace: %s, %d requests (a %.0f s window from %.0f s, arrivals ×%g). ", r.Trace.Name, r.Requests,
		r.Trace.WindowSeconds, r.Trace.FromSeconds, r.Trace.Rate)
	if r.Trace.Generated {
		intro += "The trace is GENERATED (no published trace was found, or --generated was given). "
	}
	if len(r.Rows) > 0 {
		l := r.Rows[0].Live
		ramBlocks := 0 // the recompute arm has no cache: take a caching arm's
		for _, row := range r.Rows {
			ramBlocks = max(ramBlocks, row.Sim.RAMBlocks)
		}
		intro += fmt.Sprintf("%d nodes, %d RAM blocks each, payload %d B per block, speed ×%g, verify %s; each arm on a fresh cluster. ",
			l.Instances, ramBlocks, l.PayloadBytes, l.Speed, l.VerifyMode)
	}
	if r.Partial {
		intro += "PARTIAL: the demo was interrupted; the figures cover what completed."
	}
	return &report.Report{Title: title, Intro: intro,
		Sections: []report.Section{compare.LiveSection(r.Rows, ""), compare.LiveCDFSection(r.Rows, "")}}
}

// Write writes the report directory: index.html, report.md, the figures,
// summary.json (the whole result) and summary.csv (one row per arm).
func (r *Result) Write(dir string) error {
	if err := report.Write(dir, r.Report()); err != nil {
		return fmt.Errorf("demo: write report to %s: %w", dir, err)
	}
	if err := report.WriteJSON(filepath.Join(dir, "summary.json"), r); err != nil {
		return fmt.Errorf("demo: write summary.json: %w", err)
	}
	if err := compare.WriteLiveCSV(filepath.Join(dir, "summary.csv"), r.Rows); err != nil {
		return fmt.Errorf("demo: write summary.csv: %w", err)
	}
	return nil
}
