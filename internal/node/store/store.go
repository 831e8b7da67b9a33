// Package store is a node's tiered block store: a RAM tier (package ram)
// and, when SSD offload is on, an SSD tier (package ssd) below it.
//
// Data flow:
//   - Keys are chain keys (a tenant and a chain-hash ID) or named keys
//     (a tenant and a name of up to 1 KiB, with ID block.NameID(name));
//     the store passes both through unchanged, and every tier keeps the
//     full name with the object and compares it on every read, so two
//     names that share an ID are two objects.
//   - Put refuses an object over Options.MaxObjectSize up front, before
//     any quota charge or tier work, with its size, the limit and the
//     node setting that raises it.
//   - Put stores into RAM. A block the RAM tier refuses (its admission
//     policy said no, or so many chunks are pinned that eviction cannot
//     free enough) is written to the SSD tier instead when there is one
//     ("write-around": a refused block is kept somewhere rather than
//     lost), and refused otherwise.
//   - A block RAM evicts is demoted: written to the SSD tier before its
//     chunks are reused, by the Put that needed them. With SSD offload
//     off it is dropped. A failed demotion (disk full, I/O error) drops
//     the block and is counted; it never blocks the RAM tier.
//   - Get, View and Acquire read RAM, then SSD. Every SSD read is
//     verified; a corrupt SSD copy is dropped and counted, and the read is
//     a miss (kvpool.ErrNotFound, also matching kvpool.ErrCorrupt), never
//     bytes.
//   - An SSD hit is shown to the Promoter; a promotion it admits copies
//     the block back into RAM on the store's worker goroutine, into free
//     chunks only (promotion never evicts). The SSD copy stays: tiers are
//     inclusive, so a promoted block that is evicted again needs no write.
//     A RAM tier that evicts only when full (the default watermarks) stays
//     full under load, and the promotion watermark then rejects every
//     promotion: give RAM headroom with ram.Options.HighWatermark and
//     LowWatermark below the promotion watermark (e.g. Mooncake's 0.95 and
//     0.90 with a promotion watermark of 0.95).
//   - Exists and Locate never change recency or any policy state.
//   - Quotas: every resident block is charged once to its tenant
//     (quota.Ledger), whichever tiers hold it. Put charges the block
//     before storing it and fails with kvpool.ErrQuota, storing nothing,
//     when that would take the tenant over its quota. A block is released
//     when it leaves the last tier holding it (Delete, SSD eviction, a RAM
//     eviction or drop with no SSD copy, a corrupt copy dropped with no
//     other copy). Open charges what the SSD scan found.
//
// Consistency: the store keeps one rule — when both tiers hold a key,
// they hold the same bytes — so a read never sees an older copy after a
// Put or Delete of the key has returned, even across a clean restart.
// (Two exceptions, both counted or documented: an I/O error while removing
// a stale SSD copy, counted as CleanupFailures; and a crash under an SSD
// sync mode that does not make removals durable, see package ssd.) Per-key
// work on the SSD tier (demotion, write-around, dropping the SSD copy a
// Put made stale, Delete, promotion) is serialised by a striped lock, and
// a demotion writes only if the evicted copy is still the key's current
// RAM copy (ram.RAM.Generation).
//
// Restart: RAM is volatile. Closing the store and opening it again with
// the same SSD directory finds every block whose demotion (or
// write-around) had completed, and nothing that was only in RAM.
//
// Concurrency: a Store is safe for concurrent use. It owns one goroutine,
// the promotion worker, which Close stops and waits for.
package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/quota"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/vfs"
)

// Location says which tiers hold a block, or which tier served or stored
// it.
type Location uint8

// Locations; a block in both tiers is InRAM|InSSD.
const (
	InRAM Location = 1 << iota
	InSSD
)

// String returns "ram", "ssd", "ram+ssd" or "none".
func (l Location) String() string {
	switch l {
	case 0:
		return "none"
	case InRAM:
		return "ram"
	case InSSD:
		return "ssd"
	case InRAM | InSSD:
		return "ram+ssd"
	}
	return fmt.Sprintf("location(%d)", uint8(l))
}

