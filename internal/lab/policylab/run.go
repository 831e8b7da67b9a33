package policylab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/lab/parallel"
	"github.com/kvpool/kvpool/internal/lab/report"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/lab/tracesample"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// The parts of a trace in the gap table.
const (
	// PartFirst is the first half by time: the tuning half.
	PartFirst = "first"
	// PartSecond is the second half by time: held out.
	PartSecond = "second"
	// PartWhole is the whole trace.
	PartWhole = "whole"
)

// Parts returns the parts in report order.
func Parts() []string { return []string{PartFirst, PartSecond, PartWhole} }

// minGap is the smallest Belady − LRU difference (in token-hit-ratio
// units: half a point) for which gap closed is reported; below it the
// ratio of two tiny differences is noise (docs/policy.md prints "n/a" for
// the same cells).
const minGap = 0.005

// TraceInfo describes one trace of the experiments.
type TraceInfo struct {
	// Name labels the trace; Generated marks a tracegen trace.
	Name      string `json:"name"`
	Generated bool   `json:"generated"`
	// About describes a generated trace's workload.
	About string `json:"about,omitempty"`
	// Tuned says the subject was tuned on the trace's first half (every
	// published trace; Generated.Tuned for generated ones).
	Tuned bool `json:"tuned"`
	// Requests is the whole trace's length.
	Requests int `json:"requests"`
	// HalfMs is the time (in the trace's own milliseconds) where the
	// second half starts; FirstRequests and SecondRequests count the
	// halves.
	HalfMs         int64 `json:"half_ms"`
	FirstRequests  int   `json:"first_requests"`
	SecondRequests int   `json:"second_requests"`
}

// GapRow is one cell of the gap table: every policy on one part of one
// trace at one capacity.
type GapRow struct {
	// Trace names the trace (Generated: a tracegen one); Part is
	// PartFirst, PartSecond or PartWhole.
	Trace     string `json:"trace"`
	Generated bool   `json:"generated"`
	Part      string `json:"part"`
	// Tuning marks the first half of a trace the subject was tuned on.
	Tuning bool `json:"tuning"`
	// Capacity is the cache size in blocks.
	Capacity int `json:"capacity_blocks"`
	// Unseen marks a capacity not used for tuning.
	Unseen bool `json:"unseen_capacity"`
	// TokenHitRatio maps each policy spec to its token hit ratio.
	TokenHitRatio map[string]float64 `json:"token_hit_ratio"`
	// Subject, Reference and Oracle are the subject's, LRU's and the
	// oracle's token hit ratios; Best is the best baseline's, named by
	// BestPolicy.
	Subject    float64 `json:"subject"`
	Reference  float64 `json:"reference"`
	Oracle     float64 `json:"oracle"`
	Best       float64 `json:"best_baseline"`
	BestPolicy string  `json:"best_policy"`
	// GapClosed is (Subject − Reference) / (Oracle − Reference); it is
	// meaningful only when GapDefined (Oracle − Reference >= half a point).
	GapClosed  float64 `json:"gap_closed"`
	GapDefined bool    `json:"gap_defined"`
	// VsBest is Subject − Best.
	VsBest float64 `json:"vs_best"`
}

// Goodput is one goodput search and a run at the base rate.
type Goodput struct {
	// Multiplier and ReqPerSec are sim.Goodput's results.
	Multiplier float64 `json:"rate_multiplier"`
	ReqPerSec  float64 `json:"req_per_s"`
	// TokenHitRatio and TTFTMean are from one run at the base arrival rate.
	TokenHitRatio float64 `json:"token_hit_ratio"`
	TTFTMean      float64 `json:"ttft_mean_s"`
}

