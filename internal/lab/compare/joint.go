package compare

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"

	"github.com/kvpool/kvpool/internal/lab/parallel"
	"github.com/kvpool/kvpool/internal/lab/report"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// JointTargetRatio is the goodput ratio over the baseline the joint
// comparison is judged against (≥ 1.2×; docs/policy.md, "Fig 10 goodput
// with Algorithm 1's rejection").
const JointTargetRatio = 1.2

// unboundedNICGbps is the NIC bandwidth of the unbounded arms: 1,000× the
// default 100 Gbps, so a 160 MiB block crosses a link in 13 µs and no
// transfer matters next to prefills of seconds.
const unboundedNICGbps = 1000 * sim.DefaultNICGbps

// JointArm is one arm of the joint routing and placement comparison: a
// policy and the switches of sim's joint mechanisms.
type JointArm struct {
	// Name labels the arm in tables.
	Name string `json:"name"`
	// Policy is the eviction policy spec of every RAM cache.
	Policy string `json:"policy"`
	// Routing is the routing (cache-aware or joint).
	Routing sim.Routing `json:"routing"`
	// Replication and EvictRedundantFirst are sim's placement switches.
	Replication         sim.Replication `json:"replication"`
	EvictRedundantFirst bool            `json:"evict_redundant_first"`
	// Unbounded gives every instance a RAM cache larger than the trace's
	// distinct blocks and a 100,000 Gbps NIC: nothing is ever evicted and
	// transfers are free, so the arm bounds what a policy or placement can
	// add to its routing.
	Unbounded bool `json:"unbounded"`
	// Baseline marks the arm every ratio is taken against; Ours marks the
	// candidates for "ours" (the best of them by goodput is reported).
	Baseline bool `json:"baseline"`
	Ours     bool `json:"ours"`
}

// JointArms returns the standard arms: the baseline (Mooncake-like batch
// LRU with Algorithm 1), each mechanism alone on the baseline's policy
// (the ablation), LRU with Algorithm 1, all mechanisms with lru and with
// kvchain (ours), and the unbounded arms.
func JointArms() []JointArm {
	all := func(name, pol string) JointArm {
		return JointArm{Name: name, Policy: pol, Routing: sim.RoutingJoint, Replication: sim.ReplicateHot,
			EvictRedundantFirst: true, Ours: true}
	}
	return []JointArm{
		{Name: "baseline: mooncake + cache-aware", Policy: "mooncake", Routing: sim.RoutingCacheAware, Baseline: true},
		{Name: "mooncake + (a) joint routing", Policy: "mooncake", Routing: sim.RoutingJoint},
		{Name: "mooncake + (b) hot replication", Policy: "mooncake", Routing: sim.RoutingCacheAware, Replication: sim.ReplicateHot},
		{Name: "mooncake + (c) redundant first", Policy: "mooncake", Routing: sim.RoutingCacheAware, EvictRedundantFirst: true},
		{Name: "lru + cache-aware", Policy: "lru", Routing: sim.RoutingCacheAware},
		{Name: "lru + joint routing", Policy: "lru", Routing: sim.RoutingJoint, Ours: true},
		all("lru + (a)(b)(c)", "lru"),
		all("kvchain + (a)(b)(c)", "kvchain"),
		{Name: "unbounded cache + cache-aware", Policy: "lru", Routing: sim.RoutingCacheAware, Unbounded: true},
		{Name: "unbounded cache + joint routing", Policy: "lru", Routing: sim.RoutingJoint, Unbounded: true},
	}
}