// ErrNoSSD is returned by Promote when SSD offload is off.
var ErrNoSSD = errors.New("SSD offload is off")

// stripeCount is the number of per-key locks: enough that unrelated keys
// rarely share one while a demotion holds it for one SSD write (two cores
// here, tens of connections on a node).
const stripeCount = 256

// Stats is a snapshot of the store's counters.
type Stats struct {
	// RAM and SSD are the tiers' own counters (SSD is zero when SSDOn is
	// false). Promotion reads show in SSD's Hits and BytesOut.
	RAM         tier.Stats
	RAMCounters ram.Counters
	SSD         tier.Stats
	SSDOn       bool
	// Reads (Get, View, Acquire) by where they were served: Reads =
	// HitsRAM + HitsSSD + Misses.
	Reads, HitsRAM, HitsSSD, Misses uint64
	// Corrupt copies met by reads, dropped and counted as misses (RAM) or
	// served from the SSD copy instead (RAM), or misses (SSD).
	RAMCorruptions, SSDCorruptions uint64
	// Demotions wrote DemotedBytes of evicted blocks to SSD.
	Demotions, DemotedBytes uint64
	// DemotionsClean: evicted promoted copies whose SSD copy was still
	// there (nothing written). DemotionsSuperseded: evicted copies a Put
	// or Delete of the key had replaced (nothing to write).
	DemotionsClean, DemotionsSuperseded uint64
	// DemotionFailures: evicted blocks the SSD tier refused (disk full,
	// I/O error), dropped. DemotionsFull counts those refused as full.
	DemotionFailures, DemotionsFull uint64
	// Dropped: evicted blocks dropped because SSD offload is off, and RAM
	// copies removed by DropRAM (or by Demote without an SSD tier).
	Dropped uint64
	// WriteArounds: Puts RAM refused that were stored on SSD instead.
	WriteArounds uint64
	// CleanupFailures: SSD copies the store could not remove after a Put
	// or a failed demotion made them stale (an I/O error).
	CleanupFailures uint64
	// Promotion counts promotion decisions and tasks.
	Promotion PromotionStats
}

// counters are the store's own counters.
type counters struct {
	reads, hitsRAM, hitsSSD, misses                        atomic.Uint64
	ramCorruptions, ssdCorruptions                         atomic.Uint64
	demotions, demotedBytes, demotionsClean, superseded    atomic.Uint64
	demotionFailures, demotionsFull, dropped, writeArounds atomic.Uint64
	cleanupFailures                                        atomic.Uint64
	admitted, completed, completedBytes                    atomic.Uint64
	rejFrequency, rejWatermark, rejCap, rejRate            atomic.Uint64
	failed, expired, alreadyInRAM                          atomic.Uint64
}

// task is a queued promotion.
type task struct {
	key block.Key
	at  int64 // clock time queued (UnixNano)
}

// Store is a node's tiered store. Build it with Open.
type Store struct {
	ram         *ram.RAM
	ssd         *ssd.Tier // nil: SSD offload off
	prom        Promoter
	clock       Clock
	popts       PromotionOptions // with defaults
	onPromotion func(PromotionResult)
	onEvent     func(Event)
	stripes     [stripeCount]sync.Mutex
	bufs        sync.Pool // *[]byte of the SSD block size, for SSD reads by View, Acquire and promotion
	zeroCopySSD bool      // Options.ZeroCopySSD
	maxObject   int       // Options.MaxObjectSize, default filled in
	quota       *quota.Ledger
	c           counters

	life   sync.Mutex // guards closed; ops.Add happens under it
	closed bool
	ops    sync.WaitGroup

	mu      sync.Mutex // guards the promotion queue
	queue   []task
	running int
	idle    []chan struct{} // WaitIdle callers
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	cancel  context.CancelFunc
}

