// Package validate checks that the live store and the simulator agree: it
// runs one configuration (cache mode, routing, nodes, RAM, NIC, policy,
// payload, speed) in the simulator (package sim) and live (package replay
// against a local cluster of kvpool processes started with package
// cluster), and compares the two runs on these tolerances (docs/design.md,
// "The lab"):
//
//   - token hit ratio: |live − sim| ≤ 2 percentage points;
//   - mean TTFT in model seconds: |live − sim| / sim ≤ 20%;
//   - wrong blocks (bytes that differ from their generated payload, with
//     verify=full) and corrupt blocks: exactly 0;
//   - the live run completed every request (not cut short).
//
// The simulator runs on the keys the nodes' policies see: a node's RAM
// tier hands its eviction policy a 64-bit hash of tenant and block ID
// (block.PolicyKey), not the trace's hash_id, and a policy that samples
// or sketches keys by hash (kvchain's set dueling and frequency sketch)
// lands on a different hit ratio for a different labelling of the same
// accesses: up to ±1 point for kvchain at 1,000 blocks per node on the
// 10-minute windows (BENCHMARKS.md). So Run relabels the requests' keys
// as the nodes do (NodeKeys) before simulating, and also reports the
// simulator on the trace's own keys (Report.SimTraceKeys), which is what
// kvpool compare --sim shows; for LRU and other label-blind policies the
// two are the same.
//
// Policies agree trivially when nothing is evicted: validate a policy
// with RAMBlocks small enough that evictions are most of the inserts.
//
// Each run starts its own cluster and stops it at the end, so two runs
// never share caches.
//
// The verdict is PASS, FAIL or INCONCLUSIVE. The verified blocks and
// completion do not depend on the machine's speed and are always judged.
// The mean TTFT is judged only when the live run kept up with its arrival
// schedule (KeptUp): otherwise live TTFTs measure the machine's lateness
// as much as the store. The token hit ratio is judged whenever the
// replayer says it kept up (dispatch lag p99 within replay.MaxLagP99);
// only a run far behind that stores its blocks late enough to cost hits,
// and only then is a hit-ratio disagreement left unjudged. A run whose
// judged checks all pass but that left one unjudged for lateness is
// INCONCLUSIVE, with the reason and a lower speed to rerun at
// (Report.SuggestedSpeed), instead of FAIL.
//
// RunSuite runs several configurations on one window and writes the
// verdict table (kvpool compare --validate); LiveFunc adapts Run to the
// live arms of package compare (kvpool compare --live).
package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"

	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
)

// Defaults of Config; a zero field takes these values.
const (
	// DefaultNodes is four nodes (and four prefill workers): the most
	// processes a 2-core machine runs next to the replayer while keeping
	// the dispatch lag p99 under replay.MaxLagP99 (measured: ≈5 ms at
	// speed 50).
	DefaultNodes = 4
	// DefaultPayloadBytes is 32 KiB per block, inside the 16–64 KiB range
	// a 2-core machine moves at the validation's speed.
	DefaultPayloadBytes = 32 << 10
	// DefaultSpeed is replay.DefaultSpeed (50×): a 10-minute window
	// stretched ×2 replays in 24 s of live time.
	DefaultSpeed = replay.DefaultSpeed
	// DefaultHitTolerance is the validation's bound on the token hit ratio:
	// 2 percentage points (docs/design.md, "The lab").
	DefaultHitTolerance = 0.02
	// DefaultTTFTTolerance is the validation's bound on the mean TTFT: 20%
	// of the simulator's (docs/design.md, "The lab").
	DefaultTTFTTolerance = 0.20
	// LagShareOfTolerance is the share of the TTFT tolerance a run's
	// lateness (Lateness) may take, in model seconds, for the run to
	// count as kept up (see KeptUp): a quarter. A live TTFT runs from the
	// request's scheduled arrival, so a late dispatch and a prefill timer
	// that wakes late add to the TTFT, and a late prefill delays every
	// request queued behind it too; at a quarter, that lateness leaves
	// most of the tolerance to the store itself.
	LagShareOfTolerance = 0.25
	// MinSpeed is the lowest speed SuggestedSpeed proposes: 1 (real time).
	MinSpeed = 1.0
)

