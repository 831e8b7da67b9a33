package ram

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// Review tests (adversarial review of the ACCESS op and policy keys): they
// document properties that hold against a hostile tenant.

// reviewPayload is the payload of k: different for every (tenant, id), so
// a block served under the wrong key shows.
func reviewPayload(k block.Key, n int) []byte {
	p := fmt.Appendf(nil, "%s/%d:", k.Tenant, k.ID)
	for len(p) < n {
		p = append(p, byte(k.ID)^byte(len(k.Tenant)), byte(len(p)))
	}
	return p[:n]
}

// TestReviewCollidingPolicyKeysNeverMixBlocks: two tenants' blocks with
// the same policy key (constructed, not forged in the tier's state) are
// never confused: whichever arrives second is refused with ErrNotAdmitted
// while the first is resident, every Get returns its own tenant's bytes
// or not found, and once the first is gone the second is stored and
// served as its own.
func TestReviewCollidingPolicyKeysNeverMixBlocks(t *testing.T) {
	alice := block.Key{Tenant: "alice", ID: 0x1234_5678_9abc_def0}
	bob := block.Key{Tenant: "bob", ID: PublicCollision(alice, "bob")}
	if PolicyKey(alice) != PolicyKey(bob) || alice.ID == bob.ID {
		t.Fatalf("constructed keys %v and %v do not collide", alice, bob)
	}
	for _, pol := range []string{"lru", "kvchain", "s3fifo", "arc"} {
		for _, order := range [][2]block.Key{{alice, bob}, {bob, alice}} {
			first, second := order[0], order[1]
			t.Run(pol+"/"+first.Tenant+" first", func(t *testing.T) {
				o := small(64, 4)
				o.Eviction = pol
				r := mustOpen(t, o)
				p1, p2 := reviewPayload(first, 40), reviewPayload(second, 48)
				put(t, r, first, p1)
				err := r.Put(ctx, second, p2, block.Checksum(second, p2))
				if !errors.Is(err, ErrNotAdmitted) {
					t.Fatalf("Put of %v over the resident %v: %v; want ErrNotAdmitted", second, first, err)
				}
				mustGet(t, r, first, p1)
				if got, _, err := r.Get(ctx, second, nil); !errors.Is(err, kvpool.ErrNotFound) {
					t.Fatalf("Get(%v) = %q, %v; want not found", second, got, err)
				}
				if r.Touch(second, block.Hint{Depth: 1, Parent: first.ID}) {
					t.Fatalf("Touch(%v) reported it resident", second)
				}
				// Touching the second (absent) key changed nothing of the first.
				mustGet(t, r, first, p1)
				// Once the first is gone, the second fits.
				if err := r.Delete(ctx, first); err != nil {
					t.Fatalf("Delete %v: %v", first, err)
				}
				put(t, r, second, p2)
				mustGet(t, r, second, p2)
				if got, _, err := r.Get(ctx, first, nil); !errors.Is(err, kvpool.ErrNotFound) {
					t.Fatalf("Get(%v) = %q, %v; want not found", first, got, err)
				}
				if err := r.Check(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestReviewExtremeHints: hints with extreme or hostile values — the
// largest depth, a parent that is the block itself, a parent of another
// tenant's policy key (a constructed collision), a parent never seen —
// neither panic nor corrupt the tier's state under any eviction policy.
func TestReviewExtremeHints(t *testing.T) {
	victim := block.Key{Tenant: "alice", ID: 77}
	hints := []struct {
		name string
		h    func(k block.Key) block.Hint
	}{
		{"max depth, max parent", func(block.Key) block.Hint { return block.Hint{Depth: math.MaxUint32, Parent: math.MaxUint64} }},
		{"max int depth", func(block.Key) block.Hint { return block.Hint{Depth: math.MaxInt, Parent: 1} }},
		{"negative depth", func(block.Key) block.Hint { return block.Hint{Depth: -1, Parent: 1} }},
		{"parent is itself", func(k block.Key) block.Hint { return block.Hint{Depth: 3, Parent: k.ID} }},
		{"parent collides with another tenant's block", func(block.Key) block.Hint {
			return block.Hint{Depth: 1, Parent: PublicCollision(victim, "bob")}
		}},
		{"parent never seen, depth 0", func(block.Key) block.Hint { return block.Hint{Depth: 0, Parent: 42} }},
	}
	for _, pol := range []string{"lru", "kvchain", "s3fifo", "arc", "fifo", "lfu", "mooncake"} {
		for _, hh := range hints {
			t.Run(pol+"/"+hh.name, func(t *testing.T) {
				o := small(32, 6)
				o.Eviction = pol
				r := mustOpen(t, o)
				put(t, r, victim, reviewPayload(victim, 20))
				rng := rand.New(rand.NewPCG(1, 2))
				for i := range 300 {
					k := block.Key{Tenant: "bob", ID: uint64(rng.IntN(12))}
					h := hh.h(k)
					if i%3 == 0 {
						r.Touch(k, h)
						continue
					}
					p := reviewPayload(k, 8+rng.IntN(24))
					if _, err := r.Insert(ctx, k, p, block.Checksum(k, p), InsertOptions{Hint: h}); err != nil && !errors.Is(err, ErrNotAdmitted) {
						t.Fatalf("Insert %v with %+v: %v", k, h, err)
					}
					if got, _, err := r.Get(ctx, k, nil); err == nil && !bytes.Equal(got, p) {
						t.Fatalf("Get(%v) = %q; want %q", k, got, p)
					}
				}
				if err := r.Check(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestReviewTouchRacingEviction: touches (with chain hints) race puts
// that evict and gets, over two tenants using the same IDs and a third
// whose IDs collide with the first's policy keys. A Get returns exactly
// its key's bytes or not found — never another block's — and the tier's
// state is consistent afterwards. Run with -race.
func TestReviewTouchRacingEviction(t *testing.T) {
	const ids = 24 // keys per tenant, in a tier of 8 slots
	tenants := []string{"alice", "bob"}
	keys := func(g *rand.Rand) block.Key {
		id := uint64(g.IntN(ids))
		switch g.IntN(3) {
		case 0:
			return block.Key{Tenant: "alice", ID: id}
		case 1:
			return block.Key{Tenant: "bob", ID: id}
		}
		return block.Key{Tenant: "mallory", ID: PublicCollision(block.Key{Tenant: tenants[0], ID: id}, "mallory")}
	}
	for _, pol := range []string{"lru", "kvchain", "s3fifo"} {
		t.Run(pol, func(t *testing.T) {
			o := small(64, 8)
			o.Eviction = pol
			r := mustOpen(t, o)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					g := rand.New(rand.NewPCG(uint64(w), 9))
					var buf []byte
					for range 3000 {
						k := keys(g)
						switch g.IntN(3) {
						case 0:
							p := reviewPayload(k, 64)
							if err := r.Put(ctx, k, p, block.Checksum(k, p)); err != nil && !errors.Is(err, ErrNotAdmitted) && !errors.Is(err, kvpool.ErrFull) {
								errs <- fmt.Errorf("Put %v: %w", k, err)
								return
							}
						case 1:
							r.Touch(k, block.Hint{Depth: g.IntN(4), Parent: uint64(g.IntN(ids))})
						default:
							got, _, err := r.Get(ctx, k, buf)
							buf = got
							if err == nil && !bytes.Equal(got, reviewPayload(k, 64)) {
								errs <- fmt.Errorf("Get(%v) returned %q: another block's bytes", k, got[:min(len(got), 24)])
								return
							}
							if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
								errs <- fmt.Errorf("Get %v: %w", k, err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if err := r.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
