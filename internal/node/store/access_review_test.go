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
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/vfs"
)

// Review tests (adversarial review of hinted puts and touches).

func reviewPayload(k block.Key) []byte {
	return fmt.Appendf(nil, "%s/%016x/%s", k.Tenant, k.ID, bytes.Repeat([]byte{byte(k.ID)}, 16))
}

// TestReviewPutHintedBadChecksumNeverStored: a hinted put with a wrong
// checksum is refused with kvpool.ErrCorrupt and stored nowhere — not in RAM
// and not written around to SSD — even when RAM would refuse the block
// anyway (its policy key is another tenant's), and an older good copy of
// the key is kept.
func TestReviewPutHintedBadChecksumNeverStored(t *testing.T) {
	alice := block.Key{Tenant: "alice", ID: 5}
	bob := block.Key{Tenant: "bob", ID: ram.PublicCollision(alice, "bob")}
	if ram.PolicyKey(alice) != ram.PolicyKey(bob) {
		t.Fatal("no collision")
	}
	s := mustOpen(t, testOpts(64, 4, vfs.NewMem(), 8))
	put(t, s, alice, reviewPayload(alice))
	good := block.Key{Tenant: "bob", ID: 9}
	put(t, s, good, reviewPayload(good))
	for _, c := range []struct {
		name string
		k    block.Key
		sum  func(k block.Key, p []byte) uint32
	}{
		{"RAM would take it", block.Key{Tenant: "bob", ID: 6}, func(k block.Key, p []byte) uint32 { return block.Checksum(k, p) ^ 1 }},
		{"RAM refuses its policy key", bob, func(k block.Key, p []byte) uint32 { return block.Checksum(k, p) ^ 1 }},
		{"another tenant's checksum", block.Key{Tenant: "bob", ID: 7}, func(k block.Key, p []byte) uint32 {
			return block.Checksum(block.Key{Tenant: "alice", ID: k.ID}, p)
		}},
		{"over a good copy", good, func(k block.Key, p []byte) uint32 { return block.Checksum(k, p) + 1 }},
	} {
		p := []byte("forged block")
		_, err := s.PutHinted(ctx, c.k, p, c.sum(c.k, p), block.Hint{Depth: 1, Parent: 1})
		if !errors.Is(err, kvpool.ErrCorrupt) {
			t.Errorf("%s: PutHinted = %v; want kvpool.ErrCorrupt", c.name, err)
		}
		if c.k == good {
			mustGet(t, s, good, reviewPayload(good))
			continue
		}
		if s.Contains(c.k) {
			t.Errorf("%s: the forged block is stored", c.name)
		}
		mustMiss(t, s, c.k)
	}
	mustGet(t, s, alice, reviewPayload(alice))
}

// TestReviewTouchRacingDemotion: touches race hinted puts that evict
// (demoting to SSD), gets and deletes, over three tenants, one of whose
// IDs collide with another's policy keys. Every Get returns exactly its
// key's bytes or a miss, never another block's, and the store is
// consistent afterwards (mustOpen's cleanup checks it). Run with -race.
func TestReviewTouchRacingDemotion(t *testing.T) {
	const ids = 16
	s := mustOpen(t, testOpts(64, 4, vfs.NewMem(), 12))
	keyOf := func(g *rand.Rand) block.Key {
		id := uint64(g.IntN(ids))
		switch g.IntN(3) {
		case 0:
			return block.Key{Tenant: "alice", ID: id}
		case 1:
			return block.Key{Tenant: "bob", ID: id}
		}
		return block.Key{Tenant: "mallory", ID: ram.PublicCollision(block.Key{Tenant: "alice", ID: id}, "mallory")}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := rand.New(rand.NewPCG(uint64(w), 3))
			for range 1500 {
				k := keyOf(g)
				switch g.IntN(8) {
				case 0, 1, 2:
					p := reviewPayload(k)
					if _, err := s.PutHinted(ctx, k, p, block.Checksum(k, p), block.Hint{Depth: g.IntN(3), Parent: uint64(g.IntN(ids))}); err != nil && !errors.Is(err, kvpool.ErrFull) {
						errs <- fmt.Errorf("PutHinted %v: %w", k, err)
						return
					}
				case 3, 4:
					s.Touch(k, block.Hint{Depth: g.IntN(3), Parent: uint64(g.IntN(ids))})
				case 5:
					if err := s.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						errs <- fmt.Errorf("Delete %v: %w", k, err)
						return
					}
				default:
					got, _, from, err := s.Get(ctx, k, nil)
					if err == nil && !bytes.Equal(got, reviewPayload(k)) {
						errs <- fmt.Errorf("Get(%v) from %v returned %q: another block's bytes", k, from, got)
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
}