// Open builds the store: it allocates the RAM tier and, with SSD offload
// on, opens the SSD tier (scanning it for the blocks it held), then starts
// the promotion worker.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		clock:       opts.Clock,
		popts:       opts.Promotion.withDefaults(),
		onPromotion: opts.OnPromotion,
		onEvent:     opts.OnEvent,
		zeroCopySSD: opts.ZeroCopySSD,
		maxObject:   opts.MaxObjectSize,
		kick:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	q, err := quota.New(opts.Quota)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s.quota = q
	if s.maxObject == 0 {
		s.maxObject = DefaultMaxObjectSize
	}
	ro := opts.RAM
	if ro.MaxObjectSize == 0 {
		// The store's limit, or what the RAM tier holds if less (a larger
		// object then goes straight to SSD, or is refused without one).
		ro.MaxObjectSize = int(min(int64(s.maxObject), cmp.Or(ro.CapacityBytes, ram.DefaultCapacityBytes)))
	}
	ro.OnEvict = s.demote
	r, err := ram.Open(ro)
	if err != nil {
		return nil, fmt.Errorf("store: open RAM tier: %w", err)
	}
	s.ram = r
	if opts.SSD != nil {
		so := *opts.SSD
		so.OnRemove = s.onSSDRemove
		if so.MaxObjectSize == 0 {
			// The store's limit, or what the SSD tier can hold if less
			// (a larger object then stays in RAM or is dropped when RAM
			// evicts it).
			so.MaxObjectSize = min(s.maxObject, ssd.CapacityPayload(so.CapacityBytes))
		}
		t, err := ssd.Open(ctx, so)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("store: open SSD tier: %w", err)
		}
		s.ssd = t
		// Whole pages: an SSD read lands straight in the buffer when its
		// last page's tail fits (ssd.Tier.Get); a buffer this large
		// starts on a page boundary in Go's allocator, which the tier
		// checks before relying on it.
		bs := (t.BlockSize() + ssd.PageSize - 1) / ssd.PageSize * ssd.PageSize
		s.bufs.New = func() any { b := make([]byte, 0, bs); return &b }
		for _, it := range t.Items() {
			s.quota.Set(it.Key, int64(it.Size))
		}
	}
	switch {
	case opts.Promoter != nil:
		s.prom = opts.Promoter
	case s.popts.Off:
		s.prom = neverPromoter{}
	default:
		p, err := NewLocalPromoter(opts.Promotion, r.Slots(), s.clock)
		if err != nil {
			s.closeTiers()
			return nil, err
		}
		p.key = r.PolicyKey // the RAM's (possibly keyed) policy key
		s.prom = p
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.work(wctx)
	return s, nil
}

// stripe returns k's lock stripe. The public PolicyKey spreads keys; with
// only stripeCount stripes, keys of different tenants share stripes all the
// time, so nothing is learnt from which ones do.
func (s *Store) stripe(k block.Key) *sync.Mutex {
	return &s.stripes[ram.PolicyKey(k)%stripeCount]
}

// begin registers an operation; it fails once the store is closed. The
// caller calls s.ops.Done when the operation ends.
func (s *Store) begin(what string, k block.Key) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return fmt.Errorf("store: %s %s: %w", what, k, kvpool.ErrClosed)
	}
	s.ops.Add(1)
	return nil
}

// Put stores payload (with checksum sum) under k and says where: RAM, or
// SSD when RAM refused it (see the package comment). The caller keeps
// ownership of payload.
func (s *Store) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) (Location, error) {
	return s.PutHinted(ctx, k, payload, sum, block.Hint{})
}

// PutHinted is Put with the access's chain position, which the RAM tier's
// eviction policy receives (see block.Hint): a replayer storing a request's
// blocks first to last gives each block's depth and parent, as the
// simulator's cache accesses do.
func (s *Store) PutHinted(ctx context.Context, k block.Key, payload []byte, sum uint32, h block.Hint) (Location, error) {
	if err := s.begin("put", k); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	if err := s.checkPut(k, payload); err != nil {
		return 0, err
	}
	if err := s.quota.Reserve(k, int64(len(payload))); err != nil {
		return 0, fmt.Errorf("store: put %s: %w", k, err)
	}
	loc, err := s.put(ctx, k, payload, sum, h)
	if err != nil && !s.Contains(k) {
		s.quota.Release(k)
	}
	return loc, err
}

