package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/policy"
)

// hitrateFlags are the parsed flags of kvpool hitrate: one configuration
// (opts), or with --sweep the sweep (sweep.Capacities set).
type hitrateFlags struct {
	trace  traceFlags
	asJSON bool
	list   bool
	out    string
	opts   hitrate.Options
	sweep  hitrate.SweepOptions
}

// runHitrate runs the order-only hit-ratio engine on one trace: one
// configuration, or a sweep of policies × capacities written as CSV.
func runHitrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseHitrate(args, stderr)
	if err != nil {
		return err
	}
	if f.list {
		for _, s := range policy.Presets() {
			fmt.Fprintln(stdout, s)
		}
		return nil
	}
	path, reqs, err := f.trace.load(stderr)
	if err != nil {
		return err
	}
	if f.sweep.Capacities != nil {
		results, err := hitrate.Sweep(ctx, reqs, f.sweep)
		if err != nil {
			return err
		}
		for _, r := range results {
			if w := r.Warning(); w != "" {
				fmt.Fprintf(stderr, "kvpool hitrate: warning: %s (policy %s, capacity %d, and maybe others)\n", w, r.Policy, r.Capacity)
				break
			}
		}
		return writeOutput(f.out, stdout, func(w io.Writer) error {
			if f.asJSON {
				return encodeJSON(w, results)
			}
			return hitrate.WriteCSV(w, f.trace.name, results)
		})
	}
	res, err := hitrate.Run(reqs, f.opts)
	if err != nil {
		return err
	}
	if w := res.Warning(); w != "" {
		fmt.Fprintf(stderr, "kvpool hitrate: warning: %s\n", w)
	}
	if f.asJSON {
		return encodeJSON(stdout, struct {
			Trace string `json:"trace"`
			hitrate.Result
		}{path, res})
	}
	fmt.Fprintf(stdout, "%-16s %s\n", "trace", path)
	return res.WriteText(stdout)
}

// parseHitrate parses and checks the flags of kvpool hitrate.
func parseHitrate(args []string, stderr io.Writer) (hitrateFlags, error) {
	fs := newFlagSet("hitrate", stderr)
	var f hitrateFlags
	f.trace.register(fs, "conversation", traceNameUsage)
	pol := fs.String("policy", "lru", "cache policy, eviction[+admission]; with --sweep a comma list (see --list-policies)")
	capacity := fs.Int("capacity", 5000, "blocks per cache (512 tokens each); 0 = cache nothing (the recompute baseline)")
	nodes := fs.Int("nodes", 1, "number of separate caches (1 = one global cache)")
	routing := fs.String("routing", hitrate.RoundRobin, "request routing across caches: "+strings.Join(hitrate.Routings(), " or "))
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON (with --sweep: a JSON array instead of CSV)")
	fs.BoolVar(&f.list, "list-policies", false, "print the policy specs worth comparing, one per line, and exit")
	sweep := fs.String("sweep", "", "comma list of capacities: run every --policy at each and write CSV")
	fs.StringVar(&f.out, "out", "", "with --sweep, write the CSV (or JSON) here instead of stdout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool hitrate [flags]\n\nReplays a trace in timestamp order through block caches, with no timing,\nand reports the token and block hit ratios (Mooncake FAST'25 Fig 9).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args, "nodes"); err != nil || f.list {
		return f, err
	}
	specs, err := parsePolicySpecs(*pol)
	if err != nil {
		return f, err
	}
	caps, err := parseCapacities(*sweep)
	if err != nil {
		return f, err
	}
	if caps == nil && len(specs) > 1 {
		return f, usageErrorf("--policy lists %d policies; use --sweep to compare several", len(specs))
	}
	if caps == nil && f.out != "" {
		return f, usageErrorf("--out needs --sweep")
	}
	f.opts = hitrate.Options{Policy: specs[0], Capacity: *capacity, Nodes: *nodes, Routing: *routing}
	f.sweep = hitrate.SweepOptions{Policies: specs, Capacities: caps, Nodes: *nodes, Routing: *routing}
	if err := f.opts.Validate(); err != nil {
		return f, flagError(fs, err, nil)
	}
	if caps != nil {
		if err := f.sweep.Validate(); err != nil {
			return f, flagError(fs, err, nil)
		}
	}
	return f, nil
}

// parsePolicySpecs parses --policy, a comma list of policy specs.
func parsePolicySpecs(s string) ([]policy.Spec, error) {
	var specs []policy.Spec
	for _, p := range policy.SplitSpecs(s) {
		spec, err := policy.ParseSpec(p)
		if err != nil {
			return nil, usageErrorf("--policy: %v", err)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// parseCapacities parses --sweep, a comma list of capacities; nil when
// it is empty.
func parseCapacities(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var caps []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 0 {
			return nil, usageErrorf("--sweep: capacity %q is not a whole number >= 0", f)
		}
		caps = append(caps, c)
	}
	return caps, nil
}
