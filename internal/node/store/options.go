package store

import (
	"fmt"
	"time"

	"github.com/kvpool/kvpool/internal/node/quota"
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/tier/ssd"
)

// Promotion defaults. Each says where its value comes from.
const (
	// DefaultPromotionThreshold: promote on the second SSD hit, as
	// Mooncake's master does (promotion_admission_threshold = 2; see
	// docs/design.md, "Eviction, demotion, promotion").
	DefaultPromotionThreshold = 2
	// DefaultPromotionWatermark: promote only while under 90% of the RAM
	// slots are in use (or claimed by queued promotions) — the 90% point
	// where the mooncake policy's batch eviction starts, so a promotion
	// never makes room by evicting.
	DefaultPromotionWatermark = 0.9
	// DefaultPromotionQueueCap is Mooncake's promotion_queue_limit
	// (50,000). The queue holds keys only, so this bounds it to a few MiB.
	DefaultPromotionQueueCap = 50000
	// DefaultMaxPerHeartbeat is Mooncake's promotion_max_per_heartbeat
	// default (1): promotions trickle in rather than competing with reads
	// for SSD bandwidth. Raise it for live runs that compress time.
	DefaultMaxPerHeartbeat = 1
	// DefaultHeartbeat is the interval the promotion budget is counted
	// over: one second, the order of a node's heartbeat to its master
	// (the node configuration sets the real interval).
	DefaultHeartbeat = time.Second
	// DefaultTaskTTLBeats: a promotion task that waited this many
	// heartbeats in the queue is dropped as expired — the read that asked
	// for it is long past, and in a cluster the master has moved on.
	DefaultTaskTTLBeats = 10
)

// PromotionOptions configure SSD→RAM promotion. The zero value of every
// field means its default.
type PromotionOptions struct {
	// Off stops the local promoter (Options.Promoter == nil) from
	// promoting anything; tasks given to Store.Promote still run.
	Off bool
	// Threshold is the number of recent SSD hits (counted by a count-min
	// sketch) at which a block is promoted (default
	// DefaultPromotionThreshold; 1 promotes on every SSD hit).
	Threshold int
	// Watermark is the fraction of RAM slots in use at or above which
	// nothing is promoted (default DefaultPromotionWatermark; 1 promotes
	// until RAM is full).
	Watermark float64
	// QueueCap bounds the promotion tasks waiting or running (default
	// DefaultPromotionQueueCap).
	QueueCap int
	// MaxPerHeartbeat is the most promotions the local promoter admits per
	// Heartbeat interval (default DefaultMaxPerHeartbeat).
	MaxPerHeartbeat int
	// Heartbeat is the interval of the promotion budget (default
	// DefaultHeartbeat). The budget resets when Options.Clock shows that
	// an interval has passed since the current one began.
	Heartbeat time.Duration
	// TaskTTL is how long a task may wait in the queue before it expires
	// (default DefaultTaskTTLBeats × Heartbeat).
	TaskTTL time.Duration
}

// Validate reports the first bad field, by name.
func (o PromotionOptions) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("store: Options.Promotion.%s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case o.Threshold < 0 || o.Threshold > 255:
		return bad("Threshold", "%d out of range [0 (default %d), 255]", o.Threshold, DefaultPromotionThreshold)
	case o.Watermark < 0 || o.Watermark > 1 || o.Watermark != o.Watermark:
		return bad("Watermark", "%v outside [0 (default %v), 1]", o.Watermark, DefaultPromotionWatermark)
	case o.QueueCap < 0:
		return bad("QueueCap", "%d is negative", o.QueueCap)
	case o.MaxPerHeartbeat < 0:
		return bad("MaxPerHeartbeat", "%d is negative", o.MaxPerHeartbeat)
	case o.Heartbeat < 0:
		return bad("Heartbeat", "%v is negative", o.Heartbeat)
	case o.TaskTTL < 0:
		return bad("TaskTTL", "%v is negative", o.TaskTTL)
	}
	return nil
}

