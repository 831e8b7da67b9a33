package compare

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"

	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/lab/parallel"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracestat"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// Trace is one input trace, already read and validated.
type Trace struct {
	Name     string
	Requests []trace.Request
}

// Options configure the matrix. The zero value of every field means its
// default (see DefaultOptions).
type Options struct {
	// Traces are compared one after another; at least one is required.
	Traces []Trace
	// Capacities (blocks) and Policies (policy specs) span the Fig 9
	// analogue: one global cache, request order only.
	Capacities []int
	Policies   []string
	// Instances and RAMBlocks give the Fig 10 cluster: 10 instances of 3M
	// tokens (5,859 blocks) each, as in the paper.
	Instances int
	RAMBlocks int
	// NICGbps is the bandwidth of every timed arm but the Fig 13 sweep,
	// which runs at each of Bandwidths.
	NICGbps    float64
	Bandwidths []float64
	// RateMultiplier scales every timed arm's arrival rate.
	RateMultiplier float64
	// SkipGoodput leaves out the goodput bisection (the slowest part).
	SkipGoodput bool
	// Workers bounds the experiments run at once (default GOMAXPROCS).
	Workers int
	// Progress, when set, receives one line per finished experiment.
	Progress io.Writer
	// Live, when set, also runs LiveArms on every trace live and in the
	// simulator (see LiveFunc), after the simulated matrix; the report
	// gains a "Live vs simulated" section. Nil runs nothing live.
	Live LiveFunc
	// LiveArms are the arms run live (default: LiveArms()).
	LiveArms []Arm
	// LiveBandwidths, with Live, also runs the Fig 13 sweep live: global
	// mode with round-robin routing (where the network matters most) at
	// each of these NIC bandwidths (Gbps), once per network mode of
	// LiveNets, next to the simulator on the same subsample; the report
	// gains a "Live TTFT vs link bandwidth" section. Empty runs no sweep.
	LiveBandwidths []float64
	// LiveNets are the network modes of the live sweep (default: the
	// LiveFunc's own, "").
	LiveNets []replay.NetMode
}

// Ours is the policy this project proposes, marked "(ours)" in the
// report's Fig 9 figures and tables.
const Ours = "kvchain"

