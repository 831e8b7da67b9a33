package master

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/meta"
)

// benchMaster returns a master with 4 nodes holding blocks 0..nBlocks-1 of
// tenant "t" (each block in RAM on one node and on SSD on the next), with
// room to spare so no eviction runs.
func benchMaster(b *testing.B, nBlocks int) *Master {
	m, err := New(Options{NodeTTL: time.Hour, LeaseTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	const nNodes = 4
	invs := make([]meta.Inventory, nNodes)
	for id := range uint64(nBlocks) {
		i := int(id % nNodes)
		invs[i] = append(invs[i], ram("t", id)...)
		invs[(i+1)%nNodes] = append(invs[(i+1)%nNodes], ssd("t", id)...)
	}
	for i, inv := range invs {
		id := meta.NodeID(fmt.Sprint("n", i))
		if _, err := m.Register(meta.NodeInfo{ID: id, Addr: "h:1", RAMBytes: 1 << 40, SSDBytes: 1 << 40, BlockSize: 100}, inv, meta.NodeUsage{}); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

// BenchmarkLookup32 measures in-process lookups of 32-key prefixes (every
// key present, two replicas each) from parallel goroutines.
func BenchmarkLookup32(b *testing.B) {
	const batch, nBlocks = 32, 1 << 16
	m := benchMaster(b, nBlocks)
	for _, lease := range []bool{false, true} {
		b.Run(fmt.Sprintf("lease=%v", lease), func(b *testing.B) {
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 0))
				var res meta.LookupResult
				ids := make([]uint64, batch)
				for pb.Next() {
					start := rng.Uint64N(nBlocks - batch)
					for i := range ids {
						ids[i] = start + uint64(i)
					}
					if err := m.Lookup("t", ids, lease, &res); err != nil || res.Hit != batch {
						b.Errorf("lookup: hit %d, err %v", res.Hit, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)*batch/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// BenchmarkStats measures one Stats call (a metrics scrape) on an index
// of 4M keys, two replicas each, half of them leased.
func BenchmarkStats(b *testing.B) {
	const nBlocks = 1 << 22
	m := benchMaster(b, nBlocks)
	var res meta.LookupResult
	ids := make([]uint64, 1024)
	for i := 0; i < nBlocks/2; i += len(ids) {
		for j := range ids {
			ids[j] = uint64(2*(i+j)) % nBlocks
		}
		if err := m.Lookup("t", ids, true, &res); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		st := m.Stats()
		if st.RAMReplicas != nBlocks {
			b.Fatalf("%d RAM replicas, want %d", st.RAMReplicas, nBlocks)
		}
	}
}
