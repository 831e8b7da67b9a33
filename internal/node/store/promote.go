package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/tier/ram"
)

// Promoter decides which blocks served from the SSD tier are copied back
// into RAM. The store calls Consider once for every SSD hit (Get, View,
// Acquire) and executes the promotions it admits on its worker. In a
// cluster the master decides instead: its Promoter returns Skip and the
// node runs the master's tasks through Store.Promote.
//
// Implementations are safe for concurrent use: reads call Consider from
// many goroutines.
type Promoter interface {
	Consider(k block.Key, load Load) Verdict
}

// Load is the store's state as a Promoter sees it.
type Load struct {
	// RAMUsed is the fraction of RAM slots in use or claimed by promotion
	// tasks waiting or running.
	RAMUsed float64
	// Queued is the number of promotion tasks waiting or running, and
	// QueueCap the most there may be.
	Queued, QueueCap int
}

// Verdict is a Promoter's decision about one SSD hit.
type Verdict uint8

// Verdicts. Every one but Skip is counted in PromotionStats.
const (
	// Skip: no local decision (a promoter that defers to the master).
	Skip Verdict = iota
	// Promote: queue a promotion (counted as admitted, or as rejected by
	// cap if the queue filled meanwhile).
	Promote
	// RejectFrequency: the block has not been hit often enough.
	RejectFrequency
	// RejectWatermark: RAM is at or above the promotion watermark.
	RejectWatermark
	// RejectCap: the promotion queue is full.
	RejectCap
	// RejectRate: this heartbeat's promotion budget is spent.
	RejectRate
)

var verdictNames = [...]string{"skip", "promote", "rejected by frequency", "rejected by watermark", "rejected by cap", "rejected by rate"}

// String names the verdict.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", v)
}

// LocalPromoter is the node's own promotion policy: a block is promoted on
// its Threshold-th recent SSD hit (a count-min sketch counts hits, aging
// like TinyLFU), only while RAM is under the watermark, only while the
// queue is under its cap, and at most MaxPerHeartbeat times per heartbeat
// interval (a budget reset from the clock). The checks run in that order;
// a hit is counted by the sketch whatever the verdict.
//
// It is safe for concurrent use (one mutex).
type LocalPromoter struct {
	watermark float64
	max       int
	every     time.Duration
	clock     Clock
	key       func(block.Key) policy.Key // the sketch's key of a block

	mu     sync.Mutex
	sketch *policy.CMS
	start  time.Time // the current heartbeat interval began
	used   int       // promotions admitted in it
}

var _ Promoter = (*LocalPromoter)(nil)

// NewLocalPromoter returns a promoter for a RAM tier of ramSlots slots
// (which sizes its sketch). A nil clock is the wall clock.
func NewLocalPromoter(opts PromotionOptions, ramSlots int, clock Clock) (*LocalPromoter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	sketch, err := policy.NewCMSWith(ramSlots, policy.CMSOptions{Threshold: o.Threshold})
	if err != nil {
		return nil, fmt.Errorf("store: promotion sketch: %w", err)
	}
	if clock == nil {
		clock = wallClock{}
	}
	return &LocalPromoter{watermark: o.Watermark, max: o.MaxPerHeartbeat, every: o.Heartbeat, clock: clock, key: ram.PolicyKey, sketch: sketch}, nil
}

// Consider counts an SSD hit of k and decides whether to promote it.
func (p *LocalPromoter) Consider(k block.Key, load Load) Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.sketch.Admit(policy.Access{Key: p.key(k)}) {
		return RejectFrequency
	}
	if load.RAMUsed >= p.watermark {
		return RejectWatermark
	}
	if load.Queued >= load.QueueCap {
		return RejectCap
	}
	now := p.clock.Now()
	if now.Sub(p.start) >= p.every || now.Before(p.start) {
		p.start, p.used = now, 0
	}
	if p.used >= p.max {
		return RejectRate
	}
	p.used++
	return Promote
}

// Hits returns the sketch's estimate of k's recent SSD hits.
func (p *LocalPromoter) Hits(k block.Key) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sketch.Estimate(p.key(k))
}

// neverPromoter is the promoter of PromotionOptions.Off.
type neverPromoter struct{}

func (neverPromoter) Consider(block.Key, Load) Verdict { return Skip }

// Outcome is how a promotion task ended.
type Outcome uint8

// Outcomes.
const (
	// Completed: the block was copied into RAM.
	Completed Outcome = iota + 1
	// Failed: the block could not be promoted (gone from SSD, a corrupt
	// SSD copy, no free RAM slot, an I/O error); Err says why.
	Failed
	// Expired: the task waited longer than PromotionOptions.TaskTTL.
	Expired
	// AlreadyInRAM: RAM held the block by the time the task ran.
	AlreadyInRAM
)

var outcomeNames = [...]string{"", "completed", "failed", "expired", "already in RAM"}

// String names the outcome.
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// PromotionResult reports one finished promotion task.
type PromotionResult struct {
	Key     block.Key
	Outcome Outcome
	Bytes   int   // payload bytes copied into RAM (Completed)
	Err     error // why it Failed
}

// PromotionStats count promotion decisions and tasks. (The node exports
// them as the master_promotion_* metrics.)
type PromotionStats struct {
	// Admitted tasks were queued (by the local promoter or Promote).
	Admitted uint64
	// Completed tasks copied CompletedBytes into RAM.
	Completed, CompletedBytes uint64
	// SSD hits the promoter rejected, by reason. RejectedCap also counts
	// tasks Promote could not queue.
	RejectedFrequency, RejectedWatermark, RejectedCap, RejectedRate uint64
	// Failed, Expired and AlreadyInRAM count the other task outcomes.
	Failed, Expired, AlreadyInRAM uint64
	// InFlight is the number of tasks waiting or running.
	InFlight int
}
