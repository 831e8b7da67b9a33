package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/tier"
)

// Shape of BenchmarkNodeGet. Each constant says where its value comes from.
const (
	// benchBlocks is the working set: 64 blocks, enough that random
	// reads spread over many slots, few enough that setup (64 PUTs,
	// demotions included) takes well under a second at 1 MiB.
	benchBlocks = 64
	// benchRAMBlocksRAM is the RAM tier of the "ram" case: 80 blocks, so
	// that the working set (64 blocks, 80 %) stays under the RAM
	// tier's default low watermark (config.DefaultRAMLowWatermark, 90 %)
	// and nothing is demoted.
	benchRAMBlocksRAM = 80
	// benchRAMBlocksSSD is the RAM tier of the "ssd" case: 2 blocks, so
	// that all but at most 2 blocks of the working set are demoted to SSD
	// (setup checks it).
	benchRAMBlocksSSD = 2
	// benchSSDFactor sizes the SSD tier at 4 × the working set, well
	// clear of its high watermark (ssd.DefaultHighWatermark, 95 %) with
	// every slot header counted.
	benchSSDFactor = 4
	// benchTenant is the tenant the blocks are stored under.
	benchTenant = "bench"
)

// BenchmarkNodeGet measures GET through a whole node (node.New + Run: the
// real store with its RAM tier and an SSD tier in a temporary directory
// on the real filesystem, the data-plane server, its metrics) over
// loopback through nodeclient, which verifies every block's checksum.
// Sub-benchmarks: tier ∈ {ram, ssd} × block ∈ {256 KiB, 1 MiB} × conns ∈
// {1, 4, 16}. Each connection has its own goroutine and nodeclient.Conn
// and reads random blocks of the tier under test into a reused buffer.
//
// The "ram" node holds the working set in RAM. The "ssd" node has a RAM
// tier of two blocks and promotion off (promotion.max_per_heartbeat 0),
// so the blocks demoted at PUT stay on SSD and every read of them is
// served by the SSD tier (sendfile from the slot file). Before timing,
// each block is read once and classified by the tier whose hit counter
// moved; the timed loop reads only blocks of the tier under test, and
// afterwards the node's counters must show exactly one hit on that tier
// per GET. The SSD tier syncs nothing (ssd.sync "none") to keep setup
// fast; reads do not depend on it. A small working set on SSD is read
// from the page cache: this measures the node's SSD read path, not the
// disk.
//
// It reports throughput (MB/s from SetBytes, and GB/s) and the
// 99th-percentile latency of one GET in µs, and the process's CPU seconds
// per GB (both ends; BenchmarkRawGet in internal/node/nodeserver is the raw
// reference in the same units).
func BenchmarkNodeGet(b *testing.B) {
	for _, tierName := range []string{"ram", "ssd"} {
		for _, size := range []int{256 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("tier=%s/block=%s", tierName, sizeName(size)), func(b *testing.B) {
				addr, ids := startBenchNode(b, tierName, size)
				for _, conns := range []int{1, 4, 16} {
					b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
						benchNodeGet(b, addr, tierName, ids, size, conns)
					})
				}
			})
		}
	}
}

func sizeName(size int) string {
	if size >= 1<<20 {
		return fmt.Sprintf("%dMiB", size>>20)
	}
	return fmt.Sprintf("%dKiB", size>>10)
}