// Config is one configuration to validate. The zero value of every field
// means its default; Validate names the first bad field.
type Config struct {
	// Name labels the configuration in reports ("local rr"); "" means
	// "<mode> <routing>".
	Name string `json:"name"`
	// Mode and Routing are the cache mode and routing (sim's defaults:
	// global, cache-aware).
	Mode    sim.Mode    `json:"mode"`
	Routing sim.Routing `json:"routing"`
	// Nodes is the number of nodes, and of prefill instances in the
	// simulator (DefaultNodes).
	Nodes int `json:"nodes"`
	// RAMBlocks and SSDBlocks are each node's caches in blocks
	// (sim.DefaultRAMBlocks; SSDBlocks 0 means no SSD tier).
	RAMBlocks int `json:"ram_blocks"`
	SSDBlocks int `json:"ssd_blocks"`
	// NICGbps is the modelled NIC bandwidth (sim.DefaultNICGbps).
	NICGbps float64 `json:"nic_gbps"`
	// Policy is the RAM eviction policy (sim.DefaultPolicy).
	Policy string `json:"policy"`
	// PayloadBytes is the live block size (DefaultPayloadBytes).
	PayloadBytes int `json:"payload_bytes"`
	// Speed is the live run's time compression (DefaultSpeed).
	Speed float64 `json:"speed"`
	// Verify is the live block verification (replay.VerifyFull).
	Verify replay.VerifyMode `json:"verify"`
	// Net is the live cluster's network (replay.NetPacer; NetKernel puts
	// each node on a host of its own, links shaped by the kernel).
	Net replay.NetMode `json:"net"`
	// HitTolerance bounds |live − sim| token hit ratio
	// (DefaultHitTolerance); TTFTTolerance bounds |live − sim| / sim mean
	// TTFT (DefaultTTFTTolerance).
	HitTolerance  float64 `json:"hit_tolerance"`
	TTFTTolerance float64 `json:"ttft_tolerance"`
	// SkipTTFT reports the TTFT comparison without judging it (for runs
	// whose live timing is known to be distorted, such as under the race
	// detector).
	SkipTTFT bool `json:"skip_ttft"`
	// Binary is the kvpool executable the cluster runs ("" means
	// os.Executable()).
	Binary string `json:"-"`
	// ClusterOutput receives the cluster processes' logs (nil discards
	// them).
	ClusterOutput io.Writer `json:"-"`
	// Progress receives the live replay's progress line (nil: none);
	// ProgressTerminal says it is a terminal (replay.Options).
	Progress         io.Writer `json:"-"`
	ProgressTerminal bool      `json:"-"`
}

// WithDefaults returns c with every zero field replaced by its default.
// The fields a Config shares with the live replay (mode, routing, caches,
// NIC, speed, verification) take the replay's defaults, so the simulated
// and the live side of a validation start from the same values.
func (c Config) WithDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.PayloadBytes == 0 {
		c.PayloadBytes = DefaultPayloadBytes
	}
	r := c.replayOptions().WithDefaults()
	c.Mode, c.Routing, c.Speed, c.NICGbps, c.Verify, c.Net = r.Mode, r.Routing, r.Speed, r.NICGbps, r.Verify, r.Net
	c.RAMBlocks, c.Policy = r.RAMBlocks, r.Policy
	if c.Name == "" {
		c.Name = string(c.Mode) + " " + string(c.Routing)
	}
	if c.HitTolerance == 0 {
		c.HitTolerance = DefaultHitTolerance
	}
	if c.TTFTTolerance == 0 {
		c.TTFTTolerance = DefaultTTFTTolerance
	}
	return c
}

