package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/demo"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/validate"
	"github.com/kvpool/kvpool/trace"
)

// compareRun is kvpool compare's command line, parsed.
type compareRun struct {
	// validate selects --validate; otherwise opts runs (--sim, or --live
	// when opts.Live is set).
	validate bool
	// traces, traceDir and lenient name the traces of --sim and --live.
	traces   []string
	traceDir string
	lenient  bool
	out      string
	opts     compare.Options
	// sample and cluster are the live subsample and cluster of --live
	// and --validate; modes and routing the validated arms.
	sample  demo.TraceOptions
	cluster validate.Config
	modes   string
	routing sim.Routing
	quiet   bool
}

// runCompare is kvpool compare: --validate runs validate.RunSuite,
// --sim and --live compare.RunReport.
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr}
	r, err := parseCompare(args, stderr)
	if err != nil {
		return err
	}
	if r.validate {
		return runValidate(ctx, r, stdout, stderr)
	}
	for _, name := range r.traces {
		path, reqs, err := loadTrace(name, r.traceDir, r.lenient, stderr)
		if err != nil {
			return err
		}
		r.opts.Traces = append(r.opts.Traces, compare.Trace{Name: compare.TraceName(path), Requests: reqs})
	}
	_, err = compare.RunReport(ctx, r.opts, r.out, stdout)
	return err
}

// compareClusterHelp is the cluster flags' help in kvpool compare.
func compareClusterHelp() clusterHelp {
	return clusterHelp{
		nodes:     "--live/--validate: nodes per cluster",
		speed:     "--live/--validate: time compression of the live runs",
		payload:   "--live/--validate: live bytes per block",
		ramBlocks: "--live/--validate: RAM cache per node, in blocks",
	}
}

