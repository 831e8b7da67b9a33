package master

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/meta"
)

// BenchmarkDropNode1M measures how long Expire takes to drop a node
// holding 1M of the index's 2M replicas (1M keys, a RAM replica on node
// a and an SSD one on node b; Expire run here or lazily by a Lookup,
// which then pays for it), and what readers and the other node see
// meanwhile: the longest and median Lookup of 8 keys from one goroutine,
// and the longest heartbeat of node b, sent back to back from another
// (Expire removes the replicas without the membership lock, so they go on
// and share the CPU with the drop). Run with -benchtime=1x; one op is one
// drop.
// awaitSamples waits until each counter has counted one more sample.
func awaitSamples(counters ...*atomic.Int64) {
	for _, c := range counters {
		for from := c.Load(); c.Load() == from; {
			runtime.Gosched()
		}
	}
}

func BenchmarkDropNode1M(b *testing.B) {
	const nKeys = 1 << 20
	for range b.N {
		b.StopTimer()
		clk := newFakeClock()
		m, err := New(Options{Clock: clk, NodeTTL: 10 * time.Second, LeaseTTL: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]uint64, nKeys)
		for i := range ids {
			ids[i] = uint64(i)
		}
		sa, err := m.Register(info("a", 1<<50, 1<<50), ram("t", ids...), meta.NodeUsage{})
		if err != nil {
			b.Fatal(err)
		}
		sb, err := m.Register(info("b", 1<<50, 1<<50), ssd("t", ids...), meta.NodeUsage{})
		if err != nil {
			b.Fatal(err)
		}
		_ = sa
		clk.Advance(6 * time.Second)
		if _, err := m.Heartbeat("b", sb.Session, meta.Delta{}, meta.NodeUsage{}, nil, nil); err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var lookups []time.Duration
		var beats []time.Duration
		var nLookups, nBeats atomic.Int64 // samples taken so far
		wg.Go(func() {
			var res meta.LookupResult
			q := make([]uint64, 8)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				for j := range q {
					q[j] = uint64((i*8 + j*7919) % nKeys)
				}
				t0 := time.Now()
				if err := m.Lookup("t", q, true, &res); err != nil {
					b.Error(err)
					return
				}
				lookups = append(lookups, time.Since(t0))
				nLookups.Add(1)
			}
		})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched() // heartbeats back to back, yielding
				}
				t0 := time.Now()
				if _, err := m.Heartbeat("b", sb.Session, meta.Delta{}, meta.NodeUsage{}, nil, nil); err != nil {
					b.Error(err)
					return
				}
				beats = append(beats, time.Since(t0))
				nBeats.Add(1)
			}
		})
		awaitSamples(&nLookups, &nBeats) // both running
		b.StartTimer()
		t0 := time.Now()
		// a is now past its TTL, b is not. The next Lookup may run
		// Expire itself (lazily); this one then waits for it.
		clk.Advance(6 * time.Second)
		m.Expire()
		drop := time.Since(t0)
		b.StopTimer()
		awaitSamples(&nLookups, &nBeats) // both past the drop
		close(stop)
		wg.Wait()
		slices.Sort(lookups)
		slices.Sort(beats)
		b.ReportMetric(float64(drop.Milliseconds()), "drop-ms")
		if len(lookups) > 0 {
			b.ReportMetric(float64(lookups[len(lookups)-1].Microseconds()), "lookup-max-µs")
			b.ReportMetric(float64(lookups[len(lookups)/2].Microseconds()), "lookup-p50-µs")
		}
		if len(beats) > 0 {
			b.ReportMetric(float64(beats[len(beats)-1].Milliseconds()), "heartbeat-max-ms")
		}
		if res := lookup(b, m, "t", false, 0, 1); layout(res) != "b:ssd|b:ssd" {
			b.Fatalf("after the drop: %q", layout(res))
		}
	}
}
