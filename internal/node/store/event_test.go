package store

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
	"github.com/kvpool/kvpool/internal/vfs/errorfs"
)

// seen is an event with where its key was when the event was reported.
type seen struct {
	Event
	At Location
}

// eventLog records OnEvent calls with the key's location at that moment.
type eventLog struct {
	mu  sync.Mutex
	s   *Store
	got []seen
}

func (l *eventLog) hook(e Event) {
	at := Location(0)
	if l.s != nil {
		at = l.s.Locate([]block.Key{e.Key})[0]
	}
	l.mu.Lock()
	l.got = append(l.got, seen{e, at})
	l.mu.Unlock()
}

func (l *eventLog) take() []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

func sumOf(id uint64, size int) uint32 { return block.Checksum(key(id), tiertest.Payload(id, 1, size)) }

// TestEvents: every change to which tiers hold a key is reported once,
// with the copy's size and checksum where the kind carries them, and
// (except for RAM evictions, reported while the copy leaves) after Locate
// shows it.
func TestEvents(t *testing.T) {
	const bs, size = 4096, 1000
	log := &eventLog{}
	o := testOpts(bs, 4, vfs.NewMem(), 6)
	o.Promotion.Off = true
	o.OnEvent = log.hook
	s := mustOpen(t, o)
	log.s = s
	ev := func(kind EventKind, id uint64, withMeta bool, at Location) seen {
		e := seen{Event{Kind: kind, Key: key(id)}, at}
		if withMeta {
			e.Size, e.Sum = size, sumOf(id, size)
		}
		return e
	}
	steps := []struct {
		name string
		do   func() error
		want []seen
		// after is where the keys of want are once the step has returned.
		after Location
	}{
		{"put", func() error { put(t, s, key(1), tiertest.Payload(1, 1, size)); return nil },
			[]seen{ev(EventPut, 1, true, InRAM)}, InRAM},
		{"fill RAM", func() error {
			for i := uint64(2); i <= 4; i++ {
				put(t, s, key(i), tiertest.Payload(i, 1, size))
			}
			log.take()
			return nil
		}, nil, 0},
		// The eviction is reported while the RAM copy leaves: RAM and SSD
		// both hold it at that instant.
		{"evict to SSD", func() error { put(t, s, key(5), tiertest.Payload(5, 1, size)); return nil },
			[]seen{ev(EventDemoted, 1, true, InRAM|InSSD), ev(EventPut, 5, true, InRAM)}, 0},
		{"delete", func() error { return s.Delete(ctx, key(5)) }, []seen{ev(EventDelete, 5, false, 0)}, 0},
		{"promote", func() error {
			if n, err := s.Promote(ctx, []block.Key{key(1)}); n != 1 || err != nil {
				t.Fatalf("Promote: %d, %v", n, err)
			}
			return s.WaitIdle(ctx)
		}, []seen{ev(EventPromoted, 1, true, InRAM|InSSD)}, InRAM | InSSD},
		{"drop RAM copy", func() error { return s.DropRAM(ctx, key(1)) }, []seen{ev(EventDropped, 1, false, InSSD)}, InSSD},
		{"demote on order", func() error { return s.Demote(ctx, key(2)) }, []seen{ev(EventDemoted, 2, true, InSSD)}, InSSD},
		{"demote absent", func() error {
			if err := s.Demote(ctx, key(2)); !errors.Is(err, kvpool.ErrNotFound) {
				t.Errorf("Demote of a block not in RAM: %v, want ErrNotFound", err)
			}
			if err := s.DropRAM(ctx, key(99)); !errors.Is(err, kvpool.ErrNotFound) {
				t.Errorf("DropRAM of an absent block: %v, want ErrNotFound", err)
			}
			return nil
		}, nil, 0},
		{"delete both tiers", func() error { return s.Delete(ctx, key(1)) }, []seen{ev(EventDelete, 1, false, 0)}, 0},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := log.take()
		if !slices.Equal(got, st.want) {
			t.Fatalf("%s: events %+v, want %+v", st.name, got, st.want)
		}
		for _, e := range st.want {
			if st.after != 0 {
				if at := s.Locate([]block.Key{e.Key})[0]; at != st.after {
					t.Errorf("%s: %s at %v afterwards, want %v", st.name, e.Key, at, st.after)
				}
			}
		}
	}
	if st := s.Stats(); st.Demotions != 2 || st.Dropped != 1 {
		t.Errorf("Stats: %d demotions, %d dropped; want 2 and 1", st.Demotions, st.Dropped)
	}
	items := s.SSDItems()
	if len(items) != 1 || items[0] != (ssd.Item{Key: key(2), Size: size, Sum: sumOf(2, size)}) {
		t.Errorf("SSDItems = %+v, want block 2 alone", items)
	}
	if it, ok := s.SSDItem(key(2)); !ok || it.Sum != sumOf(2, size) {
		t.Errorf("SSDItem(2) = %+v, %v", it, ok)
	}
}