// checkPut refuses, before anything is charged or stored, a key the tiers
// cannot hold (a name over block.MaxNameLen, a bad tenant) or a payload
// over the max object size.
func (s *Store) checkPut(k block.Key, payload []byte) error {
	if err := k.Validate(); err != nil {
		return fmt.Errorf("store: put %s: %w", k, err)
	}
	if len(payload) > s.maxObject {
		return fmt.Errorf("store: put %s: an object of %d bytes is larger than the max object size of %d bytes "+
			"(node flag --max-object-bytes, config max_object_bytes, at most %d; less on a node whose RAM keeps less: --ram-bytes): %w",
			k, len(payload), s.maxObject, MaxObjectSizeLimit, kvpool.ErrTooLarge)
	}
	return nil
}

// MaxObjectSize returns the largest payload Put accepts.
func (s *Store) MaxObjectSize() int { return s.maxObject }

// put is Put after the quota charge.
func (s *Store) put(ctx context.Context, k block.Key, payload []byte, sum uint32, h block.Hint) (Location, error) {
	gen, err := s.ram.Insert(ctx, k, payload, sum, ram.InsertOptions{Hint: h})
	switch {
	case err == nil:
		if s.ssd != nil {
			s.dropStale(ctx, k, gen)
		}
		s.emit(Event{Kind: EventPut, Key: k, Size: len(payload), Sum: sum})
		return InRAM, nil
	case s.ssd != nil && (errors.Is(err, ram.ErrNotAdmitted) || errors.Is(err, kvpool.ErrFull) || errors.Is(err, kvpool.ErrTooLarge)):
		// checkPut let the object in, so a RAM tier too small to keep it
		// (kvpool.ErrTooLarge) leaves it to SSD like a refusal does.
		return s.writeAround(ctx, k, payload, sum, err)
	case errors.Is(err, ram.ErrNotAdmitted):
		// Without an SSD tier a block the RAM policy declines has no
		// place: to a client that is a full store (kvpool.ErrFull), not a
		// server failure.
		return 0, fmt.Errorf("store: put %s: no SSD tier to write around to: %w", k, errors.Join(err, kvpool.ErrFull))
	}
	return 0, fmt.Errorf("store: put %s: %w", k, err)
}

// dropStale removes the SSD copy of k that the Put of RAM generation gen
// made stale. If RAM no longer holds that generation, whoever replaced or
// removed it (a newer Put, a Delete, its demotion) owns the SSD side.
func (s *Store) dropStale(ctx context.Context, k block.Key, gen uint64) {
	mu := s.stripe(k)
	mu.Lock()
	defer mu.Unlock()
	if g, ok := s.ram.Generation(k); !ok || g != gen || !s.ssd.Contains(k) {
		return
	}
	if err := s.ssd.Delete(context.WithoutCancel(ctx), k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
		s.c.cleanupFailures.Add(1)
	}
}

// writeAround stores on SSD a block RAM refused (for reason cause).
func (s *Store) writeAround(ctx context.Context, k block.Key, payload []byte, sum uint32, cause error) (Location, error) {
	mu := s.stripe(k)
	mu.Lock()
	defer mu.Unlock()
	// A RAM copy of k is older than this Put (RAM refused a replacement
	// because every slot was pinned) or a concurrent Put's: either way this
	// Put's copy goes to SSD alone. A concurrent Put that lands in RAM
	// after this removes the SSD copy again (dropStale).
	if err := s.ram.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
		return 0, fmt.Errorf("store: put %s: RAM refused it (%w), and removing its older RAM copy: %w", k, cause, err)
	}
	if err := s.ssd.Put(ctx, k, payload, sum); err != nil {
		// Any older SSD copy must not outlive this Put.
		s.dropSSD(k)
		s.emit(Event{Kind: EventDelete, Key: k})
		return 0, fmt.Errorf("store: put %s: RAM refused it (%w), and SSD: %w", k, cause, err)
	}
	s.c.writeArounds.Add(1)
	s.emit(Event{Kind: EventWriteAround, Key: k, Size: len(payload), Sum: sum})
	return InSSD, nil
}

