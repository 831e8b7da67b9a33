package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvpool/kvpool/trace"
)

// sharedTrace reads a shared trace file found by walking up from the
// package directory, or skips the test when it is absent.
func sharedTrace(tb testing.TB, name string) []trace.Request {
	tb.Helper()
	for _, dir := range []string{"../../../shared/traces", "../../shared/traces", "../../../../shared/traces"} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		reqs, err := trace.ReadFile(path, trace.ReadOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		return reqs
	}
	tb.Skipf("trace %s not found next to the repository", name)
	return nil
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
