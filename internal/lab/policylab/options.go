package policylab

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/kvpool/kvpool/internal/lab/report"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// Trace is one named input trace, already read and validated.
type Trace struct {
	// Name labels the trace in the report ("conversation").
	Name string
	// Requests are the trace's requests in trace order.
	Requests []trace.Request
}

// Generated is a generated trace: a name and the tracegen options that
// produce it.
type Generated struct {
	// Name labels the trace in the report ("gen-chat").
	Name string
	// Options generate it (Requests must be set or the tracegen default
	// applies).
	Options tracegen.Options
	// About says in a few words how its statistics differ.
	About string
	// Tuned says the subject was tuned on this trace's first half, which
	// the report then labels "tuning".
	Tuned bool
}

// JointFunc builds extra report sections from the published traces; it is
// the hook through which a caller adds the joint-routing goodput comparison
// of package compare without this package depending on it. It is called
// once, after every experiment, and may block.
type JointFunc func(ctx context.Context, traces []Trace) ([]report.Section, error)

// Reference policies. Gap closed is measured from Reference to the Oracle.
const (
	// Reference is the policy gap closed starts from (0%).
	Reference = "lru"
	// DefaultSubject is the policy under study.
	DefaultSubject = "kvchain"
	// DefaultOracle is the offline optimum gap closed ends at (100%).
	DefaultOracle = "belady"
)

// Options configures Run. The zero value of every field means its default
// (DefaultOptions); Validate names the first bad field.
type Options struct {
	// Traces are the published traces (at least one). The first two are
	// also tenants A and B of the two-tenant experiment, which is skipped
	// when there is only one.
	Traces []Trace
	// Generated are generated traces given the gap table too (default
	// DefaultGenerated(DefaultGenRequests)); SkipGenerated leaves them out.
	Generated     []Generated
	SkipGenerated bool

	// Subject is the policy under study (default "kvchain").
	Subject string
	// Baselines are the policies "vs best" compares against (default LRU,
	// LFU, S3-FIFO and ARC, docs/policy.md); Reference is always run.
	Baselines []string
	// Extra are policies shown in the tables but not counted as baselines
	// (default Mooncake's batch LRU).
	Extra []string
	// Oracle is the offline optimum (default "belady"); it must need the
	// future.
	Oracle string

	// Capacities are the cache sizes of the gap table in blocks (default
	// 2,000 / 5,000 / 10,000, the sizes kvchain was tuned at).
	Capacities []int
	// UnseenCapacities are sizes not used for tuning (default 1,000 /
	// 3,000 / 20,000), reported in robustness (c).
	UnseenCapacities []int

	// NoiseLevels are the injected prediction-error fractions p in [0, 1]
	// (default 0, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1).
	NoiseLevels []float64
	// NoiseSeed seeds the injected errors (default 1: any fixed seed
	// makes the sweep reproducible; 1 is the brief's example).
	NoiseSeed uint64
	// NoiseCapacity is the order-only cache size of robustness (a) in
	// blocks (default 5,000).
	NoiseCapacity int
	// NoiseGoodputLevels are the p values whose goodput is searched
	// (default: all of NoiseLevels).
	NoiseGoodputLevels []float64

	// TenantPolicies are the policies of the two-tenant experiment
	// (default LRU, S3-FIFO, ARC and the subject).
	TenantPolicies []string
	// TenantCapacity is the shared pool in blocks (default 5,000); each
	// tenant alone runs with half of it and with all of it.
	TenantCapacity int

	// NodeCounts are the cluster sizes of robustness (c) in the timed
	// simulator (default 4 and 16; the Fig 10 cluster has 10).
	NodeCounts []int
	// NodePolicies are the policies run at each node count (default LRU,
	// Mooncake and the subject).
	NodePolicies []string

	// Sim is the base cluster of every timed run; zero fields take the
	// simulator's defaults, which are the Fig 10 configuration (10
	// instances × 5,859 RAM blocks, global pool, cache-aware routing,
	// 100 Gbps, 30 s SLO). Policy and Instances are set per run.
	Sim sim.Options
	// GoodputTraces names the traces whose goodput is searched (default
	// all). Goodput bisection is the slowest part.
	GoodputTraces []string
	// SkipGoodput leaves out every timed experiment.
	SkipGoodput bool

	// Workers bounds the experiments run at once (default GOMAXPROCS).
	Workers int
	// Progress, when set, receives one line per finished experiment.
	Progress io.Writer
	// Joint, when set, adds the sections it returns to the report.
	Joint JointFunc
}

