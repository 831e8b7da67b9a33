package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// Mode is where a prefill instance may find cached KV blocks.
type Mode string

// The cache modes (docs/design.md, "The lab").
const (
	// ModeRecompute has no caches: every prefill computes every token.
	ModeRecompute Mode = "recompute"
	// ModeLocal lets each instance use only its own RAM and SSD caches.
	ModeLocal Mode = "local"
	// ModeGlobal shares one index over every instance's caches: a block
	// held by another instance is fetched over the network and stored
	// locally as a new replica when the prefill completes.
	ModeGlobal Mode = "global"
)

// Modes returns every mode, in a fixed order.
func Modes() []Mode { return []Mode{ModeRecompute, ModeLocal, ModeGlobal} }

// Routing chooses the prefill instance of an arriving request.
type Routing string

// The routing policies.
const (
	// RoutingRoundRobin sends request k (in arrival order) to instance
	// k mod Instances.
	RoutingRoundRobin Routing = "rr"
	// RoutingLeastLoaded picks the instance with the shortest estimated
	// queue time (ties: lowest index).
	RoutingLeastLoaded Routing = "least-loaded"
	// RoutingCacheAware is Mooncake's Algorithm 1: for every instance it
	// estimates TTFT from the queue time, the transfer time of the prefix
	// blocks it would load and the prefill time of the rest, and picks the
	// minimum (ties: lowest index).
	RoutingCacheAware Routing = "cache-aware"
	// RoutingJoint is cache-aware routing that also knows the prefixes an
	// instance is about to hold: blocks that requests already queued or
	// running there will store when their prefill completes. It estimates
	// TTFT as Algorithm 1 does, but with the prefix the request will find
	// at the head of that queue, and binds the reuse late: at the head of
	// the queue the request also reuses every leading block then in the
	// instance's RAM (see the package comment, "Joint routing").
	RoutingJoint Routing = "joint"
)

// Routings returns every routing policy, in a fixed order.
func Routings() []Routing {
	return []Routing{RoutingRoundRobin, RoutingLeastLoaded, RoutingCacheAware, RoutingJoint}
}

// Replication chooses which remotely fetched blocks an instance keeps as
// local replicas in global mode.
type Replication string

// The replication policies.
const (
	// ReplicateAll keeps every fetched block as a local replica (the
	// paper's global mode: hot blocks replicate themselves).
	ReplicateAll Replication = "all"
	// ReplicateHot keeps a fetched block only when it is hot: at least
	// Options.HotAccesses requests have asked for it (this one included),
	// or another request queued on the same instance needs it. A cold
	// block is used once and not stored; its source copy is touched
	// instead, as a read renews a lease in the store.
	ReplicateHot Replication = "hot"
)

// Replications returns every replication policy, in a fixed order.
func Replications() []Replication { return []Replication{ReplicateAll, ReplicateHot} }

// Defaults of Options; a zero field takes these values.
const (
	// DefaultInstances is the cluster of Mooncake FAST'25 Fig 10
	// (10 prefill nodes).
	DefaultInstances = 10
	// DefaultRAMBlocks is 3M tokens of KV per instance in 512-token blocks
	// (3,000,000 / 512 = 5,859), the per-node cache of Fig 10.
	DefaultRAMBlocks = 5859
	// DefaultNICGbps is a 100 Gbps NIC per instance: the knee of Fig 13,
	// above which the paper's average TTFT stays below 2 s.
	DefaultNICGbps = 100
	// DefaultSSDGBps is one NVMe PCIe 4.0 SSD's sequential read rate, about
	// 4 GB/s (an assumption; datacenter Gen4 drives read 4–7 GB/s).
	DefaultSSDGBps = 4
	// DefaultSLOSeconds is the TTFT SLO: 30 s, the looser of the two
	// thresholds reported (10 s and 30 s; docs/design.md, "What is
	// measured, and where").
	DefaultSLOSeconds = 30
	// DefaultPolicy is the eviction policy of both tiers.
	DefaultPolicy = "lru"
	// DefaultMode and DefaultRouting are the paper's full system.
	DefaultMode    = ModeGlobal
	DefaultRouting = RoutingCacheAware
	// DefaultReplication keeps the paper's behaviour.
	DefaultReplication = ReplicateAll
	// DefaultHotAccesses is the ReplicateHot threshold: a block asked for
	// by 3 requests. Every fetched block has been asked for at least twice
	// (by the request that computed it and by the fetcher), so 2 would
	// replicate everything; 3 is the smallest threshold that skips
	// anything: a fetch of a block asked for only twice so far is used
	// once and not kept.
	DefaultHotAccesses = 3
)

