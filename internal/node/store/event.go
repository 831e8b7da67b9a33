package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/ssd"
)

// EventKind says what changed in an Event.
type EventKind uint8

// The event kinds. Unless a kind says otherwise, the event is reported
// after the change is visible to Locate.
const (
	// EventPut: a Put stored the block in RAM (and removed any older SSD
	// copy). Size and Sum describe the stored copy.
	EventPut EventKind = iota + 1
	// EventWriteAround: a Put stored the block on SSD only, RAM having
	// refused it. Size and Sum describe the stored copy.
	EventWriteAround
	// EventDelete: the block left both tiers (Delete, or a failed
	// write-around that removed the older copies).
	EventDelete
	// EventDemoted: the block's RAM copy left RAM and the SSD tier holds
	// the block (written now, or already there). Size and Sum describe
	// the SSD copy. When the RAM tier evicted the copy, the event is
	// reported while the copy is still leaving: Locate may report it in
	// RAM for a moment longer (ram.Evicted's ordering).
	EventDemoted
	// EventDropped: the block's RAM copy left RAM without an SSD copy (no
	// SSD tier, a failed demotion, or DropRAM). Reported like
	// EventDemoted, possibly while the copy is still leaving.
	EventDropped
	// EventPromoted: a promotion copied the block from SSD into RAM (the
	// SSD copy stays). Size and Sum describe the copy.
	EventPromoted
	// EventSSDEvicted: the SSD tier evicted the block to make room.
	EventSSDEvicted
	// EventRAMCorrupt: a read found the RAM copy corrupt; RAM dropped it.
	EventRAMCorrupt
	// EventSSDCorrupt: a read found the SSD copy corrupt or unreadable;
	// the SSD tier dropped it.
	EventSSDCorrupt
)

var eventNames = [...]string{"", "put", "write-around", "delete", "demoted", "dropped", "promoted", "ssd evicted", "ram corrupt", "ssd corrupt"}

// String names the kind.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event reports a change to which tiers hold a key (Options.OnEvent).
type Event struct {
	Kind EventKind
	Key  block.Key
	// Size and Sum describe the copy the event concerns, for the kinds
	// that say so (a stored, demoted or promoted copy); zero otherwise.
	Size int
	Sum  uint32
}

// emit releases the quota charge of a block that left its last tier and
// reports the event to Options.OnEvent.
func (s *Store) emit(e Event) {
	switch e.Kind {
	case EventDelete:
		if !s.Contains(e.Key) {
			s.quota.Release(e.Key)
		}
	case EventDropped, EventRAMCorrupt:
		// The RAM copy is leaving (an eviction reports it while the copy
		// may still show in RAM): only an SSD copy keeps the block.
		if s.ssd == nil || !s.ssd.Contains(e.Key) {
			s.quota.Release(e.Key)
		}
	case EventSSDEvicted, EventSSDCorrupt:
		if !s.ram.Contains(e.Key) {
			s.quota.Release(e.Key)
		}
	}
	if s.onEvent != nil {
		s.onEvent(e)
	}
}

// onSSDRemove is the SSD tier's OnRemove.
func (s *Store) onSSDRemove(r ssd.Removed) {
	kind := EventSSDEvicted
	if r.Reason == ssd.RemovedCorrupt {
		kind = EventSSDCorrupt
	}
	s.emit(Event{Kind: kind, Key: r.Key})
}

// SSDItems returns every block the SSD tier holds (nil when SSD offload
// is off), without touching recency or counters: the SSD part of a node's
// inventory. RAM is empty when a store opens, so SSDItems right after
// Open is the store's whole inventory.
func (s *Store) SSDItems() []ssd.Item {
	if s.ssd == nil {
		return nil
	}
	return s.ssd.Items()
}

// SSDItem returns k's size and checksum on the SSD tier and whether the
// tier holds it, without touching recency or counters.
func (s *Store) SSDItem(k block.Key) (ssd.Item, bool) {
	if s.ssd == nil {
		return ssd.Item{}, false
	}
	return s.ssd.Stat(k)
}

