package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/meta"
)

// Master-index target shape. Each constant says where its value comes from.
const (
	// DefaultIndexKeys is the index size of the master-index target when
	// Spec.Keys is 0: 1M keys, the smallest size of BENCHMARKS.md's table.
	DefaultIndexKeys = 1_000_000
	// MaxIndexKeys bounds Spec.Keys: 1e9 keys, ten times the largest size
	// the issue asks about (100M), far beyond one machine's memory today.
	MaxIndexKeys = 1_000_000_000
	// indexNodes is the number of nodes the keys are spread over: 4, as
	// the master package's BenchmarkLookup32.
	indexNodes = 4
	// indexDelta is the number of keys one heartbeat delta adds: 4096,
	// the protocol's batch limit (masterproto.DefaultMaxBatch), what a
	// node's delta of a busy second holds at most per frame.
	indexDelta = 4096
	// indexNodeRAM is each node's RAM in the index: 1 PiB, so that no
	// index size the target accepts goes over the eviction watermark.
	indexNodeRAM = 1 << 50
	// indexSlot is each node's RAM chunk (NodeInfo.BlockSize), the
	// node's default (config.DefaultRAMChunkBytes, 4 KiB).
	indexSlot = 4 << 10
)

// indexID is the chain id of key i of the index: Mix64(i+1), a bijection,
// so the ids are distinct and look like the chain hashes of real prefixes.
func indexID(i uint64) uint64 { return block.Mix64(i + 1) }

// masterIndexTarget builds a master's index of Spec.Keys keys in process
// (one RAM replica each, spread over indexNodes nodes, added through
// Register and Heartbeat deltas as nodes report them) and looks up
// batches of random present keys through Master.Lookup with leases, as a
// get does. It reports the index's bytes per key (heap in use after a
// full GC, less the heap before the master was built, over the keys), the
// build time, the time of a full GC with the index built, and the GC
// pauses over build and run.
type masterIndexTarget struct {
	m                                       *master.Master
	keys                                    int64
	heap0                                   uint64 // heap in use before the master was made
	pause0                                  *metrics.Float64Histogram
	bytesPerKey, buildSeconds, fullGCMillis float64
	gcCycles0                               uint32
	// cpu0 is the process's CPU time when the timed run began.
	cpu0 time.Duration
}