// Validate reports the first bad field by name. Zero fields are valid.
func (c Config) Validate() error {
	d := c.WithDefaults()
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("validate: %w", option.Errorf(field, format, a...))
	}
	switch {
	case d.Nodes < 1:
		return bad("Nodes", "must be > 0, got %d", d.Nodes)
	case math.IsNaN(d.HitTolerance) || d.HitTolerance < 0 || d.HitTolerance > 1:
		return bad("HitTolerance", "must be a fraction in (0, 1], got %g", d.HitTolerance)
	case math.IsNaN(d.TTFTTolerance) || math.IsInf(d.TTFTTolerance, 0) || d.TTFTTolerance < 0:
		return bad("TTFTTolerance", "must be finite and > 0, got %g", d.TTFTTolerance)
	}
	if err := d.SimOptions().Validate(); err != nil {
		return fmt.Errorf("validate: config: %w", err)
	}
	ro := d.ReplayOptions()
	ro.Master = "pending" // set once the cluster is up
	if err := ro.Validate(); err != nil {
		return fmt.Errorf("validate: config: %w", err)
	}
	if err := replay.ClusterOptions(d.Nodes, ro).Validate(); err != nil {
		return fmt.Errorf("validate: config: %w", err)
	}
	return nil
}

// SimOptions returns the simulator's options for c.
func (c Config) SimOptions() sim.Options {
	c = c.WithDefaults()
	return sim.Options{
		Instances: c.Nodes, RAMBlocks: c.RAMBlocks, SSDBlocks: c.SSDBlocks,
		Mode: c.Mode, Routing: c.Routing, Policy: c.Policy, NICGbps: c.NICGbps,
	}
}

// ReplayOptions returns the live replay's options for c (without the
// master's address, which the cluster gives).
func (c Config) ReplayOptions() replay.Options {
	return c.WithDefaults().replayOptions()
}

// replayOptions are the live replay's options for c as it is (zero fields
// stay zero).
func (c Config) replayOptions() replay.Options {
	return replay.Options{
		Mode: c.Mode, Routing: c.Routing, PayloadBytes: c.PayloadBytes, Speed: c.Speed,
		NICGbps: c.NICGbps, Verify: c.Verify, RAMBlocks: c.RAMBlocks, SSDBlocks: c.SSDBlocks,
		Policy: c.Policy, Progress: c.Progress, ProgressTerminal: c.ProgressTerminal, Net: c.Net,
	}
}

// Verdict is a validation's outcome.
type Verdict string

// The verdicts. A Report's Verdict is FAIL when a judged check failed,
// INCONCLUSIVE when every judged check passed but the mean TTFT (or the
// hit ratio, see the package comment) could not be judged because the
// live run did not keep up, and PASS otherwise.
const (
	VerdictPass         Verdict = "PASS"
	VerdictFail         Verdict = "FAIL"
	VerdictInconclusive Verdict = "INCONCLUSIVE"
)

// The exit codes of a verdict, shared by every command that judges live
// against simulated runs (kvpool compare --validate, kvpool demo): 0 PASS,
// 1 FAIL (a judged check disagrees, or a wrong block), 3 INCONCLUSIVE
// (nothing judged disagrees, but a live run did not keep up, so a check
// was not judged). 2 stays the usage error of every command.
const (
	ExitPass         = 0
	ExitFail         = 1
	ExitInconclusive = 3
)

// ExitCode returns v's exit code (ExitFail for an unknown verdict).
func (v Verdict) ExitCode() int {
	switch v {
	case VerdictPass:
		return ExitPass
	case VerdictInconclusive:
		return ExitInconclusive
	}
	return ExitFail
}

// Overall returns the verdict of several runs together: FAIL when any
// failed (or is not a known verdict), else INCONCLUSIVE when any was,
// else PASS (also for none).
func Overall(vs []Verdict) Verdict {
	out := VerdictPass
	for _, v := range vs {
		switch v {
		case VerdictPass:
		case VerdictInconclusive:
			out = VerdictInconclusive
		default:
			return VerdictFail
		}
	}
	return out
}

// ErrInconclusive is wrapped by the error of a validation that could not
// judge a check because the machine did not keep up with the live run
// (and found nothing else wrong).
var ErrInconclusive = errors.New("validate: inconclusive")