// DefaultGenRequests is the length of each default generated trace: about
// the conversation trace's 12,031 requests.
const DefaultGenRequests = 12000

// QuickGenRequests is the length of each generated trace of
// QuickOptions: a quarter of DefaultGenRequests, for a look in seconds.
const QuickGenRequests = 3000

// DefaultGenerated returns the generated traces of the gap table, each
// requests long. gen-chat and gen-long are the tuning traces of
// docs/policy.md (tracegen.ChatOptions with seed 0; seed 7 with 3 turns per
// session and 3,000 new tokens per turn); gen-prompts and gen-deep were
// chosen for statistics unlike both published traces (not for kvchain's
// results on them): nearly every block is used once except 256 shared
// system prompts, and ten-turn sessions five minutes apart whose reuse
// distance exceeds every tuned capacity.
func DefaultGenerated(requests int) []Generated {
	chat := tracegen.ChatOptions()
	chat.Requests = requests
	long := chat
	long.Seed, long.MeanTurns, long.Input = 7, 3, tracegen.LengthDist{Mean: 3000, Sigma: 1}
	prompts := tracegen.Options{Seed: 3, Requests: requests, SystemPrompts: 256, SystemPromptBlocks: 8, MeanTurns: 1,
		Input: tracegen.LengthDist{Mean: 2000, Sigma: 1}}
	deep := tracegen.Options{Seed: 3, Requests: requests, SystemPrompts: 8, SystemPromptBlocks: 4, MeanTurns: 10,
		ThinkTime: 5 * time.Minute, Input: tracegen.LengthDist{Mean: 1500, Sigma: 0.5}}
	return []Generated{
		{"gen-chat", chat, "chat preset, seed 0", true},
		{"gen-long", long, "3 turns/session, 3,000 new tokens/turn, seed 7", true},
		{"gen-prompts", prompts, "256 shared 8-block system prompts, single turns: ~96% of blocks used once", false},
		{"gen-deep", deep, "10 turns/session 5 min apart: long reuse distances", false},
	}
}

// DefaultOptions returns the full experiment set (no traces).
func DefaultOptions() Options {
	return Options{
		Generated:        DefaultGenerated(DefaultGenRequests),
		Subject:          DefaultSubject,
		Baselines:        []string{"lru", "lfu", "s3fifo", "arc"},
		Extra:            []string{"mooncake"},
		Oracle:           DefaultOracle,
		Capacities:       []int{2000, 5000, 10000},
		UnseenCapacities: []int{1000, 3000, 20000},
		NoiseLevels:      []float64{0, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1},
		NoiseSeed:        1,
		NoiseCapacity:    5000,
		TenantPolicies:   []string{"lru", "s3fifo", "arc", DefaultSubject},
		TenantCapacity:   5000,
		NodeCounts:       []int{4, 16},
		NodePolicies:     []string{"lru", "mooncake", DefaultSubject},
		Workers:          runtime.GOMAXPROCS(0),
	}
}

// QuickOptions returns a smaller set for a fast look: generated traces of
// 3,000 requests, goodput at three error levels and only at 4 nodes. The
// caller may further restrict GoodputTraces.
func QuickOptions() Options {
	o := DefaultOptions()
	o.Generated = DefaultGenerated(QuickGenRequests)
	o.NoiseGoodputLevels = []float64{0, 0.4, 1}
	o.NodeCounts = []int{4}
	return o
}

