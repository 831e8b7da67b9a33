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
// The demo ends with a verdict (Result.Verdict, package validate's
// rules and exit codes): PASS when live and simulated agree in every arm,
// FAIL when a judged check disagrees in any (or a wrong block was
// received), INCONCLUSIVE when nothing judged disagrees but an arm's
// live run did not keep up with its schedule, so its mean TTFT was not
// judged. The report states it first, in words.
//
// When the context ends (Ctrl-C), the running arm stops with the requests
// completed so far, no further arm starts, every process is stopped, and
// the report is still written with the result marked partial: it shows
// the configuration that was run and gives no verdict.
package demo

import (
	"context"
	"fmt"
	"io"
	"math"
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
	// nodes, 32 KiB payloads, 5,859 RAM blocks per node: the paper's 3M
	// tokens, full verification), but a zero Speed is DefaultSpeed.
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
	// Config is every arm's cluster configuration, defaults filled in
	// (its Name, Mode and Routing are validate's defaults, global
	// cache-aware, not any arm's: each arm sets its own); Arms names the
	// arms the demo was to run, in order.
	Config validate.Config `json:"config"`
	Arms   []string        `json:"planned_arms"`
	// Rows hold one live/sim pair per completed (or interrupted) arm.
	Rows []compare.LiveRow `json:"arms"`
	// Checks holds the validation verdicts of each row (same order), and
	// Verdicts each row's verdict with what it rests on.
	Checks   [][]validate.Check `json:"checks"`
	Verdicts []ArmVerdict       `json:"verdicts"`
	// Partial is set when the demo was interrupted.
	Partial bool `json:"partial"`
	// Verdict is the demo's verdict over every arm (validate.Overall; ""
	// when interrupted: no verdict), and VerdictText says it in words.
	Verdict     validate.Verdict `json:"verdict"`
	VerdictText string           `json:"verdict_text"`
	// Seconds is the demo's wall-clock duration.
	Seconds float64 `json:"seconds"`
}

// ArmVerdict is one arm's live/sim verdict and what it rests on.
type ArmVerdict struct {
	// Arm is the arm's name; Verdict its validation verdict.
	Arm     string           `json:"arm"`
	Verdict validate.Verdict `json:"verdict"`
	// HitDelta is live − sim token hit ratio; TTFTRelDelta (live − sim)
	// / sim mean TTFT.
	HitDelta     float64 `json:"hit_delta"`
	TTFTRelDelta float64 `json:"ttft_rel_delta"`
	// KeptUp is whether the live run kept up with its schedule
	// (validate.KeptUp), Reason why not, and SuggestedSpeed the speed to
	// rerun at when the verdict is INCONCLUSIVE.
	KeptUp         bool    `json:"kept_up"`
	Reason         string  `json:"reason,omitempty"`
	SuggestedSpeed float64 `json:"suggested_speed,omitempty"`
	// Failures are the failed checks' messages.
	Failures []string `json:"failures,omitempty"`
}

// Run runs the demo. It returns an error when the trace cannot be loaded
// or a cluster cannot be started; an interruption is not an error (see
// Result.Partial).
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Cluster.Speed == 0 {
		opts.Cluster.Speed = DefaultSpeed
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
	arms := opts.Arms
	if len(arms) == 0 {
		arms = compare.LiveArms()
	}
	base := opts.Cluster.WithDefaults()
	res := &Result{Trace: w, Requests: len(w.Requests), Config: base}
	for _, a := range arms {
		res.Arms = append(res.Arms, a.Name)
	}
	fmt.Fprintf(progress, "kvpool demo: %s, %d requests (%.0f s window from %.0f s, arrivals ×%g); %d nodes, payload %s, speed %g, %d RAM blocks per node; network: %s\n",
		w.Name, len(w.Requests), w.WindowSeconds, w.FromSeconds, w.Rate, base.Nodes, report.Bytes(int64(base.PayloadBytes)), base.Speed, base.RAMBlocks,
		base.ReplayOptions().NetDescription())
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
		res.addArm(w.Name, a, rep)
		fmt.Fprintf(progress, "kvpool demo: arm %s done in %.1f s: token hit %.1f%% live / %.1f%% sim, mean TTFT %.2f s live / %.2f s sim, %d verified hits, %d wrong blocks: %s\n",
			a.Name, time.Since(t0).Seconds(), 100*rep.Live.TokenHitRatio, 100*rep.Sim.TokenHitRatio, rep.Live.TTFTMean, rep.Sim.TTFTMean,
			rep.Live.VerifiedHits, rep.Live.WrongBlocks, res.Rows[len(res.Rows)-1].Verdict)
	}
	res.Verdict, res.VerdictText = res.judge()
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// addArm records arm a's validation rep on trace. An interrupted arm
// (rep.Live.Partial) gets no verdict: its validation fails the
// "complete" check and judges the rest on part of the requests, but an
// interruption is not a disagreement. Its row says validate.Interrupted
// (Report.Row), its ArmVerdict has an empty Verdict and no failures,
// and the result is partial.
func (r *Result) addArm(trace string, a compare.Arm, rep *validate.Report) {
	row := rep.Row(trace, a)
	v := ArmVerdict{Arm: a.Name, Verdict: rep.Verdict, HitDelta: rep.HitDelta,
		TTFTRelDelta: rep.TTFTRelDelta, KeptUp: rep.KeptUp, Reason: rep.Reason, SuggestedSpeed: rep.SuggestedSpeed,
		Failures: rep.Failures()}
	if rep.Live.Partial {
		v.Verdict, v.SuggestedSpeed, v.Failures = "", 0, nil
		r.Partial = true
	}
	r.Rows = append(r.Rows, row)
	r.Checks = append(r.Checks, rep.Checks)
	r.Verdicts = append(r.Verdicts, v)
}