// KeptUp reports whether a live run kept up with its arrival schedule
// well enough for its TTFTs to be judged against the simulator's, and if
// not, why. Two conditions, both from the replayer's own accounting:
//
//   - the replayer's verdict (replay.Summary.KeptUp): dispatch lag p99 at
//     most replay.MaxLagP99 (20 ms live), past which the tail of the
//     schedule ran late;
//   - the run's lateness (Lateness: per request, the dispatch lag plus
//     how far its prefill overshot its planned time, averaged, in live
//     seconds) times the speed, i.e. in model seconds, at most
//     LagShareOfTolerance of the TTFT tolerance (ttftTolerance × the
//     simulator's mean TTFT). The dispatch lag alone misses a machine
//     whose timers all wake late: measured with two busy loops at speed
//     100, lag p99 4–7 ms (kept up by the first condition) but live mean
//     TTFTs 23–37% over the simulator's.
func KeptUp(l replay.Summary, lateness, simTTFTMean, ttftTolerance float64) (bool, string) {
	if !l.KeptUp {
		return false, fmt.Sprintf("the machine did not keep up: dispatch lag p99 %.1f ms > %v", 1e3*l.LagP99, replay.MaxLagP99)
	}
	budget := LagShareOfTolerance * ttftTolerance * simTTFTMean
	if late := lateness * l.Speed; simTTFTMean > 0 && late > budget {
		return false, fmt.Sprintf("the machine did not keep up: requests ran %.2f ms late on average (dispatch and prefill timers), %.3f model s at speed %g, over %.0f%% of the TTFT tolerance (%.3f s)",
			1e3*lateness, late, l.Speed, 100*LagShareOfTolerance, budget)
	}
	return true, ""
}

// Lateness returns how late, on average, the machine ran a live run's
// requests, in live seconds: per request, the dispatcher's lag plus how
// far the prefill overshot its planned live time (its model time over
// the speed), over res's completed requests. 0 for an empty run.
func Lateness(res *replay.Result) float64 {
	speed := res.Summary.Speed
	if len(res.Live) == 0 || speed <= 0 {
		return 0
	}
	sum := 0.0
	for i, lr := range res.Live {
		sum += lr.Lag + max(lr.Prefill-res.Records[i].Prefill/speed, 0)
	}
	return sum / float64(len(res.Live))
}

// SuggestedSpeed returns a speed at which a run that did not keep up
// (KeptUp) likely would: the run's speed scaled by how far it was over
// each bound (as if its live lateness stayed as it was, and its lag p99
// shrank with the load), rounded down to a whole number, within
// [speed/8, speed/2] and at least MinSpeed. An overloaded run's lag grows
// with its backlog, so a linear scaling overshoots; the floor makes such
// a run step down, an eighth at a time, instead of jumping to real time.
func SuggestedSpeed(l replay.Summary, lateness, simTTFTMean, ttftTolerance float64) float64 {
	s := l.Speed / 2
	if l.LagP99 > 0 {
		s = min(s, l.Speed*replay.MaxLagP99.Seconds()/l.LagP99)
	}
	if lateness > 0 && simTTFTMean > 0 {
		s = min(s, LagShareOfTolerance*ttftTolerance*simTTFTMean/lateness)
	}
	return max(math.Floor(max(s, l.Speed/8)), MinSpeed)
}

// Check is one criterion's verdict.
type Check struct {
	// Name is the criterion ("token hit ratio", "mean TTFT", ...).
	Name string `json:"name"`
	// Pass is the verdict; Judged is false when the criterion was
	// reported but not judged (Config.SkipTTFT), in which case Pass is
	// true.
	Pass   bool `json:"pass"`
	Judged bool `json:"judged"`
	// Message states the measured values and the bound.
	Message string `json:"message"`
}