func (t *masterIndexTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	t.keys = spec.Keys
	if t.keys == 0 {
		t.keys = DefaultIndexKeys
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0, cycles0 := ms.HeapAlloc, ms.NumGC
	t.heap0, t.gcCycles0 = heap0, cycles0
	t.pause0 = gcPauses()
	t0 := time.Now()
	m, err := master.New(master.Options{NodeTTL: time.Hour, HeartbeatInterval: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("create master: %w", err)
	}
	t.m = m
	if err := buildIndex(ctx, m, t.keys, int64(spec.BlockSize), spec); err != nil {
		return nil, err
	}
	t.buildSeconds = time.Since(t0).Seconds()
	runtime.GC() // the deltas' garbage
	g0 := time.Now()
	runtime.GC()
	t.fullGCMillis = float64(time.Since(g0).Microseconds()) / 1e3
	runtime.ReadMemStats(&ms)
	t.bytesPerKey = (float64(ms.HeapAlloc) - float64(heap0)) / float64(t.keys)
	if spec.Progress != nil {
		fmt.Fprintf(spec.Progress, "master-index: %d keys built in %.1f s, %.1f bytes/key, full GC %.1f ms\n",
			t.keys, t.buildSeconds, t.bytesPerKey, t.fullGCMillis)
	}
	t.cpu0 = processCPU()
	ws := make([]Worker, spec.Conns*spec.Depth)
	for i := range ws {
		ws[i] = &indexWorker{m: m, n: uint64(t.keys), ids: make([]uint64, spec.Batch), rng: rand.New(rand.NewPCG(uint64(i)+1, 0x6b7670))}
	}
	return ws, nil
}

// buildIndex registers indexNodes nodes and adds keys 0..n-1 to the index
// through heartbeat deltas of indexDelta keys, key i on node i mod
// indexNodes.
func buildIndex(ctx context.Context, m *master.Master, n, size int64, spec Spec) error {
	ids := make([]meta.NodeID, indexNodes)
	sessions := make([]meta.Session, indexNodes)
	for i := range ids {
		ids[i] = meta.NodeID(fmt.Sprintf("index-node-%d", i))
		info := meta.NodeInfo{ID: ids[i], Addr: fmt.Sprintf("127.0.0.1:%d", 7490+i), RAMBytes: indexNodeRAM, BlockSize: indexSlot}
		r, err := m.Register(info, nil, meta.NodeUsage{})
		if err != nil {
			return fmt.Errorf("register %s: %w", ids[i], err)
		}
		sessions[i] = r.Session
	}
	added := make([]meta.Item, 0, indexDelta)
	next := time.Now().Add(10 * time.Second)
	for start := int64(0); start < n; start += indexDelta * indexNodes {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("build index: %w", err)
		}
		for j := range int64(indexNodes) {
			added = added[:0]
			for i := start + j; i < min(n, start+indexDelta*indexNodes); i += indexNodes {
				added = append(added, meta.Item{Key: block.Key{Tenant: benchTenant, ID: indexID(uint64(i))}, Tier: meta.TierRAM, Size: size, Sum: uint32(i)})
			}
			if len(added) == 0 {
				continue
			}
			if _, err := m.Heartbeat(ids[j], sessions[j], meta.Delta{Added: added}, meta.NodeUsage{}, nil, nil); err != nil {
				return fmt.Errorf("build index: add %d keys on %s: %w", len(added), ids[j], err)
			}
		}
		if spec.Progress != nil && time.Now().After(next) {
			next = time.Now().Add(10 * time.Second)
			fmt.Fprintf(spec.Progress, "master-index: %d of %d keys indexed\n", min(n, start+indexDelta*indexNodes), n)
		}
	}
	return nil
}

// Annotate adds the index's figures to the result. The heap is measured
// again last, after a full GC of its own, which the CPU time, the GC
// cycles and the pauses reported leave out.
func (t *masterIndexTarget) Annotate(res *Result) {
	p99, pmax := pauseQuantiles(t.pause0, gcPauses())
	var perCPU float64
	if cpu := processCPU() - t.cpu0; t.cpu0 > 0 && cpu > 0 {
		perCPU = float64(res.Ops) / cpu.Seconds()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cycles := int64(ms.NumGC - t.gcCycles0)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	res.Index = &IndexResult{
		KeysPerCPUSecond: perCPU,
		Keys:             t.keys,
		BytesPerKey:      t.bytesPerKey,
		BytesPerKeyAfter: (float64(ms.HeapAlloc) - float64(t.heap0)) / float64(t.keys),
		BuildSeconds:     t.buildSeconds,
		FullGCMillis:     t.fullGCMillis,
		GCCycles:         cycles,
		GCPauseP99Micros: p99 * 1e6,
		GCPauseMaxMicros: pmax * 1e6,
	}
}

func (t *masterIndexTarget) Close() error {
	t.m = nil
	return nil
}

// indexWorker looks up Batch random present keys per request, with a
// lease, and checks that every one is found.
type indexWorker struct {
	m   *master.Master
	n   uint64
	ids []uint64
	rng *rand.Rand
	res meta.LookupResult
}

func (w *indexWorker) Do(ctx context.Context) (Op, error) {
	for i := range w.ids {
		w.ids[i] = indexID(w.rng.Uint64N(w.n))
	}
	if err := w.m.Lookup(benchTenant, w.ids, true, &w.res); err != nil {
		return Op{}, fmt.Errorf("lookup %d keys: %w", len(w.ids), err)
	}
	if w.res.Hit != len(w.ids) {
		return Op{}, fmt.Errorf("lookup %d present keys: hit %d, want all", len(w.ids), w.res.Hit)
	}
	return Op{Ops: int64(len(w.ids))}, nil
}

// gcPauseMetric is the runtime's histogram of stop-the-world GC pauses.
const gcPauseMetric = "/gc/pauses:seconds"

// gcPauses returns a snapshot of the GC pause histogram.
func gcPauses() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: gcPauseMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// pauseQuantiles returns the 99th percentile and the maximum of the pauses
// counted between snapshots a and b, in seconds: each the upper bound of
// its histogram bucket (the lower bound for the open last bucket). 0, 0
// when there were no pauses.
func pauseQuantiles(a, b *metrics.Float64Histogram) (p99, pmax float64) {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0, 0
	}
	var total uint64
	d := make([]uint64, len(b.Counts))
	for i := range d {
		d[i] = b.Counts[i] - a.Counts[i]
		total += d[i]
	}
	if total == 0 {
		return 0, 0
	}
	upper := func(i int) float64 {
		if u := b.Buckets[i+1]; !math.IsInf(u, 1) {
			return u
		}
		return b.Buckets[i]
	}
	want := uint64(math.Ceil(0.99 * float64(total)))
	var cum uint64
	for i, c := range d {
		cum += c
		if c > 0 {
			pmax = upper(i)
		}
		if p99 == 0 && cum >= want {
			p99 = upper(i)
		}
	}
	return p99, pmax
}
