package ram

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvpool/kvpool/block"
)

// spaceMix is a workload of the space measurements (issue 15's targets).
type spaceMix struct {
	name string
	// next returns the keys and payload sizes of the next unit written.
	next func(rng *rand.Rand, i int) ([]block.Key, []int)
}

var spaceMixes = []spaceMix{
	{"lmcache", func(rng *rand.Rand, i int) ([]block.Key, []int) {
		// An LMCache chunk: a 28-byte metadata object and its KV bytes,
		// 1–8 MiB uniform, under LMCache's string keys.
		base := fmt.Sprintf("meta-llama/Llama-3.1-8B@1@0@%016x@bfloat16", rng.Uint64())
		return []block.Key{block.Named("t", base+"metadata"), block.Named("t", base+"kv_bytes")},
			[]int{28, 1<<20 + rng.IntN(7<<20+1)}
	}},
	{"32KiB", func(rng *rand.Rand, i int) ([]block.Key, []int) {
		return []block.Key{{Tenant: "t", ID: rng.Uint64()}}, []int{32 << 10}
	}},
}

// spaceResult is what a space run measured at its end.
type spaceResult struct {
	held, payload, capacity int64
	objects                 int
	runs                    int // runs of adjacent chunks of the resident objects
	written                 int64
}

// runSpace fills a tier of capacity bytes (4 KiB chunks, watermarks 0.95
// and 0.90, LRU) with mix until 10× its capacity has been written, and
// returns its space counters. Payload bytes come from one random buffer:
// their content does not change the space they take.
func runSpace(tb testing.TB, capacity int64, mix spaceMix, seed uint64) spaceResult {
	r, err := Open(Options{CapacityBytes: capacity, HighWatermark: 0.95, LowWatermark: 0.90})
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(seed, 15))
	src := make([]byte, 8<<20)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	var written int64
	for i := 0; written < 10*capacity; i++ {
		keys, sizes := mix.next(rng, i)
		for j, k := range keys {
			p := src[:sizes[j]]
			if err := r.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
				tb.Fatalf("Put %s (%d bytes): %v", k, len(p), err)
			}
			written += int64(len(p))
		}
	}
	if err := r.Check(); err != nil {
		tb.Fatal(err)
	}
	st := r.Stats()
	runs := 0
	r.mu.Lock()
	for i := range r.objs {
		if r.objs[i].state == objLive {
			for run := r.objs[i].first; run >= 0; run = r.runNext[run] {
				runs++
			}
		}
	}
	r.mu.Unlock()
	return spaceResult{held: st.HeldBytes, payload: st.Bytes, capacity: st.CapacityBytes, objects: st.Blocks, runs: runs, written: written}
}

// TestSpace: after 10× the tier's size has churned through it, the
// resident objects of either mix hold at most 10% more than their
// payload (issue 15's target), and the tier is filled to its watermarks.
func TestSpace(t *testing.T) {
	for _, mix := range spaceMixes {
		t.Run(mix.name, func(t *testing.T) {
			res := runSpace(t, 64<<20, mix, 1)
			ratio := float64(res.held) / float64(res.payload)
			fill := float64(res.payload) / float64(res.capacity)
			t.Logf("%d objects in %d runs: held/payload %.4f, payload/capacity %.3f", res.objects, res.runs, ratio, fill)
			if ratio > 1.10 || res.held < res.payload {
				t.Errorf("held/payload %.4f (%d / %d), want within [1, 1.10]", ratio, res.held, res.payload)
			}
			// LMCache objects are up to 8 MiB in a 64 MiB tier: after the
			// trim to 90% a Put of up to 8 MiB leaves it at least 75% full.
			if fill < 0.75 || fill > 0.95 {
				t.Errorf("payload/capacity %.3f, want within [0.75, 0.95]", fill)
			}
		})
	}
}
