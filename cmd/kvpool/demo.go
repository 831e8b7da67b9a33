package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/lab/demo"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/validate"
	"github.com/kvpool/kvpool/trace"
	"os"
)

// runDemo is `kvpool demo`: recompute vs local vs global, live and
// simulated, on a window of the conversation trace, with a report.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	traceName := fs.String("trace", demo.DefaultTrace, "trace name (conversation, synthetic, toolagent) or file")
	traceDir := fs.String("trace-dir", "", "directory searched first for traces (then $KVPOOL_TRACE_DIR, ./traces, ../shared/traces)")
	generated := fs.Bool("generated", false, "use a generated chat trace instead of searching for a published one")
	window := fs.Duration("window", demo.DefaultWindow, "length of the trace window replayed")
	from := fs.Duration("from", 0, "start of the window in trace time")
	rate := fs.Float64("rate", demo.DefaultRate, "arrival-rate multiplier (0.5 spreads arrivals ×2: 4 nodes stand in for the paper's ~10)")
	nodes := fs.Int("nodes", validate.DefaultNodes, "nodes (and prefill workers) of each arm's cluster")
	speed := fs.Float64("speed", validate.DefaultSpeed, "time compression S of the live runs")
	payloadFlag := fs.String("payload", "32KiB", "live bytes per block")
	ramBlocks := fs.Int("ram-blocks", sim.DefaultRAMBlocks, "RAM cache per node, in blocks (default: the paper's 3M tokens)")
	out := fs.String("out", "report", "report directory to write")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool demo [flags]\n\nReplays a window of the conversation trace live on a local cluster (a master and\nN node processes) for four arms — recompute, local LRU (rr), local cache-aware,\nglobal cache-aware — simulates the same, prints the comparison and writes a report.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	size, err := config.ParseSize(*payloadFlag)
	if err != nil {
		return usageErrorf("--payload %q: %v", *payloadFlag, err)
	}
	if int64(size) > 1<<30 {
		return usageErrorf("--payload %q: more than 1 GiB per block", *payloadFlag)
	}
	stderr = &lockedWriter{w: stderr}
	opts := demo.Options{
		Trace: demo.TraceOptions{Name: *traceName, Dir: *traceDir, Generated: *generated, From: *from, Window: *window,
			Rate: *rate, Finder: trace.Finder{Getenv: os.Getenv}},
		Cluster: validate.Config{Nodes: *nodes, Speed: *speed, PayloadBytes: int(size), RAMBlocks: *ramBlocks},
	}
	if !*quiet {
		opts.Progress, opts.LiveProgress = stderr, stderr
	}
	if err := opts.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	start := time.Now()
	res, err := demo.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	if err := res.Write(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s (%.1f s)\n", filepath.Join(*out, "index.html"), time.Since(start).Seconds())
	if n := res.WrongBlocks(); n > 0 {
		return fmt.Errorf("demo: %d wrong blocks received", n)
	}
	if res.Partial {
		return fmt.Errorf("demo: interrupted; partial report written to %s", *out)
	}
	return nil
}
