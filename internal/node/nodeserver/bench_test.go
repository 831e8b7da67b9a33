package nodeserver_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/nodeserver/nodeservertest"
)

// benchBlocks is the number of distinct blocks a benchmark cycles through:
// 64 blocks are 16–64 MiB, enough to defeat CPU caches, small enough to stay
// in the page cache for the file-backed runs.
const benchBlocks = 64

// BenchmarkNodeGet measures GET over loopback through nodeclient (which
// verifies every block's checksum): RAM blocks sent with writev, file blocks
// with sendfile (page cache), for two block sizes and 1, 4 and 16
// connections each running GETs back to back. It reports throughput (MB/s
// from SetBytes, and GB/s), the 99th-percentile latency of one GET and the
// process's CPU seconds per GB (both ends; BenchmarkRawGet is the raw
// reference in the same units).
func BenchmarkNodeGet(b *testing.B) {
	for _, file := range []bool{false, true} {
		for _, size := range []int{256 << 10, 1 << 20} {
			for _, conns := range []int{1, 4, 16} {
				name := fmt.Sprintf("backend=ram/size=%dKiB/conns=%d", size>>10, conns)
				if file {
					name = fmt.Sprintf("backend=file/size=%dKiB/conns=%d", size>>10, conns)
				}
				b.Run(name, func(b *testing.B) { benchGet(b, file, false, size, conns) })
			}
		}
	}
}

// BenchmarkNodeGetNamed is BenchmarkNodeGet for named objects (GET named,
// verified against the name) of the sizes an LMCache-like workload stores:
// a 28-byte metadata record, a 32 KiB block and a 4 MiB chunk, from RAM
// (writev) with 1 and 4 connections.
func BenchmarkNodeGetNamed(b *testing.B) {
	for _, size := range []int{28, 32 << 10, 4 << 20} {
		for _, conns := range []int{1, 4} {
			b.Run(fmt.Sprintf("size=%dB/conns=%d", size, conns), func(b *testing.B) { benchGet(b, false, true, size, conns) })
		}
	}
}

// benchName is the name of benchmark object id: LMCache-like, 60 bytes.
func benchName(id uint64) string {
	return fmt.Sprintf("meta-llama/Llama-3.1-8B@1@0@%016x@bfloat16kv_bytes", id)
}

func benchGet(b *testing.B, file, named bool, size, conns int) {
	be := nodeservertest.NewBackend(b.TempDir())
	b.Cleanup(func() { be.Close() })
	for id := range uint64(benchBlocks) {
		k := block.Key{Tenant: "bench", ID: id}
		if named {
			k = block.Named("bench", benchName(id))
		}
		be.Store(k, payload(size, byte(id)))
		if file {
			if err := be.Spill(k); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	_, addr := nodeservertest.Start(b, nodeserver.Options{Backend: be})
	ctx := context.Background()
	cs := make([]*nodeclient.Conn, conns)
	for i := range cs {
		c, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Tenant: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	lat := make([][]time.Duration, conns)
	for i := range lat {
		lat[i] = make([]time.Duration, 0, b.N/conns+1)
	}
	var next atomic.Int64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuSeconds(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			dst := make([]byte, 0, size)
			var names [benchBlocks]string
			for id := range names {
				names[id] = benchName(uint64(id))
			}
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				t0 := time.Now()
				var err error
				if named {
					_, _, err = c.GetNamed(ctx, names[n%benchBlocks], dst)
				} else {
					_, _, err = c.Get(ctx, uint64(n%benchBlocks), dst)
				}
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		p99 := all[min(len(all)-1, len(all)*99/100)]
		b.ReportMetric(p99.Seconds()*1e6, "p99-µs")
	}
	reportCPU(b, size, cpu0)
}
