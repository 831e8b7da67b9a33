package master

import (
	"fmt"
	"time"

	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
)

// Clock is the master's time source; tests inject a fake one. It must be
// safe for concurrent use.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Options configures a Master. The zero value means every default.
type Options struct {
	// Clock is the time source (default: the system clock).
	Clock Clock
	// NodeTTL is how long a node may stay silent before it is dropped with
	// all its replicas (default 3 s: three heartbeat intervals, so two lost
	// heartbeats are survived and a dead node's replicas leave the index
	// within 3 s; Mooncake's client_live_ttl_sec is 10 s, which leaves
	// readers chasing a dead node for longer).
	NodeTTL time.Duration
	// HeartbeatInterval is told to nodes at registration (default 1 s); it
	// must be shorter than NodeTTL.
	HeartbeatInterval time.Duration
	// LeaseTTL is how long a leased Lookup protects the returned replicas
	// from eviction (default 5 s: Mooncake's default_kv_lease_ttl of 5000
	// ms; a Get of 32 model-unit blocks of 160 MiB at 100 Gbps takes about
	// 0.4 s, so 5 s covers slow and retried reads while still letting
	// eviction make progress). At most MaxLeaseTTL.
	LeaseTTL time.Duration
	// RecencyResolution is how often at most a leased Lookup records an
	// access to one RAM replica in the eviction policy (default 100 ms).
	// The policy is a single object behind one mutex and each recorded
	// access costs a few cache misses in it, so recording every access of
	// a hot block would cap leased lookups at a few million keys/s
	// (BenchmarkLookup32); at 100 ms a block costs at most ten policy
	// updates a second however hot it is. Victims are blocks unused for
	// seconds to minutes, so the order they are chosen in does not change;
	// only accesses to one replica within the same 100 ms are merged. The
	// index keeps recency in milliseconds, so a resolution under 1 ms
	// (1 ns) records every access a millisecond or more after the last
	// recorded one.
	RecencyResolution time.Duration
	// Placement is the strategy of Place calls that pass StrategyDefault
	// (default LocalFirst).
	Placement meta.Strategy
	// Eviction names the global eviction policy (policy.EvictionNames;
	// default "lru"). Offline policies that need the future (belady) are
	// refused.
	Eviction string
	// PolicyCapacity is the capacity in blocks the eviction policy is built
	// for (default 65536: the pool RAM of Fig. 10's ten 3M-token nodes is
	// 58,594 blocks of 512 tokens, rounded up to a power of two). LRU and
	// FIFO ignore it; S3-FIFO and ARC size their queues from it; the index
	// holds any number of replicas whatever its value.
	PolicyCapacity int
	// HighWatermark is the pool RAM usage fraction above which the master
	// orders evictions, and LowWatermark the fraction it evicts down to
	// (defaults 0.95 and 0.90: Mooncake's eviction_high_watermark_ratio of
	// 0.95 and eviction_ratio of 0.05).
	HighWatermark, LowWatermark float64
	// Promotion configures SSD→RAM promotion.
	Promotion PromotionOptions
}

// PromotionOptions configures promotion control. The zero value means every
// default.
type PromotionOptions struct {
	// Disabled turns promotion off: SSD hits are ignored.
	Disabled bool
	// Threshold is the count of SSD hits of a block on one node (counted in
	// a count-min sketch) at which a promotion is considered (default 2:
	// promote on the second touch, Mooncake's rule; at most 255).
	Threshold int
	// RAMWatermark bounds a node's RAM usage fraction after promotions: a
	// promotion that would take the node's indexed RAM usage, plus the
	// promotions already admitted for it, over RAMWatermark is rejected
	// (default 0.9: under the 0.95 eviction watermark, so promotions do not
	// by themselves trigger eviction).
	RAMWatermark float64
	// QueueCap bounds a node's admitted promotions not yet handed out
	// (default 1024: 64 heartbeats' worth at MaxPerHeartbeat 16).
	QueueCap int
	// MaxPerHeartbeat is the most promotion tasks one heartbeat reply
	// carries (Mooncake's max_per_heartbeat; default 16).
	MaxPerHeartbeat int
	// TaskTimeout is how long a task handed out to a node (promotion or
	// eviction order) may stay unacknowledged before it expires (default
	// 10 s: ten heartbeats; a 160 MiB model-unit block reads from SSD in
	// well under a second, so a node that is alive answers long before).
	TaskTimeout time.Duration
	// SketchKeys sizes the count-min sketch: it ages (halves its counts)
	// every 10 × SketchKeys reports (default 65536, like PolicyCapacity),
	// so a block hit twice in that window counts as hit twice.
	SketchKeys int
}

// maxSketchKeys bounds PromotionOptions.SketchKeys (the sketch's memory is
// about 8 bytes per key: 2^24 keys is 128 MiB).
const maxSketchKeys = 1 << 24

