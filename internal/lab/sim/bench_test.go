package sim

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/trace"
	"github.com/kvpool/kvpool/trace/tracetest"
)

// sharedTrace reads a published trace file from $KVPOOL_TRACE_DIR, or
// skips the test when it is absent (see trace/tracetest).
func sharedTrace(tb testing.TB, name string) []trace.Request {
	tb.Helper()
	reqs, err := trace.ReadFile(tracetest.Path(tb, name), trace.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return reqs
}

// BenchmarkSimConversation runs the full conversation trace on the paper's
// cluster (10 instances × 5,859 blocks, global mode, cache-aware routing).
func BenchmarkSimConversation(b *testing.B) {
	reqs := sharedTrace(b, "conversation_trace.jsonl")
	b.ReportAllocs()
	var res *Result
	for b.Loop() {
		var err error
		if res, err = Run(context.Background(), reqs, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(reqs))*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(res.Summary.TokenHitRatio, "token_hit_ratio")
	b.ReportMetric(res.Summary.TTFTMean, "ttft_mean_s")
}

// BenchmarkSimConversationJoint runs the same cluster with every joint
// mechanism on: joint routing, hot replication, redundant replicas first.
func BenchmarkSimConversationJoint(b *testing.B) {
	reqs := sharedTrace(b, "conversation_trace.jsonl")
	o := Options{Routing: RoutingJoint, Replication: ReplicateHot, EvictRedundantFirst: true}
	b.ReportAllocs()
	var res *Result
	for b.Loop() {
		var err error
		if res, err = Run(context.Background(), reqs, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(reqs))*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(res.Summary.TokenHitRatio, "token_hit_ratio")
	b.ReportMetric(res.Summary.TTFTMean, "ttft_mean_s")
}

// BenchmarkSimFleet runs generated chat traces (tracegen.ChatOptions, the
// arrival rate scaled to 0.34 req/s per instance as bench/simscale.sh
// does) on larger clusters, global mode, cache-aware routing: the cost per
// request as the cluster grows. The full grid up to 1,000 instances × 1M
// requests is bench/simscale.sh's.
func BenchmarkSimFleet(b *testing.B) {
	for _, c := range []struct{ instances, requests int }{
		{10, 12_000}, {100, 12_000}, {100, 100_000}, {1000, 30_000}, {1000, 100_000},
	} {
		b.Run(fmt.Sprintf("instances=%d/requests=%d", c.instances, c.requests), func(b *testing.B) {
			g := tracegen.ChatOptions()
			g.Requests, g.Rate = c.requests, 0.34*float64(c.instances)
			reqs, err := tracegen.Generate(g)
			if err != nil {
				b.Fatal(err)
			}
			o := Options{Instances: c.instances}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := Run(context.Background(), reqs, o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(len(reqs))/float64(b.N), "µs/request")
		})
	}
}
