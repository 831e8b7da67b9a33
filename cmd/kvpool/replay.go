package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracesample"
	"github.com/kvpool/kvpool/internal/netns"
	"github.com/kvpool/kvpool/trace"
)

// replayOutput is the --json document of kvpool replay.
type replayOutput struct {
	Trace   string         `json:"trace"`
	Master  string         `json:"master"`
	Summary replay.Summary `json:"summary"`
}

// replayFlags are the parsed flags of kvpool replay.
type replayFlags struct {
	trace traceFlags
	out   runOutput
	// local is the size of the local cluster to start; 0 with opts.Master
	// naming a running cluster.
	local int
	// window is the --from/--to window of the trace (trace sample's).
	window tracesample.Options
	opts   replay.Options
}

// runReplay is `kvpool replay`: the live trace replayer.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// The cluster's processes, the progress line and this function all
	// write to stderr from different goroutines.
	stderr = &lockedWriter{w: stderr}
	f, err := parseReplay(args, stderr)
	if err != nil {
		return err
	}
	path, reqs, err := f.trace.load(stderr)
	if err != nil {
		return err
	}
	if reqs, err = f.cut(path, reqs); err != nil {
		return err
	}
	var res *replay.Result
	if f.local > 0 {
		res, f.opts.Master, err = replay.RunLocal(ctx, f.local, reqs, f.opts, stderr)
	} else {
		if err := f.describeCluster(ctx, stderr); err != nil {
			return err
		}
		res, err = replay.Run(ctx, reqs, f.opts)
	}
	if err != nil {
		return err
	}
	if n := res.Summary.WarmNotice(); n != "" {
		fmt.Fprintf(stderr, "kvpool replay: WARNING: %s\n", n)
	}
	if err := f.out.writeRecords("replay", res.Records); err != nil {
		return err
	}
	if f.out.json {
		if err := encodeJSON(stdout, replayOutput{Trace: path, Master: f.opts.Master, Summary: res.Summary}); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	} else {
		fmt.Fprintf(stdout, "%-16s %s\n", "trace", path)
		if err := res.Summary.WriteText(stdout); err != nil {
			return err
		}
		if f.out.records != "" {
			fmt.Fprintf(stdout, "%-16s %s\n", "records", f.out.records)
		}
	}
	if res.Summary.WrongBlocks > 0 {
		return fmt.Errorf("replay: %d wrong blocks received", res.Summary.WrongBlocks)
	}
	return nil
}

// cut applies the --from/--to window to the trace read from path.
func (f *replayFlags) cut(path string, reqs []trace.Request) ([]trace.Request, error) {
	if f.window.FromMs == 0 && f.window.ToMs == 0 {
		return reqs, nil
	}
	out, err := tracesample.Sample(reqs, f.window)
	if err != nil {
		return nil, fmt.Errorf("replay: cut the window of %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, usageErrorf("--from %g --to %g: the window of %s holds no requests", float64(f.window.FromMs)/1000,
			float64(f.window.ToMs)/1000, path)
	}
	return out, nil
}

// describeCluster asks the nodes of the running cluster --master names for
// their capacities, sets the summary's to theirs (not the flags'), and
// says what it found on stderr, with a warning when the nodes already
// hold blocks.
func (f *replayFlags) describeCluster(ctx context.Context, stderr io.Writer) error {
	info, err := replay.Probe(ctx, f.opts)
	if err != nil {
		return err
	}
	if len(info.Nodes) == 0 {
		return fmt.Errorf("replay: master %s lists no live node", f.opts.Master)
	}
	n := info.Nodes[0]
	f.opts.RAMBlocks, f.opts.SSDBlocks = n.RAMBlocks, n.SSDBlocks
	caps := fmt.Sprintf("%d RAM blocks", n.RAMBlocks)
	if n.SSDBlocks > 0 {
		caps += fmt.Sprintf(", %d SSD blocks", n.SSDBlocks)
	}
	caps += " each"
	if !info.Uniform() {
		var each []string
		for _, x := range info.Nodes {
			each = append(each, fmt.Sprintf("%s %d RAM/%d SSD", x.ID, x.RAMBlocks, x.SSDBlocks))
		}
		caps = "capacities differ: " + strings.Join(each, ", ") + "; the summary shows the first node's"
	}
	fmt.Fprintf(stderr, "kvpool replay: cluster of master %s: %d live nodes, %s (blocks of %d B), %d blocks stored\n",
		f.opts.Master, len(info.Nodes), caps, f.opts.WithDefaults().PayloadBytes, info.Stored())
	return nil
}

