package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/demo"
	"github.com/kvpool/kvpool/internal/lab/replay"
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
		nodes:        "--live/--validate: nodes per cluster",
		speed:        "--live/--validate: time compression of the live runs",
		payload:      "--live/--validate: live bytes per block",
		ramBlocks:    "--live/--validate: RAM cache per node, in blocks",
		speedDefault: validate.DefaultSpeed,
	}
}

// compareFlags are kvpool compare's flags.
type compareFlags struct {
	cluster             clusterFlags
	report              reportFlags
	sim, live, validate bool
	traces, traceDir    string
	noGoodput, lenient  bool
	rate, nic           float64
	workers             int
	trace               string
	generated           bool
	modes, routing      string
	from, window        time.Duration
	first               int
	liveRate            float64
	skipTTFT            bool
	policy              string
	liveBandwidths      string
}

// register declares kvpool compare's flags on fs.
func (f *compareFlags) register(fs *flag.FlagSet) {
	f.cluster.register(fs, compareClusterHelp())
	f.report.register(fs, "report/compare", "no progress lines")
	fs.BoolVar(&f.sim, "sim", false, "run the arms in the simulator (model time)")
	fs.BoolVar(&f.live, "live", false, "--sim plus live arms on a subsample of each trace (a local cluster per arm), in a \"Live vs simulated\" section")
	fs.BoolVar(&f.validate, "validate", false, "run --mode arms live and simulated on a subsample and fail unless they agree (hit ratio ±2 points, mean TTFT ±20%, 0 wrong blocks); INCONCLUSIVE (exit 3) when the machine did not keep up")
	fs.StringVar(&f.traces, "traces", "conversation,synthetic", "comma-separated trace names or files")
	fs.StringVar(&f.traceDir, "trace-dir", "", "directory searched first for traces (then $KVPOOL_TRACE_DIR, ./traces)")
	fs.BoolVar(&f.noGoodput, "no-goodput", false, "skip the goodput bisection (the slowest part)")
	fs.Float64Var(&f.rate, "rate", 1, "arrival-rate multiplier for every timed arm")
	fs.Float64Var(&f.nic, "nic-gbps", sim.DefaultNICGbps, "NIC bandwidth per instance in Gbps")
	fs.IntVar(&f.workers, "workers", 0, "experiments run at once (0 = one per CPU)")
	fs.BoolVar(&f.lenient, "lenient", false, "skip malformed trace lines instead of failing")
	// Live subsample and cluster (--live, --validate).
	fs.StringVar(&f.trace, "trace", demo.DefaultTrace, "--validate: trace name or file")
	fs.BoolVar(&f.generated, "generated", false, "--validate: use a generated chat trace")
	fs.StringVar(&f.modes, "mode", "local,global", "--validate: comma-separated cache modes to validate")
	fs.StringVar(&f.routing, "routing", string(sim.RoutingCacheAware), "--validate: routing of the validated arms")
	fs.DurationVar(&f.from, "from", 0, "--live/--validate: start of the subsample window in trace time (0 = the trace's start)")
	fs.DurationVar(&f.window, "window", demo.DefaultWindow, "--live/--validate: length of the subsample window")
	fs.IntVar(&f.first, "first", 0, "--live/--validate: keep only the first N requests of the window (0 = all)")
	fs.Float64Var(&f.liveRate, "live-rate", demo.DefaultRate, "--live/--validate: arrival-rate multiplier of the subsample (0.5: 4 nodes stand in for ~10)")
	fs.BoolVar(&f.skipTTFT, "skip-ttft", false, "--validate: report the mean TTFT comparison without judging it")
	fs.StringVar(&f.policy, "policy", sim.DefaultPolicy, "--live/--validate: RAM eviction policy of the nodes and the simulated instances (lru, kvchain, ...)")
	fs.StringVar(&f.liveBandwidths, "live-bandwidths", "", fmt.Sprintf("--live: also run the Fig 13 sweep live (global rr) at these NIC bandwidths, Gbps, comma-separated; with --net kernel once with the pacers and once with kernel links (default: none; with --net kernel %s)", joinFloats(compare.DefaultLiveBandwidths())))
}

// joinFloats lists vs comma-separated.
func joinFloats(vs []float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(out, ",")
}