// NoiseRow is the subject with a fraction P of wrong reuse predictions on
// one trace.
type NoiseRow struct {
	// Trace names the trace, P the error fraction and Spec the policy
	// spec that injects it.
	Trace string  `json:"trace"`
	P     float64 `json:"p"`
	Spec  string  `json:"spec"`
	// TokenHitRatio is order-only, one cache of Options.NoiseCapacity.
	TokenHitRatio float64 `json:"token_hit_ratio"`
	// Goodput is set for the levels and traces whose goodput was searched.
	Goodput *Goodput `json:"goodput,omitempty"`
}

// NoiseRef is a reference policy (a baseline or the plain subject) in the
// setting of the noise sweep.
type NoiseRef struct {
	// Trace and Policy name the run.
	Trace  string `json:"trace"`
	Policy string `json:"policy"`
	// TokenHitRatio is order-only at Options.NoiseCapacity.
	TokenHitRatio float64 `json:"token_hit_ratio"`
	// Goodput is set on the traces whose goodput was searched.
	Goodput *Goodput `json:"goodput,omitempty"`
}

// TenantRow is one tenant under one policy.
type TenantRow struct {
	Policy string `json:"policy"`
	// Tenant is the tenant's trace name, Label "A", "B", ...
	Tenant string `json:"tenant"`
	Label  string `json:"label"`
	// Shared is the tenant's share of the shared pool's run; SoloHalf and
	// SoloWhole are the tenant alone with half and with all of the pool.
	Shared    Counts `json:"shared"`
	SoloHalf  Counts `json:"solo_half"`
	SoloWhole Counts `json:"solo_whole"`
}

// Normalised is the tenant's shared hit ratio over its solo-at-half hit
// ratio (false when the latter is 0).
func (r TenantRow) Normalised() (float64, bool) {
	h := r.SoloHalf.TokenHitRatio()
	if h == 0 {
		return 0, false
	}
	return r.Shared.TokenHitRatio() / h, true
}

// TenantFairness sums up one policy in the shared pool.
type TenantFairness struct {
	Policy string `json:"policy"`
	// Jain is Jain's index of the tenants' normalised hit ratios
	// (meaningful only when JainDefined).
	Jain        float64 `json:"jain"`
	JainDefined bool    `json:"jain_defined"`
	// SharedTokenHitRatio is the whole pool's token hit ratio.
	SharedTokenHitRatio float64 `json:"shared_token_hit_ratio"`
}

// TenantResult is the two-tenant experiment.
type TenantResult struct {
	// Capacity is the shared pool in blocks; Tenants are the tenants'
	// trace names, A first.
	Capacity int      `json:"capacity_blocks"`
	Tenants  []string `json:"tenants"`
	// WindowMs and Keys are as in Merged.
	WindowMs int64 `json:"window_ms"`
	Keys     []int `json:"keys"`
	// Rows hold each policy's tenants, policy by policy; Fairness has one
	// entry per policy.
	Rows     []TenantRow      `json:"rows"`
	Fairness []TenantFairness `json:"fairness"`
}

// NodeRow is one policy on a cluster of Nodes instances in the timed
// simulator.
type NodeRow struct {
	// Trace, Nodes, Policy and RAMBlocks (per node) name the run.
	Trace     string `json:"trace"`
	Nodes     int    `json:"nodes"`
	Policy    string `json:"policy"`
	RAMBlocks int    `json:"ram_blocks"`
	// Goodput is its goodput and its run at the base rate.
	Goodput Goodput `json:"goodput"`
}

// Setup records the options a Result was produced with, with policy
// specs in canonical form (see Options for each field's meaning);
// SimSummary describes the base cluster in words.
type Setup struct {
	Subject            string      `json:"subject"`
	Baselines          []string    `json:"baselines"`
	Extra              []string    `json:"extra"`
	Oracle             string      `json:"oracle"`
	Capacities         []int       `json:"capacities"`
	UnseenCapacities   []int       `json:"unseen_capacities"`
	NoiseLevels        []float64   `json:"noise_levels"`
	NoiseGoodputLevels []float64   `json:"noise_goodput_levels"`
	NoiseSeed          uint64      `json:"noise_seed"`
	NoiseCapacity      int         `json:"noise_capacity"`
	GoodputTraces      []string    `json:"goodput_traces"`
	Sim                sim.Options `json:"-"`
	SimSummary         string      `json:"sim"`
	SLOSeconds         float64     `json:"slo_s"`
}