// TestEventsSSD: SSD evictions and corrupt SSD copies are reported.
func TestEventsSSD(t *testing.T) {
	const bs, size = 4096, 1000
	log := &eventLog{}
	efs := errorfs.Wrap(vfs.NewMem(), nil)
	o := testOpts(bs, 2, efs, 3)
	o.Promotion.Off = true
	o.OnEvent = log.hook
	s := mustOpen(t, o)
	log.s = s
	for i := uint64(1); i <= 5; i++ { // 2 in RAM, 3 on SSD
		put(t, s, key(i), tiertest.Payload(i, 1, size))
	}
	log.take()
	put(t, s, key(6), tiertest.Payload(6, 1, size)) // demotes 4, which evicts 1 from SSD
	got := log.take()
	want := []seen{
		{Event{Kind: EventSSDEvicted, Key: key(1)}, 0},
		{Event{Kind: EventDemoted, Key: key(4), Size: size, Sum: sumOf(4, size)}, InRAM | InSSD},
		{Event{Kind: EventPut, Key: key(6), Size: size, Sum: sumOf(6, size)}, InRAM},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	sw := errorfs.NewSwitch(errorfs.OnPath("pages-*", errorfs.OnOps(errorfs.OpRead, errorfs.BitFlip(3))))
	efs.SetInjector(sw)
	sw.Set(true)
	if _, _, _, err := s.Get(ctx, key(2), nil); !errors.Is(err, kvpool.ErrCorrupt) {
		t.Fatalf("Get of a flipped SSD copy: %v", err)
	}
	sw.Set(false)
	if got, want := log.take(), []seen{{Event{Kind: EventSSDCorrupt, Key: key(2)}, 0}}; !slices.Equal(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}

// TestEventsNoSSD: without an SSD tier evictions and demotion orders are
// drops.
func TestEventsNoSSD(t *testing.T) {
	log := &eventLog{}
	o := testOpts(4096, 2, nil, 0)
	o.OnEvent = log.hook
	s := mustOpen(t, o)
	log.s = s
	for i := uint64(1); i <= 3; i++ {
		put(t, s, key(i), tiertest.Payload(i, 1, 10))
	}
	got := log.take()
	if len(got) != 4 || got[2].Kind != EventDropped || got[2].Key != key(1) || got[3].Kind != EventPut {
		t.Fatalf("events %+v, want put 1, put 2, dropped 1, put 3", got)
	}
	if err := s.Demote(ctx, key(2)); err != nil {
		t.Fatal(err)
	}
	if got, want := log.take(), []seen{{Event{Kind: EventDropped, Key: key(2)}, 0}}; !slices.Equal(got, want) {
		t.Errorf("Demote without SSD: events %+v, want %+v", got, want)
	}
	if _, err := Open(ctx, Options{SSD: &ssd.Options{Dir: "/x", FS: vfs.NewMem(), OnRemove: func(ssd.Removed) {}}}); err == nil {
		t.Errorf("Open with SSD.OnRemove set: no error")
	}
}