// dropSSD removes k from the SSD tier, counting a failure other than
// absence. The caller holds k's stripe.
func (s *Store) dropSSD(k block.Key) {
	if err := s.ssd.Delete(context.Background(), k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
		s.c.cleanupFailures.Add(1)
	}
}

// demote is the RAM tier's OnEvict: it writes the evicted copy to SSD,
// unless the copy was superseded, or is a clean promoted copy whose SSD
// copy is still there.
func (s *Store) demote(ev ram.Evicted) {
	if s.ssd == nil {
		s.c.dropped.Add(1)
		s.emit(Event{Kind: EventDropped, Key: ev.Key, Size: ev.Payload.Len(), Sum: ev.Sum})
		return
	}
	mu := s.stripe(ev.Key)
	mu.Lock()
	defer mu.Unlock()
	if g, ok := s.ram.Generation(ev.Key); !ok || g != ev.Gen {
		s.c.superseded.Add(1)
		return
	}
	if ev.Clean && s.ssd.Contains(ev.Key) {
		s.c.demotionsClean.Add(1)
		s.emit(Event{Kind: EventDemoted, Key: ev.Key, Size: ev.Payload.Len(), Sum: ev.Sum})
		return
	}
	// Not the evicting Put's context: its caller giving up must not lose
	// a block that is already leaving RAM.
	if err := s.ssd.PutSegments(context.Background(), ev.Key, ev.Payload, ev.Sum); err != nil {
		s.c.demotionFailures.Add(1)
		if errors.Is(err, kvpool.ErrFull) {
			s.c.demotionsFull.Add(1)
		}
		s.dropSSD(ev.Key) // an older SSD copy must not outlive this newer one
		s.emit(Event{Kind: EventDropped, Key: ev.Key, Size: ev.Payload.Len(), Sum: ev.Sum})
		return
	}
	s.c.demotions.Add(1)
	s.c.demotedBytes.Add(uint64(ev.Payload.Len()))
	s.emit(Event{Kind: EventDemoted, Key: ev.Key, Size: ev.Payload.Len(), Sum: ev.Sum})
}

// Get appends k's payload to dst[:0] and returns it with its checksum and
// the tier that served it: RAM, else SSD (verified). A miss returns
// kvpool.ErrNotFound; if the miss was a corrupt SSD copy (dropped and
// counted) the error also matches kvpool.ErrCorrupt.
func (s *Store) Get(ctx context.Context, k block.Key, dst []byte) ([]byte, uint32, Location, error) {
	if err := s.begin("get", k); err != nil {
		return dst[:0], 0, 0, err
	}
	defer s.ops.Done()
	s.c.reads.Add(1)
	out, sum, err := s.ram.Get(ctx, k, dst)
	if err == nil {
		s.c.hitsRAM.Add(1)
		return out, sum, InRAM, nil
	}
	if err := s.ramMiss(k, err); err != nil {
		return dst[:0], 0, 0, err
	}
	if s.ssd == nil {
		s.c.misses.Add(1)
		return dst[:0], 0, 0, fmt.Errorf("store: get %s: %w", k, kvpool.ErrNotFound)
	}
	out, sum, err = s.ssd.Get(ctx, k, dst)
	if err != nil {
		return dst[:0], 0, 0, s.ssdMiss(k, "get", err)
	}
	s.ssdHit(k)
	return out, sum, InSSD, nil
}

// ramMiss classifies a RAM read error: nil for a miss (absent, or a
// corrupt copy RAM dropped), the error otherwise.
func (s *Store) ramMiss(k block.Key, err error) error {
	switch {
	case errors.Is(err, kvpool.ErrNotFound):
		return nil
	case errors.Is(err, kvpool.ErrCorrupt):
		s.c.ramCorruptions.Add(1)
		s.emit(Event{Kind: EventRAMCorrupt, Key: k})
		return nil
	}
	return fmt.Errorf("store: read %s from RAM: %w", k, err)
}

