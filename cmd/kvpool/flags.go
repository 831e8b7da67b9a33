package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/lab/demo"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/validate"
	"github.com/kvpool/kvpool/trace"
)

// This file declares the flag groups several subcommands share: the trace
// selection, the cost model, the local cluster of a live run and the
// output. Each group registers its flags on a subcommand's flag set and
// turns what was given into the options of the package the subcommand
// calls, so that a flag means the same everywhere it appears.

// Help texts of the trace flags.
const (
	traceNameUsage = "trace name (conversation, synthetic, toolagent) or file"
	traceDirUsage  = "directory searched first for traces (then $" + trace.EnvTraceDir + ", ./traces)"
	lenientUsage   = "skip malformed trace lines instead of failing"
)

// traceFlags select the trace of a lab subcommand: --trace, --trace-dir
// and, unless registered without it, --lenient.
type traceFlags struct {
	name    string
	dir     string
	lenient bool
}

// register declares --trace (default def, help usage), --trace-dir and
// --lenient on fs.
func (t *traceFlags) register(fs *flag.FlagSet, def, usage string) {
	t.registerPath(fs, def, usage)
	fs.BoolVar(&t.lenient, "lenient", false, lenientUsage)
}

// registerPath declares --trace and --trace-dir only, for a subcommand
// that reads its trace through a package (and so takes no --lenient).
func (t *traceFlags) registerPath(fs *flag.FlagSet, def, usage string) {
	fs.StringVar(&t.name, "trace", def, usage)
	fs.StringVar(&t.dir, "trace-dir", "", traceDirUsage)
}

// load reads the trace --trace names (see loadTrace).
func (t *traceFlags) load(stderr io.Writer) (path string, reqs []trace.Request, err error) {
	return loadTrace(t.name, t.dir, t.lenient, stderr)
}

// costFlags are the cost model of a timed run: the bandwidths, the TTFT
// SLO and the cost profile.
type costFlags struct {
	nicGbps, ssdGBps, slo float64
	profile               string
}

// register declares --nic-gbps, --ssd-gbps, --slo and --profile on fs.
// live says the run is live (kvpool replay): its bandwidths are modelled
// per node and its SLO is in model seconds; otherwise they are the
// simulated instances'.
func (c *costFlags) register(fs *flag.FlagSet, live bool) {
	nic, ssd, slo := "NIC bandwidth per instance and direction, Gbit/s", "SSD read bandwidth per instance, GB/s", "TTFT SLO in seconds"
	if live {
		nic, ssd, slo = "modelled NIC bandwidth per node and direction, Gbit/s", "modelled SSD bandwidth per node, GB/s", "TTFT SLO in model seconds"
	}
	fs.Float64Var(&c.nicGbps, "nic-gbps", sim.DefaultNICGbps, nic)
	fs.Float64Var(&c.ssdGBps, "ssd-gbps", sim.DefaultSSDGBps, ssd)
	fs.Float64Var(&c.slo, "slo", sim.DefaultSLOSeconds, slo)
	fs.StringVar(&c.profile, "profile", costmodel.Default().Name, "cost profile")
}

// costPositive are the cost flags that refuse 0 (see refuseZero).
func costPositive() []string { return []string{"nic-gbps", "ssd-gbps", "slo"} }

// costProfile returns the profile --profile names.
func (c *costFlags) costProfile() (costmodel.Profile, error) {
	p, err := costmodel.Lookup(c.profile)
	if err != nil {
		return p, usageErrorf("--profile: %v", err)
	}
	return p, nil
}

// clusterHelp are the help texts of the cluster flags, which say what the
// cluster is for in each subcommand.
type clusterHelp struct {
	nodes, speed, payload, ramBlocks string
	// speedDefault is --speed's default.
	speedDefault float64
}

// demoClusterHelp is the cluster flags' help in kvpool demo.
func demoClusterHelp() clusterHelp {
	return clusterHelp{
		nodes:        "nodes (and prefill workers) of each arm's cluster",
		speed:        "time compression S of the live runs",
		payload:      "live bytes per block",
		ramBlocks:    fmt.Sprintf("RAM cache per node, in blocks (%d is the paper's 3M tokens)", sim.DefaultRAMBlocks),
		speedDefault: demo.DefaultSpeed,
	}
}

// clusterFlags are the local cluster of a live run checked against the
// simulator (package validate): --nodes, --speed, --payload, --ram-blocks.
type clusterFlags struct {
	nodes     int
	speed     float64
	payload   string
	ramBlocks int
	net       string
}

