package hitrate

import (
	"testing"

	"github.com/kvpool/kvpool/internal/policy"
)

// TestSharedTraces runs the published traces (skipped when absent): with
// room for every block, LRU reaches the infinite-cache ratio computed with
// a plain set; at 5,000 blocks Belady beats every online policy and every
// policy stays below the infinite cache.
func TestSharedTraces(t *testing.T) {
	for _, name := range []string{"conversation", "synthetic"} {
		t.Run(name, func(t *testing.T) {
			reqs, ok := loadShared(t, name)
			if !ok {
				t.Skipf("%s trace not found (see the log above)", name)
			}
			seen := make(map[uint64]bool)
			var hit, in int64
			for _, r := range reqs { // the published traces are in timestamp order
				h := 0
				for h < len(r.HashIDs) && seen[r.HashIDs[h]] {
					h++
				}
				for _, k := range r.HashIDs {
					seen[k] = true
				}
				hit += int64(r.HitTokens(h))
				in += int64(r.InputLength)
			}
			infinite := float64(hit) / float64(in)
			res, err := Run(reqs, Options{Capacity: len(seen)})
			if err != nil {
				t.Fatal(err)
			}
			if res.TokenHitRatio != infinite {
				t.Fatalf("LRU with room for all %d blocks: %v, infinite cache %v", len(seen), res.TokenHitRatio, infinite)
			}
			results, err := Sweep(t.Context(), reqs, SweepOptions{Policies: policy.Presets(), Capacities: []int{5000}})
			if err != nil {
				t.Fatal(err)
			}
			var belady float64
			for _, r := range results {
				if r.Policy == "belady" {
					belady = r.TokenHitRatio
				}
			}
			for _, r := range results {
				if r.TokenHitRatio <= 0 || r.TokenHitRatio > infinite {
					t.Errorf("%s: token hit ratio %v outside (0, %v]", r.Policy, r.TokenHitRatio, infinite)
				}
				if r.Policy != "belady" && r.TokenHitRatio >= belady {
					t.Errorf("%s: %v beats belady's %v", r.Policy, r.TokenHitRatio, belady)
				}
			}
		})
	}
}