// parseCompare parses kvpool compare's flags.
func parseCompare(args []string, stderr io.Writer) (*compareRun, error) {
	fs := newFlagSet("compare", stderr)
	var cf clusterFlags
	var rep reportFlags
	cf.register(fs, compareClusterHelp())
	rep.register(fs, "report", "no progress lines")
	simFlag := fs.Bool("sim", false, "run the arms in the simulator (model time)")
	liveFlag := fs.Bool("live", false, "--sim plus live arms on a subsample of each trace (a local cluster per arm), in a \"Live vs simulated\" section")
	validateFlag := fs.Bool("validate", false, "run --mode arms live and simulated on a subsample and fail unless they agree (hit ratio ±2 points, mean TTFT ±20%, 0 wrong blocks); INCONCLUSIVE (exit 3) when the machine did not keep up")
	traces := fs.String("traces", "conversation,synthetic", "comma-separated trace names or files")
	traceDir := fs.String("trace-dir", "", "directory searched first for traces (then $KVPOOL_TRACE_DIR, ./traces)")
	noGoodput := fs.Bool("no-goodput", false, "skip the goodput bisection (the slowest part)")
	rate := fs.Float64("rate", 1, "arrival-rate multiplier for every timed arm")
	nic := fs.Float64("nic-gbps", 0, "NIC bandwidth per instance in Gbps (default 100)")
	workers := fs.Int("workers", 0, "experiments run at once (default: number of CPUs)")
	lenient := fs.Bool("lenient", false, "skip malformed trace lines instead of failing")
	// Live subsample and cluster (--live, --validate).
	traceName := fs.String("trace", demo.DefaultTrace, "--validate: trace name or file")
	generated := fs.Bool("generated", false, "--validate: use a generated chat trace")
	modes := fs.String("mode", "local,global", "--validate: comma-separated cache modes to validate")
	routing := fs.String("routing", string(sim.RoutingCacheAware), "--validate: routing of the validated arms")
	from := fs.Duration("from", 0, "--live/--validate: start of the subsample window in trace time")
	window := fs.Duration("window", demo.DefaultWindow, "--live/--validate: length of the subsample window")
	first := fs.Int("first", 0, "--live/--validate: keep only the first N requests of the window (0 = all)")
	liveRate := fs.Float64("live-rate", demo.DefaultRate, "--live/--validate: arrival-rate multiplier of the subsample (0.5: 4 nodes stand in for ~10)")
	skipTTFT := fs.Bool("skip-ttft", false, "--validate: report the mean TTFT comparison without judging it")
	policyFlag := fs.String("policy", sim.DefaultPolicy, "--live/--validate: RAM eviction policy of the nodes and the simulated instances (lru, kvchain, ...)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool compare --sim|--live|--validate [flags]\n\nRuns the standard matrix (hit ratio vs capacity per policy, local vs global,\nTTFT by scheduler, TTFT vs bandwidth, goodput) on each trace and writes a report.\n--live adds live arms on a subsample; --validate checks live against simulated.\n\n"+
			"exit status of --validate: 0 PASS (live and simulated agree); 1 FAIL (they disagree, or a\n"+
			"wrong block); 3 INCONCLUSIVE (nothing judged disagrees, but the machine did not keep up\n"+
			"with a live run: dispatch lag p99 over 10 ms, or requests late on average (dispatch and\n"+
			"prefill timers) by over a quarter of the TTFT tolerance in model time; its mean TTFT,\n"+
			"and when p99 was over 10 ms a disagreeing hit ratio, were not judged: rerun with the\n"+
			"--speed it suggests); 2 bad flags.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args); err != nil {
		return nil, err
	}
	n := 0
	for _, b := range []bool{*simFlag, *liveFlag, *validateFlag} {
		if b {
			n++
		}
	}
	if n != 1 {
		return nil, usageErrorf("give exactly one of --sim, --live and --validate")
	}
	r := &compareRun{validate: *validateFlag, traceDir: *traceDir, lenient: *lenient, out: rep.out, modes: *modes,
		routing: sim.Routing(*routing), quiet: rep.quiet}
	for _, name := range strings.Split(*traces, ",") {
		if name = strings.TrimSpace(name); name != "" {
			r.traces = append(r.traces, name)
		}
	}
	if *liveFlag || *validateFlag {
		cluster, err := cf.config()
		if err != nil {
			return nil, err
		}
		cluster.NICGbps, cluster.SkipTTFT, cluster.Policy = *nic, *skipTTFT, *policyFlag
		cluster.Progress = rep.progress(stderr)
		if err := cluster.Validate(); err != nil {
			return nil, usageErrorf("%v", err)
		}
		r.cluster = cluster
		r.sample = demo.TraceOptions{Name: *traceName, Dir: *traceDir, Generated: *generated, From: *from, Window: *window,
			First: *first, Rate: *liveRate, Finder: trace.Finder{Getenv: os.Getenv}}
		if err := r.sample.Validate(); err != nil {
			return nil, usageErrorf("%v", err)
		}
	}
	r.opts = compare.Options{RateMultiplier: *rate, NICGbps: *nic, Workers: *workers, SkipGoodput: *noGoodput,
		Progress: rep.progress(stderr)}
	if *liveFlag {
		s := r.sample.WithDefaults()
		r.opts.Live = validate.LiveFunc(validate.Sample{From: s.From, Window: s.Window, First: s.First, Rate: s.Rate}, r.cluster)
	}
	return r, nil
}

// exitInconclusive is the exit code of kvpool compare --validate when the
// machine did not keep up with the live runs (INCONCLUSIVE): distinct
// from FAIL's 1 and a usage error's 2.
const exitInconclusive = 3

// exitError is an error with its own exit code (main's runWith uses it).
type exitError struct {
	err  error
	code int
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// ExitCode is the process's exit code for e.
func (e exitError) ExitCode() int { return e.code }

// runValidate is kvpool compare --validate: the modes become one
// configuration each, the window is loaded, and validate.RunSuite runs
// them.
func runValidate(ctx context.Context, r *compareRun, stdout, stderr io.Writer) error {
	var cfgs []validate.Config
	for _, m := range strings.Split(r.modes, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		c := r.cluster
		c.Mode, c.Routing = sim.Mode(m), r.routing
		if err := c.Validate(); err != nil {
			return usageErrorf("--mode %s: %v", m, err)
		}
		cfgs = append(cfgs, c)
	}
	if len(cfgs) == 0 {
		return usageErrorf("--mode: no mode given")
	}
	w, err := demo.LoadWindow(r.sample)
	if err != nil {
		return err
	}
	_, err = validate.RunSuite(ctx, validate.SuiteOptions{Requests: w.Requests, TraceName: w.Name, FromSeconds: w.FromSeconds,
		WindowSeconds: w.WindowSeconds, Rate: w.Rate, Notice: w.Notice, Configs: cfgs,
		Log: stderr, LogPrefix: "kvpool compare: ", Quiet: r.quiet}, stdout)
	if errors.Is(err, validate.ErrInconclusive) {
		return exitError{err: err, code: exitInconclusive}
	}
	return err
}