// Options configures one simulation. The zero value of every field means its
// default (see the Default constants); Validate reports the first bad field.
type Options struct {
	// Instances is the number of prefill instances P.
	Instances int
	// RAMBlocks is each instance's RAM cache capacity in blocks.
	RAMBlocks int
	// SSDBlocks is each instance's SSD cache capacity in blocks; 0 means
	// no SSD tier (RAM evictions are dropped).
	SSDBlocks int
	// Mode is the cache mode.
	Mode Mode
	// Routing is the routing policy.
	Routing Routing
	// Policy is the policy spec of every cache tier, as policy.ParseSpec
	// reads it ("lru", "s3fifo+second-hit", ...).
	Policy string
	// Profile is the model/hardware cost profile; a zero Profile (empty
	// Name) means costmodel.Default(). Its BlockTokens must equal the
	// traces' trace.BlockTokens.
	Profile costmodel.Profile
	// RateMultiplier compresses time: a request arrives at
	// (timestamp - first timestamp) / RateMultiplier.
	RateMultiplier float64
	// NICGbps is each instance's NIC bandwidth in Gbit/s, in each
	// direction (egress and ingress separately).
	NICGbps float64
	// SSDGBps is each instance's SSD read bandwidth in GB/s (10⁹ B/s).
	SSDGBps float64
	// SLOSeconds is the TTFT SLO used for attainment, rejection and
	// goodput.
	SLOSeconds float64
	// NoPrefetch turns prefetching off. With prefetch (the default), the
	// transfer of a request's SSD and remote prefix blocks starts when it
	// arrives and overlaps its queueing; without, it starts when the
	// request reaches the head of its instance's queue and keeps the
	// instance busy.
	NoPrefetch bool
	// Reject turns on admission control: a request whose best estimated
	// TTFT exceeds the SLO is rejected (counted as an SLO miss and
	// reported separately).
	Reject bool
	// Replication chooses which fetched blocks become local replicas in
	// global mode ("" means DefaultReplication). Local and recompute modes
	// fetch nothing, so it has no effect there.
	Replication Replication
	// HotAccesses is ReplicateHot's threshold in requests (0 means
	// DefaultHotAccesses); it must be at least 2.
	HotAccesses int
	// EvictRedundantFirst makes an instance that must evict a RAM block
	// prefer a block with a replica on another instance over the last copy
	// its policy would evict, unless the replica was used much more
	// recently (see the package comment, "Redundant replicas first").
	EvictRedundantFirst bool
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Instances == 0 {
		o.Instances = DefaultInstances
	}
	if o.RAMBlocks == 0 {
		o.RAMBlocks = DefaultRAMBlocks
	}
	if o.Mode == "" {
		o.Mode = DefaultMode
	}
	if o.Routing == "" {
		o.Routing = DefaultRouting
	}
	if o.Policy == "" {
		o.Policy = DefaultPolicy
	}
	if o.Profile.Name == "" {
		o.Profile = costmodel.Default()
	}
	if o.RateMultiplier == 0 {
		o.RateMultiplier = 1
	}
	if o.NICGbps == 0 {
		o.NICGbps = DefaultNICGbps
	}
	if o.SSDGBps == 0 {
		o.SSDGBps = DefaultSSDGBps
	}
	if o.SLOSeconds == 0 {
		o.SLOSeconds = DefaultSLOSeconds
	}
	if o.Replication == "" {
		o.Replication = DefaultReplication
	}
	if o.HotAccesses == 0 {
		o.HotAccesses = DefaultHotAccesses
	}
	return o
}

// WithDefaults returns o with every zero field replaced by its default: the
// configuration a run of o actually uses.
func (o Options) WithDefaults() Options { return o.withDefaults() }

// positive reports whether v is finite and > 0.
func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// Validate reports the first invalid field of o by name. Zero fields are
// valid (they mean the default).
func (o Options) Validate() error {
	_, err := o.validate()
	return err
}

// validate checks o and returns its parsed policy spec.
func (o Options) validate() (policy.Spec, error) {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("sim: %w", option.Errorf(field, format, a...))
	}
	o = o.withDefaults()
	switch {
	case o.Instances < 0:
		return policy.Spec{}, bad("Instances", "must be > 0, got %d", o.Instances)
	case o.RAMBlocks < 0:
		return policy.Spec{}, bad("RAMBlocks", "must be > 0, got %d", o.RAMBlocks)
	case o.SSDBlocks < 0:
		return policy.Spec{}, bad("SSDBlocks", "must be >= 0 (0 = no SSD), got %d", o.SSDBlocks)
	case o.Mode != ModeRecompute && o.Mode != ModeLocal && o.Mode != ModeGlobal:
		return policy.Spec{}, bad("Mode", "unknown mode %q (known: %v)", o.Mode, Modes())
	case !slices.Contains(Routings(), o.Routing):
		return policy.Spec{}, bad("Routing", "unknown routing %q (known: %v)", o.Routing, Routings())
	case !positive(o.RateMultiplier):
		return policy.Spec{}, bad("RateMultiplier", "must be finite and > 0, got %g", o.RateMultiplier)
	case !positive(o.NICGbps):
		return policy.Spec{}, bad("NICGbps", "must be finite and > 0, got %g", o.NICGbps)
	case !positive(o.SSDGBps):
		return policy.Spec{}, bad("SSDGBps", "must be finite and > 0, got %g", o.SSDGBps)
	case !positive(o.SLOSeconds):
		return policy.Spec{}, bad("SLOSeconds", "must be finite and > 0, got %g", o.SLOSeconds)
	case !slices.Contains(Replications(), o.Replication):
		return policy.Spec{}, bad("Replication", "unknown replication %q (known: %v)", o.Replication, Replications())
	case o.HotAccesses < 2:
		return policy.Spec{}, bad("HotAccesses", "must be >= 2 (every fetched block has been asked for twice), got %d", o.HotAccesses)
	}
	if err := o.Profile.Validate(); err != nil {
		return policy.Spec{}, bad("Profile", "%w", err)
	}
	if o.Profile.BlockTokens != trace.BlockTokens {
		return policy.Spec{}, bad("Profile", "profile %q has %d-token blocks; the traces' keys cover %d tokens",
			o.Profile.Name, o.Profile.BlockTokens, trace.BlockTokens)
	}
	spec, err := policy.ParseSpec(o.Policy)
	if err != nil {
		return policy.Spec{}, bad("Policy", "%w", err)
	}
	return spec, nil
}

// nicBytesPerSec and ssdBytesPerSec convert the bandwidth options.
func (o Options) nicBytesPerSec() float64 { return o.NICGbps * 1e9 / 8 }
func (o Options) ssdBytesPerSec() float64 { return o.SSDGBps * 1e9 }
