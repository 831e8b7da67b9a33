package ram

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
)

// benchSizes are the payload sizes of issue 15: a 32 KiB and a 256 KiB
// block (the live-run range), 1 MiB, and a 4 MiB object.
var benchSizes = []int{32 << 10, 256 << 10, 1 << 20, 4 << 20}

// benchObjects is how many objects of size bytes a benchmark tier holds:
// 64, fewer for large objects so the arena stays within 64 MiB.
func benchObjects(size int) int { return max(8, min(64, (64<<20)/size)) }

// benchTier returns a tier (default 4 KiB chunks) holding
// benchObjects(size) objects of size bytes, blocks 0..n-1, and the
// payloads and sums of blocks 0..2n-1.
func benchTier(b *testing.B, size int, o Options) (*RAM, [][]byte, []uint32) {
	n := benchObjects(size)
	o.BlockSize, o.CapacityBytes = size, int64(n*size)
	r, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	ps := make([][]byte, 2*n)
	sums := make([]uint32, 2*n)
	for i := range ps {
		ps[i] = tiertest.Payload(uint64(i), 1, size)
		sums[i] = block.Checksum(key(uint64(i)), ps[i])
		if i < n {
			if err := r.Put(ctx, key(uint64(i)), ps[i], sums[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	return r, ps, sums
}

func reportGBs(b *testing.B, size int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/s/1e9, "GB/s")
	}
}

// BenchmarkPut stores blocks into a full tier: every Put evicts one
// (through an OnEvict hook that does nothing) and copies the payload in.
func BenchmarkPut(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			r, ps, sums := benchTier(b, size, Options{OnEvict: func(Evicted) {}})
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := i % len(ps)
				if err := r.Put(ctx, key(uint64(j)), ps[j], sums[j]); err != nil {
					b.Fatal(err)
				}
			}
			reportGBs(b, size)
		})
	}
}

// BenchmarkGet copies resident blocks out, with and without checksum
// verification (the cost of VerifyReads).
func BenchmarkGet(b *testing.B) {
	for _, size := range benchSizes {
		for _, verify := range []bool{true, false} {
			b.Run(fmt.Sprintf("%dKiB/verify=%v", size>>10, verify), func(b *testing.B) {
				r, _, _ := benchTier(b, size, Options{SkipVerifyReads: !verify})
				dst := make([]byte, 0, size)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					var err error
					if dst, _, err = r.Get(ctx, key(uint64(i%benchObjects(size))), dst); err != nil {
						b.Fatal(err)
					}
				}
				reportGBs(b, size)
			})
		}
	}
}

// BenchmarkView hands resident blocks to a callback in place (what a
// writev sender does); the callback touches one byte per page so the
// payload is really reached.
func BenchmarkView(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			r, _, _ := benchTier(b, size, Options{})
			var sink byte
			fn := func(segs tier.Segments, _ uint32) error {
				for _, p := range segs {
					for i := 0; i < len(p); i += 4096 {
						sink ^= p[i]
					}
				}
				return nil
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := r.View(key(uint64(i%benchObjects(size))), fn); err != nil {
					b.Fatal(err)
				}
			}
			reportGBs(b, size)
			_ = sink
		})
	}
}

// BenchmarkParallelGet measures Get throughput with every core reading.
func BenchmarkParallelGet(b *testing.B) {
	size := 256 << 10
	r, _, _ := benchTier(b, size, Options{})
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]byte, 0, size)
		for pb.Next() {
			var err error
			if dst, _, err = r.Get(ctx, key(next.Add(1)%64), dst); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportGBs(b, size)
}

// BenchmarkSpace fills a 256 MiB tier (4 KiB chunks, watermarks 0.95 and
// 0.90) with each mix of spaceMixes until 10× its size has been written,
// and reports the space the resident objects hold per payload byte
// (held/payload, issue 15's target ≤ 1.10) and how full the tier is
// (payload/capacity), and into how many runs of adjacent chunks (the
// Segments a reader gets) the resident objects fall.
func BenchmarkSpace(b *testing.B) {
	for _, mix := range spaceMixes {
		b.Run(mix.name, func(b *testing.B) {
			var res spaceResult
			for i := range b.N {
				res = runSpace(b, 256<<20, mix, uint64(i+1))
			}
			b.ReportMetric(float64(res.held)/float64(res.payload), "held/payload")
			b.ReportMetric(float64(res.payload)/float64(res.capacity), "payload/capacity")
			b.ReportMetric(float64(res.objects), "objects")
			b.ReportMetric(float64(res.runs)/float64(res.objects), "runs/object")
		})
	}
}