// withDefaults returns o with every zero field replaced by its default.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Generated == nil {
		o.Generated = d.Generated
	}
	if o.SkipGenerated {
		o.Generated = nil
	}
	if o.Subject == "" {
		o.Subject = d.Subject
	}
	if len(o.Baselines) == 0 {
		o.Baselines = d.Baselines
	}
	if o.Extra == nil {
		o.Extra = d.Extra
	}
	if o.Oracle == "" {
		o.Oracle = d.Oracle
	}
	if len(o.Capacities) == 0 {
		o.Capacities = d.Capacities
	}
	if o.UnseenCapacities == nil {
		o.UnseenCapacities = d.UnseenCapacities
	}
	if len(o.NoiseLevels) == 0 {
		o.NoiseLevels = d.NoiseLevels
	}
	if o.NoiseSeed == 0 {
		o.NoiseSeed = d.NoiseSeed
	}
	if o.NoiseCapacity == 0 {
		o.NoiseCapacity = d.NoiseCapacity
	}
	if len(o.NoiseGoodputLevels) == 0 {
		o.NoiseGoodputLevels = o.NoiseLevels
	}
	if len(o.TenantPolicies) == 0 {
		o.TenantPolicies = []string{"lru", "s3fifo", "arc", o.Subject}
	}
	if o.TenantCapacity == 0 {
		o.TenantCapacity = d.TenantCapacity
	}
	if len(o.NodeCounts) == 0 {
		o.NodeCounts = d.NodeCounts
	}
	if len(o.NodePolicies) == 0 {
		o.NodePolicies = []string{"lru", "mooncake", o.Subject}
	}
	if o.Workers == 0 {
		o.Workers = d.Workers
	}
	return o
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	o = o.withDefaults()
	if err := o.validateTraces(); err != nil {
		return err
	}
	if err := o.validatePolicies(); err != nil {
		return err
	}
	if err := o.validateSizes(); err != nil {
		return err
	}
	if err := o.Sim.Validate(); err != nil {
		return fmt.Errorf("policylab: %w", option.Errorf("Sim", "%w", err))
	}
	return nil
}

// validateTraces checks the given and generated traces (distinct names,
// requests, generator options) and that every goodput trace is a given
// one.
func (o Options) validateTraces() error {
	if len(o.Traces) == 0 {
		return fmt.Errorf("policylab: %w", option.Errorf("Traces", "none given"))
	}
	names := map[string]bool{}
	for i, t := range o.Traces {
		if t.Name == "" {
			return fmt.Errorf("policylab: %w", option.Errorf("Traces", "entry %d: empty name", i))
		}
		if names[t.Name] {
			return fmt.Errorf("policylab: %w", option.Errorf("Traces", "entry %d: name %q used twice", i, t.Name))
		}
		names[t.Name] = true
		if len(t.Requests) == 0 {
			return fmt.Errorf("policylab: %w", option.Errorf("Traces", "entry %d %q: no requests", i, t.Name))
		}
	}
	for i, g := range o.Generated {
		if g.Name == "" {
			return fmt.Errorf("policylab: %w", option.Errorf("Generated", "entry %d: empty name", i))
		}
		if names[g.Name] {
			return fmt.Errorf("policylab: %w", option.Errorf("Generated", "entry %d: name %q used twice", i, g.Name))
		}
		names[g.Name] = true
		if err := g.Options.Validate(); err != nil {
			return fmt.Errorf("policylab: %w", option.Errorf("Generated", "entry %d %q: %w", i, g.Name, err))
		}
	}
	for _, n := range o.GoodputTraces {
		if !slices.ContainsFunc(o.Traces, func(t Trace) bool { return t.Name == n }) {
			return fmt.Errorf("policylab: %w", option.Errorf("GoodputTraces", "%q is not one of the traces", n))
		}
	}
	return nil
}