// Validate reports the first out-of-range field.
func (o Options) Validate() error {
	switch {
	case o.NodeTTL < 0:
		return optionError("NodeTTL", o.NodeTTL, "want >= 0 (0 = default 3s)")
	case o.HeartbeatInterval < 0:
		return optionError("HeartbeatInterval", o.HeartbeatInterval, "want >= 0 (0 = default 1s)")
	case o.LeaseTTL < 0 || o.LeaseTTL > MaxLeaseTTL:
		return optionError("LeaseTTL", o.LeaseTTL, "want 0 (default 5s) to 24 days")
	case o.RecencyResolution < 0:
		return optionError("RecencyResolution", o.RecencyResolution, "want >= 0 (0 = default 100ms)")
	case o.Placement > meta.Hash:
		return optionError("Placement", o.Placement, "want default, local-first, least-used or hash")
	case o.PolicyCapacity < 0 || o.PolicyCapacity > 1<<26:
		return optionError("PolicyCapacity", o.PolicyCapacity, "want 0 (default 65536) to 2^26")
	case o.HighWatermark < 0 || o.HighWatermark > 1 || o.HighWatermark != o.HighWatermark:
		return optionError("HighWatermark", o.HighWatermark, "want 0 (default 0.95) or a fraction in (0, 1]")
	case o.LowWatermark < 0 || o.LowWatermark >= 1 || o.LowWatermark != o.LowWatermark:
		return optionError("LowWatermark", o.LowWatermark, "want 0 (default 0.90) or a fraction in (0, 1)")
	}
	if name := o.Eviction; name != "" {
		if _, err := policy.NewEviction(name, 0); err != nil {
			return fmt.Errorf("master: %w", option.Errorf("Eviction", "%w", err))
		}
		if (policy.Spec{Eviction: name}).NeedsFuture() {
			return optionError("Eviction", name, "an offline policy needs the future; want an online one")
		}
	}
	p := o.Promotion
	switch {
	case p.Threshold < 0 || p.Threshold > 255:
		return optionError("Promotion.Threshold", p.Threshold, "want 0 (default 2) to 255")
	case p.RAMWatermark < 0 || p.RAMWatermark > 1 || p.RAMWatermark != p.RAMWatermark:
		return optionError("Promotion.RAMWatermark", p.RAMWatermark, "want 0 (default 0.9) or a fraction in (0, 1]")
	case p.QueueCap < 0:
		return optionError("Promotion.QueueCap", p.QueueCap, "want >= 0 (0 = default 1024)")
	case p.MaxPerHeartbeat < 0:
		return optionError("Promotion.MaxPerHeartbeat", p.MaxPerHeartbeat, "want >= 0 (0 = default 16)")
	case p.TaskTimeout < 0:
		return optionError("Promotion.TaskTimeout", p.TaskTimeout, "want >= 0 (0 = default 10s)")
	case p.SketchKeys < 0 || p.SketchKeys > maxSketchKeys:
		return optionError("Promotion.SketchKeys", p.SketchKeys, "want 0 (default 65536) to 2^24")
	}
	d := o.withDefaults()
	if d.HeartbeatInterval >= d.NodeTTL {
		return optionError("HeartbeatInterval", d.HeartbeatInterval, fmt.Sprintf("must be shorter than the node TTL (%v)", d.NodeTTL))
	}
	if d.LowWatermark >= d.HighWatermark {
		return optionError("LowWatermark", d.LowWatermark, fmt.Sprintf("must be below the high watermark (%v)", d.HighWatermark))
	}
	return nil
}

// DefaultOptions returns the options with every default filled in.
func DefaultOptions() Options { return Options{}.withDefaults() }

// MaxLeaseTTL is the longest LeaseTTL: 24 days, under 2^31 ms, since the
// index keeps a lease's end in 32-bit milliseconds compared modulo 2^32
// (index.go).
const MaxLeaseTTL = 24 * 24 * time.Hour

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.NodeTTL == 0 {
		o.NodeTTL = 3 * time.Second
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = time.Second
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 5 * time.Second
	}
	if o.RecencyResolution == 0 {
		o.RecencyResolution = 100 * time.Millisecond
	}
	if o.Placement == meta.StrategyDefault {
		o.Placement = meta.LocalFirst
	}
	if o.Eviction == "" {
		o.Eviction = "lru"
	}
	if o.PolicyCapacity == 0 {
		o.PolicyCapacity = 1 << 16
	}
	if o.HighWatermark == 0 {
		o.HighWatermark = 0.95
	}
	if o.LowWatermark == 0 {
		o.LowWatermark = 0.90
	}
	p := &o.Promotion
	if p.Threshold == 0 {
		p.Threshold = 2
	}
	if p.RAMWatermark == 0 {
		p.RAMWatermark = 0.9
	}
	if p.QueueCap == 0 {
		p.QueueCap = 1024
	}
	if p.MaxPerHeartbeat == 0 {
		p.MaxPerHeartbeat = 16
	}
	if p.TaskTimeout == 0 {
		p.TaskTimeout = 10 * time.Second
	}
	if p.SketchKeys == 0 {
		p.SketchKeys = 1 << 16
	}
	return o
}

func optionError(field string, value any, want string) error {
	return fmt.Errorf("master: %w", option.Errorf(field, "%v: %s", value, want))
}
