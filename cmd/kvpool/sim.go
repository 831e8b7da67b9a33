package main

import (
	"context"
	"fmt"
	"io"

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

// simFlags are the parsed flags of kvpool sim.
type simFlags struct {
	trace   traceFlags
	out     runOutput
	goodput bool
	opts    sim.Options
}

// runSim runs the discrete-event cluster simulator on one trace.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseSim(args, stderr)
	if err != nil {
		return err
	}
	path, reqs, err := f.trace.load(stderr)
	if err != nil {
		return err
	}
	res, err := sim.Run(ctx, reqs, f.opts)
	if err != nil {
		return err
	}
	out := simOutput{Trace: path, Summary: res.Summary}
	if f.goodput {
		m, rps, err := sim.Goodput(ctx, reqs, f.opts, sim.DefaultGoodputTarget)
		if err != nil {
			return err
		}
		out.Goodput = &simGoodput{RateMultiplier: m, RequestsPerSec: rps, Target: sim.DefaultGoodputTarget}
	}
	if err := f.out.writeRecords("sim", res.Records); err != nil {
		return err
	}
	if f.out.json {
		return encodeJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "%-16s %s (%d requests)\n", "trace", path, len(reqs))
	if err := res.Summary.WriteText(stdout); err != nil {
		return err
	}
	if out.Goodput != nil {
		fmt.Fprintf(stdout, "%-16s %.3g req/s (rate ×%.3g) with >= %.0f%% within %g s\n", "goodput",
			out.Goodput.RequestsPerSec, out.Goodput.RateMultiplier, 100*out.Goodput.Target, res.Summary.SLO)
	}
	if f.out.records != "" {
		fmt.Fprintf(stdout, "%-16s %s\n", "records", f.out.records)
	}
	return nil
}

// parseSim parses the flags of kvpool sim into sim.Options.
func parseSim(args []string, stderr io.Writer) (simFlags, error) {
	fs := newFlagSet("sim", stderr)
	var f simFlags
	var cost costFlags
	f.trace.register(fs, "conversation", traceNameUsage)
	cost.register(fs, false)
	f.out.register(fs, "write one CSV row per request to this file")
	o := &f.opts
	mode := fs.String("mode", string(sim.DefaultMode), "cache mode: recompute, local or global")
	routing := fs.String("routing", string(sim.DefaultRouting), "routing: rr, least-loaded, cache-aware or joint (cache-aware that also counts prefixes pending on an instance)")
	replication := fs.String("replication", string(sim.DefaultReplication), "global mode: which fetched blocks become local replicas: all, or hot (asked for by --hot-accesses requests)")
	fs.IntVar(&o.HotAccesses, "hot-accesses", sim.DefaultHotAccesses, "with --replication hot: requests that must ask for a block before a fetch replicates it")
	fs.BoolVar(&o.EvictRedundantFirst, "evict-redundant-first", false, "global mode: evict a redundant replica before the last copy of a block")
	fs.IntVar(&o.Instances, "instances", sim.DefaultInstances, "prefill instances")
	fs.IntVar(&o.RAMBlocks, "ram-blocks", sim.DefaultRAMBlocks, "RAM cache per instance, in 512-token blocks")
	fs.IntVar(&o.SSDBlocks, "ssd-blocks", 0, "SSD cache per instance, in blocks (0 = no SSD tier)")
	fs.StringVar(&o.Policy, "policy", sim.DefaultPolicy, "cache policy spec, eviction[+admission] (see kvpool hitrate --list-policies)")
	fs.Float64Var(&o.RateMultiplier, "rate", 1, "arrival-rate multiplier (arrival = timestamp / rate)")
	prefetch := fs.Bool("prefetch", true, "start block transfers at arrival, overlapping the queue")
	fs.BoolVar(&o.Reject, "reject", false, "reject requests whose estimated TTFT exceeds the SLO")
	fs.BoolVar(&f.goodput, "goodput", false, "also find the goodput: the highest rate with >= 90% of requests within the SLO")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool sim [flags]\n\nReplays a trace on a simulated cluster of prefill instances in model time\nand reports hit ratios, bytes moved, TTFT and SLO attainment.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args, append(costPositive(), "instances", "ram-blocks", "rate", "hot-accesses")...); err != nil {
		return f, err
	}
	o.Mode, o.Routing, o.Replication, o.NoPrefetch = sim.Mode(*mode), sim.Routing(*routing), sim.Replication(*replication), !*prefetch
	o.NICGbps, o.SSDGBps, o.SLOSeconds = cost.nicGbps, cost.ssdGBps, cost.slo
	p, err := cost.costProfile()
	if err != nil {
		return f, err
	}
	o.Profile = p
	if err := o.Validate(); err != nil {
		return f, flagError(fs, err, nil)
	}
	return f, nil
}
