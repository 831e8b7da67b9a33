package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
)

// presence is what the model knows about a key.
type presence uint8

const (
	absent presence = iota // the store must not hold it
	may                    // it may hold it (eviction may have dropped it)
	must                   // it must hold it
)

// modelKey is the model's view of one key: its latest payload and whether
// the store holds it.
type modelKey struct {
	ver, size int
	state     presence
}

// TestModel runs random puts, gets, views, deletes, existence checks and
// restarts against the store and against a trivial map, comparing them
// after every step: every present block is byte-identical to its latest
// put; a deleted block is gone; and what must be present is.
//
// What "must" means per configuration:
//   - bigSSD (room for every key, never evicts): every block put is
//     present until a restart (RAM evicts to SSD, SSD keeps everything).
//     A restart keeps exactly the blocks Locate placed on SSD just before.
//   - smallSSD: SSD evicts too, so a put block may vanish; a vanished
//     block never comes back. A restart still keeps exactly the SSD blocks.
//   - noSSD: evicted blocks are dropped; a restart loses everything.
//   - bigRAM (nothing is ever evicted, SSD on): every put block is
//     present; a restart loses every one.
//   - headroom: as bigSSD, with RAM trimmed to 60% past 80% of its slots,
//     so promotions find free slots.
func TestModel(t *testing.T) {
	const keys = 40
	variants := []struct {
		name               string
		ramSlots, ssdSlots int // ssdSlots 0: SSD off
		ssdKeepsAll        bool
		headroom           bool // RAM evicts past 80% of its slots down to 60%
	}{
		{"bigSSD", 8, 64, true, false},
		{"smallSSD", 8, 12, false, false},
		{"noSSD", 8, 0, false, false},
		{"bigRAM", 64, 64, true, false},
		{"headroom", 10, 64, true, true},
	}
	for _, v := range variants {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed=%d", v.name, seed), func(t *testing.T) {
				runModel(t, seed, keys, v.ramSlots, v.ssdSlots, v.ssdKeepsAll, v.headroom)
			})
		}
	}
}

func runModel(t *testing.T, seed uint64, keys, ramSlots, ssdSlots int, ssdKeepsAll, headroom bool) {
	const (
		steps = 1500
		bs    = 512
	)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var fs vfs.FS
	if ssdSlots > 0 {
		fs = vfs.NewMem()
	}
	o := testOpts(bs, ramSlots, fs, ssdSlots)
	// Promote on the first SSD hit, without a budget: promotions run on
	// the worker, concurrently with the steps, and must not change what
	// the store holds.
	o.Promotion = PromotionOptions{Threshold: 1, MaxPerHeartbeat: 1 << 20}
	if headroom {
		o.RAM.HighWatermark, o.RAM.LowWatermark = 0.8, 0.6
	}
	s := mustOpen(t, o)
	model := make([]modelKey, keys)
	payload := func(id int) []byte { return tiertest.Payload(uint64(id), uint64(model[id].ver), model[id].size) }
	putState := may
	if ssdKeepsAll {
		putState = must
	}
	if ramSlots >= keys {
		putState = must // nothing is ever evicted
	}

	// read checks one key by Get or View against the model.
	read := func(step, id int) {
		k := key(uint64(id))
		var got []byte
		var err error
		if rng.IntN(2) == 0 {
			got, _, _, err = s.Get(ctx, k, nil)
		} else {
			err = s.View(ctx, k, func(seg tier.Segments, sum uint32, _ Location) error {
				p := seg.AppendTo(nil)
				if !block.Verify(k, p, sum) {
					return fmt.Errorf("checksum mismatch")
				}
				got = bytes.Clone(p)
				return nil
			})
		}
		m := &model[id]
		switch {
		case errors.Is(err, kvpool.ErrNotFound):
			if m.state == must {
				t.Fatalf("step %d: block %d (version %d) missing: %v", step, id, m.ver, err)
			}
			m.state = absent // a vanished block never comes back
		case err != nil:
			t.Fatalf("step %d: read %d: %v", step, id, err)
		case m.state == absent:
			t.Fatalf("step %d: block %d is absent in the model, the store returned %d bytes", step, id, len(got))
		case !bytes.Equal(got, payload(id)):
			ver, cerr := tiertest.CheckPayload(uint64(id), got)
			t.Fatalf("step %d: block %d: got version %d (%v), want version %d", step, id, ver, cerr, m.ver)
		}
	}

	allKeys := make([]block.Key, keys)
	for i := range allKeys {
		allKeys[i] = key(uint64(i))
	}
	for step := range steps {
		id := rng.IntN(keys)
		k := key(uint64(id))
		switch op := rng.IntN(100); {
		case op < 40: // put a new version
			model[id].ver++
			model[id].size = 16 + rng.IntN(bs-15)
			p := payload(id)
			if _, err := s.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
				t.Fatalf("step %d: Put %d: %v", step, id, err)
			}
			model[id].state = putState
		case op < 75:
			read(step, id)
		case op < 85:
			err := s.Delete(ctx, k)
			if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
				t.Fatalf("step %d: Delete %d: %v", step, id, err)
			}
			if errors.Is(err, kvpool.ErrNotFound) && model[id].state == must {
				t.Fatalf("step %d: Delete %d found nothing, but it must be present", step, id)
			}
			model[id].state = absent
		case op < 99: // wait for promotions (a quiescent point), then check the invariants
			if err := s.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		default: // restart
			if err := s.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			locs := s.Locate(allKeys)
			if err := s.Close(); err != nil {
				t.Fatalf("step %d: Close: %v", step, err)
			}
			var err error
			if s, err = Open(ctx, o); err != nil {
				t.Fatalf("step %d: reopen: %v", step, err)
			}
			t.Cleanup(func() { closeChecked(t, s) })
			// Exactly the SSD blocks survive, and only on SSD.
			after := s.Locate(allKeys)
			for i := range model {
				want := locs[i] & InSSD
				if after[i] != want {
					t.Fatalf("step %d: block %d: in %v before the restart, %v after; want %v", step, i, locs[i], after[i], want)
				}
				model[i].state = absent
				if want != 0 {
					model[i].state = putState
				}
			}
		}
		// After every step, existence agrees with the model, without
		// touching any policy state.
		locs := s.Locate(allKeys)
		exists := s.Exists(allKeys)
		for i, m := range model {
			if exists[i] != (locs[i] != 0) {
				t.Fatalf("step %d: block %d: Exists %v, Locate %v", step, i, exists[i], locs[i])
			}
			switch {
			case m.state == must && locs[i] == 0:
				t.Fatalf("step %d: block %d must be present, Locate says none", step, i)
			case m.state == absent && locs[i] != 0:
				t.Fatalf("step %d: block %d must be absent, Locate says %v", step, i, locs[i])
			case m.state == may && locs[i] == 0:
				model[i].state = absent
			}
			if fs == nil && locs[i]&InSSD != 0 {
				t.Fatalf("step %d: block %d on SSD with SSD off", step, i)
			}
		}
		// Every so often, read every block back.
		if step%100 == 99 {
			for i := range model {
				read(step, i)
			}
		}
	}
	st := s.Stats()
	t.Logf("reads %d: RAM %d, SSD %d, misses %d; demotions %d (clean %d); promotions %+v",
		st.Reads, st.HitsRAM, st.HitsSSD, st.Misses, st.Demotions, st.DemotionsClean, st.Promotion)
}