// Result holds every experiment's rows in a fixed order: Gap (with
// robustness (c)'s capacities, marked Unseen), Noise and Refs for
// robustness (a), Tenants for (b) (nil with fewer than two traces) and
// Nodes for (c).
type Result struct {
	Setup   Setup         `json:"setup"`
	Traces  []TraceInfo   `json:"traces"`
	Gap     []GapRow      `json:"gap"`
	Noise   []NoiseRow    `json:"noise"`
	Refs    []NoiseRef    `json:"noise_refs"`
	Tenants *TenantResult `json:"tenants,omitempty"`
	Nodes   []NodeRow     `json:"nodes"`
	// Joint holds the sections of Options.Joint, if any.
	Joint []report.Section `json:"-"`
	// Elapsed is the wall time of Run.
	Elapsed time.Duration `json:"-"`
}

// part is one part of one trace, ready to replay.
type part struct {
	trace     int // index into res.Traces
	name      string
	reqs      []trace.Request
	generated bool
}

// SplitHalves cuts reqs (in trace order, spanning at least 2 ms) at half
// its span: first holds the requests before first timestamp + span/2,
// second the rest with timestamps shifted to start there. It returns the
// cut point in the trace's own milliseconds.
func SplitHalves(reqs []trace.Request) (first, second []trace.Request, halfMs int64, err error) {
	if len(reqs) == 0 {
		return nil, nil, 0, fmt.Errorf("policylab: split into halves: no requests")
	}
	for i := 1; i < len(reqs); i++ {
		if reqs[i].Timestamp < reqs[i-1].Timestamp {
			return nil, nil, 0, fmt.Errorf("policylab: split into halves: request %d (timestamp %d) is before request %d (timestamp %d); want trace order",
				i, reqs[i].Timestamp, i-1, reqs[i-1].Timestamp)
		}
	}
	lo, hi := reqs[0].Timestamp, reqs[len(reqs)-1].Timestamp
	if lo < 0 {
		return nil, nil, 0, fmt.Errorf("policylab: split into halves: first timestamp %d is negative", lo)
	}
	if hi-lo < 2 {
		return nil, nil, 0, fmt.Errorf("policylab: split into halves: the trace spans %d ms; want at least 2 to split by time", hi-lo)
	}
	halfMs = lo + (hi-lo)/2
	if first, err = tracesample.Sample(reqs, tracesample.Options{ToMs: halfMs}); err != nil {
		return nil, nil, 0, fmt.Errorf("policylab: split into halves at %d ms: %w", halfMs, err)
	}
	if second, err = tracesample.Sample(reqs, tracesample.Options{FromMs: halfMs}); err != nil {
		return nil, nil, 0, fmt.Errorf("policylab: split into halves at %d ms: %w", halfMs, err)
	}
	return first, second, halfMs, nil
}

