package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/compare"
)

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", stderr)
	simFlag := fs.Bool("sim", false, "run the arms in the simulator (model time); required until live arms exist")
	traces := fs.String("traces", "conversation,synthetic", "comma-separated trace names or files")
	traceDir := fs.String("trace-dir", "", "directory searched first for traces (then $KVPOOL_TRACE_DIR, ./traces, ../shared/traces)")
	out := fs.String("out", "report", "report directory to write")
	noGoodput := fs.Bool("no-goodput", false, "skip the goodput bisection (the slowest part)")
	rate := fs.Float64("rate", 1, "arrival-rate multiplier for every timed arm")
	nic := fs.Float64("nic-gbps", 0, "NIC bandwidth per instance in Gbps (default 100)")
	workers := fs.Int("workers", 0, "experiments run at once (default: number of CPUs)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	lenient := fs.Bool("lenient", false, "skip malformed trace lines instead of failing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool compare --sim [flags]\n\nRuns the standard matrix (hit ratio vs capacity per policy, local vs global,\nTTFT by scheduler, TTFT vs bandwidth, goodput) on each trace and writes a report.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !*simFlag {
		return usageErrorf("only simulated arms exist so far: pass --sim")
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	opts := compare.Options{RateMultiplier: *rate, NICGbps: *nic, Workers: *workers, SkipGoodput: *noGoodput}
	if !*quiet {
		opts.Progress = stderr
	}
	for _, name := range strings.Split(*traces, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		path, reqs, err := loadTrace(name, *traceDir, *lenient, stderr)
		if err != nil {
			return err
		}
		opts.Traces = append(opts.Traces, compare.Trace{Name: compare.TraceName(path), Requests: reqs})
	}
	start := time.Now()
	res, err := compare.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := compare.Write(*out, res); err != nil {
		return err
	}
	if err := res.Markdown(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s (%.1fs)\n", filepath.Join(*out, "index.html"), time.Since(start).Seconds())
	return nil
}
