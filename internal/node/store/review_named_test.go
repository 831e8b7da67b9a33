package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/vfs"
)

// TestReviewNamedStaleness: each goroutine owns a few names, all sharing
// one ID with the other goroutines' names and with a chain key, and runs
// put, get, view, acquire, delete, demote and promote on them in order,
// with a model of what it last stored; the other goroutines' puts evict
// its objects from RAM to SSD (and off SSD) at any moment. A read must
// return the last version put or a miss (an eviction) — never an older
// version, another name's bytes, or anything after a delete.
func TestReviewNamedStaleness(t *testing.T) {
	const bs = 512
	o := testOpts(bs, 12, vfs.NewMem(), 24)
	o.Promotion.Threshold = 1
	o.Promotion.MaxPerHeartbeat = 1000
	s := mustOpen(t, o)

	const workers, names, ops = 3, 3, 400
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			keys := make([]block.Key, names)
			last := make([][]byte, names) // nil: deleted or never put
			for i := range keys {
				keys[i] = block.Key{Tenant: "ten", ID: 7, Name: fmt.Sprintf("w%d-%d", w, i)}
			}
			if w == 0 {
				keys[0] = block.Key{Tenant: "ten", ID: 7} // the chain key of the same ID
			}
			check := func(i int, got []byte, err error, how string) bool {
				k := keys[i]
				switch {
				case err == nil && last[i] == nil:
					t.Errorf("%s %s after its delete: %d bytes", how, k, len(got))
				case err == nil && !bytes.Equal(got, last[i]):
					t.Errorf("%s %s: %d bytes, not the last version put (%d bytes)", how, k, len(got), len(last[i]))
				case err != nil && !errors.Is(err, kvpool.ErrNotFound):
					t.Errorf("%s %s: %v", how, k, err)
				default:
					return true
				}
				return false
			}
			for op := range ops {
				i := rng.IntN(names)
				k := keys[i]
				switch rng.IntN(8) {
				case 0, 1, 2:
					p := []byte(fmt.Sprintf("%s v%d ", k, op))
					p = bytes.Repeat(p, 1+rng.IntN(3*bs/len(p)))
					if _, err := s.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
						if !errors.Is(err, kvpool.ErrFull) {
							t.Errorf("Put %s: %v", k, err)
							return
						}
						// A failed put leaves no older copy behind.
						p = nil
					}
					last[i] = p
				case 3:
					got, _, _, err := s.Get(ctx, k, nil)
					if !check(i, got, err, "Get") {
						return
					}
				case 4:
					var got []byte
					err := s.View(ctx, k, func(p tier.Segments, _ uint32, _ Location) error {
						got = p.AppendTo(nil)
						return nil
					})
					if !check(i, got, err, "View") {
						return
					}
				case 5:
					ref, err := s.Acquire(ctx, k)
					var got []byte
					if err == nil {
						got = ref.Payload.AppendTo(nil)
						if ref.File != nil {
							got = make([]byte, ref.Len)
							if _, err := ref.File.ReadAt(got, ref.Off); err != nil {
								t.Errorf("read section of %s: %v", k, err)
							}
						}
						ref.Release()
					}
					if !check(i, got, err, "Acquire") {
						return
					}
				case 6:
					if err := s.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						t.Errorf("Delete %s: %v", k, err)
						return
					}
					last[i] = nil
				case 7:
					if rng.IntN(2) == 0 {
						if err := s.Demote(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) && !errors.Is(err, kvpool.ErrFull) {
							t.Errorf("Demote %s: %v", k, err)
							return
						}
					} else if _, err := s.Promote(ctx, []block.Key{k}); err != nil {
						t.Errorf("Promote %s: %v", k, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}
