package master

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// lruOrder returns the keys of the LRU order, least recently used first,
// read from the log's live records.
func lruOrder(m *Master) []block.Key {
	var out []block.Key
	for _, l := range lruOrderLinks(m) {
		s := &m.shards[l>>lruShardShift]
		_, ei := s.repAt(lruHandle(l))
		out = append(out, s.keyOf(s.ent(ei)))
	}
	return out
}

// TestLRULogIsExactLRU drives a master with the lru policy through
// leased lookups, removals and additions of tens of thousands of keys,
// enough for the log to be swept many times and its positions to wrap
// round, and checks after each round that the log's live records give
// exactly the order of a model LRU (each key stamped at its last access),
// that the log holds at most about twice the live records, and the
// index's invariants.
func TestLRULogIsExactLRU(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: time.Millisecond, RecencyResolution: time.Nanosecond})
	// Start just short of the positions' wrap, so that it happens early.
	m.lruLog.next = lruPosMask - 3*lruChunkLen
	const nKeys = 6 * lruChunkLen
	rng := rand.New(rand.NewPCG(7, 7))
	stamp := map[uint64]int{} // the model: id → the access that put it last
	clock := 0
	touch := func(id uint64) { clock++; stamp[id] = clock }

	ids := make([]uint64, 0, nKeys)
	for i := range uint64(nKeys) {
		ids = append(ids, i+1)
	}
	s := register(t, m, info("a", 1<<40, 0), nil)
	for i := 0; i < len(ids); i += 4096 {
		batch := ids[i:min(i+4096, len(ids))]
		heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", batch...)}, nil, nil)
		for _, id := range batch {
			touch(id)
		}
	}
	nextID := uint64(nKeys + 1)
	var res meta.LookupResult
	maxRecs := 0
	for round := range 40 {
		for range 200 {
			switch r := rng.IntN(10); {
			case r < 8: // a leased lookup of 32 distinct present keys
				keys := make([]block.Key, 0, 32)
				seen := map[uint64]bool{}
				for len(keys) < 32 {
					id := ids[rng.IntN(len(ids))]
					if !seen[id] {
						seen[id] = true
						keys = append(keys, key("t", id))
					}
				}
				clk.Advance(time.Millisecond) // past the recency resolution
				if err := m.Locate(keys, true, &res); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					touch(k.ID)
				}
			case r == 8: // the node drops a few keys
				var gone []meta.ItemKey
				for range 8 {
					i := rng.IntN(len(ids))
					id := ids[i]
					ids[i] = ids[len(ids)-1]
					ids = ids[:len(ids)-1]
					delete(stamp, id)
					gone = append(gone, meta.ItemKey{Key: key("t", id), Tier: meta.TierRAM})
				}
				heartbeat(t, m, "a", s, meta.Delta{Removed: gone}, nil, nil)
			default: // and stores a few new ones
				added := []uint64{nextID, nextID + 1, nextID + 2, nextID + 3, nextID + 4, nextID + 5, nextID + 6, nextID + 7}
				nextID += uint64(len(added))
				heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", added...)}, nil, nil)
				ids = append(ids, added...)
				for _, id := range added {
					touch(id)
				}
			}
			m.lruMu.Lock()
			recs, live := m.lruLog.recs, m.lruLog.live
			m.lruMu.Unlock()
			maxRecs = max(maxRecs, recs)
			if bound := 2*live + lruSlack + 2*lruChunkLen; recs > bound {
				t.Fatalf("round %d: the log holds %d records for %d live, over %d", round, recs, live, bound)
			}
		}
		got := lruOrder(m)
		want := make([]uint64, 0, len(stamp))
		for id := range stamp {
			want = append(want, id)
		}
		slices.SortFunc(want, func(a, b uint64) int { return cmp.Compare(stamp[a], stamp[b]) })
		if len(got) != len(want) {
			t.Fatalf("round %d: the log orders %d keys, the model %d", round, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i] {
				t.Fatalf("round %d: place %d (of %d, least recent first) holds %v, the model says t/%d", round, i, len(got), got[i], want[i])
			}
		}
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	m.lruMu.Lock()
	wrapped, sweepsSeen := m.lruLog.next < lruPosMask/2, m.lruLog.sweeps
	m.lruMu.Unlock()
	if sweepsSeen < 3 || !wrapped {
		t.Errorf("the run exercised too little: %d sweeps, positions wrapped %v", sweepsSeen, wrapped)
	}
	t.Logf("%d sweeps; the log held at most %d records for about %d keys", sweepsSeen, maxRecs, len(ids))
}

// TestLRULogVictims fills a pool past its watermark after touching its
// keys in a shuffled order, many times over so that the log has been
// swept, and checks that the eviction pass orders out the least recently
// touched keys, in that order.
func TestLRULogVictims(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: time.Millisecond, RecencyResolution: time.Nanosecond})
	const nKeys = 4 * lruChunkLen
	// 100-byte slots; the keys fill 0.94 of the RAM, under the high
	// watermark (0.95).
	s := register(t, m, info("a", 100*nKeys*100/94, 0), nil)
	ids := ids(1, nKeys)
	for i := 0; i < len(ids); i += 4096 {
		heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", ids[i:min(i+4096, len(ids))]...)}, nil, nil)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var order []uint64
	var res meta.LookupResult
	for range 8 { // eight shuffled passes over every key: 7/8 of the records go stale
		order = slices.Clone(ids)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for i := 0; i < len(order); i += 32 {
			keys := make([]block.Key, 0, 32)
			for _, id := range order[i:min(i+32, len(order))] {
				keys = append(keys, key("t", id))
			}
			clk.Advance(time.Millisecond)
			if err := m.Locate(keys, true, &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	clk.Advance(time.Second) // every lease has ended
	// Storing 300 more keys takes the pool over 0.95: a pass orders out
	// the least recent keys down to the low watermark (0.90).
	more := ids[:0:0]
	for i := range uint64(300) {
		more = append(more, nKeys+1+i)
	}
	reply := heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", more...)}, nil, nil)
	want := len(reply.Tasks)
	if want == 0 {
		t.Fatal("no eviction orders")
	}
	var got []string
	for _, task := range reply.Tasks {
		got = append(got, fmt.Sprint(task.Key.ID))
	}
	var exp []string
	for _, id := range order[:want] {
		exp = append(exp, fmt.Sprint(id))
	}
	if !slices.Equal(got, exp) {
		t.Fatalf("victims %v, want the %d least recently touched %v", got, want, exp)
	}
	if m.lruLog.sweeps == 0 {
		t.Errorf("the log was never swept")
	}
	t.Logf("%d victims, %d sweeps", want, m.lruLog.sweeps)
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
