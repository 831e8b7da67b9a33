package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kvpool/kvpool/internal/lab/demo"
	"github.com/kvpool/kvpool/internal/lab/validate"
	"github.com/kvpool/kvpool/trace"
)

// runDemo is `kvpool demo`: recompute vs local vs global, live and
// simulated, on a window of the conversation trace, with a report.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr}
	opts, rep, err := parseDemo(args, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := demo.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	if err := res.Write(rep.out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s (%.1f s)\n", filepath.Join(rep.out, "index.html"), time.Since(start).Seconds())
	if res.Partial {
		return fmt.Errorf("demo: interrupted; partial report written to %s", rep.out)
	}
	if res.Verdict != validate.VerdictPass {
		return exitError{err: errors.New(res.VerdictText), code: res.Verdict.ExitCode()}
	}
	return nil
}

// parseDemo parses the flags of kvpool demo into demo.Options; progress
// goes to stderr unless --quiet.
func parseDemo(args []string, stderr io.Writer) (demo.Options, reportFlags, error) {
	fs := newFlagSet("demo", stderr)
	var tf traceFlags
	var cf clusterFlags
	var rep reportFlags
	tf.registerPath(fs, demo.DefaultTrace, traceNameUsage)
	cf.register(fs, demoClusterHelp())
	rep.register(fs, "report/demo", "no progress on stderr")
	generated := fs.Bool("generated", false, "use a generated chat trace instead of searching for a published one")
	window := fs.Duration("window", demo.DefaultWindow, "length of the trace window replayed")
	from := fs.Duration("from", 0, "start of the window in trace time (0 = the trace's start)")
	rate := fs.Float64("rate", demo.DefaultRate, "arrival-rate multiplier (0.5 spreads arrivals ×2: 4 nodes stand in for the paper's ~10)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool demo [flags]\n\nReplays a window of the conversation trace live on a local cluster (a master and\nN node processes) for four arms — recompute, local LRU (rr), local cache-aware,\nglobal cache-aware — simulates the same, prints the comparison and writes a report.\n\n"+
			verdictExitHelp+"; 1 also when interrupted (a partial report, no verdict).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args, append(clusterPositive(), "window", "rate")...); err != nil {
		return demo.Options{}, rep, err
	}
	if err := rep.check(); err != nil {
		return demo.Options{}, rep, err
	}
	cluster, err := cf.config()
	if err != nil {
		return demo.Options{}, rep, err
	}
	name, err := askedTrace(fs, tf, *generated)
	if err != nil {
		return demo.Options{}, rep, err
	}
	cluster.ProgressTerminal = isTerminal(stderr)
	opts := demo.Options{
		Trace: demo.TraceOptions{Name: name, Dir: tf.dir, Generated: *generated, From: *from, Window: *window,
			Rate: *rate, Finder: trace.Finder{Getenv: os.Getenv}},
		Cluster: cluster,
	}
	opts.Progress = rep.progress(stderr)
	opts.LiveProgress = opts.Progress
	if err := opts.Validate(); err != nil {
		return demo.Options{}, rep, flagError(fs, err, nil)
	}
	return opts, rep, nil
}

// askedTrace returns the trace --trace names when the flag was given
// (with --generated it is a usage error), resolved to its file: a trace
// asked for that cannot be found is a usage error naming it, never a
// fallback to a generated trace. It returns "" when --trace was not
// given: the default trace, or a generated one when it is not found.
func askedTrace(fs *flag.FlagSet, tf traceFlags, generated bool) (string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "trace" })
	if !given {
		return "", nil
	}
	if generated {
		return "", usageErrorf("give --trace or --generated, not both")
	}
	path, err := trace.Finder{Getenv: os.Getenv}.Find(tf.name, tf.dir)
	if err != nil {
		return "", usageErrorf("--trace %s: %v", tf.name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", usageErrorf("--trace %s: %v", path, err)
	}
	f.Close()
	return path, nil
}
