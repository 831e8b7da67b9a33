package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/kvpool/kvpool/internal/bench"
	"github.com/kvpool/kvpool/internal/config"
)

// runBench implements `kvpool bench`: one target (--target) or the
// side-by-side comparison (--vs redis,tcp,disk).
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", stderr)
	target := fs.String("target", "", "target: "+strings.Join(bench.Targets(), ", "))
	tierName := fs.String("tier", "ram", "node target's tier under test: ram or ssd")
	blocks := fs.String("block", "256KiB", "block (value) size, or a comma-separated list")
	conns := fs.Int("conns", 0, "connections (0: 8; sim: 1)")
	batch := fs.Int("batch", 0, "keys per master lookup (0: 32) / blocks per client.Get for cluster (0: 8)")
	nodes := fs.Int("nodes", 0, "nodes of the cluster target (0: 3)")
	depth := fs.Int("depth", 0, "requests in flight per connection (redis pipelining; master goroutines per connection)")
	writes := fs.Float64("write-fraction", 0, "share of requests that write, 0..1")
	duration := fs.Duration("duration", 0, "length of each run (0: 5s unless --count)")
	count := fs.Int64("count", 0, "number of requests per run instead of a duration")
	data := fs.String("data", "", "data set size (default: 64 blocks in memory, 256MiB on disk)")
	dir := fs.String("dir", "", "directory for the ssd/disk files (default: a temporary directory)")
	buffered := fs.Bool("buffered-io", false, "do not use O_DIRECT for ssd, disk and node --tier ssd")
	tracePath := fs.String("trace", "", "sim target's trace file (default: a generated chat trace)")
	redisAddr := fs.String("redis-addr", "", "address of a running redis-server (redis target, --vs redis)")
	redisBin := fs.String("redis-server", "redis-server", "redis-server binary --vs redis starts when --redis-addr is empty")
	vs := fs.String("vs", "", "comparison points, comma-separated: redis,tcp,disk")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the runs to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if (*target == "") == (*vs == "") {
		return usageErrorf("give exactly one of --target and --vs")
	}
	var sizes []int
	for _, f := range strings.Split(*blocks, ",") {
		sz, err := config.ParseSize(strings.TrimSpace(f))
		if err != nil || sz <= 0 {
			return usageErrorf("--block %q: want sizes like 256KiB or 1MiB", f)
		}
		sizes = append(sizes, int(sz))
	}
	var dataBytes int64
	if *data != "" {
		sz, err := config.ParseSize(*data)
		if err != nil || sz <= 0 {
			return usageErrorf("--data %q: want a size like 256MiB", *data)
		}
		dataBytes = int64(sz)
	}
	progress := stderr
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("create CPU profile %s: %w", *cpuprofile, err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	if *vs != "" {
		o := bench.CompareOptions{
			BlockSizes: sizes, Conns: *conns, Depth: *depth, Duration: *duration,
			Dir: *dir, BufferedIO: *buffered, Progress: progress, RedisAddr: *redisAddr,
		}
		for _, a := range strings.Split(*vs, ",") {
			o.Against = append(o.Against, strings.TrimSpace(a))
		}
		if err := o.Validate(); err != nil {
			return usageErrorf("%v", err)
		}
		if o.RedisAddr == "" && slices.Contains(o.Against, bench.VsRedis) {
			srv, err := bench.StartRedis(ctx, *redisBin)
			switch {
			case err != nil && isNotFound(err):
				o.RedisSkipReason = fmt.Sprintf("%s not installed (apt-get install -y redis-server, or bench/vs.sh)", *redisBin)
				fmt.Fprintf(stderr, "kvpool bench: %v; skipping redis. Install it with `apt-get update && apt-get install -y redis-server` (or run bench/vs.sh), or pass --redis-addr.\n", err)
			case err != nil:
				return err
			default:
				defer srv.Close()
				o.RedisAddr = srv.Addr()
			}
		}
		cs, err := bench.Compare(ctx, o)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, cs)
		}
		return bench.WriteComparisons(stdout, cs)
	}

	var results []bench.Result
	for _, sz := range sizes {
		spec := bench.Spec{
			Target: *target, Tier: *tierName, BlockSize: sz, Conns: *conns, Batch: *batch, Nodes: *nodes, Depth: *depth,
			WriteFraction: *writes, Duration: *duration, Count: *count, DataBytes: dataBytes,
			Dir: *dir, BufferedIO: *buffered, Addr: *redisAddr, TracePath: *tracePath, Progress: progress,
		}
		if err := spec.Validate(); err != nil {
			return usageErrorf("%v", err)
		}
		res, err := bench.Run(ctx, spec)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if *asJSON {
		return writeJSON(stdout, results)
	}
	return bench.WriteTable(stdout, results)
}

// isNotFound reports whether err says the redis-server binary is missing.
func isNotFound(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
