package store

import (
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
)

const benchSize = 256 << 10

// benchStore is a store of 16 RAM slots over a 64-slot SSD on MemFS
// holding blocks 0..47: 0..31 on SSD only, 32..47 in RAM.
func benchStore(b *testing.B) *Store {
	o := testOpts(benchSize, 16, vfs.NewMem(), 64)
	o.Promotion.Off = true // keep the placement fixed
	s, err := Open(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for i := range uint64(48) {
		p := tiertest.Payload(i, 1, benchSize)
		if _, err := s.Put(ctx, key(i), p, block.Checksum(key(i), p)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func reportGBs(b *testing.B, size int) {
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/sec/1e9, "GB/s")
	}
}

// BenchmarkGet reads blocks from each tier (SSD on MemFS: this measures
// the store's and the SSD tier's own overhead — copy and verification —
// not a device).
func BenchmarkGet(b *testing.B) {
	for _, tc := range []struct {
		name  string
		first uint64
	}{{"ram", 32}, {"ssd", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchStore(b)
			dst := make([]byte, 0, benchSize)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				var err error
				var from Location
				if dst, _, from, err = s.Get(ctx, key(tc.first+uint64(i%16)), dst); err != nil || (from == InRAM) != (tc.name == "ram") {
					b.Fatalf("Get: from %v, %v", from, err)
				}
			}
			reportGBs(b, benchSize)
		})
	}
}

// BenchmarkPutDemote puts blocks into a full RAM tier: every Put demotes
// one block to SSD (MemFS) before storing its own.
func BenchmarkPutDemote(b *testing.B) {
	s := benchStore(b)
	ps := make([][]byte, 48)
	for i := range ps {
		ps[i] = tiertest.Payload(uint64(i), 2, benchSize)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i % len(ps)
		k := key(uint64(j))
		if _, err := s.Put(ctx, k, ps[j], block.Checksum(k, ps[j])); err != nil {
			b.Fatal(err)
		}
	}
	reportGBs(b, benchSize)
	st := s.Stats()
	b.ReportMetric(float64(st.Demotions)/float64(b.N), "demotions/op")
}