// validatePolicies checks every policy spec, and that the policies run
// on the store are online and the oracle is not.
func (o Options) validatePolicies() error {
	if err := checkOnline("Subject", o.Subject); err != nil {
		return err
	}
	if err := checkOnline("Baselines", o.Baselines...); err != nil {
		return err
	}
	if err := checkSpecs("Extra", o.Extra...); err != nil {
		return err
	}
	if err := checkOnline("TenantPolicies", o.TenantPolicies...); err != nil {
		return err
	}
	if err := checkOnline("NodePolicies", o.NodePolicies...); err != nil {
		return err
	}
	if err := checkSpecs("Oracle", o.Oracle); err != nil {
		return err
	}
	if sp, _ := policy.ParseSpec(o.Oracle); !sp.NeedsFuture() {
		return fmt.Errorf("policylab: %w", option.Errorf("Oracle", "%q is an online policy; want an offline optimum such as belady", o.Oracle))
	}
	return nil
}

// validateSizes checks the capacities, the error levels (and that the
// subject accepts them), the node counts and the worker count.
func (o Options) validateSizes() error {
	for _, f := range []struct {
		field string
		caps  []int
	}{{"Capacities", o.Capacities}, {"UnseenCapacities", o.UnseenCapacities}} {
		for _, c := range f.caps {
			if c <= 0 {
				return fmt.Errorf("policylab: %w", option.Errorf(f.field, "%d is not a positive block count", c))
			}
		}
	}
	for _, f := range []struct {
		field string
		v     int
	}{{"NoiseCapacity", o.NoiseCapacity}, {"TenantCapacity", o.TenantCapacity}} {
		if f.v <= 0 {
			return fmt.Errorf("policylab: %w", option.Errorf(f.field, "%d: want a positive block count", f.v))
		}
	}
	if o.TenantCapacity < 2 {
		return fmt.Errorf("policylab: %w", option.Errorf("TenantCapacity", "%d: want >= 2 (each tenant alone gets half)", o.TenantCapacity))
	}
	for _, f := range []struct {
		field string
		ps    []float64
	}{{"NoiseLevels", o.NoiseLevels}, {"NoiseGoodputLevels", o.NoiseGoodputLevels}} {
		for _, p := range f.ps {
			if math.IsNaN(p) || p < 0 || p > 1 {
				return fmt.Errorf("policylab: %w", option.Errorf(f.field, "%v is not a fraction in [0, 1]", p))
			}
		}
	}
	for _, p := range o.NoiseLevels {
		if err := checkSpecs("NoiseLevels", NoiseSpec(o.Subject, p, o.NoiseSeed)); err != nil {
			return fmt.Errorf("%w (robustness (a) needs the subject to accept an injected prediction error)", err)
		}
	}
	for _, n := range o.NodeCounts {
		if n <= 0 {
			return fmt.Errorf("policylab: %w", option.Errorf("NodeCounts", "%d is not a positive node count", n))
		}
	}
	if o.Workers < 0 {
		return fmt.Errorf("policylab: %w", option.Errorf("Workers", "%d: want >= 0 (0 means GOMAXPROCS)", o.Workers))
	}
	return nil
}

// checkSpecs reports the first of specs, given in Options.field, that is
// not a valid policy spec.
func checkSpecs(field string, specs ...string) error {
	for _, s := range specs {
		if _, err := policy.ParseSpec(s); err != nil {
			return fmt.Errorf("policylab: %w", option.Errorf(field, "%w", err))
		}
	}
	return nil
}

// checkOnline is checkSpecs, and also refuses a policy that needs the
// future.
func checkOnline(field string, specs ...string) error {
	if err := checkSpecs(field, specs...); err != nil {
		return err
	}
	for _, s := range specs {
		if sp, _ := policy.ParseSpec(s); sp.NeedsFuture() {
			return fmt.Errorf("policylab: %w", option.Errorf(field, "%q needs the future; want an online policy", s))
		}
	}
	return nil
}

// NoiseSpec returns the policy spec of subject with a fraction p of its
// reuse predictions made wrong on purpose, seeded by seed:
// "kvchain(perr=0.2,seed=1)".
func NoiseSpec(subject string, p float64, seed uint64) string {
	return subject + "(perr=" + strconv.FormatFloat(p, 'g', -1, 64) + ",seed=" + strconv.FormatUint(seed, 10) + ")"
}