// ssdMiss counts and words an SSD read error.
func (s *Store) ssdMiss(k block.Key, what string, err error) error {
	switch {
	case errors.Is(err, kvpool.ErrNotFound):
		s.c.misses.Add(1)
		return fmt.Errorf("store: %s %s: %w", what, k, kvpool.ErrNotFound)
	case errors.Is(err, kvpool.ErrCorrupt):
		s.c.misses.Add(1)
		s.c.ssdCorruptions.Add(1)
		return fmt.Errorf("store: %s %s: %w (the SSD copy failed verification and was dropped: %w)", what, k, kvpool.ErrNotFound, err)
	}
	return fmt.Errorf("store: %s %s from SSD: %w", what, k, err)
}

// ssdHit counts a read served by SSD and shows it to the promoter.
func (s *Store) ssdHit(k block.Key) {
	s.c.hitsSSD.Add(1)
	s.considerPromotion(k)
}

// View calls fn with k's payload, its checksum and the tier serving it.
// From RAM the bytes are the RAM slot itself, pinned while fn runs (zero
// copy, not verified: the receiver verifies); from SSD they are read into
// a pooled buffer and verified first. fn must not modify or retain the
// bytes. Misses are reported as by Get; fn's error is returned wrapped.
func (s *Store) View(ctx context.Context, k block.Key, fn func(payload tier.Segments, sum uint32, from Location) error) error {
	if err := s.begin("view", k); err != nil {
		return err
	}
	defer s.ops.Done()
	s.c.reads.Add(1)
	called := false
	err := s.ram.View(k, func(p tier.Segments, sum uint32) error {
		called = true
		return fn(p, sum, InRAM)
	})
	if called {
		s.c.hitsRAM.Add(1)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return nil
	}
	if err := s.ramMiss(k, err); err != nil {
		return err
	}
	if s.ssd == nil {
		s.c.misses.Add(1)
		return fmt.Errorf("store: view %s: %w", k, kvpool.ErrNotFound)
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	out, sum, err := s.ssd.Get(ctx, k, *bp)
	if err != nil {
		return s.ssdMiss(k, "view", err)
	}
	*bp = out[:0]
	s.ssdHit(k)
	if err := fn(tier.Segments{out}, sum, InSSD); err != nil {
		return fmt.Errorf("store: view %s: %w", k, err)
	}
	return nil
}

// Ref is a block held for an asynchronous sender: a pinned RAM slot (not
// verified here; the receiver verifies against Sum), or an SSD block —
// read into a pooled buffer and verified (the default), or with
// Options.ZeroCopySSD the section of its slot file (for sendfile, verified
// only by the receiver). Call Release once the bytes are sent.
type Ref struct {
	From Location // InRAM or InSSD
	// Payload is the block's bytes (RAM chunks in place, or a verified SSD
	// read); read-only.
	Payload tier.Segments
	// Len is the payload's length; File and Off locate it on SSD (From
	// == InSSD).
	Len  int
	File vfs.File
	Off  int64
	Sum  uint32

	release func()
}

// Release lets the tier reuse the slot. It is safe to call more than once.
func (r Ref) Release() {
	if r.release != nil {
		r.release()
	}
}

// Acquire pins k where it is, RAM first, and returns a Ref to it. Misses
// are reported as by Get.
func (s *Store) Acquire(ctx context.Context, k block.Key) (Ref, error) {
	if err := s.begin("acquire", k); err != nil {
		return Ref{}, err
	}
	defer s.ops.Done()
	if err := ctx.Err(); err != nil {
		return Ref{}, fmt.Errorf("store: acquire %s: %w", k, err)
	}
	s.c.reads.Add(1)
	p, sum, rel, err := s.ram.Acquire(k)
	if err == nil {
		s.c.hitsRAM.Add(1)
		return Ref{From: InRAM, Payload: p, Len: p.Len(), Sum: sum, release: rel}, nil
	}
	if err := s.ramMiss(k, err); err != nil {
		return Ref{}, err
	}
	if s.ssd == nil {
		s.c.misses.Add(1)
		return Ref{}, fmt.Errorf("store: acquire %s: %w", k, kvpool.ErrNotFound)
	}
	if s.zeroCopySSD {
		f, off, n, sum, rel, err := s.ssd.Section(k)
		if err == nil {
			s.ssdHit(k)
			return Ref{From: InSSD, File: f, Off: off, Len: n, Sum: sum, release: rel}, nil
		}
		if !errors.Is(err, ssd.ErrFragmented) {
			return Ref{}, s.ssdMiss(k, "acquire", err)
		}
		// Not in one run of adjacent pages: no single file section to
		// send, so read it (verified) like the copying path.
	}
	// A verified read: the SSD tier checks the head entry, the stored
	// name and the checksum and drops a corrupt copy, so the node never
	// sends a bad one.
	bp := s.bufs.Get().(*[]byte)
	out, sum, err := s.ssd.Get(ctx, k, (*bp)[:0])
	if err != nil {
		s.bufs.Put(bp)
		return Ref{}, s.ssdMiss(k, "acquire", err)
	}
	s.ssdHit(k)
	var once sync.Once
	release := func() { once.Do(func() { *bp = out[:0]; s.bufs.Put(bp) }) }
	return Ref{From: InSSD, Payload: tier.Segments{out}, Len: len(out), Sum: sum, release: release}, nil
}

// Touch records an access to k's RAM copy with the RAM tier's eviction
// policy (ram.RAM.Touch), moving no data, and reports whether RAM held k.
// An SSD copy is neither touched nor promoted: the access a replayer
// reports this way is of a block in the node's memory.
func (s *Store) Touch(k block.Key, h block.Hint) bool {
	if err := s.begin("touch", k); err != nil {
		return false
	}
	defer s.ops.Done()
	return s.ram.Touch(k, h)
}

// Contains reports whether either tier holds k. Like Exists it changes
// no policy state.
func (s *Store) Contains(k block.Key) bool {
	return s.ram.Contains(k) || (s.ssd != nil && s.ssd.Contains(k))
}

// Exists reports, for each key, whether either tier holds it. It never
// changes recency or any policy state.
func (s *Store) Exists(keys []block.Key) []bool {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = s.Contains(k)
	}
	return out
}

