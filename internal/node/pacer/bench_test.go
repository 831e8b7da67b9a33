package pacer

import (
	"context"
	"testing"
	"time"
)

// BenchmarkWaitUnlimited is the cost a paced path pays when pacing is off:
// one atomic load.
func BenchmarkWaitUnlimited(b *testing.B) {
	p, _ := New(Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Wait(ctx, 256<<10)
	}
}

// BenchmarkWaitUnlimitedParallel shows that unlimited mode has no lock
// contention.
func BenchmarkWaitUnlimitedParallel(b *testing.B) {
	p, _ := New(Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = p.Wait(ctx, 256<<10)
		}
	})
}

// BenchmarkWaitLimitedNoSleep is the bookkeeping cost of a limited pacer
// whose rate is high enough that no call sleeps (lock, clock read, bucket
// arithmetic).
func BenchmarkWaitLimitedNoSleep(b *testing.B) {
	p, _ := New(Options{Rate: 1e15, Burst: 1 << 40})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Wait(ctx, 4096)
	}
}

// BenchmarkWaitLimitedParallelNoSleep is the same under contention.
func BenchmarkWaitLimitedParallelNoSleep(b *testing.B) {
	p, _ := New(Options{Rate: 1e15, Burst: 1 << 40})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = p.Wait(ctx, 4096)
		}
	})
}

// BenchmarkPacedThroughput paces real time: 64 KiB chunks through a
// 512 MiB/s pacer on the system clock, and reports the achieved rate as a
// fraction of the configured one (1.0 is exact; below 1 is timer overshoot
// the bucket could not absorb) and the share of the time spent sleeping.
// With a burst of one chunk every timer overshoot is lost; the default
// burst (10 ms of rate) absorbs it.
func BenchmarkPacedThroughput(b *testing.B) {
	const rate, chunk = 512 << 20, 64 << 10
	for _, bc := range []struct {
		name  string
		burst float64
	}{{"burst=chunk", chunk}, {"burst=default", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			p, _ := New(Options{Rate: rate, Burst: bc.burst})
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(chunk)
			// Drain the initial burst so that it does not count.
			_ = p.Wait(ctx, int(p.effectiveBurst()))
			start := time.Now()
			for b.Loop() {
				_ = p.Wait(ctx, chunk)
			}
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)*chunk/el/rate, "achieved/target")
			b.ReportMetric(p.Waited().Seconds()/el, "wait-share")
		})
	}
}
