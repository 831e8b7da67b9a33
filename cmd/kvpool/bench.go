package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/kvpool/kvpool/internal/bench"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/netns"
)

// benchFlags are the parsed flags of kvpool bench.
type benchFlags struct {
	// spec is the run of --target, but for its block size; sizes are the
	// block sizes run.
	spec  bench.Spec
	sizes []int
	// vs is the comparison of --vs (vs.Against empty without it).
	vs       bench.CompareOptions
	redisBin string
	// clusterVs is --target cluster --vs tcp: the cluster beside its
	// raw-TCP limit over the same connections.
	clusterVs  bool
	asJSON     bool
	cpuprofile string
}

// runBench implements `kvpool bench`: one target (--target) or the
// side-by-side comparison (--vs redis,tcp,disk).
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseBench(args, stderr)
	if err != nil {
		return err
	}
	if f.cpuprofile != "" {
		stop, err := startCPUProfile(f.cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if len(f.vs.Against) > 0 {
		return runBenchVs(ctx, f, stdout, stderr)
	}
	if f.clusterVs {
		return runClusterVs(ctx, f, stdout)
	}
	var results []bench.Result
	for _, sz := range f.sizes {
		spec := f.spec
		spec.BlockSize = sz
		res, err := bench.Run(ctx, spec)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if f.asJSON {
		return encodeJSON(stdout, results)
	}
	return bench.WriteTable(stdout, results)
}

// runBenchVs runs the comparison of --vs.
func runBenchVs(ctx context.Context, f benchFlags, stdout, stderr io.Writer) error {
	cs, err := bench.CompareWithRedis(ctx, f.vs, f.redisBin, stderr)
	if err != nil {
		return err
	}
	if f.asJSON {
		return encodeJSON(stdout, cs)
	}
	return bench.WriteComparisons(stdout, cs)
}

// runClusterVs runs the cluster target beside its raw-TCP limit at each
// block size (--target cluster --vs tcp).
func runClusterVs(ctx context.Context, f benchFlags, stdout io.Writer) error {
	var cs []bench.Comparison
	for _, sz := range f.sizes {
		spec := f.spec
		spec.BlockSize = sz
		c, err := bench.CompareCluster(ctx, spec)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	if f.asJSON {
		return encodeJSON(stdout, cs)
	}
	return bench.WriteComparisons(stdout, cs)
}

// parseBench parses and checks the flags of kvpool bench; progress goes
// to stderr.
func parseBench(args []string, stderr io.Writer) (benchFlags, error) {
	fs := newFlagSet("bench", stderr)
	var f benchFlags
	s := &f.spec
	fs.StringVar(&s.Target, "target", "", "target: "+strings.Join(bench.Targets(), ", "))
	fs.StringVar(&s.Tier, "tier", "ram", "node target's tier under test: ram or ssd")
	blocks := fs.String("block", "", "block (value) size, or a comma-separated list (default 256KiB; with --vs 32KiB,256KiB,1MiB,4MiB); nodes and tiers take objects up to it")
	fs.IntVar(&s.Conns, "conns", 0, fmt.Sprintf("connections (0 = the target's default: %d; sim: 1)", bench.DefaultConns))
	fs.IntVar(&s.Batch, "batch", 0, fmt.Sprintf("keys per master lookup / blocks per client.Get for cluster / random blocks per MGET for node (0 = the target's default: master %d, cluster %d, node 1)", bench.DefaultMasterBatch, bench.DefaultClusterBatch))
	fs.IntVar(&s.Nodes, "nodes", bench.DefaultClusterNodes, "nodes of the cluster target")
	fs.BoolVar(&s.Netns, "netns", false, "cluster target on real hosts: master and nodes as processes, each in a network namespace of its own, the workers on node-0's host reading the other nodes' blocks (Linux, root, iproute2)")
	linkRate := fs.String("link-rate", "", "with --netns: every node's link rate each way, enforced by the kernel (e.g. 50MB/s, 400Mbps; empty = unshaped)")
	fs.IntVar(&s.Depth, "depth", 0, fmt.Sprintf("requests in flight per connection: redis pipelining, master goroutines per connection (0 = the target's default: master %d, others 1)", bench.DefaultMasterDepth))
	fs.Float64Var(&s.WriteFraction, "write-fraction", 0, "share of requests that write, 0..1 (0 = reads only)")
	fs.DurationVar(&s.Duration, "duration", 0, fmt.Sprintf("length of each run (0 = %v, or until --count requests)", bench.DefaultDuration))
	fs.Int64Var(&s.Count, "count", 0, "number of requests per run instead of a duration (0 = run for --duration)")
	keys := fs.String("keys", "", fmt.Sprintf("master-index target's index size in keys: a count like 1000000, 1M or 10M (k, M, G are powers of 1000; default %d)", bench.DefaultIndexKeys))
	data := fs.String("data", "", "data set size (default: 64 blocks in memory, 256MiB on disk)")
	fs.StringVar(&s.Dir, "dir", "", "directory for the ssd/disk files (default: a temporary directory)")
	fs.BoolVar(&s.BufferedIO, "buffered-io", false, "do not use O_DIRECT for ssd, disk and node --tier ssd")
	fs.BoolVar(&s.Named, "named", false, "store and read named objects (LMCache-style names, the node's named ops) instead of chain ids: ram, ssd, node, cluster, redis and --vs")
	fs.StringVar(&s.TracePath, "trace", "", "sim target's trace file (default: a generated chat trace)")
	fs.StringVar(&s.Addr, "redis-addr", "", "address of a running redis-server (redis target, --vs redis)")
	fs.StringVar(&f.redisBin, "redis-server", "redis-server", "redis-server binary --vs redis starts when --redis-addr is empty")
	vs := fs.String("vs", "", "comparison points, comma-separated: redis,tcp,disk; with --target cluster, tcp: the cluster beside raw TCP over the same connections (target cluster-tcp)")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the runs to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool bench --target T [flags] | --vs redis,tcp,disk [flags] | --target cluster --vs tcp [flags]\n\n"+
			"Measures one target (a tier, a node, the master, a local cluster, the simulator,\n"+
			"plain TCP or disk, or a redis-server) with a closed-loop load of --conns\n"+
			"connections and prints throughput and latency percentiles; --vs runs kvpool's\n"+
			"node beside each comparison point at the same block sizes and prints one row\n"+
			"per block size and point with kvpool's throughput as a ratio to the point's.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args, "nodes"); err != nil {
		return f, err
	}
	if s.Target == bench.TargetCluster && *vs != "" {
		if strings.TrimSpace(*vs) != bench.VsTCP {
			return f, usageErrorf("--target cluster --vs %q: the cluster compares with raw TCP only: --vs tcp", *vs)
		}
		f.clusterVs, *vs = true, ""
	} else if (s.Target == "") == (*vs == "") {
		return f, usageErrorf("give exactly one of --target and --vs (or --target cluster --vs tcp)")
	}
	var err error
	switch {
	case *blocks != "":
		if f.sizes, err = parseBlockSizes(*blocks); err != nil {
			return f, err
		}
	case *vs != "":
		f.sizes = bench.DefaultCompareSizes()
	default:
		f.sizes = []int{bench.DefaultBlockSize}
	}
	if *data != "" {
		sz, err := config.ParseSize(*data)
		if err != nil || sz <= 0 {
			return f, usageErrorf("--data %q: want a size like 256MiB", *data)
		}
		s.DataBytes = int64(sz)
	}
	if *keys != "" {
		n, err := parseCount(*keys)
		if err != nil {
			return f, usageErrorf("--keys %q: %v", *keys, err)
		}
		if n < 1 {
			return f, usageErrorf("--keys must be at least 1 (got %q)", *keys)
		}
		s.Keys = n
	}
	if *linkRate != "" {
		r, err := config.ParseBandwidth(*linkRate)
		if err != nil {
			return f, usageErrorf("--link-rate %q: %v", *linkRate, err)
		}
		if !s.Netns {
			return f, usageErrorf("--link-rate shapes the links of real hosts: add --netns")
		}
		s.LinkRate = float64(r)
	}
	if s.Netns {
		if err := netns.Available(); err != nil {
			return f, usageErrorf("--netns: %v", err)
		}
	}
	s.Progress = stderr
	if *vs != "" {
		f.vs = bench.CompareOptions{
			BlockSizes: f.sizes, Named: s.Named, Conns: s.Conns, Depth: s.Depth, Duration: s.Duration,
			Dir: s.Dir, BufferedIO: s.BufferedIO, Progress: stderr, RedisAddr: s.Addr,
		}
		for _, a := range strings.Split(*vs, ",") {
			f.vs.Against = append(f.vs.Against, strings.TrimSpace(a))
		}
		if err := f.vs.Validate(); err != nil {
			return f, flagError(fs, err, nil)
		}
	} else {
		for _, sz := range f.sizes {
			spec := *s
			spec.BlockSize = sz
			if err := spec.Validate(); err != nil {
				return f, flagError(fs, err, nil)
			}
		}
	}
	return f, nil
}

// parseBlockSizes parses --block, a comma-separated list of sizes.
func parseBlockSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		sz, err := config.ParseSize(strings.TrimSpace(f))
		if err != nil || sz <= 0 {
			return nil, usageErrorf("--block %q: want sizes like 256KiB or 1MiB", f)
		}
		sizes = append(sizes, int(sz))
	}
	return sizes, nil
}

// parseCount parses a count: a whole number, or a decimal number with a
// suffix k, M or G (powers of 1000, case-insensitive) whose value is whole
// ("1M", "2.5k", "10M").
func parseCount(s string) (int64, error) {
	const syntax = "want a count like 1000000, 1M or 10M"
	t := strings.TrimSpace(s)
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'g', 'G':
			mult = 1e9
		}
		if mult > 1 {
			t = strings.TrimSpace(t[:len(t)-1])
		}
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok || strings.ContainsAny(t, "/eE") {
		return 0, errors.New(syntax)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, fmt.Errorf("%s is not a whole number that fits in 64 bits: %s", s, syntax)
	}
	return r.Num().Int64(), nil
}

// startCPUProfile writes a CPU profile to path until the returned stop is
// called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create CPU profile %s: %w", path, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
