package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/policylab"
	"github.com/kvpool/kvpool/internal/lab/report"
)

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy", stderr)
	out := fs.String("out", "policy-report", "report directory to write")
	traces := fs.String("trace", "both", "conversation, synthetic, both, or a comma-separated list of trace names or files (the first two are tenants A and B)")
	traceDir := fs.String("trace-dir", "", "directory searched first for traces (then $KVPOOL_TRACE_DIR, ./traces, ../shared/traces)")
	quick := fs.Bool("quick", false, "a fast look: shorter generated traces, goodput at p = 0, 0.4, 1 on the first trace only, 4 nodes only")
	genRequests := fs.Int("gen-requests", -1, "requests per generated trace; 0 leaves generated traces out (default 12000, 3000 with --quick)")
	noGoodput := fs.Bool("no-goodput", false, "skip every timed experiment (goodput bisection is the slowest part)")
	noJoint := fs.Bool("no-joint", false, "leave out the joint routing and placement goodput comparison (kvpool compare's Fig 10 arms)")
	workers := fs.Int("workers", 0, "experiments run at once (default: number of CPUs)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	lenient := fs.Bool("lenient", false, "skip malformed trace lines instead of failing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool policy [--out DIR] [--trace conversation|synthetic|both] [--quick] [flags]\n\n"+
			"Writes the policy report: the LRU→Belady gap closed by kvchain on the tuning half, the\n"+
			"held-out half and the whole of each trace and on generated traces, and the robustness\n"+
			"experiments (injected prediction error, two tenants in one pool, unseen capacities and\n"+
			"node counts) to DIR/index.html, report.md, SVG figures, CSV and summary.json.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *genRequests < -1 {
		return usageErrorf("--gen-requests %d: want a request count >= 0", *genRequests)
	}
	names := strings.Split(*traces, ",")
	if strings.TrimSpace(*traces) == "both" {
		names = []string{"conversation", "synthetic"}
	}
	opts := policylab.DefaultOptions()
	if *quick {
		opts = policylab.QuickOptions()
	}
	switch {
	case *genRequests == 0:
		opts.SkipGenerated = true
	case *genRequests > 0:
		opts.Generated = policylab.DefaultGenerated(*genRequests)
	}
	opts.SkipGoodput, opts.Workers = *noGoodput, *workers
	if !*quiet {
		opts.Progress = &lockedWriter{w: stderr}
	}
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		path, reqs, err := loadTrace(name, *traceDir, *lenient, stderr)
		if err != nil {
			return err
		}
		opts.Traces = append(opts.Traces, policylab.Trace{Name: compare.TraceName(path), Requests: reqs})
	}
	if len(opts.Traces) == 0 {
		return usageErrorf("--trace %q: no trace given", *traces)
	}
	if *quick {
		opts.GoodputTraces = []string{opts.Traces[0].Name}
	}
	if !*noGoodput && !*noJoint {
		opts.Joint = jointSections(opts.GoodputTraces, *workers, opts.Progress)
	}
	if err := opts.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	start := time.Now()
	res, err := policylab.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := policylab.Write(*out, res); err != nil {
		return err
	}
	if err := res.Markdown(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s (%.1fs)\n", filepath.Join(*out, "index.html"), time.Since(start).Seconds())
	return nil
}

// jointSections returns the policylab hook that adds package compare's
// joint routing and placement goodput comparison (the Fig 10 cluster) on
// the traces named by only (all when empty): once with FIFO queues and no
// rejection, once with Algorithm 1's rejection in every arm.
func jointSections(only []string, workers int, progress io.Writer) policylab.JointFunc {
	return func(ctx context.Context, traces []policylab.Trace) ([]report.Section, error) {
		var secs []report.Section
		for _, reject := range []bool{false, true} {
			opts := compare.JointOptions{Workers: workers, Progress: progress, Reject: reject}
			for _, t := range traces {
				if len(only) == 0 || slices.Contains(only, t.Name) {
					opts.Traces = append(opts.Traces, compare.Trace{Name: t.Name, Requests: t.Requests})
				}
			}
			res, err := compare.RunJoint(ctx, opts)
			if err != nil {
				return nil, err
			}
			secs = append(secs, res.Section())
		}
		return secs, nil
	}
}