// Locate reports, for each key, which tiers hold it. It never changes
// recency or any policy state.
func (s *Store) Locate(keys []block.Key) []Location {
	out := make([]Location, len(keys))
	for i, k := range keys {
		if s.ram.Contains(k) {
			out[i] |= InRAM
		}
		if s.ssd != nil && s.ssd.Contains(k) {
			out[i] |= InSSD
		}
	}
	return out
}

// Delete removes k from both tiers. It returns kvpool.ErrNotFound when
// neither held it.
func (s *Store) Delete(ctx context.Context, k block.Key) error {
	if err := s.begin("delete", k); err != nil {
		return err
	}
	defer s.ops.Done()
	mu := s.stripe(k)
	mu.Lock()
	defer mu.Unlock()
	rerr := s.ram.Delete(ctx, k)
	serr := error(kvpool.ErrNotFound)
	if s.ssd != nil {
		serr = s.ssd.Delete(ctx, k)
	}
	rAbsent, sAbsent := errors.Is(rerr, kvpool.ErrNotFound), errors.Is(serr, kvpool.ErrNotFound)
	if rerr == nil || serr == nil {
		s.emit(Event{Kind: EventDelete, Key: k})
	}
	switch {
	case rAbsent && sAbsent:
		return fmt.Errorf("store: delete %s: %w", k, kvpool.ErrNotFound)
	case (rerr == nil || rAbsent) && (serr == nil || sAbsent):
		return nil
	case rerr != nil && !rAbsent:
		return fmt.Errorf("store: delete %s from RAM: %w", k, rerr)
	}
	return fmt.Errorf("store: delete %s from SSD: %w", k, serr)
}