// register declares the cluster flags on fs with the help texts h.
func (c *clusterFlags) register(fs *flag.FlagSet, h clusterHelp) {
	fs.IntVar(&c.nodes, "nodes", validate.DefaultNodes, h.nodes)
	fs.Float64Var(&c.speed, "speed", h.speedDefault, h.speed)
	fs.StringVar(&c.payload, "payload", "32KiB", h.payload)
	fs.IntVar(&c.ramBlocks, "ram-blocks", sim.DefaultRAMBlocks, h.ramBlocks)
	fs.StringVar(&c.net, "net", string(replay.NetPacer), netUsage)
}

// clusterPositive are the cluster flags that refuse 0 (see refuseZero).
func clusterPositive() []string { return []string{"nodes", "speed", "ram-blocks"} }

// config returns the cluster as validate's Config (the rest of its fields
// zero, for the caller to fill).
func (c *clusterFlags) config() (validate.Config, error) {
	size, err := parsePayload(c.payload)
	if err != nil {
		return validate.Config{}, err
	}
	net, err := parseNet(c.net)
	if err != nil {
		return validate.Config{}, err
	}
	return validate.Config{Nodes: c.nodes, Speed: c.speed, PayloadBytes: size, RAMBlocks: c.ramBlocks, Net: net}, nil
}

// maxPayload bounds --payload: a live run stores blocks of that size, and
// a node takes objects of at most config.MaxObjectBytesLimit (512 MiB).
const maxPayload = config.MaxObjectBytesLimit

// parsePayload parses --payload, the live bytes per block.
func parsePayload(s string) (int, error) {
	size, err := config.ParseSize(s)
	if err != nil {
		return 0, usageErrorf("--payload %q: %v", s, err)
	}
	if size == 0 {
		return 0, usageErrorf("--payload %q: want a size > 0", s)
	}
	if size > maxPayload {
		return 0, usageErrorf("--payload %q: %d bytes, more than %v, the largest object a node takes", s, size, maxPayload)
	}
	return int(size), nil
}

// runOutput is how a run reports: --json for the summary as JSON and
// --records for one CSV row per request.
type runOutput struct {
	json    bool
	records string
}

// register declares --json and --records (help recordsUsage) on fs.
func (o *runOutput) register(fs *flag.FlagSet, recordsUsage string) {
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON")
	fs.StringVar(&o.records, "records", "", recordsUsage)
}

// writeRecords writes recs to --records, if given, as the per-request
// CSV; cmd names the subcommand in errors.
func (o *runOutput) writeRecords(cmd string, recs []sim.Record) error {
	if o.records == "" {
		return nil
	}
	f, err := os.Create(o.records)
	if err != nil {
		return fmt.Errorf("%s: create records file: %w", cmd, err)
	}
	if err := sim.WriteRecordsCSV(f, recs); err != nil {
		f.Close()
		return fmt.Errorf("%s: write records to %s: %w", cmd, o.records, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: close records file %s: %w", cmd, o.records, err)
	}
	return nil
}

// reportFlags are where a report goes: --out and --quiet.
type reportFlags struct {
	out   string
	quiet bool
}

// register declares --out (default def) and --quiet (help quietUsage).
func (r *reportFlags) register(fs *flag.FlagSet, def, quietUsage string) {
	fs.StringVar(&r.out, "out", def, "report directory to write")
	fs.BoolVar(&r.quiet, "quiet", false, quietUsage)
}

// accessWrite is access(2)'s W_OK: may this process write the file.
const accessWrite = 0x2

// check refuses an --out that cannot be a report directory: a path that
// is, or is under, something other than a directory, or a directory
// this process cannot write. It is called before any work starts, so a
// long run does not end on it.
func (r *reportFlags) check() error {
	if r.out == "" {
		return usageErrorf("--out: empty; give the report directory")
	}
	p := filepath.Clean(r.out)
	for {
		st, err := os.Stat(p)
		if err == nil {
			switch {
			case !st.IsDir() && p == filepath.Clean(r.out):
				return usageErrorf("--out %s: not a directory", r.out)
			case !st.IsDir():
				return usageErrorf("--out %s: %s is not a directory", r.out, p)
			case syscall.Access(p, accessWrite) != nil:
				return usageErrorf("--out %s: directory %s is not writable", r.out, p)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return usageErrorf("--out %s: %v", r.out, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}

// progress returns where progress lines go: w, or nil with --quiet.
func (r *reportFlags) progress(w io.Writer) io.Writer {
	if r.quiet {
		return nil
	}
	return w
}

// encodeJSON writes v as indented JSON.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
