package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/policylab"
)

// runPolicy is `kvpool policy`: the cache policy report.
func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, out, err := parsePolicy(args, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := policylab.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := policylab.Write(out, res); err != nil {
		return err
	}
	if err := res.Markdown(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s (%.1fs)\n", filepath.Join(out, "index.html"), time.Since(start).Seconds())
	return nil
}

// parsePolicy parses the flags of kvpool policy into policylab.Options,
// reading the traces, and returns the report directory.
func parsePolicy(args []string, stderr io.Writer) (policylab.Options, string, error) {
	fs := newFlagSet("policy", stderr)
	var tf traceFlags
	var rep reportFlags
	tf.register(fs, "both", "conversation, synthetic, both, or a comma-separated list of trace names or files (the first two are tenants A and B)")
	rep.register(fs, "report/policy", "no progress lines")
	quick := fs.Bool("quick", false, "a fast look: shorter generated traces, goodput at p = 0, 0.4, 1 on the first trace only, 4 nodes only")
	genRequests := fs.Int("gen-requests", policylab.DefaultGenRequests, fmt.Sprintf("requests per generated trace, %d with --quick unless given; 0 = leave generated traces out", policylab.QuickGenRequests))
	noGoodput := fs.Bool("no-goodput", false, "skip every timed experiment (goodput bisection is the slowest part)")
	noJoint := fs.Bool("no-joint", false, "leave out the joint routing and placement goodput comparison (kvpool compare's Fig 10 arms)")
	workers := fs.Int("workers", 0, "experiments run at once (0 = one per CPU)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool policy [--out DIR] [--trace conversation|synthetic|both] [--quick] [flags]\n\n"+
			"Writes the policy report: the LRU→Belady gap closed by kvchain on the tuning half, the\n"+
			"held-out half and the whole of each trace and on generated traces, and the robustness\n"+
			"experiments (injected prediction error, two tenants in one pool, unseen capacities and\n"+
			"node counts) to DIR/index.html, report.md, SVG figures, CSV and summary.json.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args); err != nil {
		return policylab.Options{}, "", err
	}
	if err := rep.check(); err != nil {
		return policylab.Options{}, "", err
	}
	opts := policylab.DefaultOptions()
	if *quick {
		opts = policylab.QuickOptions()
	}
	genSet := false
	fs.Visit(func(f *flag.Flag) { genSet = genSet || f.Name == "gen-requests" })
	switch {
	case *genRequests == 0:
		opts.SkipGenerated = true
	case genSet:
		opts.Generated = policylab.DefaultGenerated(*genRequests)
	}
	opts.SkipGoodput, opts.Workers = *noGoodput, *workers
	if p := rep.progress(stderr); p != nil {
		opts.Progress = &lockedWriter{w: p}
	}
	traces, err := policyTraces(tf, stderr)
	if err != nil {
		return policylab.Options{}, "", err
	}
	opts.Traces = traces
	if *quick {
		opts.GoodputTraces = []string{opts.Traces[0].Name}
	}
	if !*noGoodput && !*noJoint {
		opts.Joint = compare.PolicyJoint(opts.GoodputTraces, *workers, opts.Progress)
	}
	if err := opts.Validate(); err != nil {
		return policylab.Options{}, "", flagError(fs, err, nil)
	}
	return opts, rep.out, nil
}

// policyTraces reads the traces --trace names: "both" for the
// conversation and synthetic traces, else a comma-separated list.
func policyTraces(tf traceFlags, stderr io.Writer) ([]policylab.Trace, error) {
	names := strings.Split(tf.name, ",")
	if strings.TrimSpace(tf.name) == "both" {
		names = []string{"conversation", "synthetic"}
	}
	var traces []policylab.Trace
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		path, reqs, err := loadTrace(name, tf.dir, tf.lenient, stderr)
		if err != nil {
			return nil, err
		}
		traces = append(traces, policylab.Trace{Name: compare.TraceName(path), Requests: reqs})
	}
	if len(traces) == 0 {
		return nil, usageErrorf("--trace %q: no trace given", tf.name)
	}
	return traces, nil
}