// Report is the outcome of Run.
type Report struct {
	// Config is the configuration run, with defaults filled in.
	Config Config `json:"config"`
	// Requests is the number of requests given.
	Requests int `json:"requests"`
	// Sim and Live are the two runs' summaries (model seconds); Sim ran
	// on the nodes' policy keys (NodeKeys), SimTraceKeys on the trace's.
	Sim          sim.Summary    `json:"sim"`
	SimTraceKeys sim.Summary    `json:"sim_trace_keys"`
	Live         replay.Summary `json:"live"`
	// SimTTFTs and LiveTTFTs are the served requests' TTFTs in model
	// seconds, ascending.
	SimTTFTs  []float64 `json:"-"`
	LiveTTFTs []float64 `json:"-"`
	// HitDelta is live − sim token hit ratio; TTFTRelDelta is
	// (live − sim) / sim mean TTFT (0 when both are 0, 1 when only the
	// simulator's is 0, so the report stays valid JSON).
	HitDelta     float64 `json:"hit_delta"`
	TTFTRelDelta float64 `json:"ttft_rel_delta"`
	// Checks hold one verdict per criterion; Pass is true when all pass
	// and the verdict is PASS.
	Checks []Check `json:"checks"`
	Pass   bool    `json:"pass"`
	// Verdict is PASS, FAIL or INCONCLUSIVE (see Verdict).
	Verdict Verdict `json:"verdict"`
	// Lateness is the live run's Lateness (live seconds); KeptUp is
	// KeptUp's verdict on the live run, and Reason its reason when false.
	Lateness float64 `json:"lateness_s"`
	KeptUp   bool    `json:"kept_up"`
	Reason   string  `json:"reason,omitempty"`
	// SuggestedSpeed is the speed to rerun at when the verdict is
	// INCONCLUSIVE (0 otherwise).
	SuggestedSpeed float64 `json:"suggested_speed,omitempty"`
}

// Row returns r as a live/sim row of trace's arm a (package compare's
// tables), with its verdict (Interrupted when the live run was cut
// short).
func (r *Report) Row(trace string, a compare.Arm) compare.LiveRow {
	v := string(r.Verdict)
	if r.Live.Partial {
		v = Interrupted
	}
	return compare.LiveRow{Trace: trace, Arm: a, Sim: r.Sim, Live: r.Live, SimTTFTs: r.SimTTFTs, LiveTTFTs: r.LiveTTFTs,
		Verdict: v, KeptUp: r.KeptUp, Reason: r.Reason}
}

// Failures returns the messages of the failed checks.
func (r *Report) Failures() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Pass {
			out = append(out, r.Config.Name+": "+c.Name+": "+c.Message)
		}
	}
	return out
}

// unjudged names the checks left unjudged ("mean TTFT", "token hit ratio
// and mean TTFT").
func (r *Report) unjudged() string {
	var names []string
	for _, c := range r.Checks {
		if !c.Judged {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, " and ")
}

// Err returns an error listing the failed checks, one wrapping
// ErrInconclusive with the reason and the suggested speed when the
// verdict is INCONCLUSIVE, or nil when r passed.
func (r *Report) Err() error {
	if r.Verdict == VerdictInconclusive {
		return fmt.Errorf("%w: %s: %s not judged: %s; rerun at speed %g", ErrInconclusive, r.Config.Name, r.unjudged(), r.Reason, r.SuggestedSpeed)
	}
	if r.Pass {
		return nil
	}
	var errs []error
	for _, f := range r.Failures() {
		errs = append(errs, errors.New(f))
	}
	return fmt.Errorf("validate: live and simulated runs disagree: %w", errors.Join(errs...))
}

// Run runs cfg on reqs in the simulator, then live on a fresh local
// cluster of cfg.Nodes processes (stopped before Run returns), and
// compares the two. When ctx ends during the live run, the report covers
// the requests completed so far, Live.Partial is set and the
// "complete" check fails; Run returns an error only when a run could not
// be made (bad input, cluster start failure, simulator cancelled).
func Run(ctx context.Context, reqs []trace.Request, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	if len(reqs) == 0 {
		return nil, errors.New("validate: no requests to run")
	}
	rep := &Report{Config: c, Requests: len(reqs)}
	sr, err := sim.Run(ctx, NodeKeys(reqs, c.ReplayOptions().WithDefaults().Tenant), c.SimOptions())
	if err != nil {
		return nil, fmt.Errorf("validate: simulate %s on %d requests: %w", c.Name, len(reqs), err)
	}
	rep.Sim = sr.Summary
	rep.SimTTFTs = sim.ServedTTFTs(sr.Records)
	tr, err := sim.Run(ctx, reqs, c.SimOptions())
	if err != nil {
		return nil, fmt.Errorf("validate: simulate %s on %d requests with the trace's keys: %w", c.Name, len(reqs), err)
	}
	rep.SimTraceKeys = tr.Summary

	lr, err := Live(ctx, reqs, c)
	if err != nil {
		return nil, err
	}
	rep.Live = lr.Summary
	rep.LiveTTFTs = sim.ServedTTFTs(lr.Records)
	rep.Lateness = Lateness(lr)
	rep.judge()
	return rep, nil
}

// Live runs cfg live only: it starts a local cluster sized and paced for
// cfg under the scale model, replays reqs against it and stops it.
func Live(ctx context.Context, reqs []trace.Request, cfg Config) (*replay.Result, error) {
	c := cfg.WithDefaults()
	ro := c.ReplayOptions()
	co := replay.ClusterOptions(c.Nodes, ro)
	co.Binary, co.Stderr, co.Stdout = c.Binary, c.ClusterOutput, c.ClusterOutput
	cl, err := cluster.Start(ctx, co)
	if err != nil {
		return nil, fmt.Errorf("validate: start a cluster of %d nodes for %s: %w", c.Nodes, c.Name, err)
	}
	ro = replay.Attach(cl, ro)
	res, err := replay.Run(ctx, reqs, ro)
	stopErr := cl.Stop()
	if err != nil {
		return nil, fmt.Errorf("validate: replay %s live on %d requests: %w", c.Name, len(reqs), err)
	}
	if stopErr != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("validate: stop the cluster of %s: %w", c.Name, stopErr)
	}
	return res, nil
}

