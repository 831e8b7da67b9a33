package sim

import (
	"context"
	"testing"

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