// gapPolicies returns the specs of the gap table, each once, in table
// order: reference, other baselines, extra, subject, oracle.
func (o Options) gapPolicies() []string {
	var out []string
	add := func(specs ...string) {
		for _, s := range specs {
			sp, _ := policy.ParseSpec(s)
			if n := sp.String(); !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	add(Reference)
	add(o.Baselines...)
	add(o.Extra...)
	add(o.Subject, o.Oracle)
	return out
}

// canon returns s as ParseSpec prints it (s is valid).
func canon(s string) string {
	sp, _ := policy.ParseSpec(s)
	return sp.String()
}

// Run executes every experiment. It stops early with ctx's error when ctx
// ends.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	o := opts.withDefaults()
	x := &runPlan{o: o, res: &Result{Setup: newSetup(o)}}
	if err := x.addTraces(); err != nil {
		return nil, err
	}
	x.addNoiseRows()
	x.planReferenceGoodput()
	x.planNodeCounts()
	x.planGap()
	x.planNoiseHitRatio()
	if err := x.planTenants(); err != nil {
		return nil, err
	}

	all := append(x.goodputJobs, x.jobs...)
	if err := parallel.Run(ctx, all, o.Workers, o.Progress); err != nil {
		return nil, fmt.Errorf("policylab: %w", err)
	}
	res := x.res
	if o.Joint != nil {
		secs, err := o.Joint(ctx, o.Traces)
		if err != nil {
			return nil, fmt.Errorf("policylab: joint routing sections: %w", err)
		}
		res.Joint = secs
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// runPlan is a Run being planned: the options (with their defaults), the
// result whose rows the jobs fill in, the parts of every trace, and the
// jobs (the goodput jobs, the slow ones, run first).
type runPlan struct {
	o                 Options
	res               *Result
	parts             []part
	goodputJobs, jobs []parallel.Job
}

// newSetup describes the experiments of o (which has its defaults): the
// canonical policy specs, the simulated cluster, and the traces whose
// goodput is measured.
func newSetup(o Options) Setup {
	base := o.Sim.WithDefaults()
	st := Setup{
		Subject: canon(o.Subject), Oracle: canon(o.Oracle), Capacities: o.Capacities, UnseenCapacities: o.UnseenCapacities,
		NoiseLevels: o.NoiseLevels, NoiseGoodputLevels: o.NoiseGoodputLevels, NoiseSeed: o.NoiseSeed, NoiseCapacity: o.NoiseCapacity,
		Sim: base, SLOSeconds: base.SLOSeconds,
		SimSummary: fmt.Sprintf("%d instances × %d RAM blocks, %s pool, %s routing, %g Gbps NIC, %s cost model, TTFT SLO %g s",
			base.Instances, base.RAMBlocks, base.Mode, base.Routing, base.NICGbps, base.Profile.Name, base.SLOSeconds),
	}
	for _, b := range o.Baselines {
		st.Baselines = append(st.Baselines, canon(b))
	}
	if !slices.Contains(st.Baselines, Reference) {
		st.Baselines = append([]string{Reference}, st.Baselines...)
	}
	for _, e := range o.Extra {
		st.Extra = append(st.Extra, canon(e))
	}
	goodputTraces := o.GoodputTraces
	if len(goodputTraces) == 0 {
		for _, t := range o.Traces {
			goodputTraces = append(goodputTraces, t.Name)
		}
	}
	if o.SkipGoodput {
		goodputTraces = nil
	}
	st.GoodputTraces = goodputTraces
	return st
}

// addTraces records every trace, given then generated, in res.Traces and
// its three parts in x.parts.
func (x *runPlan) addTraces() error {
	for _, t := range x.o.Traces {
		if err := x.addTrace(t.Name, "", false, true, t.Requests); err != nil {
			return fmt.Errorf("policylab: %w", err)
		}
	}
	for _, g := range x.o.Generated {
		reqs, err := tracegen.Generate(g.Options)
		if err != nil {
			return fmt.Errorf("policylab: generate %s: %w", g.Name, err)
		}
		if err := x.addTrace(g.Name, g.About, true, g.Tuned, reqs); err != nil {
			return fmt.Errorf("policylab: %w", err)
		}
	}
	return nil
}

// addTrace splits reqs into its halves and records the trace and its
// parts.
func (x *runPlan) addTrace(name, about string, generated, tuned bool, reqs []trace.Request) error {
	first, second, half, err := SplitHalves(reqs)
	if err != nil {
		return fmt.Errorf("trace %s: %w", name, err)
	}
	ti := len(x.res.Traces)
	x.res.Traces = append(x.res.Traces, TraceInfo{Name: name, Generated: generated, About: about, Tuned: tuned, Requests: len(reqs),
		HalfMs: half, FirstRequests: len(first), SecondRequests: len(second)})
	x.parts = append(x.parts, part{ti, PartFirst, first, generated}, part{ti, PartSecond, second, generated}, part{ti, PartWhole, reqs, generated})
	return nil
}

// findTrace returns the requests of the given trace named name (nil if
// there is none).
func (x *runPlan) findTrace(name string) []trace.Request {
	for _, t := range x.o.Traces {
		if t.Name == name {
			return t.Requests
		}
	}
	return nil
}

// refPolicies are the policies robustness (a) compares the noisy subject
// with: the baselines and the subject itself.
func (x *runPlan) refPolicies() []string {
	return append(slices.Clone(x.res.Setup.Baselines), x.res.Setup.Subject)
}

// goodputJob measures the goodput of reqs under so into dst.
func goodputJob(name string, reqs []trace.Request, so sim.Options, dst *Goodput) parallel.Job {
	return parallel.Job{Name: name, Run: func(ctx context.Context) error {
		g, err := measureGoodput(ctx, reqs, so)
		if err != nil {
			return err
		}
		*dst = g
		return nil
	}}
}

// addNoiseRows adds the rows of robustness (a) for every given trace: one
// per error level of the subject's predictions, and one per reference
// policy.
func (x *runPlan) addNoiseRows() {
	o, res := x.o, x.res
	refPolicies := x.refPolicies()
	for _, t := range o.Traces {
		for _, p := range o.NoiseLevels {
			spec := NoiseSpec(o.Subject, p, o.NoiseSeed)
			res.Noise = append(res.Noise, NoiseRow{Trace: t.Name, P: p, Spec: canon(spec)})
		}
		for _, p := range refPolicies {
			res.Refs = append(res.Refs, NoiseRef{Trace: t.Name, Policy: p})
		}
	}
}

// planReferenceGoodput plans robustness (a)'s goodput jobs: per goodput
// trace, of the error levels in NoiseGoodputLevels and of the references.
func (x *runPlan) planReferenceGoodput() {
	o, res := x.o, x.res
	for _, name := range res.Setup.GoodputTraces {
		reqs := x.findTrace(name)
		for i := range res.Noise {
			row := &res.Noise[i]
			if row.Trace != name || !slices.Contains(o.NoiseGoodputLevels, row.P) {
				continue
			}
			row.Goodput = &Goodput{}
			so := o.Sim
			so.Policy = row.Spec
			x.goodputJobs = append(x.goodputJobs, goodputJob(fmt.Sprintf("%s: goodput %s", name, row.Spec), reqs, so, row.Goodput))
		}
		for i := range res.Refs {
			ref := &res.Refs[i]
			if ref.Trace != name {
				continue
			}
			ref.Goodput = &Goodput{}
			so := o.Sim
			so.Policy = ref.Policy
			x.goodputJobs = append(x.goodputJobs, goodputJob(fmt.Sprintf("%s: goodput %s", name, ref.Policy), reqs, so, ref.Goodput))
		}
	}
}

// planNodeCounts adds the rows of robustness (c), the goodput of the node
// policies on every node count per goodput trace, and plans their jobs.
func (x *runPlan) planNodeCounts() {
	o, res := x.o, x.res
	for _, name := range res.Setup.GoodputTraces {
		for _, n := range o.NodeCounts {
			for _, p := range o.NodePolicies {
				res.Nodes = append(res.Nodes, NodeRow{Trace: name, Nodes: n, Policy: canon(p), RAMBlocks: res.Setup.Sim.RAMBlocks})
			}
		}
	}
	for i := range res.Nodes {
		row := &res.Nodes[i]
		so := o.Sim
		so.Policy, so.Instances = row.Policy, row.Nodes
		x.goodputJobs = append(x.goodputJobs, goodputJob(fmt.Sprintf("%s: goodput %s on %d nodes", row.Trace, row.Policy, row.Nodes),
			x.findTrace(row.Trace), so, &row.Goodput))
	}
}

// planGap adds the rows of the gap table, every part of every trace at
// every capacity (with the unseen capacities of robustness (c)), and
// plans one hit-ratio sweep job per part.
func (x *runPlan) planGap() {
	o, res := x.o, x.res
	policies := o.gapPolicies()
	var specs []policy.Spec
	for _, p := range policies {
		sp, _ := policy.ParseSpec(p)
		specs = append(specs, sp)
	}
	caps := slices.Clone(o.Capacities)
	for _, c := range o.UnseenCapacities {
		if !slices.Contains(caps, c) {
			caps = append(caps, c)
		}
	}
	slices.Sort(caps)
	for _, pt := range x.parts {
		ti := res.Traces[pt.trace]
		for _, c := range caps {
			res.Gap = append(res.Gap, GapRow{Trace: ti.Name, Generated: pt.generated, Part: pt.name, Tuning: ti.Tuned && pt.name == PartFirst, Capacity: c,
				Unseen: !slices.Contains(o.Capacities, c)})
		}
	}
	for pi, pt := range x.parts {
		ti := res.Traces[pt.trace]
		rows := res.Gap[pi*len(caps) : (pi+1)*len(caps)] // res.Gap is complete: no append moves it now
		x.jobs = append(x.jobs, parallel.Job{Name: fmt.Sprintf("%s %s: %d policies × %d capacities", ti.Name, pt.name, len(specs), len(caps)),
			Run: func(ctx context.Context) error {
				rs, err := hitrate.Sweep(ctx, pt.reqs, hitrate.SweepOptions{Policies: specs, Capacities: caps, Workers: 1})
				if err != nil {
					return err
				}
				for i := range rows {
					rows[i].TokenHitRatio = map[string]float64{}
				}
				for _, r := range rs {
					rows[slices.Index(caps, r.Capacity)].TokenHitRatio[r.Policy] = r.TokenHitRatio
				}
				for i := range rows {
					rows[i].fill(res.Setup)
				}
				return nil
			}})
	}
}

// planNoiseHitRatio plans robustness (a)'s order-only jobs: per given
// trace, the hit ratio of every error level and reference at
// NoiseCapacity.
func (x *runPlan) planNoiseHitRatio() {
	o, res := x.o, x.res
	refPolicies := x.refPolicies()
	for _, t := range o.Traces {
		var ss []policy.Spec
		for _, row := range res.Noise {
			if row.Trace == t.Name {
				sp, _ := policy.ParseSpec(row.Spec)
				ss = append(ss, sp)
			}
		}
		for _, p := range refPolicies {
			sp, _ := policy.ParseSpec(p)
			ss = append(ss, sp)
		}
		x.jobs = append(x.jobs, parallel.Job{Name: fmt.Sprintf("%s: hit ratio vs prediction error @%d blocks", t.Name, o.NoiseCapacity),
			Run: func(ctx context.Context) error {
				rs, err := hitrate.Sweep(ctx, t.Requests, hitrate.SweepOptions{Policies: ss, Capacities: []int{o.NoiseCapacity}, Workers: 1})
				if err != nil {
					return err
				}
				for _, r := range rs {
					for i := range res.Noise {
						if res.Noise[i].Trace == t.Name && res.Noise[i].Spec == r.Policy {
							res.Noise[i].TokenHitRatio = r.TokenHitRatio
						}
					}
					for i := range res.Refs {
						if res.Refs[i].Trace == t.Name && res.Refs[i].Policy == r.Policy {
							res.Refs[i].TokenHitRatio = r.TokenHitRatio
						}
					}
				}
				return nil
			}})
	}
}

// planTenants plans robustness (b) when there are two given traces or
// more: the first two merged as two tenants sharing TenantCapacity
// blocks, one job per tenant policy.
func (x *runPlan) planTenants() error {
	o := x.o
	if len(o.Traces) < 2 {
		return nil
	}
	m, err := Merge(o.Traces[:2])
	if err != nil {
		return err
	}
	tr := &TenantResult{Capacity: o.TenantCapacity, WindowMs: m.WindowMs, Keys: m.Keys}
	for _, t := range o.Traces[:2] {
		tr.Tenants = append(tr.Tenants, t.Name)
	}
	x.res.Tenants = tr
	tr.Fairness = make([]TenantFairness, len(o.TenantPolicies))
	tr.Rows = make([]TenantRow, len(o.TenantPolicies)*len(tr.Tenants))
	for pi, p := range o.TenantPolicies {
		sp, _ := policy.ParseSpec(p)
		rows := tr.Rows[pi*len(tr.Tenants) : (pi+1)*len(tr.Tenants)]
		fair := &tr.Fairness[pi]
		x.jobs = append(x.jobs, parallel.Job{Name: fmt.Sprintf("tenants: %s, shared %d blocks", sp, o.TenantCapacity), Run: func(ctx context.Context) error {
			return runTenants(ctx, m, sp, o.TenantCapacity, tr.Tenants, rows, fair)
		}})
	}
	return nil
}

// fill computes the derived fields of a row whose TokenHitRatio is set.
func (r *GapRow) fill(s Setup) {
	r.Subject = r.TokenHitRatio[s.Subject]
	r.Reference = r.TokenHitRatio[Reference]
	r.Oracle = r.TokenHitRatio[s.Oracle]
	r.Best, r.BestPolicy = -1, ""
	for _, b := range s.Baselines {
		if v, ok := r.TokenHitRatio[b]; ok && v > r.Best {
			r.Best, r.BestPolicy = v, b
		}
	}
	r.VsBest = r.Subject - r.Best
	if d := r.Oracle - r.Reference; d >= minGap {
		r.GapClosed, r.GapDefined = (r.Subject-r.Reference)/d, true
	}
}

// runTenants fills rows (one per tenant) and fair for policy sp.
func runTenants(ctx context.Context, m *Merged, sp policy.Spec, capacity int, names []string, rows []TenantRow, fair *TenantFairness) error {
	shared, err := ReplayShared(m, sp, capacity)
	if err != nil {
		return err
	}
	var total Counts
	var norm []float64
	defined := true
	for t := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		row := TenantRow{Policy: sp.String(), Tenant: names[t], Label: string(rune('A' + t)), Shared: shared[t]}
		for _, solo := range []struct {
			dst *Counts
			c   int
		}{{&row.SoloHalf, capacity / 2}, {&row.SoloWhole, capacity}} {
			r, err := hitrate.Run(m.Solo[t], hitrate.Options{Policy: sp, Capacity: solo.c})
			if err != nil {
				return fmt.Errorf("tenant %s alone: %w", names[t], err)
			}
			*solo.dst = Counts{Requests: r.Requests, InputTokens: r.InputTokens, HitTokens: r.HitTokens, Blocks: r.Blocks, HitBlocks: r.HitBlocks}
		}
		rows[t] = row
		total.InputTokens += row.Shared.InputTokens
		total.HitTokens += row.Shared.HitTokens
		if v, ok := row.Normalised(); ok {
			norm = append(norm, v)
		} else {
			defined = false
		}
	}
	*fair = TenantFairness{Policy: sp.String(), SharedTokenHitRatio: total.TokenHitRatio()}
	if defined {
		fair.Jain, fair.JainDefined = Jain(norm)
	}
	return nil
}

// measureGoodput searches the goodput of so on reqs and runs it once at
// the base rate.
func measureGoodput(ctx context.Context, reqs []trace.Request, so sim.Options) (Goodput, error) {
	m, rps, err := sim.Goodput(ctx, reqs, so, 0)
	if err != nil {
		return Goodput{}, err
	}
	r, err := sim.Run(ctx, reqs, so)
	if err != nil {
		return Goodput{}, err
	}
	return Goodput{Multiplier: m, ReqPerSec: rps, TokenHitRatio: r.Summary.TokenHitRatio, TTFTMean: r.Summary.TTFTMean}, nil
}