// withDefaults fills the zero fields.
func (o PromotionOptions) withDefaults() PromotionOptions {
	if o.Threshold == 0 {
		o.Threshold = DefaultPromotionThreshold
	}
	if o.Watermark == 0 {
		o.Watermark = DefaultPromotionWatermark
	}
	if o.QueueCap == 0 {
		o.QueueCap = DefaultPromotionQueueCap
	}
	if o.MaxPerHeartbeat == 0 {
		o.MaxPerHeartbeat = DefaultMaxPerHeartbeat
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.TaskTTL == 0 {
		o.TaskTTL = DefaultTaskTTLBeats * o.Heartbeat
	}
	return o
}

// Clock tells the time. Tests inject a fake one; the default is the wall
// clock (time.Now, which testing/synctest also fakes).
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// DefaultMaxObjectSize is the largest object a store takes when
// Options.MaxObjectSize is zero: 64 MiB, an LMCache chunk of 256 tokens
// of a model with up to 256 KiB of KV per token (an 8B model's chunk is
// about 32 MiB), while one object stays a small part of a RAM tier.
const DefaultMaxObjectSize = 64 << 20

// MaxObjectSizeLimit is the most Options.MaxObjectSize may be: 512 MiB
// (wire.MaxObjectSize, what the node protocol is sized for).
const MaxObjectSizeLimit = 512 << 20

// Options configure a Store. The zero value is a store with a default
// RAM tier, no SSD tier and default promotion settings.
type Options struct {
	// MaxObjectSize is the largest payload Put accepts, in bytes (default
	// DefaultMaxObjectSize, at most MaxObjectSizeLimit); a larger one is
	// refused up front with kvpool.ErrTooLarge, naming the node setting
	// that raises it (--max-object-bytes, max_object_bytes). The store
	// hands it to both tiers as their MaxObjectSize.
	MaxObjectSize int
	// RAM configures the RAM tier. Its OnEvict must be nil: the store
	// installs its own (demotion).
	RAM ram.Options
	// SSD configures the SSD tier; nil turns SSD offload off (evicted
	// blocks are dropped and nothing survives a restart).
	SSD *ssd.Options
	// Promotion configures SSD→RAM promotion (used only with an SSD tier).
	Promotion PromotionOptions
	// Promoter decides which SSD hits are promoted; nil means a
	// LocalPromoter built from Promotion (or none when Promotion.Off).
	Promoter Promoter
	// Clock times promotion budgets and task expiry (default: the wall
	// clock).
	Clock Clock
	// OnPromotion, when set, is called on the promotion worker after each
	// promotion task ends (a node reports completions to its master this
	// way). It must not block for long.
	OnPromotion func(PromotionResult)
	// OnEvent, when set, is called after every change to which tiers hold
	// a key (see Event and EventKind for when each kind is reported). It
	// runs on the goroutine making the change, possibly with internal
	// locks held and concurrently with other calls: it must be safe for
	// concurrent use, must not block for long, and must not call the
	// store's methods other than Contains, Exists, Locate and SSDItem. A
	// node uses it to keep its master's index up to date.
	OnEvent func(Event)
	// ZeroCopySSD makes Acquire hand out SSD blocks as file regions (for
	// sendfile) without reading them. Off by default: then Acquire reads
	// an SSD block into memory and verifies its checksum first, so a
	// corrupt copy is counted and dropped on the node instead of being
	// sent (the client would still reject it, but the bad copy would stay).
	ZeroCopySSD bool
	// Quota sets per-tenant byte quotas on the blocks resident in either
	// tier (package quota); the zero value accounts usage and refuses
	// nothing. A Put over its tenant's quota fails with kvpool.ErrQuota.
	Quota quota.Options
}

// Validate reports the first bad field, by name.
func (o Options) Validate() error {
	if o.MaxObjectSize < 0 || o.MaxObjectSize > MaxObjectSizeLimit {
		return fmt.Errorf("store: Options.MaxObjectSize: %d out of range [0 (default %d), %d]", o.MaxObjectSize, DefaultMaxObjectSize, MaxObjectSizeLimit)
	}
	if err := o.RAM.Validate(); err != nil {
		return fmt.Errorf("store: Options.RAM: %w", err)
	}
	if o.RAM.OnEvict != nil {
		return fmt.Errorf("store: Options.RAM.OnEvict: must be nil (the store demotes evicted blocks itself)")
	}
	if o.SSD != nil {
		if o.SSD.OnRemove != nil {
			return fmt.Errorf("store: Options.SSD.OnRemove: must be nil (the store reports SSD removals through Options.OnEvent)")
		}
		// The tiers' BlockSizes are typical object sizes their policies
		// are sized for, not slots: they need not agree, and an object
		// evicted from RAM is demoted whatever its size up to the SSD
		// tier's max object size.
		if err := o.SSD.Validate(); err != nil {
			return fmt.Errorf("store: Options.SSD: %w", err)
		}
	}
	if err := o.Quota.Validate(); err != nil {
		return fmt.Errorf("store: Options.Quota: %w", err)
	}
	return o.Promotion.Validate()
}