// judge returns the demo's verdict and a paragraph saying it: what
// agreed within which bounds, what disagreed, or which arms could not be
// judged and why.
func (r *Result) judge() (validate.Verdict, string) {
	c := r.Config
	bounds := fmt.Sprintf("(bounds: token hit ratio within %.0f points, mean TTFT within %.0f%%, 0 wrong blocks)",
		100*c.HitTolerance, 100*c.TTFTTolerance)
	if r.Partial {
		return "", fmt.Sprintf("PARTIAL, no verdict: the demo was interrupted after %d of %d arms (%s); "+
			"the figures below cover the requests that completed.", len(r.Rows), len(r.Arms), strings.Join(r.Arms, ", "))
	}
	var vs []validate.Verdict
	var failed, inconclusive []string
	hit, ttft, speed := 0.0, 0.0, 0.0
	var verified int64
	kept := "all of which kept up"
	for i, v := range r.Verdicts {
		if !v.KeptUp {
			kept = "the mean TTFT judged only where the arm kept up"
		}
		vs = append(vs, v.Verdict)
		hit = max(hit, math.Abs(v.HitDelta))
		verified += r.Rows[i].Live.VerifiedHits
		switch v.Verdict {
		case validate.VerdictFail:
			failed = append(failed, fmt.Sprintf("%s (%s)", v.Arm, strings.Join(v.Failures, "; ")))
		case validate.VerdictInconclusive:
			inconclusive = append(inconclusive, fmt.Sprintf("%s: %s", v.Arm, strings.TrimPrefix(v.Reason, "the machine did not keep up: ")))
			if speed == 0 || v.SuggestedSpeed < speed {
				speed = v.SuggestedSpeed
			}
		default:
			ttft = max(ttft, math.Abs(v.TTFTRelDelta))
		}
	}
	verdict := validate.Overall(vs)
	switch verdict {
	case validate.VerdictFail:
		return verdict, fmt.Sprintf("FAIL: live and simulated runs disagree %s in %s.", bounds, strings.Join(failed, "; "))
	case validate.VerdictInconclusive:
		return verdict, fmt.Sprintf("INCONCLUSIVE: no judged check disagrees %s, but the machine did not keep up with the live runs of %d of %d arms "+
			"(%s), so their mean TTFT was not judged; rerun with --speed %g, or on a quieter machine. "+
			"Token hit ratio within %.2f points of simulated in every arm.",
			bounds, len(inconclusive), len(r.Verdicts), strings.Join(inconclusive, "; "), speed, 100*hit)
	}
	return verdict, fmt.Sprintf("PASS: live within %.2f points of simulated token hit ratio and within %.1f%% of simulated mean TTFT "+
		"in every arm, %s %s; %d hits read and verified, 0 wrong blocks.", 100*hit, 100*ttft, kept, bounds, verified)
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
		if row.Live.Partial {
			fmt.Fprintf(&b, "\n%s interrupted: %d of %d requests completed live; not judged", row.Arm.Name, row.Live.Completed, r.Requests)
			continue
		}
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
	if r.VerdictText != "" {
		b.WriteString("\n" + r.VerdictText)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("demo: write the table: %w", err)
	}
	return nil
}

// Report lays the result out as a report: the verdict first, then the
// configuration, the live-vs-simulated table and figures.
func (r *Result) Report() *report.Report {
	title := "kvpool demo: recompute vs local vs global KV caching, live and simulated"
	if r.Partial {
		title += " (PARTIAL)"
	}
	word, rest, _ := strings.Cut(r.VerdictText, ": ")
	if word == "" {
		word = "no verdict"
	}
	intro := "**" + word + "**"
	if rest != "" {
		intro += ": " + rest
	}
	intro += "\n\n"
	intro += fmt.Sprintf("Trace: %s, %d requests (a %.0f s window from %.0f s, arrivals ×%g). ", r.Trace.Name, r.Requests,
		r.Trace.WindowSeconds, r.Trace.FromSeconds, r.Trace.Rate)
	if r.Trace.Generated {
		intro += "The trace is GENERATED (no published trace was found, or --generated was given). "
	}
	c := r.Config
	intro += "Network: " + c.ReplayOptions().NetDescription() + ". "
	intro += fmt.Sprintf("%d nodes, %d RAM blocks each (the recompute arm caches nothing), policy %s, payload %s per block, speed ×%g, "+
		"verify %s (every hit read and checked before it is reused); each arm on a fresh cluster. ",
		c.Nodes, c.RAMBlocks, c.Policy, report.Bytes(int64(c.PayloadBytes)), c.Speed, c.Verify)
	if r.Partial {
		intro += fmt.Sprintf("\n\nPARTIAL: the demo was interrupted; %d of the %d planned arms (%s) have figures, covering what completed.",
			len(r.Rows), len(r.Arms), strings.Join(r.Arms, ", "))
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