// NodeKeys returns a copy of reqs whose every hash_id is replaced by the
// key a node's eviction policy sees for that block under tenant
// (block.PolicyKey): the same accesses, labelled as the live policies see
// them. The mapping is one-to-one within a tenant, so prefixes, hits and
// every other figure of a label-blind policy are unchanged.
func NodeKeys(reqs []trace.Request, tenant string) []trace.Request {
	out := make([]trace.Request, len(reqs))
	for i, r := range reqs {
		keys := make([]uint64, len(r.HashIDs))
		for j, id := range r.HashIDs {
			keys[j] = block.PolicyKey(block.Key{Tenant: tenant, ID: id})
		}
		r.HashIDs = keys
		out[i] = r
	}
	return out
}

// judge fills the deltas and the checks.
func (r *Report) judge() {
	c, s, l := r.Config, r.Sim, r.Live
	r.HitDelta = l.TokenHitRatio - s.TokenHitRatio
	switch {
	case s.TTFTMean != 0:
		r.TTFTRelDelta = (l.TTFTMean - s.TTFTMean) / s.TTFTMean
	case l.TTFTMean != 0:
		r.TTFTRelDelta = 1
	}
	hitOK := math.Abs(r.HitDelta) <= c.HitTolerance+1e-12
	hmsg := fmt.Sprintf("live %.2f%% vs sim %.2f%%: differ by %.2f points (bound %.2f)",
		100*l.TokenHitRatio, 100*s.TokenHitRatio, 100*math.Abs(r.HitDelta), 100*c.HitTolerance)
	// lagged: a check could not be judged because the run fell behind.
	lagged := false
	if !hitOK && !l.KeptUp {
		// Far behind its schedule, a request's prefill ends late and its
		// blocks are stored late, after the conversation's next request
		// has looked for them: the hit ratio then depends on the
		// machine's speed too (measured under -race with two busy loops:
		// lag p99 0.2–0.9 s cost 3–4 points).
		lagged = true
		r.Checks = append(r.Checks, Check{Name: "token hit ratio", Pass: true, Judged: false,
			Message: fmt.Sprintf("%s; not judged: dispatch lag p99 %.1f ms > %v, so blocks were stored late", hmsg, 1e3*l.LagP99, replay.MaxLagP99)})
	} else {
		r.Checks = append(r.Checks, Check{Name: "token hit ratio", Pass: hitOK, Judged: true, Message: hmsg})
	}
	ttftOK := math.Abs(r.TTFTRelDelta) <= c.TTFTTolerance+1e-12
	msg := fmt.Sprintf("live %.3f s vs sim %.3f s (model): differ by %.1f%% (bound %.0f%%)",
		l.TTFTMean, s.TTFTMean, 100*math.Abs(r.TTFTRelDelta), 100*c.TTFTTolerance)
	r.KeptUp, r.Reason = KeptUp(l, r.Lateness, s.TTFTMean, c.TTFTTolerance)
	switch {
	case c.SkipTTFT:
		if !r.KeptUp {
			msg += "; " + r.Reason
		}
		r.Checks = append(r.Checks, Check{Name: "mean TTFT", Pass: true, Judged: false, Message: msg + "; not judged"})
	case !r.KeptUp:
		lagged = true
		r.Checks = append(r.Checks, Check{Name: "mean TTFT", Pass: true, Judged: false, Message: msg + "; not judged: " + r.Reason})
	default:
		r.Checks = append(r.Checks, Check{Name: "mean TTFT", Pass: ttftOK, Judged: true, Message: msg})
	}
	r.Checks = append(r.Checks, Check{Name: "verified blocks", Pass: l.WrongBlocks == 0 && l.CorruptBlocks == 0, Judged: true,
		Message: fmt.Sprintf("%d wrong (verify %s), %d corrupt, want 0; %d hits read and verified", l.WrongBlocks, l.VerifyMode, l.CorruptBlocks, l.VerifiedHits)})
	complete := !l.Partial && l.Completed == r.Requests
	cmsg := fmt.Sprintf("%d of %d requests completed live", l.Completed, r.Requests)
	if l.Partial {
		cmsg += " (interrupted)"
	}
	if l.FirstError != "" {
		cmsg += "; first error: " + l.FirstError
	}
	r.Checks = append(r.Checks, Check{Name: "complete", Pass: complete, Judged: true, Message: cmsg})
	r.Pass = true
	for _, ch := range r.Checks {
		r.Pass = r.Pass && ch.Pass
	}
	switch {
	case !r.Pass:
		r.Verdict = VerdictFail
	case lagged:
		// Reason is set: a lagged check implies !r.KeptUp.
		r.Verdict, r.Pass = VerdictInconclusive, false
		r.SuggestedSpeed = SuggestedSpeed(l, r.Lateness, s.TTFTMean, c.TTFTTolerance)
	default:
		r.Verdict = VerdictPass
	}
}

