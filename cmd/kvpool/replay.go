package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
)

// replayOutput is the --json document of kvpool replay.
type replayOutput struct {
	Trace   string         `json:"trace"`
	Master  string         `json:"master"`
	Summary replay.Summary `json:"summary"`
}

// runReplay is `kvpool replay`: the live trace replayer.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", stderr)
	local := fs.Int("local", 0, "start a local cluster of N nodes for the run (and stop it at the end)")
	masterAddr := fs.String("master", "", "address of a running cluster's master (instead of --local)")
	token := fs.String("token", "", "the cluster's auth token")
	traceName := fs.String("trace", "conversation", "trace name (conversation, synthetic, toolagent) or file")
	traceDir := fs.String("trace-dir", "", "directory searched first for traces (then $KVPOOL_TRACE_DIR, ./traces, ../shared/traces)")
	lenient := fs.Bool("lenient", false, "skip malformed trace lines instead of failing")
	mode := fs.String("mode", string(sim.DefaultMode), "cache mode: recompute, local or global")
	routing := fs.String("routing", string(sim.DefaultRouting), "routing: rr, least-loaded or cache-aware")
	payloadFlag := fs.String("payload", "64KiB", "live bytes per block (the nodes' block size)")
	speed := fs.Float64("speed", replay.DefaultSpeed, "time compression S: arrivals at timestamp/S, prefill model_time/S")
	nic := fs.Float64("nic-gbps", sim.DefaultNICGbps, "modelled NIC bandwidth per node and direction, Gbit/s")
	ssdGBps := fs.Float64("ssd-gbps", sim.DefaultSSDGBps, "modelled SSD bandwidth per node, GB/s")
	ramBlocks := fs.Int("ram-blocks", sim.DefaultRAMBlocks, "RAM cache per node, in blocks (with --local)")
	ssdBlocks := fs.Int("ssd-blocks", 0, "SSD cache per node, in blocks (with --local; 0 = no SSD tier)")
	pol := fs.String("policy", sim.DefaultPolicy, "RAM eviction policy of the nodes (with --local)")
	prefill := fs.String("prefill", string(replay.PrefillSleep), "prefill mode: sleep or cpu")
	prefetch := fs.String("prefetch", "on", "start block transfers at arrival, overlapping the queue: on or off")
	verify := fs.String("verify", string(replay.VerifyFull), "block verification: checksum, or full (regenerate and compare)")
	slo := fs.Float64("slo", sim.DefaultSLOSeconds, "TTFT SLO in model seconds")
	profile := fs.String("profile", "", "cost profile (default "+costmodel.Default().Name+")")
	records := fs.String("records", "", "write one CSV row per request to this file (kvpool sim's format, model seconds)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool replay [--local N | --master ADDR] [flags]\n\nReplays a trace live against a kvpool cluster under the scale model\n(DESIGN.md) and reports the simulator's statistics, in model seconds.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	// The cluster's processes, the progress line and this function all
	// write to stderr from different goroutines.
	stderr = &lockedWriter{w: stderr}
	if (*local > 0) == (*masterAddr != "") {
		return usageErrorf("give exactly one of --local N (N > 0) and --master ADDR")
	}
	if *local < 0 {
		return usageErrorf("--local must be positive, got %d", *local)
	}
	size, err := config.ParseSize(*payloadFlag)
	if err != nil {
		return usageErrorf("--payload %q: %v", *payloadFlag, err)
	}
	if int64(size) > 1<<30 {
		return usageErrorf("--payload %q: more than 1 GiB per block", *payloadFlag)
	}
	var noPrefetch bool
	switch *prefetch {
	case "on", "true":
	case "off", "false":
		noPrefetch = true
	default:
		return usageErrorf("--prefetch %q: want on or off", *prefetch)
	}
	opts := replay.Options{
		Master: *masterAddr, Token: *token,
		Mode: sim.Mode(*mode), Routing: sim.Routing(*routing),
		PayloadBytes: int(size), Speed: *speed, NICGbps: *nic, SSDGBps: *ssdGBps,
		Prefill: replay.PrefillMode(*prefill), NoPrefetch: noPrefetch, Verify: replay.VerifyMode(*verify),
		SLOSeconds: *slo, RAMBlocks: *ramBlocks, SSDBlocks: *ssdBlocks, Policy: *pol,
	}
	if !*quiet {
		opts.Progress = stderr
	}
	if *profile != "" {
		p, err := costmodel.Lookup(*profile)
		if err != nil {
			return usageErrorf("--profile: %v", err)
		}
		opts.Profile = p
	}
	if *local > 0 {
		opts.Master = "pending" // validated below with the real address
	}
	if err := opts.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	path, reqs, err := loadTrace(*traceName, *traceDir, *lenient, stderr)
	if err != nil {
		return err
	}
	if *local > 0 {
		co := replay.ClusterOptions(*local, opts)
		co.Stderr = stderr
		c, err := cluster.Start(ctx, co)
		if err != nil {
			return fmt.Errorf("replay: start a local cluster of %d nodes: %w", *local, err)
		}
		defer c.Stop()
		opts.Master = c.Master.Addr
		fmt.Fprintf(stderr, "kvpool replay: local cluster of %d nodes, master %s\n", *local, c.Master.Addr)
	}
	res, err := replay.Run(ctx, reqs, opts)
	if err != nil {
		return err
	}
	if *records != "" {
		if err := writeReplayRecords(*records, res.Records); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(replayOutput{Trace: path, Master: opts.Master, Summary: res.Summary}); err != nil {
			return fmt.Errorf("replay: write JSON summary: %w", err)
		}
	} else {
		fmt.Fprintf(stdout, "%-16s %s\n", "trace", path)
		if err := res.Summary.WriteText(stdout); err != nil {
			return err
		}
		if *records != "" {
			fmt.Fprintf(stdout, "%-16s %s\n", "records", *records)
		}
	}
	if res.Summary.WrongBlocks > 0 {
		return fmt.Errorf("replay: %d wrong blocks received", res.Summary.WrongBlocks)
	}
	return nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// writeReplayRecords writes the per-request CSV to path.
func writeReplayRecords(path string, recs []sim.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("replay: create records file: %w", err)
	}
	if err := sim.WriteRecordsCSV(f, recs); err != nil {
		f.Close()
		return fmt.Errorf("replay: write records to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("replay: close records file %s: %w", path, err)
	}
	return nil
}