// parseBandwidths parses --live-bandwidths.
func parseBandwidths(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, usageErrorf("--live-bandwidths %q: %q is not a bandwidth in Gbps > 0", s, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// compareUsage prints kvpool compare's usage and fs's flags to stderr.
func compareUsage(fs *flag.FlagSet, stderr io.Writer) func() {
	return func() {
		fmt.Fprintln(stderr, "usage: kvpool compare --sim|--live|--validate [flags]\n\nRuns the standard matrix (hit ratio vs capacity per policy, local vs global,\nTTFT by scheduler, TTFT vs bandwidth, goodput) on each trace and writes a report.\n--live adds live arms on a subsample; --validate checks live against simulated.\n\n"+
			"--validate: "+verdictExitHelp+".\n\nflags:")
		fs.PrintDefaults()
	}
}

// parseCompare parses kvpool compare's flags.
func parseCompare(args []string, stderr io.Writer) (*compareRun, error) {
	fs := newFlagSet("compare", stderr)
	var f compareFlags
	f.register(fs)
	fs.Usage = compareUsage(fs, stderr)
	if err := parseNoArgs(fs, args, append(clusterPositive(), "rate", "nic-gbps", "window", "live-rate")...); err != nil {
		return nil, err
	}
	n := 0
	for _, b := range []bool{f.sim, f.live, f.validate} {
		if b {
			n++
		}
	}
	if n != 1 {
		return nil, usageErrorf("give exactly one of --sim, --live and --validate")
	}
	if f.sim && f.cluster.net != string(replay.NetPacer) {
		return nil, usageErrorf("--net %q: the network mode of the live runs (--live, --validate); --sim models the network", f.cluster.net)
	}
	if !f.validate { // --validate writes no report directory
		if err := f.report.check(); err != nil {
			return nil, err
		}
	}
	r := &compareRun{validate: f.validate, traceDir: f.traceDir, lenient: f.lenient, out: f.report.out, modes: f.modes,
		routing: sim.Routing(f.routing), quiet: f.report.quiet}
	for _, name := range strings.Split(f.traces, ",") {
		if name = strings.TrimSpace(name); name != "" {
			r.traces = append(r.traces, name)
		}
	}
	if f.live || f.validate {
		if err := f.liveRun(fs, r, stderr); err != nil {
			return nil, flagError(fs, err, map[string]string{"Rate": "live-rate"})
		}
	}
	r.opts = compare.Options{RateMultiplier: f.rate, NICGbps: f.nic, Workers: f.workers, SkipGoodput: f.noGoodput,
		Progress: f.report.progress(stderr)}
	if f.live {
		s := r.sample.WithDefaults()
		r.opts.Live = validate.LiveFunc(validate.Sample{From: s.From, Window: s.Window, First: s.First, Rate: s.Rate}, r.cluster)
		kernel := r.cluster.Net == replay.NetKernel
		switch {
		case f.liveBandwidths != "":
			bws, err := parseBandwidths(f.liveBandwidths)
			if err != nil {
				return nil, err
			}
			r.opts.LiveBandwidths = bws
		case kernel:
			r.opts.LiveBandwidths = compare.DefaultLiveBandwidths()
		}
		if kernel {
			r.opts.LiveNets = []replay.NetMode{replay.NetPacer, replay.NetKernel}
		}
		// Every sweep run is checked now, not when the sweep reaches it.
		for _, bw := range r.opts.LiveBandwidths {
			for _, net := range append([]replay.NetMode{r.cluster.Net}, r.opts.LiveNets...) {
				c := r.cluster
				c.NICGbps, c.Net = bw, net
				if err := c.Validate(); err != nil {
					return nil, usageErrorf("--live-bandwidths %g Gbps (net %s): %v", bw, c.WithDefaults().Net, err)
				}
			}
		}
	} else if f.liveBandwidths != "" {
		return nil, usageErrorf("--live-bandwidths runs a live sweep: add --live")
	}
	return r, nil
}

// liveRun sets r's cluster and subsample (--live and --validate) from the
// flags.
func (f *compareFlags) liveRun(fs *flag.FlagSet, r *compareRun, stderr io.Writer) error {
	cluster, err := f.cluster.config()
	if err != nil {
		return err
	}
	cluster.NICGbps, cluster.SkipTTFT, cluster.Policy = f.nic, f.skipTTFT, f.policy
	cluster.Progress, cluster.ProgressTerminal = f.report.progress(stderr), isTerminal(stderr)
	if err := cluster.Validate(); err != nil {
		return err
	}
	if f.validate {
		for _, m := range strings.Split(f.modes, ",") {
			c := cluster
			c.Mode, c.Routing = sim.Mode(strings.TrimSpace(m)), sim.Routing(f.routing)
			if err := c.Validate(); err != nil {
				return err
			}
		}
	}
	r.cluster = cluster
	name := ""
	if f.validate {
		var err error
		if name, err = askedTrace(fs, traceFlags{name: f.trace, dir: f.traceDir}, f.generated); err != nil {
			return err
		}
	}
	r.sample = demo.TraceOptions{Name: name, Dir: f.traceDir, Generated: f.generated, From: f.from, Window: f.window,
		First: f.first, Rate: f.liveRate, Finder: trace.Finder{Getenv: os.Getenv}}
	if err := r.sample.Validate(); err != nil {
		return err
	}
	return nil
}

// verdictExitHelp documents the exit status of a command that judges
// live against simulated runs (validate.Verdict.ExitCode).
var verdictExitHelp = fmt.Sprintf("exit status %d PASS (live and simulated agree in every run); %d FAIL (a judged\n"+
	"check disagrees, or a wrong block); %d INCONCLUSIVE (nothing judged disagrees, but the\n"+
	"machine did not keep up with a live run: dispatch lag p99 over %v, one heartbeat of the\n"+
	"replay's cluster, or requests late on average (dispatch and prefill timers) by over a\n"+
	"quarter of the TTFT tolerance in model\n"+
	"time; its mean TTFT, and past the lag bound a disagreeing hit ratio, were not judged:\n"+
	"rerun with the --speed it suggests); 2 bad flags",
	validate.ExitPass, validate.ExitFail, validate.ExitInconclusive, replay.MaxLagP99)

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
		return exitError{err: err, code: validate.ExitInconclusive}
	}
	return err
}