// DefaultOptions returns the standard matrix.
func DefaultOptions() Options {
	return Options{
		// 5,859 blocks = 3M tokens (the paper's per-node cache in Fig 9/10);
		// 97,657 blocks = 50M tokens, where Fig 9 reaches the maximum.
		Capacities: []int{500, 1000, 2000, 5000, 5859, 10000, 20000, 50000, 97657},
		// kvchain is ours (docs/policy.md): it is compared wherever the
		// others are, second so that it gets a strong colour in Fig 9.
		Policies:  []string{"lru", Ours, "fifo", "lfu", "s3fifo", "arc", "mooncake", "lru+second-hit", "belady"},
		Instances: sim.DefaultInstances,
		RAMBlocks: sim.DefaultRAMBlocks,
		NICGbps:   sim.DefaultNICGbps,
		// Fig 13 spans 24 to 400 Gbps.
		Bandwidths:     []float64{24, 50, 100, 200, 400},
		RateMultiplier: 1,
		Workers:        runtime.GOMAXPROCS(0),
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if len(o.Capacities) == 0 {
		o.Capacities = d.Capacities
	}
	if len(o.Policies) == 0 {
		o.Policies = d.Policies
	}
	if o.Instances == 0 {
		o.Instances = d.Instances
	}
	if o.RAMBlocks == 0 {
		o.RAMBlocks = d.RAMBlocks
	}
	if o.NICGbps == 0 {
		o.NICGbps = d.NICGbps
	}
	if len(o.Bandwidths) == 0 {
		o.Bandwidths = d.Bandwidths
	}
	if o.RateMultiplier == 0 {
		o.RateMultiplier = d.RateMultiplier
	}
	if o.Workers == 0 {
		o.Workers = d.Workers
	}
	return o
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	o = o.withDefaults()
	if len(o.Traces) == 0 {
		return fmt.Errorf("compare: Traces: none given")
	}
	for i, t := range o.Traces {
		if t.Name == "" {
			return fmt.Errorf("compare: Traces[%d]: empty name", i)
		}
		if len(t.Requests) == 0 {
			return fmt.Errorf("compare: Traces[%d] %q: no requests", i, t.Name)
		}
	}
	for _, c := range o.Capacities {
		if c <= 0 {
			return fmt.Errorf("compare: Capacities: %d is not a positive block count", c)
		}
	}
	for _, p := range o.Policies {
		if _, err := policy.ParseSpec(p); err != nil {
			return fmt.Errorf("compare: Policies: %w", err)
		}
	}
	for _, b := range append(slices.Clone(o.Bandwidths), o.LiveBandwidths...) {
		if !(b > 0) || math.IsInf(b, 0) {
			return fmt.Errorf("compare: Bandwidths: %g Gbps is not a positive bandwidth", b)
		}
	}
	if o.Workers < 0 {
		return fmt.Errorf("compare: %w", option.Errorf("Workers", "%d is negative", o.Workers))
	}
	base := o.simOptions(sim.ModeGlobal, sim.RoutingCacheAware, o.NICGbps)
	if err := base.Validate(); err != nil {
		return fmt.Errorf("compare: cluster: %w", err)
	}
	return nil
}

// HitRatioRow is one order-only run: a policy on one global cache.
type HitRatioRow struct {
	Trace         string  `json:"trace"`
	Policy        string  `json:"policy"`
	Capacity      int     `json:"capacity_blocks"`
	TokenHitRatio float64 `json:"token_hit_ratio"`
	BlockHitRatio float64 `json:"block_hit_ratio"`
}

// Arm is one timed configuration of the cluster.
type Arm struct {
	Name    string      `json:"name"`
	Mode    sim.Mode    `json:"mode"`
	Routing sim.Routing `json:"routing"`
	NICGbps float64     `json:"nic_gbps"`
}

// SimRow is one timed run of an arm on a trace.
type SimRow struct {
	Trace   string      `json:"trace"`
	Arm     Arm         `json:"arm"`
	Summary sim.Summary `json:"summary"`
	// TTFTs are the served requests' TTFTs in model seconds, ascending.
	TTFTs []float64 `json:"-"`
}

// GoodputRow is the goodput of an arm on a trace.
type GoodputRow struct {
	Trace      string  `json:"trace"`
	Arm        Arm     `json:"arm"`
	Multiplier float64 `json:"rate_multiplier"`
	ReqPerSec  float64 `json:"req_per_s"`
}

// Result holds every figure of the matrix, in a fixed order.
type Result struct {
	Options struct {
		Instances      int       `json:"instances"`
		RAMBlocks      int       `json:"ram_blocks"`
		NICGbps        float64   `json:"nic_gbps"`
		Bandwidths     []float64 `json:"bandwidths_gbps"`
		RateMultiplier float64   `json:"rate_multiplier"`
		Profile        string    `json:"profile"`
		SLOSeconds     float64   `json:"slo_s"`
	} `json:"options"`
	Traces   []tracestat.Stats `json:"traces"`
	Names    []string          `json:"trace_names"`
	HitRatio []HitRatioRow     `json:"hit_ratio"`
	Sim      []SimRow          `json:"sim"`
	Goodput  []GoodputRow      `json:"goodput"`
	// Live holds the live-vs-simulated rows (Options.Live), if any.
	Live []LiveRow `json:"live,omitempty"`
	// LiveSweep holds the live Fig 13 sweep (Options.LiveBandwidths), in
	// trace, bandwidth, network order.
	LiveSweep []LiveRow `json:"live_sweep,omitempty"`
}

// The arms of the timed experiments.
func fixedArms(nic float64) []Arm {
	return []Arm{
		{"recompute", sim.ModeRecompute, sim.RoutingLeastLoaded, nic},
		{"local rr", sim.ModeLocal, sim.RoutingRoundRobin, nic},
		{"local least-loaded", sim.ModeLocal, sim.RoutingLeastLoaded, nic},
		{"local cache-aware", sim.ModeLocal, sim.RoutingCacheAware, nic},
		{"global rr", sim.ModeGlobal, sim.RoutingRoundRobin, nic},
		{"global cache-aware", sim.ModeGlobal, sim.RoutingCacheAware, nic},
	}
}

// goodputArms are the arms whose goodput is searched.
func goodputArms(nic float64) []Arm {
	return []Arm{
		{"recompute", sim.ModeRecompute, sim.RoutingLeastLoaded, nic},
		{"local cache-aware", sim.ModeLocal, sim.RoutingCacheAware, nic},
		{"global cache-aware", sim.ModeGlobal, sim.RoutingCacheAware, nic},
	}
}

// bandwidthRoutings are the routings of the Fig 13 sweep: cache-aware
// routing avoids the network where it can, round-robin has to use it, so
// the pair brackets how much bandwidth matters.
var bandwidthRoutings = []sim.Routing{sim.RoutingCacheAware, sim.RoutingRoundRobin}

// bandwidthArm is the global arm with routing at nic Gbps; at the base
// bandwidth it is the fixed arm of the same routing.
func bandwidthArm(routing sim.Routing, nic, base float64) Arm {
	name := "global " + string(routing)
	if nic != base {
		name = fmt.Sprintf("%s @%g Gbps", name, nic)
	}
	return Arm{name, sim.ModeGlobal, routing, nic}
}

func (o Options) simOptions(mode sim.Mode, routing sim.Routing, nic float64) sim.Options {
	return sim.Options{
		Instances:      o.Instances,
		RAMBlocks:      o.RAMBlocks,
		Mode:           mode,
		Routing:        routing,
		NICGbps:        nic,
		RateMultiplier: o.RateMultiplier,
	}
}

// Run executes the matrix. It stops early with ctx's error when ctx ends.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	res := newResult(o)
	var jobs []parallel.Job
	jobs = append(jobs, traceStatJobs(o, res)...)
	jobs = append(jobs, hitRatioJobs(o, res)...)
	jobs = append(jobs, simJobs(o, res)...)
	if !o.SkipGoodput {
		jobs = append(jobs, goodputJobs(o, res)...)
	}
	if err := parallel.Run(ctx, jobs, o.Workers, o.Progress); err != nil {
		return nil, err
	}
	if o.Live != nil {
		if err := runLive(ctx, o, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// newResult is an empty result that records the options o (with the
// simulator's defaults filled in) it is about to be run with.
func newResult(o Options) *Result {
	res := &Result{}
	base := o.simOptions(sim.ModeGlobal, sim.RoutingCacheAware, o.NICGbps).WithDefaults()
	res.Options.Instances, res.Options.RAMBlocks = o.Instances, o.RAMBlocks
	res.Options.NICGbps, res.Options.Bandwidths = o.NICGbps, o.Bandwidths
	res.Options.RateMultiplier, res.Options.SLOSeconds = o.RateMultiplier, base.SLOSeconds
	res.Options.Profile = base.Profile.Name
	return res
}

// traceStatJobs add one row per trace to res.Names and res.Traces and
// return the jobs that fill the statistics in.
func traceStatJobs(o Options, res *Result) []parallel.Job {
	var jobs []parallel.Job
	for ti, t := range o.Traces {
		res.Names = append(res.Names, t.Name)
		res.Traces = append(res.Traces, tracestat.Stats{})
		jobs = append(jobs, parallel.Job{Name: t.Name + ": trace statistics", Run: func(context.Context) error {
			res.Traces[ti] = tracestat.Compute(t.Requests)
			return nil
		}})
	}
	return jobs
}

// hitRatioJobs add one res.HitRatio row per trace, policy and capacity and
// return the jobs that measure them.
func hitRatioJobs(o Options, res *Result) []parallel.Job {
	var jobs []parallel.Job
	for _, t := range o.Traces {
		for _, p := range o.Policies {
			spec, _ := policy.ParseSpec(p)
			for _, c := range o.Capacities {
				i := len(res.HitRatio)
				res.HitRatio = append(res.HitRatio, HitRatioRow{Trace: t.Name, Policy: spec.String(), Capacity: c})
				jobs = append(jobs, parallel.Job{Name: fmt.Sprintf("%s: hit ratio %s @%d blocks", t.Name, spec, c), Run: func(context.Context) error {
					r, err := hitrate.Run(t.Requests, hitrate.Options{Policy: spec, Capacity: c, Nodes: 1})
					if err != nil {
						return err
					}
					res.HitRatio[i].TokenHitRatio, res.HitRatio[i].BlockHitRatio = r.TokenHitRatio, r.BlockHitRatio
					return nil
				}})
			}
		}
	}
	return jobs
}

// simArms are the simulated arms of every trace: the fixed arms, then the
// bandwidth sweep of each routing at every bandwidth but the base one.
func simArms(o Options) []Arm {
	arms := fixedArms(o.NICGbps)
	for _, routing := range bandwidthRoutings {
		for _, bw := range o.Bandwidths {
			if bw != o.NICGbps {
				arms = append(arms, bandwidthArm(routing, bw, o.NICGbps))
			}
		}
	}
	return arms
}

// simJobs add one res.Sim row per trace and simulated arm and return the
// jobs that simulate them.
func simJobs(o Options, res *Result) []parallel.Job {
	var jobs []parallel.Job
	for _, t := range o.Traces {
		for _, a := range simArms(o) {
			i := len(res.Sim)
			res.Sim = append(res.Sim, SimRow{Trace: t.Name, Arm: a})
			jobs = append(jobs, parallel.Job{Name: fmt.Sprintf("%s: sim %s", t.Name, a.Name), Run: func(ctx context.Context) error {
				r, err := sim.Run(ctx, t.Requests, o.simOptions(a.Mode, a.Routing, a.NICGbps))
				if err != nil {
					return err
				}
				res.Sim[i].Summary = r.Summary
				res.Sim[i].TTFTs = sim.ServedTTFTs(r.Records)
				return nil
			}})
		}
	}
	return jobs
}

// goodputJobs add one res.Goodput row per trace and goodput arm and return
// the jobs that search them.
func goodputJobs(o Options, res *Result) []parallel.Job {
	var jobs []parallel.Job
	for _, t := range o.Traces {
		for _, a := range goodputArms(o.NICGbps) {
			i := len(res.Goodput)
			res.Goodput = append(res.Goodput, GoodputRow{Trace: t.Name, Arm: a})
			jobs = append(jobs, parallel.Job{Name: fmt.Sprintf("%s: goodput %s", t.Name, a.Name), Run: func(ctx context.Context) error {
				m, rps, err := sim.Goodput(ctx, t.Requests, o.simOptions(a.Mode, a.Routing, a.NICGbps), 0)
				if err != nil {
					return err
				}
				res.Goodput[i].Multiplier, res.Goodput[i].ReqPerSec = m, rps
				return nil
			}})
		}
	}
	return jobs
}
