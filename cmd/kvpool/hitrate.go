package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// runHitrate runs the order-only hit-ratio engine on one trace: one
// configuration, or a sweep of policies × capacities written as CSV.
func runHitrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("hitrate", stderr)
	traceName := fs.String("trace", "conversation", "trace name (conversation, synthetic, toolagent) or file")
	traceDir := fs.String("trace-dir", "", "directory searched first for traces (then $"+trace.EnvTraceDir+", ./traces, ../shared/traces)")
	lenient := fs.Bool("lenient", false, "skip malformed trace lines instead of failing")
	pol := fs.String("policy", "lru", "cache policy, eviction[+admission]; with --sweep a comma list (see --list-policies)")
	capacity := fs.Int("capacity", 5000, "blocks per cache (512 tokens each); 0 caches nothing")
	nodes := fs.Int("nodes", 1, "number of separate caches (1 = one global cache)")
	routing := fs.String("routing", hitrate.RoundRobin, "request routing across caches: "+strings.Join(hitrate.Routings(), " or "))
	asJSON := fs.Bool("json", false, "print the result as JSON (with --sweep: a JSON array instead of CSV)")
	list := fs.Bool("list-policies", false, "print the policy specs worth comparing, one per line, and exit")
	sweep := fs.String("sweep", "", "comma list of capacities: run every --policy at each and write CSV")
	out := fs.String("out", "", "with --sweep, write the CSV (or JSON) here instead of stdout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool hitrate [flags]\n\nReplays a trace in timestamp order through block caches, with no timing,\nand reports the token and block hit ratios (Mooncake FAST'25 Fig 9).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *list {
		for _, s := range policy.Presets() {
			fmt.Fprintln(stdout, s)
		}
		return nil
	}

	var specs []policy.Spec
	for _, p := range policy.SplitSpecs(*pol) {
		s, err := policy.ParseSpec(p)
		if err != nil {
			return usageErrorf("--policy: %v", err)
		}
		specs = append(specs, s)
	}
	var caps []int
	if *sweep != "" {
		for _, f := range strings.Split(*sweep, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || c < 0 {
				return usageErrorf("--sweep: capacity %q is not a whole number >= 0", f)
			}
			caps = append(caps, c)
		}
	} else {
		if len(specs) > 1 {
			return usageErrorf("--policy lists %d policies; use --sweep to compare several", len(specs))
		}
		if *out != "" {
			return usageErrorf("--out needs --sweep")
		}
	}
	opts := hitrate.Options{Policy: specs[0], Capacity: *capacity, Nodes: *nodes, Routing: *routing}
	sweepOpts := hitrate.SweepOptions{Policies: specs, Capacities: caps, Nodes: *nodes, Routing: *routing}
	if err := opts.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	if *nodes < 1 {
		return usageErrorf("--nodes is %d, want >= 1", *nodes)
	}
	if caps != nil {
		if err := sweepOpts.Validate(); err != nil {
			return usageErrorf("%v", err)
		}
	}

	path, reqs, err := loadTrace(*traceName, *traceDir, *lenient, stderr)
	if err != nil {
		return err
	}

	if caps != nil {
		results, err := hitrate.Sweep(ctx, reqs, sweepOpts)
		if err != nil {
			return err
		}
		return writeOutput(*out, stdout, func(w io.Writer) error {
			if *asJSON {
				return encodeJSON(w, results)
			}
			return hitrate.WriteCSV(w, *traceName, results)
		})
	}
	res, err := hitrate.Run(reqs, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		return encodeJSON(stdout, struct {
			Trace string `json:"trace"`
			hitrate.Result
		}{path, res})
	}
	fmt.Fprintf(stdout, "%-16s %s\n", "trace", path)
	return res.WriteText(stdout)
}

// encodeJSON writes v as indented JSON.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