// JointOptions configure RunJoint. The zero value of every field but
// Traces means its default.
type JointOptions struct {
	// Traces are compared one after another; at least one is required.
	Traces []Trace
	// Arms are the arms (default JointArms()); exactly one must be the
	// Baseline.
	Arms []JointArm
	// Instances and RAMBlocks give the cluster (default: Fig 10, 10 ×
	// 5,859 blocks). Every other sim option is its default (global mode,
	// 100 Gbps, 30 s SLO, prefetch).
	Instances int
	RAMBlocks int
	// Reject runs every arm with Algorithm 1's rejection (sim.Options.Reject:
	// a request whose estimated TTFT exceeds the SLO is turned away on
	// arrival and counts as a miss), as the paper's Algorithm 1 does, and
	// takes the pooled ceiling with rejection (sim.Ceiling.GoodputRejecting).
	Reject bool
	// Workers bounds the simulations run at once (default GOMAXPROCS).
	Workers int
	// Progress, when set, receives one line per finished simulation.
	Progress io.Writer
}

func (o JointOptions) withDefaults() JointOptions {
	if len(o.Arms) == 0 {
		o.Arms = JointArms()
	}
	if o.Instances == 0 {
		o.Instances = sim.DefaultInstances
	}
	if o.RAMBlocks == 0 {
		o.RAMBlocks = sim.DefaultRAMBlocks
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o
}

// Validate reports the first bad field.
func (o JointOptions) Validate() error {
	o = o.withDefaults()
	if len(o.Traces) == 0 {
		return fmt.Errorf("compare: joint: Traces: none given")
	}
	for i, t := range o.Traces {
		if t.Name == "" {
			return fmt.Errorf("compare: joint: Traces[%d]: empty name", i)
		}
		if len(t.Requests) == 0 {
			return fmt.Errorf("compare: joint: Traces[%d] %q: no requests", i, t.Name)
		}
	}
	if o.Workers < 0 {
		return fmt.Errorf("compare: joint: Workers: %d is negative", o.Workers)
	}
	baselines := 0
	for i, a := range o.Arms {
		if a.Name == "" {
			return fmt.Errorf("compare: joint: Arms[%d]: empty name", i)
		}
		if err := o.simOptions(a, 1).Validate(); err != nil {
			return fmt.Errorf("compare: joint: Arms[%d] %q: %w", i, a.Name, err)
		}
		if a.Baseline {
			baselines++
		}
	}
	if baselines != 1 {
		return fmt.Errorf("compare: joint: Arms: %d arms are marked Baseline, want exactly 1", baselines)
	}
	return nil
}

// simOptions returns arm a's simulator options for a trace with distinct
// distinct blocks.
func (o JointOptions) simOptions(a JointArm, distinct int) sim.Options {
	so := sim.Options{
		Instances:           o.Instances,
		RAMBlocks:           o.RAMBlocks,
		Mode:                sim.ModeGlobal,
		Routing:             a.Routing,
		Policy:              a.Policy,
		Replication:         a.Replication,
		EvictRedundantFirst: a.EvictRedundantFirst,
		Reject:              o.Reject,
	}
	if a.Unbounded {
		so.RAMBlocks = max(distinct, 1)
		so.NICGbps = unboundedNICGbps
	}
	return so
}

// JointRow is one arm on one trace.
type JointRow struct {
	Trace string   `json:"trace"`
	Arm   JointArm `json:"arm"`
	// Multiplier and ReqPerSec are the arm's goodput (sim.Goodput);
	// Ratio is ReqPerSec over the baseline's on the same trace.
	Multiplier float64 `json:"goodput_rate_multiplier"`
	ReqPerSec  float64 `json:"goodput_req_per_s"`
	Ratio      float64 `json:"goodput_ratio"`
	// AtBaseline is the arm's run at the baseline's goodput multiplier
	// (TTFT, hit ratio and bytes are compared there, at equal load).
	AtBaseline sim.Summary `json:"at_baseline_goodput"`
	// AtTraceRate is the arm's run at the trace's own rate (×1).
	AtTraceRate sim.Summary `json:"at_trace_rate"`
}

// JointCeiling is the pooled ceiling of one trace (sim.Ceiling): its
// reuse, its capacity multiplier, and its goodput with FIFO queues (the
// model's discipline; with rejection when the comparison rejects) and,
// without rejection, with shortest-first queues, each with its ratio to
// the baseline's goodput.
type JointCeiling struct {
	Trace                   string  `json:"trace"`
	TokenHitRatio           float64 `json:"token_hit_ratio"`
	CapacityMultiplier      float64 `json:"capacity_rate_multiplier"`
	Multiplier              float64 `json:"goodput_rate_multiplier"`
	ReqPerSec               float64 `json:"goodput_req_per_s"`
	Ratio                   float64 `json:"goodput_ratio"`
	ShortestFirstMultiplier float64 `json:"shortest_first_goodput_rate_multiplier"`
	ShortestFirstReqPerSec  float64 `json:"shortest_first_goodput_req_per_s"`
	ShortestFirstRatio      float64 `json:"shortest_first_goodput_ratio"`
}

// JointResult is the joint comparison.
type JointResult struct {
	Instances  int     `json:"instances"`
	RAMBlocks  int     `json:"ram_blocks"`
	SLOSeconds float64 `json:"slo_s"`
	// Reject says every arm and the ceiling ran with Algorithm 1's
	// rejection (JointOptions.Reject).
	Reject bool `json:"reject"`
	// Traces are the trace names in order.
	Traces   []string       `json:"traces"`
	Rows     []JointRow     `json:"rows"`
	Ceilings []JointCeiling `json:"ceilings"`
}

// RunJoint runs the joint routing and placement comparison: every arm's
// goodput on every trace, every arm again at the baseline's goodput rate,
// and each trace's pooled ceiling. Simulations run on up to Workers
// goroutines; the result does not depend on their number.
func RunJoint(ctx context.Context, opts JointOptions) (*JointResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	res := &JointResult{Instances: o.Instances, RAMBlocks: o.RAMBlocks, Reject: o.Reject}
	base := o.baselineIndex()
	var goodput, atBase []parallel.Job
	for ti, t := range o.Traces {
		res.Traces = append(res.Traces, t.Name)
		distinct := distinctBlocks(t.Requests)
		res.Ceilings = append(res.Ceilings, JointCeiling{Trace: t.Name})
		goodput = append(goodput, o.ceilingJob(res, ti, base, distinct))
		for _, a := range o.Arms {
			g, b := o.armJobs(res, ti, base, a, distinct)
			goodput, atBase = append(goodput, g), append(atBase, b)
		}
	}
	if err := parallel.Run(ctx, goodput, o.Workers, o.Progress); err != nil {
		return nil, err
	}
	if err := parallel.Run(ctx, atBase, o.Workers, o.Progress); err != nil {
		return nil, err
	}
	res.setRatios(len(o.Arms), base)
	return res, nil
}

// baselineIndex is the index in o.Arms of the (last) arm marked Baseline,
// or 0 if none is.
func (o JointOptions) baselineIndex() int {
	base := 0
	for i, a := range o.Arms {
		if a.Baseline {
			base = i
		}
	}
	return base
}

// ceilingJob fills res.Ceilings[ti] with the pooled ceiling of trace ti,
// which has distinct distinct blocks, under the baseline arm's options.
func (o JointOptions) ceilingJob(res *JointResult, ti, base, distinct int) parallel.Job {
	t := o.Traces[ti]
	return parallel.Job{Name: t.Name + ": joint: pooled ceiling", Run: func(ctx context.Context) error {
		c, err := sim.NewCeiling(t.Requests, o.simOptions(o.Arms[base], distinct))
		if err != nil {
			return err
		}
		jc := JointCeiling{Trace: t.Name, TokenHitRatio: c.TokenHitRatio, CapacityMultiplier: c.CapacityMultiplier}
		if o.Reject {
			jc.Multiplier, jc.ReqPerSec, err = c.GoodputRejecting(ctx, 0)
		} else {
			if jc.Multiplier, jc.ReqPerSec, err = c.Goodput(ctx, 0); err == nil {
				jc.ShortestFirstMultiplier, jc.ShortestFirstReqPerSec, err = c.GoodputShortestFirst(ctx, 0)
			}
		}
		res.Ceilings[ti] = jc
		return err
	}}
}

// armJobs add the row of arm a on trace ti (which has distinct distinct
// blocks) to res.Rows and return its two jobs: goodput, the search for
// the arm's goodput; atBase, which runs (after every goodput job) the arm
// at the baseline's goodput multiplier and at the trace's own rate.
func (o JointOptions) armJobs(res *JointResult, ti, base int, a JointArm, distinct int) (goodput, atBase parallel.Job) {
	t := o.Traces[ti]
	i := len(res.Rows)
	res.Rows = append(res.Rows, JointRow{Trace: t.Name, Arm: a})
	so := o.simOptions(a, distinct)
	goodput = parallel.Job{Name: fmt.Sprintf("%s: joint: goodput %s", t.Name, a.Name), Run: func(ctx context.Context) error {
		m, rps, err := sim.Goodput(ctx, t.Requests, so, 0)
		if err != nil {
			return err
		}
		res.Rows[i].Multiplier, res.Rows[i].ReqPerSec = m, rps
		return nil
	}}
	atBase = parallel.Job{Name: fmt.Sprintf("%s: joint: %s at the baseline's goodput", t.Name, a.Name), Run: func(ctx context.Context) error {
		so := so
		so.RateMultiplier = res.Rows[ti*len(o.Arms)+base].Multiplier
		if so.RateMultiplier == 0 {
			return fmt.Errorf("baseline %q has no goodput on trace %q", o.Arms[base].Name, t.Name)
		}
		r, err := sim.Run(ctx, t.Requests, so)
		if err != nil {
			return err
		}
		res.Rows[i].AtBaseline = r.Summary
		so.RateMultiplier = 1
		if r, err = sim.Run(ctx, t.Requests, so); err != nil {
			return err
		}
		res.Rows[i].AtTraceRate = r.Summary
		return nil
	}}
	return goodput, atBase
}

// setRatios sets every row's and ceiling's goodput ratio to the baseline
// of its trace (the row at index base among the arms rows of each trace),
// and the SLO from the first arm of the first trace whose run reports one.
func (r *JointResult) setRatios(arms, base int) {
	for ti := range r.Traces {
		b := r.Rows[ti*arms+base].ReqPerSec
		for i := range arms {
			row := &r.Rows[ti*arms+i]
			row.Ratio = ratioOf(row.ReqPerSec, b)
		}
		r.Ceilings[ti].Ratio = ratioOf(r.Ceilings[ti].ReqPerSec, b)
		r.Ceilings[ti].ShortestFirstRatio = ratioOf(r.Ceilings[ti].ShortestFirstReqPerSec, b)
		if r.SLOSeconds == 0 {
			r.SLOSeconds = r.Rows[ti*arms].AtBaseline.SLO
		}
	}
}

// distinctBlocks counts the distinct keys of reqs.
func distinctBlocks(reqs []trace.Request) int {
	seen := make(map[policy.Key]struct{})
	for i := range reqs {
		for _, k := range reqs[i].HashIDs {
			seen[k] = struct{}{}
		}
	}
	return len(seen)
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Baseline returns the baseline row of trace t, or nil.
func (r *JointResult) Baseline(t string) *JointRow {
	for i := range r.Rows {
		if r.Rows[i].Trace == t && r.Rows[i].Arm.Baseline {
			return &r.Rows[i]
		}
	}
	return nil
}

// Ours returns the best arm marked Ours on trace t: the highest goodput,
// then the lowest mean TTFT at the baseline's goodput rate (nil if none).
func (r *JointResult) Ours(t string) *JointRow {
	var best *JointRow
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Trace != t || !row.Arm.Ours {
			continue
		}
		if best == nil || row.ReqPerSec > best.ReqPerSec ||
			(row.ReqPerSec == best.ReqPerSec && row.AtBaseline.TTFTMean < best.AtBaseline.TTFTMean) {
			best = row
		}
	}
	return best
}

// Ceiling returns the pooled ceiling of trace t, or nil.
func (r *JointResult) Ceiling(t string) *JointCeiling {
	for i := range r.Ceilings {
		if r.Ceilings[i].Trace == t {
			return &r.Ceilings[i]
		}
	}
	return nil
}

// Section renders the comparison as a report section: the verdict per
// trace against JointTargetRatio, and the table of arms.
func (r *JointResult) Section() report.Section {
	sec := report.Section{Title: "Joint routing and placement: goodput vs the Mooncake-like baseline (Fig 10 configuration)"}
	if r.Reject {
		sec.Title += ", with Algorithm 1's rejection"
	}
	sec.Text = r.sectionText()
	sec.Tables = []report.Table{r.verdictTable(), r.armsTable()}
	return sec
}

// sectionText is the section's prose: the configuration, the arms, and
// what the pooled ceiling means with or without rejection.
func (r *JointResult) sectionText() string {
	text := fmt.Sprintf("%d instances × %d RAM blocks, global mode, 100 Gbps, prefetch, %g s TTFT SLO; goodput is the highest "+
		"rate (trace rate × multiplier, bisection to 2%%) with ≥ 90%% of requests within the SLO. Baseline: the approximate (batch) "+
		"LRU `mooncake` with Algorithm 1 (`cache-aware`). (a) `joint` routing also counts the prefixes that requests already queued "+
		"on an instance will store there, and binds the reuse at the head of the queue; (b) hot replication keeps a fetched block only "+
		"when it is hot; (c) redundant first evicts a replica held elsewhere before a last copy. Ours is the best arm using them. "+
		"Unbounded arms never evict and move blocks for free. TTFT, hit ratio and bytes are measured at the baseline's goodput rate "+
		"(equal load) unless marked ×1 (the trace's own rate).\n\n",
		r.Instances, r.RAMBlocks, r.SLOSeconds)
	if r.Reject {
		text += "Every arm here rejects a request on arrival when its estimated TTFT exceeds the SLO, as the paper's Algorithm 1 " +
			"does (`kvpool sim --reject`); a rejected request counts as a miss. Under overload the requests turned away are those " +
			"with the most prefill work, so goodput rises far above the rate FIFO queues without rejection sustain, and at the " +
			"goodput rate the instances run with queues close to the SLO (the mean TTFT there is near the SLO for every arm).\n\n" +
			"The pooled ceiling with rejection is an optimistic reference for this model, not a proof: every request reuses every " +
			"leading block any earlier arrival asked for (even one still queued, which matters when queues are tens of seconds " +
			"long), transfers are free, one central FIFO queue feeds all instances, and a request is rejected exactly when its own " +
			"TTFT would exceed the SLO."
	} else {
		text += "The pooled ceiling is an optimistic reference for this model, not a proof: every request reuses every leading " +
			"block any earlier arrival asked for, transfers are free, and one central FIFO queue feeds all instances. Its capacity " +
			"multiplier is the rate at which that minimal prefill work fills every instance for the whole trace. The shortest-first " +
			"ceiling serves the least work first instead: it shows that the 90% goodput criterion can be met at far higher rates by " +
			"starving the longest requests, which is a change of queue discipline (scheduling), not of routing or placement, and is " +
			"not done here. The policy report also runs this comparison with Algorithm 1's rejection in every arm (next section)."
	}
	return text
}

// verdictTable compares, per trace, ours with the baseline and says
// whether the pooled ceiling leaves JointTargetRatio reachable.
func (r *JointResult) verdictTable() report.Table {
	ceilingCol := "FIFO ceiling (req/s)"
	if r.Reject {
		ceilingCol = "ceiling with rejection (req/s)"
	}
	verdict := report.Table{Caption: fmt.Sprintf("Verdict: ours vs the baseline (target ≥ %g× goodput, mean TTFT no worse)", JointTargetRatio),
		Columns: []string{"trace", "baseline (req/s)", "ours", "ours (req/s)", "ours/baseline", "mean TTFT at baseline goodput (s)",
			"mean TTFT ×1 (s)", ceilingCol, "ceiling/baseline", "target reachable"}}
	for _, t := range r.Traces {
		b, o, c := r.Baseline(t), r.Ours(t), r.Ceiling(t)
		if b == nil || o == nil || c == nil {
			continue
		}
		reach := "yes"
		switch {
		case c.Ratio >= JointTargetRatio:
		case r.Reject:
			reach = fmt.Sprintf("no (ceiling with rejection %s)", times(c.Ratio))
		default:
			reach = fmt.Sprintf("no with FIFO queues (ceiling %s); shortest-first ceiling %s", times(c.Ratio), times(c.ShortestFirstRatio))
		}
		if c.Ratio >= JointTargetRatio && o.Ratio < JointTargetRatio {
			reach = fmt.Sprintf("not ruled out by the ceiling (%s); not reached", times(c.Ratio))
		}
		verdict.Rows = append(verdict.Rows, []string{t, perSec(b.ReqPerSec), o.Arm.Name, perSec(o.ReqPerSec), times(o.Ratio),
			secs(b.AtBaseline.TTFTMean) + " → " + secs(o.AtBaseline.TTFTMean),
			secs(b.AtTraceRate.TTFTMean) + " → " + secs(o.AtTraceRate.TTFTMean),
			perSec(c.ReqPerSec), times(c.Ratio), reach})
	}
	return verdict
}

// armsTable lists every arm on every trace, then the pooled ceilings.
func (r *JointResult) armsTable() report.Table {
	arms := report.Table{Caption: "Every arm: goodput; at the baseline's goodput rate TTFT, hit ratio and bytes moved; mean TTFT and hit ratio at ×1",
		Columns: []string{"trace", "arm", "goodput (req/s)", "vs baseline", "mean TTFT (s)", "p90 TTFT (s)", "token hit ratio",
			"network", "replicas skipped", "redundant evictions", "late-bound blocks", "mean TTFT ×1 (s)", "token hit ratio ×1"}}
	for _, row := range r.Rows {
		s, s1 := row.AtBaseline, row.AtTraceRate
		arms.Rows = append(arms.Rows, []string{row.Trace, row.Arm.Name, perSec(row.ReqPerSec), times(row.Ratio),
			secs(s.TTFTMean), secs(s.TTFTP90), pct(s.TokenHitRatio), report.Bytes(s.BytesNet),
			strconv.FormatInt(s.ReplicasSkipped, 10), strconv.FormatInt(s.RedundantEvictions, 10), strconv.FormatInt(s.LateBoundBlocks, 10),
			secs(s1.TTFTMean), pct(s1.TokenHitRatio)})
	}
	for _, c := range r.Ceilings {
		name := "pooled ceiling, FIFO (capacity ×" + num(c.CapacityMultiplier) + ")"
		if r.Reject {
			name = "pooled ceiling, FIFO with rejection (capacity ×" + num(c.CapacityMultiplier) + ")"
		}
		arms.Rows = append(arms.Rows,
			[]string{c.Trace, name, perSec(c.ReqPerSec), times(c.Ratio), "–", "–", pct(c.TokenHitRatio), "–", "–", "–", "–", "–", "–"})
		if !r.Reject {
			arms.Rows = append(arms.Rows, []string{c.Trace, "pooled ceiling, shortest first", perSec(c.ShortestFirstReqPerSec),
				times(c.ShortestFirstRatio), "–", "–", pct(c.TokenHitRatio), "–", "–", "–", "–", "–", "–"})
		}
	}
	return arms
}

// times formats a ratio as "1.05×".
func times(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) + "×" }