// startBenchNode runs a node for the tier under test until the benchmark
// ends, stores the working set and returns the node's address and the
// ids of the blocks its tierName tier serves.
func startBenchNode(b *testing.B, tierName string, size int) (string, []uint64) {
	b.Helper()
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.BlockSize = config.Size(size)
	cfg.RAM.Bytes = config.Size(benchRAMBlocksRAM * size)
	cfg.SSD.Enabled = true
	cfg.SSD.Path = filepath.Join(b.TempDir(), "ssd")
	cfg.SSD.Bytes = config.Size(benchSSDFactor * benchBlocks * size)
	cfg.SSD.Sync = "none"
	if tierName == "ssd" {
		cfg.RAM.Bytes = config.Size(benchRAMBlocksSSD * size)
		cfg.Promotion.MaxPerHeartbeat = 0 // promotion off: SSD blocks stay on SSD
	}
	n, err := New(cfg, Options{})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	select {
	case <-n.Ready():
	case err := <-done:
		cancel()
		b.Fatalf("Run ended before the node was ready: %v", err)
	}
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	})

	c, err := nodeclient.Dial(ctx, n.Addr(), nodeclient.DialOptions{Tenant: benchTenant})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for id := range uint64(benchBlocks) {
		if err := c.Put(ctx, id, payload(id, size)); err != nil {
			b.Fatalf("Put %d: %v", id, err)
		}
	}
	st, err := tierStats(c)
	if err != nil {
		b.Fatal(err)
	}
	switch tierName {
	case "ram":
		if st["ram"].Blocks != benchBlocks {
			b.Fatalf("RAM tier holds %d blocks after %d puts, want all of them", st["ram"].Blocks, benchBlocks)
		}
	case "ssd":
		if want := benchBlocks - benchRAMBlocksSSD; st["ssd"].Blocks < want {
			b.Fatalf("SSD tier holds %d blocks after %d puts into a RAM tier of %d, want at least %d",
				st["ssd"].Blocks, benchBlocks, benchRAMBlocksSSD, want)
		}
	}

	// Classify every block by the tier that serves it; with promotion
	// off and no writes, reads move nothing between tiers.
	var ids []uint64
	dst := make([]byte, 0, size)
	for id := range uint64(benchBlocks) {
		if _, _, err := c.Get(ctx, id, dst); err != nil {
			b.Fatalf("Get %d: %v", id, err)
		}
		after, err := tierStats(c)
		if err != nil {
			b.Fatal(err)
		}
		if after[tierName].Hits == st[tierName].Hits+1 {
			ids = append(ids, id)
		}
		st = after
	}
	if want := benchBlocks - benchRAMBlocksSSD; len(ids) < want {
		b.Fatalf("the %s tier served %d of %d blocks, want at least %d", tierName, len(ids), benchBlocks, want)
	}
	return n.Addr(), ids
}

// tierStats returns the node's per-tier counters by tier name.
func tierStats(c *nodeclient.Conn) (map[string]tier.Stats, error) {
	ts, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]tier.Stats, len(ts))
	for _, t := range ts {
		out[t.Name] = t.Stats
	}
	return out, nil
}

// benchNodeGet runs b.N GETs of random blocks among ids, split evenly
// over conns connections, and checks that the tier under test served
// every one of them.
func benchNodeGet(b *testing.B, addr, tierName string, ids []uint64, size, conns int) {
	cs := make([]*nodeclient.Conn, conns)
	for i := range cs {
		c, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Tenant: benchTenant})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	before, err := tierStats(cs[0])
	if err != nil {
		b.Fatal(err)
	}
	// A fixed share per connection, so that each latency slice is
	// allocated once, before the timer starts.
	// The buffers too are allocated before the timer starts.
	lat := make([][]time.Duration, conns)
	dsts := make([][]byte, conns)
	for i := range lat {
		share := b.N / conns
		if i < b.N%conns {
			share++
		}
		lat[i] = make([]time.Duration, 0, share)
		dsts[i] = make([]byte, 0, size)
	}
	runtime.GC() // collect the setup's garbage (the PUT payloads) before timing
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuSeconds(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(conns)))
			dst := dsts[i]
			for range cap(lat[i]) {
				id := ids[rng.IntN(len(ids))]
				t0 := time.Now()
				p, _, err := c.Get(ctx, id, dst)
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil {
					b.Error(err)
					return
				}
				if len(p) != size {
					b.Errorf("Get %d: %d bytes, want %d", id, len(p), size)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu1 := cpuSeconds(b)

	after, err := tierStats(cs[0])
	if err != nil {
		b.Fatal(err)
	}
	if got := after[tierName].Hits - before[tierName].Hits; got != uint64(b.N) {
		b.Fatalf("the %s tier served %d of %d GETs, want all", tierName, got, b.N)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		p99 := all[min(len(all)-1, len(all)*99/100)]
		b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
	}
	reportCPU(b, size, cpu0, cpu1)
}