// parseReplay parses and checks the flags of kvpool replay; progress goes
// to stderr unless --quiet.
func parseReplay(args []string, stderr io.Writer) (replayFlags, error) {
	fs := newFlagSet("replay", stderr)
	var f replayFlags
	var cost costFlags
	o := &f.opts
	fs.IntVar(&f.local, "local", 0, "start a local cluster of N nodes for the run (and stop it at the end); 0 = none, use --master")
	fs.StringVar(&o.Master, "master", "", "address of a running cluster's master (instead of --local)")
	fs.StringVar(&o.Token, "token", "", "the cluster's auth token")
	f.trace.register(fs, "conversation", traceNameUsage)
	cost.register(fs, true)
	f.out.register(fs, "write one CSV row per request to this file (kvpool sim's format, model seconds)")
	mode := fs.String("mode", string(sim.DefaultMode), "cache mode: recompute, local or global")
	routing := fs.String("routing", string(sim.DefaultRouting), "routing: rr, least-loaded or cache-aware")
	payload := fs.String("payload", "64KiB", "live bytes per block (the nodes' block size)")
	fs.Float64Var(&o.Speed, "speed", replay.DefaultSpeed, "time compression S: arrivals at timestamp/S, prefill model_time/S")
	fs.IntVar(&o.RAMBlocks, "ram-blocks", sim.DefaultRAMBlocks, "RAM cache per node, in blocks (with --local; with --master the nodes' own)")
	fs.IntVar(&o.SSDBlocks, "ssd-blocks", 0, "SSD cache per node, in blocks (with --local; 0 = no SSD tier; with --master the nodes' own)")
	fs.StringVar(&o.Policy, "policy", sim.DefaultPolicy, "RAM eviction policy of the nodes (with --local)")
	from := fs.Float64("from", 0, "window start in trace seconds (inclusive); the window is shifted to start at 0")
	to := fs.Float64("to", 0, "window end in trace seconds (exclusive); 0 = end of trace")
	prefill := fs.String("prefill", string(replay.PrefillSleep), "prefill mode: sleep or cpu")
	prefetch := fs.String("prefetch", "on", "start block transfers at arrival, overlapping the queue: on or off")
	verify := fs.String("verify", string(replay.VerifyFull), "block verification: checksum, or full (regenerate and compare)")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	netMode := fs.String("net", string(replay.NetPacer), netUsage+" (kernel needs --local)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool replay [--local N | --master ADDR] [flags]\n\nReplays a trace live against a kvpool cluster under the scale model\n(docs/design.md) and reports the simulator's statistics, in model seconds.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args, append(costPositive(), "speed", "ram-blocks")...); err != nil {
		return f, err
	}
	if (f.local > 0) == (o.Master != "") {
		return f, usageErrorf("give exactly one of --local N (N > 0) and --master ADDR")
	}
	window, err := sampleOptions(fs, *from, *to, 0, 0, 0, 1)
	if err != nil {
		return f, err
	}
	f.window = window
	size, err := parsePayload(*payload)
	if err != nil {
		return f, err
	}
	switch *prefetch {
	case "on", "true":
	case "off", "false":
		o.NoPrefetch = true
	default:
		return f, usageErrorf("--prefetch %q: want on or off", *prefetch)
	}
	o.Mode, o.Routing, o.PayloadBytes = sim.Mode(*mode), sim.Routing(*routing), size
	o.Prefill, o.Verify = replay.PrefillMode(*prefill), replay.VerifyMode(*verify)
	o.NICGbps, o.SSDGBps, o.SLOSeconds = cost.nicGbps, cost.ssdGBps, cost.slo
	if !*quiet {
		o.Progress, o.ProgressTerminal = stderr, isTerminal(stderr)
	}
	if o.Profile, err = cost.costProfile(); err != nil {
		return f, err
	}
	if o.Net, err = parseNet(*netMode); err != nil {
		return f, err
	}
	if o.Net == replay.NetKernel && f.local == 0 {
		return f, usageErrorf("--net kernel: the replay puts the nodes on hosts of their own, so it needs --local N (not --master)")
	}
	if f.local > 0 {
		o.Master = "pending" // validated here, set to the real address once the cluster is up
	}
	if err := o.Validate(); err != nil {
		return f, flagError(fs, err, nil)
	}
	return f, nil
}

// isTerminal reports whether w is a terminal (a character device), where
// a progress line may be redrawn in place; through a lockedWriter, the
// writer it wraps.
func isTerminal(w io.Writer) bool {
	if l, ok := w.(*lockedWriter); ok {
		w = l.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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

// netUsage describes --net.
const netUsage = "network between the nodes: pacer (token buckets in each node, one loopback; works anywhere) or kernel (each node and its worker on a network host of its own, links shaped by the kernel; Linux, root, iproute2)"

// parseNet parses --net and, for kernel, says in one line why this
// machine cannot make network hosts (exit status 2).
func parseNet(s string) (replay.NetMode, error) {
	m := replay.NetMode(s)
	switch m {
	case replay.NetPacer:
		return m, nil
	case replay.NetKernel:
		if err := netns.Available(); err != nil {
			return m, usageErrorf("--net kernel: %v", err)
		}
		return m, nil
	}
	return m, usageErrorf("--net %q: want pacer or kernel", s)
}