// Demote moves k's RAM copy to the SSD tier and removes it from RAM: an
// eviction decided outside the RAM tier (by the master). The copy is
// written unless the SSD tier already holds k (by the store's consistency
// rule, the same bytes). With SSD offload off it drops the RAM copy, as
// DropRAM does. It returns kvpool.ErrNotFound when RAM does not hold k, and
// the SSD tier's error (the RAM copy stays) when the write fails. It is
// counted with the demotions.
//
// A Put of k that lands in RAM while Demote writes replaces the copy being
// demoted; Demote then leaves RAM alone (and the Put removes the SSD copy
// it made stale). The RAM tier has no conditional delete, so a Put landing
// in the instant between Demote's last check and its removal of the RAM
// copy is removed instead, leaving the demoted copy on SSD; kvpool's keys
// name their content (a prefix hash), so that copy holds the same bytes.
func (s *Store) Demote(ctx context.Context, k block.Key) error {
	if err := s.begin("demote", k); err != nil {
		return err
	}
	defer s.ops.Done()
	mu := s.stripe(k)
	mu.Lock()
	defer mu.Unlock()
	gen, ok := s.ram.Generation(k)
	if !ok {
		return fmt.Errorf("store: demote %s: %w", k, kvpool.ErrNotFound)
	}
	if s.ssd == nil {
		return s.dropRAMLocked(ctx, k, gen, "demote")
	}
	if !s.ssd.Contains(k) {
		err := s.ram.View(k, func(p tier.Segments, sum uint32) error {
			return s.ssd.PutSegments(ctx, k, p, sum)
		})
		if err != nil {
			if errors.Is(err, kvpool.ErrFull) {
				s.c.demotionsFull.Add(1)
			}
			s.c.demotionFailures.Add(1)
			return fmt.Errorf("store: demote %s: %w", k, err)
		}
		if it, ok := s.ssd.Stat(k); ok {
			s.c.demotions.Add(1)
			s.c.demotedBytes.Add(uint64(it.Size))
		}
	} else {
		s.c.demotionsClean.Add(1)
	}
	if g, ok := s.ram.Generation(k); !ok || g != gen {
		s.c.superseded.Add(1)
		return nil
	}
	if err := s.ram.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
		return fmt.Errorf("store: demote %s: remove the RAM copy: %w", k, err)
	}
	it, _ := s.ssd.Stat(k)
	s.emit(Event{Kind: EventDemoted, Key: k, Size: it.Size, Sum: it.Sum})
	return nil
}

// DropRAM removes k's RAM copy, leaving any SSD copy: an eviction decided
// outside the RAM tier (by the master) for a block it wants dropped. It
// returns kvpool.ErrNotFound when RAM does not hold k.
func (s *Store) DropRAM(ctx context.Context, k block.Key) error {
	if err := s.begin("drop", k); err != nil {
		return err
	}
	defer s.ops.Done()
	mu := s.stripe(k)
	mu.Lock()
	defer mu.Unlock()
	gen, ok := s.ram.Generation(k)
	if !ok {
		return fmt.Errorf("store: drop %s from RAM: %w", k, kvpool.ErrNotFound)
	}
	return s.dropRAMLocked(ctx, k, gen, "drop")
}

// dropRAMLocked deletes RAM generation gen of k. The caller holds k's
// stripe.
func (s *Store) dropRAMLocked(ctx context.Context, k block.Key, gen uint64, what string) error {
	if g, ok := s.ram.Generation(k); !ok || g != gen {
		s.c.superseded.Add(1)
		return nil
	}
	if err := s.ram.Delete(ctx, k); err != nil {
		return fmt.Errorf("store: %s %s from RAM: %w", what, k, err)
	}
	s.c.dropped.Add(1)
	s.emit(Event{Kind: EventDropped, Key: k})
	return nil
}