// RAMWatermark returns the fraction of RAM slots in use.
func (s *Store) RAMWatermark() float64 { return s.ram.Watermark() }

// SSDOn reports whether SSD offload is on.
func (s *Store) SSDOn() bool { return s.ssd != nil }

// SSDOpenStats returns what opening the SSD tier found, and false when
// SSD offload is off.
func (s *Store) SSDOpenStats() (ssd.OpenStats, bool) {
	if s.ssd == nil {
		return ssd.OpenStats{}, false
	}
	return s.ssd.OpenStats(), true
}

// Quota returns each tenant's resident bytes, quota and rejected Puts,
// sorted by tenant.
func (s *Store) Quota() []quota.TenantStats { return s.quota.Stats() }

// Stats returns a snapshot of every counter.
func (s *Store) Stats() Stats {
	st := Stats{
		RAM:                 s.ram.Stats(),
		RAMCounters:         s.ram.Counters(),
		SSDOn:               s.ssd != nil,
		Reads:               s.c.reads.Load(),
		HitsRAM:             s.c.hitsRAM.Load(),
		HitsSSD:             s.c.hitsSSD.Load(),
		Misses:              s.c.misses.Load(),
		RAMCorruptions:      s.c.ramCorruptions.Load(),
		SSDCorruptions:      s.c.ssdCorruptions.Load(),
		Demotions:           s.c.demotions.Load(),
		DemotedBytes:        s.c.demotedBytes.Load(),
		DemotionsClean:      s.c.demotionsClean.Load(),
		DemotionsSuperseded: s.c.superseded.Load(),
		DemotionFailures:    s.c.demotionFailures.Load(),
		DemotionsFull:       s.c.demotionsFull.Load(),
		Dropped:             s.c.dropped.Load(),
		WriteArounds:        s.c.writeArounds.Load(),
		CleanupFailures:     s.c.cleanupFailures.Load(),
		Promotion: PromotionStats{
			Admitted:          s.c.admitted.Load(),
			Completed:         s.c.completed.Load(),
			CompletedBytes:    s.c.completedBytes.Load(),
			RejectedFrequency: s.c.rejFrequency.Load(),
			RejectedWatermark: s.c.rejWatermark.Load(),
			RejectedCap:       s.c.rejCap.Load(),
			RejectedRate:      s.c.rejRate.Load(),
			Failed:            s.c.failed.Load(),
			Expired:           s.c.expired.Load(),
			AlreadyInRAM:      s.c.alreadyInRAM.Load(),
		},
	}
	if s.ssd != nil {
		st.SSD = s.ssd.Stats()
	}
	s.mu.Lock()
	st.Promotion.InFlight = len(s.queue) + s.running
	s.mu.Unlock()
	return st
}

// Check verifies both tiers' invariants. Call it only while no operation
// is in flight and nothing is held through Acquire.
func (s *Store) Check() error {
	err := s.ram.Check()
	if s.ssd != nil {
		err = errors.Join(err, s.ssd.Check())
	}
	return err
}

// Close stops the promotion worker (abandoning queued tasks), waits for
// operations in flight, and closes both tiers: RAM contents are lost, the
// SSD tier syncs. Closing twice returns kvpool.ErrClosed.
func (s *Store) Close() error {
	s.life.Lock()
	if s.closed {
		s.life.Unlock()
		return fmt.Errorf("store: close: %w", kvpool.ErrClosed)
	}
	s.closed = true
	s.life.Unlock()
	s.cancel()
	close(s.quit)
	<-s.done
	s.ops.Wait()
	s.mu.Lock()
	for _, ch := range s.idle {
		close(ch)
	}
	s.idle = nil
	s.queue = nil
	s.mu.Unlock()
	if err := s.closeTiers(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

func (s *Store) closeTiers() error {
	err := s.ram.Close()
	if s.ssd != nil {
		err = errors.Join(err, s.ssd.Close())
	}
	return err
}
