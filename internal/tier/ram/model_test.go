package ram

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
)

// TestModel drives a small tier (32 chunks of 512 bytes) with random
// puts of every size up to the tier, deletes, reads of every kind and
// held pins, over names colliding in their IDs and chain keys of the same
// IDs, against a map of what each key last stored: a read returns that
// or nothing, never another key's bytes; Check holds after every step.
func TestModel(t *testing.T) {
	o := Options{BlockSize: 512, ChunkSize: 512, CapacityBytes: 512 * 32}
	var r *RAM
	o.OnEvict = func(ev Evicted) {
		if !block.Verify(ev.Key, ev.Payload.AppendTo(nil), ev.Sum) {
			t.Errorf("OnEvict %s: payload does not match its sum", ev.Key)
		}
	}
	r = mustOpen(t, o)
	rng := rand.New(rand.NewPCG(15, 15))
	var keys []block.Key
	for id := range uint64(4) {
		keys = append(keys, block.Key{Tenant: "t", ID: id})
		for _, name := range []string{"a", "b", "ab", "\x00"} {
			keys = append(keys, block.Key{Tenant: "t", ID: id, Name: name})
		}
	}
	model := map[block.Key][]byte{}
	type held struct {
		k    block.Key
		want []byte
		segs tier.Segments
		rel  func()
	}
	var pins []held
	for step := range 4000 {
		k := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(10); {
		case op < 4:
			n := rng.IntN(512 * 8)
			if rng.IntN(20) == 0 {
				n = 512*32 - len(k.Name) // the whole tier
			}
			p := tiertest.Payload(uint64(step), 1, n)
			err := r.Put(ctx, k, p, block.Checksum(k, p))
			switch {
			case err == nil:
				model[k] = p
			case errors.Is(err, kvpool.ErrFull):
				// Too much pinned; the old copy, if any, stays.
			default:
				t.Fatalf("step %d: Put %s (%d bytes): %v", step, k, n, err)
			}
		case op < 5:
			err := r.Delete(ctx, k)
			if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
				t.Fatalf("step %d: Delete %s: %v", step, k, err)
			}
			delete(model, k)
		case op < 7:
			got, _, err := r.Get(ctx, k, nil)
			if err == nil && !bytes.Equal(got, model[k]) {
				t.Fatalf("step %d: Get %s: %d bytes that are not the %d it last stored", step, k, len(got), len(model[k]))
			}
			if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
				t.Fatalf("step %d: Get %s: %v", step, k, err)
			}
		case op < 8:
			err := r.View(k, func(p tier.Segments, sum uint32) error {
				if got := p.AppendTo(nil); !bytes.Equal(got, model[k]) || sum != block.Checksum(k, got) {
					t.Fatalf("step %d: View %s: wrong bytes", step, k)
				}
				return nil
			})
			if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
				t.Fatalf("step %d: View %s: %v", step, k, err)
			}
		case op < 9 && len(pins) < 3:
			segs, _, rel, err := r.Acquire(k)
			if err == nil {
				if !bytes.Equal(segs.AppendTo(nil), model[k]) {
					t.Fatalf("step %d: Acquire %s: wrong bytes", step, k)
				}
				pins = append(pins, held{k, model[k], segs, rel})
			}
		default:
			if len(pins) > 0 {
				h := pins[0]
				if !bytes.Equal(h.segs.AppendTo(nil), h.want) {
					t.Fatalf("step %d: bytes of %s held through Acquire changed", step, h.k)
				}
				h.rel()
				pins = pins[1:]
			}
		}
		// A key evicted meanwhile is simply absent.
		for k := range model {
			if !r.Contains(k) {
				delete(model, k)
			}
		}
		if len(pins) == 0 {
			if err := r.Check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	for _, h := range pins {
		h.rel()
	}
	st, c := r.Stats(), r.Counters()
	t.Logf("Stats %+v, Counters %+v", st, c)
	if st.Evicted == 0 || c.Full == 0 {
		t.Errorf("Stats %+v, Counters %+v: want evictions and some Puts refused for pins", st, c)
	}
}
