package ram

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
)

// chainTrace returns a request trace shaped like the conversation trace in
// miniature: each request's key list extends an earlier request's (a
// shared prefix) with fresh keys, so prefix chains form and most keys are
// used once.
func chainTrace(seed uint64, requests int) [][]uint64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	var reqs [][]uint64
	next := uint64(1)
	for range requests {
		var keys []uint64
		if len(reqs) > 0 && rng.IntN(3) > 0 {
			base := reqs[len(reqs)-1-rng.IntN(min(len(reqs), 20))]
			keys = append(keys, base[:1+rng.IntN(len(base))]...)
		}
		for n := 1 + rng.IntN(6); n > 0; n-- {
			keys = append(keys, next)
			next++
		}
		reqs = append(reqs, keys)
	}
	return reqs
}

// TestHintsMatchSimulator checks that the tier's eviction policy sees what
// the simulator's does: every block of every request accessed first to
// last with its chain position (Depth, Parent), a Put of a resident key
// being a hit. A policy.Cache of the same policy driven the simulator's
// way (over the tier's policy keys) must hold exactly the tier's blocks
// after every request. The tier gets one slot more than the capacity and
// evicts down to the capacity after each Put, as Cache does.
func TestHintsMatchSimulator(t *testing.T) {
	const capacity = 64
	reqs := chainTrace(7, 600)
	for _, pol := range []string{"lru", "kvchain", "s3fifo", "arc"} {
		t.Run(pol, func(t *testing.T) {
			w := float64(capacity) / float64(capacity+1)
			o := small(16, capacity+1)
			o.Eviction, o.HighWatermark, o.LowWatermark = pol, w, w
			r := mustOpen(t, o)
			// The tier sizes its policy for its high watermark: capacity.
			ev, err := policy.NewEviction(pol, capacity)
			if err != nil {
				t.Fatal(err)
			}
			sim := policy.NewCache(capacity, ev, nil)
			p := []byte("payload")
			hits, simHits := 0, 0
			for i, keys := range reqs {
				for j, id := range keys {
					k := key(id)
					h := block.Hint{Depth: j}
					a := policy.Access{Key: PolicyKey(k), Hint: block.Hint{Depth: j}, NextUse: policy.NoNextUse}
					if j > 0 {
						h.Parent = keys[j-1]
						a.Parent = PolicyKey(key(keys[j-1]))
					}
					if sim.Access(a) {
						simHits++
					}
					// The replayer touches the blocks its node holds and
					// puts the others.
					if r.Touch(k, h) {
						hits++
						continue
					}
					if _, err := r.Insert(ctx, k, p, block.Checksum(k, p), InsertOptions{Hint: h}); err != nil {
						t.Fatalf("request %d block %d: %v", i, j, err)
					}
				}
				for _, keys := range reqs[:i+1] {
					for _, id := range keys {
						if got, want := r.Contains(key(id)), sim.Contains(PolicyKey(key(id))); got != want {
							t.Fatalf("after request %d: key %d resident %v in the tier, %v in the simulator's cache", i, id, got, want)
						}
					}
				}
			}
			if hits != simHits || hits == 0 {
				t.Fatalf("%d touches found their block, the simulator had %d hits (want equal and > 0)", hits, simHits)
			}
			if ev := r.Stats().Evicted; ev < uint64(len(reqs)) {
				t.Fatalf("%d evictions: the trace does not put the tier under pressure", ev)
			}
		})
	}
}

// TestPutResidentIsHit checks that a Put replacing a resident block keeps
// the key's policy history (a hit), where it used to re-enter the policy
// as a new slot.
func TestPutResidentIsHit(t *testing.T) {
	o := small(16, 3)
	o.Eviction = "lru"
	r := mustOpen(t, o)
	for _, id := range []uint64{1, 2, 3, 1, 4} {
		put(t, r, key(id), []byte{byte(id)})
	}
	for id, want := range map[uint64]bool{1: true, 2: false, 3: true, 4: true} {
		if got := r.Contains(key(id)); got != want {
			t.Errorf("key %d resident %v, want %v", id, got, want)
		}
	}
}

// TestTouch checks Touch: it refreshes a resident block's recency and
// reports residency, changes nothing for an absent one, and is not a read.
func TestTouch(t *testing.T) {
	tests := []struct {
		name    string
		touch   uint64
		want    bool
		evicted uint64 // by the next Put
	}{
		{"resident oldest", 1, true, 2},
		{"resident newest", 2, true, 1},
		{"absent", 9, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := small(16, 2)
			o.Eviction = "lru"
			r := mustOpen(t, o)
			put(t, r, key(1), []byte{1})
			put(t, r, key(2), []byte{2})
			if got := r.Touch(key(tt.touch), block.Hint{}); got != tt.want {
				t.Fatalf("Touch(%d) = %v, want %v", tt.touch, got, tt.want)
			}
			if r.Contains(key(9)) {
				t.Fatal("Touch of an absent key stored it")
			}
			put(t, r, key(3), []byte{3})
			if r.Contains(key(tt.evicted)) {
				t.Fatalf("key %d still resident; want it evicted", tt.evicted)
			}
			if st := r.Stats(); st.Hits != 0 || st.Misses != 0 {
				t.Fatalf("Touch counted %d hits and %d misses; it is not a read", st.Hits, st.Misses)
			}
		})
	}
	r := mustOpen(t, small(16, 2))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Touch(key(1), block.Hint{}) {
		t.Fatal("Touch on a closed tier reported a resident block")
	}
}

// TestPolicyKeyCollision checks that a block whose policy key is held by
// another tenant's resident block is refused (ErrNotAdmitted), not mixed
// up with it.
func TestPolicyKeyCollision(t *testing.T) {
	r := mustOpen(t, small(16, 4))
	a := block.Key{Tenant: "a", ID: 1}
	put(t, r, a, []byte{1})
	// Forge the collision: re-key a's slot to b's policy key.
	b := block.Key{Tenant: "b", ID: 1}
	r.mu.Lock()
	s := r.polObj[PolicyKey(a)]
	r.pol.Remove(PolicyKey(a))
	delete(r.polObj, PolicyKey(a))
	r.objs[s].pk = PolicyKey(b)
	r.polInsertLocked(s, policy.Access{Key: PolicyKey(b)})
	r.internLocked(b.Tenant)
	err := r.collisionLocked(b, PolicyKey(b))
	// Undo, so Check passes.
	r.pol.Remove(PolicyKey(b))
	delete(r.polObj, PolicyKey(b))
	r.objs[s].pk = PolicyKey(a)
	r.polInsertLocked(s, policy.Access{Key: PolicyKey(a)})
	r.mu.Unlock()
	if !errors.Is(err, ErrNotAdmitted) {
		t.Fatalf("collision: got %v, want ErrNotAdmitted", err)
	}
}
