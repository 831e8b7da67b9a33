package store

import (
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/tier/ram"
)

// TestHintsReachRAMPolicy checks that PutHinted and Touch drive the RAM
// tier's eviction policy as the simulator drives its cache: a
// policy.Cache of the same policy, accessed with the same keys and chain
// positions, holds the same blocks after every request.
func TestHintsReachRAMPolicy(t *testing.T) {
	const capacity = 8
	reqs := [][]uint64{
		{1, 2, 3, 4}, {1, 2, 3, 4, 5, 6}, {7, 8, 9}, {1, 2, 10, 11}, {7, 8, 9, 12},
		{13, 14, 15, 16, 17}, {1, 2, 3, 4, 5, 6, 18}, {7, 19}, {13, 14, 20}, {1, 21, 22, 23},
	}
	for _, pol := range []string{"lru", "kvchain"} {
		t.Run(pol, func(t *testing.T) {
			w := float64(capacity) / float64(capacity+1)
			o := testOpts(16, capacity+1, nil, 0)
			o.RAM.Eviction, o.RAM.HighWatermark, o.RAM.LowWatermark = pol, w, w
			s := mustOpen(t, o)
			ev, err := policy.NewEviction(pol, capacity)
			if err != nil {
				t.Fatal(err)
			}
			ref := policy.NewCache(capacity, ev, nil)
			p := []byte("kv")
			touched := 0
			for i, keys := range reqs {
				for j, id := range keys {
					h := block.Hint{Depth: j}
					a := policy.Access{Key: ram.PolicyKey(key(id)), Hint: block.Hint{Depth: j}, NextUse: policy.NoNextUse}
					if j > 0 {
						h.Parent = keys[j-1]
						a.Parent = ram.PolicyKey(key(keys[j-1]))
					}
					ref.Access(a)
					if s.Touch(key(id), h) {
						touched++
						continue
					}
					if _, err := s.PutHinted(ctx, key(id), p, block.Checksum(key(id), p), h); err != nil {
						t.Fatalf("request %d: PutHinted %d: %v", i, id, err)
					}
				}
				for id := uint64(1); id <= 23; id++ {
					if got, want := s.Contains(key(id)), ref.Contains(ram.PolicyKey(key(id))); got != want {
						t.Fatalf("after request %d: block %d resident %v in the store, %v in the reference cache", i, id, got, want)
					}
				}
			}
			if touched == 0 {
				t.Fatal("no Touch found its block: the test exercises nothing")
			}
		})
	}
}

// TestTouchAbsent checks that Touch reports a block RAM does not hold and
// changes nothing, and fails on a closed store.
func TestTouchAbsent(t *testing.T) {
	s := mustOpen(t, testOpts(16, 4, nil, 0))
	if s.Touch(key(1), block.Hint{}) {
		t.Fatal("Touch of an absent block reported it resident")
	}
	if s.Contains(key(1)) {
		t.Fatal("Touch stored a block")
	}
	put := func(id uint64) {
		if _, err := s.Put(ctx, key(id), []byte{1}, block.Checksum(key(id), []byte{1})); err != nil {
			t.Fatal(err)
		}
	}
	put(1)
	if !s.Touch(key(1), block.Hint{Depth: 1, Parent: 9}) {
		t.Fatal("Touch of a resident block reported it absent")
	}
	closeChecked(t, s)
	if s.Touch(key(1), block.Hint{}) {
		t.Fatal("Touch on a closed store reported a resident block")
	}
}
