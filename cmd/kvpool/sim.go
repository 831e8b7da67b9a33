package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/lab/sim"
)

// simOutput is the --json document of kvpool sim.
type simOutput struct {
	Trace   string      `json:"trace"`
	Summary sim.Summary `json:"summary"`
	// Goodput is set with --goodput.
	Goodput *simGoodput `json:"goodput,omitempty"`
}

type simGoodput struct {
	RateMultiplier float64 `json:"rate_multiplier"`
	RequestsPerSec float64 `json:"requests_per_s"`
	Target         float64 `json:"slo_attainment_target"`
}

// runSim runs the discrete-event cluster simulator on one trace.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim", stderr)
	traceName := fs.String("trace", "conversation", "trace name (conversation, synthetic, toolagent) or file")
	traceDir := fs.String("trace-dir", "", "directory searched first for traces (then $KVPOOL_TRACE_DIR, ./traces, ../shared/traces)")
	lenient := fs.Bool("lenient", false, "skip malformed trace lines instead of failing")
	mode := fs.String("mode", string(sim.DefaultMode), "cache mode: recompute, local or global")
	routing := fs.String("routing", string(sim.DefaultRouting), "routing: rr, least-loaded, cache-aware or joint (cache-aware that also counts prefixes pending on an instance)")
	replication := fs.String("replication", string(sim.DefaultReplication), "global mode: which fetched blocks become local replicas: all, or hot (asked for by --hot-accesses requests)")
	hotAccesses := fs.Int("hot-accesses", sim.DefaultHotAccesses, "with --replication hot: requests that must ask for a block before a fetch replicates it")
	evictRedundant := fs.Bool("evict-redundant-first", false, "global mode: evict a redundant replica before the last copy of a block")
	instances := fs.Int("instances", sim.DefaultInstances, "prefill instances")
	ramBlocks := fs.Int("ram-blocks", sim.DefaultRAMBlocks, "RAM cache per instance, in 512-token blocks")
	ssdBlocks := fs.Int("ssd-blocks", 0, "SSD cache per instance, in blocks (0 = no SSD tier)")
	pol := fs.String("policy", sim.DefaultPolicy, "cache policy spec, eviction[+admission] (see kvpool hitrate --list-policies)")
	nic := fs.Float64("nic-gbps", sim.DefaultNICGbps, "NIC bandwidth per instance and direction, Gbit/s")
	ssdGBps := fs.Float64("ssd-gbps", sim.DefaultSSDGBps, "SSD read bandwidth per instance, GB/s")
	rate := fs.Float64("rate", 1, "arrival-rate multiplier (arrival = timestamp / rate)")
	slo := fs.Float64("slo", sim.DefaultSLOSeconds, "TTFT SLO in seconds")
	prefetch := fs.Bool("prefetch", true, "start block transfers at arrival, overlapping the queue")
	reject := fs.Bool("reject", false, "reject requests whose estimated TTFT exceeds the SLO")
	profile := fs.String("profile", "", "cost profile (default "+costmodel.Default().Name+")")
	records := fs.String("records", "", "write one CSV row per request to this file")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	goodput := fs.Bool("goodput", false, "also find the goodput: the highest rate with >= 90% of requests within the SLO")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool sim [flags]\n\nReplays a trace on a simulated cluster of prefill instances in model time\nand reports hit ratios, bytes moved, TTFT and SLO attainment.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"--instances", *instances > 0},
		{"--ram-blocks", *ramBlocks > 0},
		{"--ssd-blocks", *ssdBlocks >= 0},
		{"--nic-gbps", *nic > 0},
		{"--ssd-gbps", *ssdGBps > 0},
		{"--rate", *rate > 0},
		{"--slo", *slo > 0},
	} {
		if !c.ok {
			return usageErrorf("%s must be positive", c.name)
		}
	}
	opts := sim.Options{
		Instances:      *instances,
		RAMBlocks:      *ramBlocks,
		SSDBlocks:      *ssdBlocks,
		Mode:           sim.Mode(*mode),
		Routing:        sim.Routing(*routing),
		Policy:         *pol,
		RateMultiplier: *rate,
		NICGbps:        *nic,
		SSDGBps:        *ssdGBps,
		SLOSeconds:     *slo,
		NoPrefetch:     !*prefetch,
		Reject:         *reject,

		Replication:         sim.Replication(*replication),
		HotAccesses:         *hotAccesses,
		EvictRedundantFirst: *evictRedundant,
	}
	if *profile != "" {
		p, err := costmodel.Lookup(*profile)
		if err != nil {
			return usageErrorf("--profile: %v", err)
		}
		opts.Profile = p
	}
	if err := opts.Validate(); err != nil {
		return usageErrorf("%v", err)
	}

	path, reqs, err := loadTrace(*traceName, *traceDir, *lenient, stderr)
	if err != nil {
		return err
	}
	res, err := sim.Run(ctx, reqs, opts)
	if err != nil {
		return err
	}
	out := simOutput{Trace: path, Summary: res.Summary}
	if *goodput {
		m, rps, err := sim.Goodput(ctx, reqs, opts, sim.DefaultGoodputTarget)
		if err != nil {
			return err
		}
		out.Goodput = &simGoodput{RateMultiplier: m, RequestsPerSec: rps, Target: sim.DefaultGoodputTarget}
	}
	if *records != "" {
		if err := writeRecords(*records, res.Records); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "%-16s %s (%d requests)\n", "trace", path, len(reqs))
	if err := res.Summary.WriteText(stdout); err != nil {
		return err
	}
	if out.Goodput != nil {
		fmt.Fprintf(stdout, "%-16s %.3g req/s (rate ×%.3g) with >= %.0f%% within %g s\n", "goodput",
			out.Goodput.RequestsPerSec, out.Goodput.RateMultiplier, 100*out.Goodput.Target, res.Summary.SLO)
	}
	if *records != "" {
		fmt.Fprintf(stdout, "%-16s %s\n", "records", *records)
	}
	return nil
}

// writeRecords writes the per-request CSV to path.
func writeRecords(path string, recs []sim.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("sim: create records file: %w", err)
	}
	if err := sim.WriteRecordsCSV(f, recs); err != nil {
		f.Close()
		return fmt.Errorf("sim: write records to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sim: close records file %s: %w", path, err)
	}
	return nil
}