// Interrupted is the verdict cell of a configuration whose live run was
// cut short (Live.Partial): its Verdict is FAIL (the "complete" check),
// but an interruption is not a disagreement, so tables say this instead.
const Interrupted = "interrupted"

// WriteTable writes reports as a Markdown table (one row per
// configuration) followed by one line per failed check, one per
// inconclusive configuration and one per interrupted one.
func WriteTable(w io.Writer, reps []*Report) error {
	var b strings.Builder
	b.WriteString("| config | requests | policy | RAM blocks | token hit sim (trace keys) | token hit sim | token hit live | Δ (points) | mean TTFT sim (s) | mean TTFT live (s) | Δ | wrong blocks | lag p99 (ms) | kept up | verdict |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range reps {
		verdict := string(r.Verdict)
		switch {
		case r.Live.Partial:
			verdict = Interrupted
		case verdict == "" && r.Pass:
			verdict = string(VerdictPass)
		case verdict == "":
			verdict = string(VerdictFail)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %.2f%% | %.2f%% | %.2f%% | %+.2f | %.3f | %.3f | %+.1f%% | %d | %.2f | %v | %s |\n",
			r.Config.Name, r.Requests, r.Config.Policy, r.Config.RAMBlocks, 100*r.SimTraceKeys.TokenHitRatio, 100*r.Sim.TokenHitRatio,
			100*r.Live.TokenHitRatio, 100*r.HitDelta,
			r.Sim.TTFTMean, r.Live.TTFTMean, 100*r.TTFTRelDelta, r.Live.WrongBlocks, 1e3*r.Live.LagP99, r.KeptUp, verdict)
	}
	for _, r := range reps {
		if r.Live.Partial {
			fmt.Fprintf(&b, "INTERRUPTED %s: %d of %d requests completed live; not judged\n", r.Config.Name, r.Live.Completed, r.Requests)
			continue
		}
		for _, f := range r.Failures() {
			fmt.Fprintf(&b, "FAIL %s\n", f)
		}
		if r.Verdict == VerdictInconclusive {
			fmt.Fprintf(&b, "INCONCLUSIVE %s: %s not judged: %s; rerun at speed %g\n", r.Config.Name, r.unjudged(), r.Reason, r.SuggestedSpeed)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("validate: write table: %w", err)
	}
	return nil
}
