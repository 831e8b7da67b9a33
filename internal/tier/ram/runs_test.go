package ram

import (
	"math/rand/v2"
	"testing"

	"github.com/kvpool/kvpool/block"
)

// smallRunChunks is the run length below which a run counts as small in
// BenchmarkRuns: 16 chunks of 4 KiB are 64 KiB, the piece size at which a
// writev costs what one contiguous write does (BenchmarkWritevShape in
// internal/node/nodeserver).
const smallRunChunks = 16

// BenchmarkRuns measures how the RAM tier's objects fragment under churn
// with reads: the LMCache mix (spaceMixes) written through a 256 MiB tier
// until 10× its size has passed, with three Touches of recently written
// objects per object written, so that the eviction order is not the
// allocation order. It reports, for the resident objects of at least
// 256 KiB, runs of adjacent chunks per object (one iovec per run when a
// GET sends it) and the share of their bytes in runs under 64 KiB, for
// each eviction policy a node is configured with.
func BenchmarkRuns(b *testing.B) {
	for _, ev := range []string{"lru", "lfu", "s3fifo", "arc", "kvchain"} {
		b.Run("eviction="+ev, func(b *testing.B) {
			var runs, objects, chunks, small int
			for i := range b.N {
				runs, objects, chunks, small = runsUnderReads(b, ev, uint64(i+1))
			}
			b.ReportMetric(float64(runs)/float64(max(objects, 1)), "runs/object")
			b.ReportMetric(float64(small)/float64(max(chunks, 1)), "small-run-share")
		})
	}
}

func runsUnderReads(b *testing.B, eviction string, seed uint64) (runs, objects, chunks, small int) {
	const capacity = 256 << 20
	r, err := Open(Options{CapacityBytes: capacity, HighWatermark: 0.95, LowWatermark: 0.90, Eviction: eviction})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(seed, 16))
	src := make([]byte, 8<<20)
	var recent []block.Key
	for written := int64(0); written < 10*capacity; {
		keys, sizes := spaceMixes[0].next(rng, 0)
		for j, k := range keys {
			p := src[:sizes[j]]
			if err := r.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
				b.Fatalf("Put %s (%d bytes): %v", k, len(p), err)
			}
			written += int64(len(p))
			recent = append(recent, k)
		}
		for range 3 {
			r.Touch(recent[len(recent)-1-rng.IntN(min(len(recent), 400))], block.Hint{})
		}
	}
	if err := r.Check(); err != nil {
		b.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.objs {
		if m := &r.objs[i]; m.state == objLive && m.n >= 256<<10 {
			objects++
			for run := m.first; run >= 0; run = r.runNext[run] {
				runs++
				chunks += int(r.runLen[run])
				if r.runLen[run] < smallRunChunks {
					small += int(r.runLen[run])
				}
			}
		}
	}
	return runs, objects, chunks, small
}
