package hitrate

import (
	"testing"

	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
	"github.com/kvpool/kvpool/trace/tracetest"
)

// loadShared reads a published trace from $KVPOOL_TRACE_DIR, or logs why
// it is absent (and how to set the variable; see trace/tracetest) and
// reports false.
func loadShared(tb testing.TB, name string) ([]trace.Request, bool) {
	tb.Helper()
	path, err := tracetest.Find(trace.FileName(name))
	if err != nil {
		tb.Log(err)
		return nil, false
	}
	reqs, err := trace.ReadFile(path, trace.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return reqs, true
}

// generated returns a deterministic trace the size of the conversation
// trace (12,031 requests, ~288,500 blocks, ~24 blocks each): half the
// requests extend a prefix of an earlier one, the rest start from one of
// 16 shared system prompts.
func generated() []trace.Request {
	const n, avg = 12031, 24
	s := uint64(0x9e3779b97f4a7c15)
	rnd := func(m int) int {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return int(s % uint64(m))
	}
	out := make([]trace.Request, 0, n)
	fresh := uint64(1 << 20)
	for i := range n {
		size := 1 + rnd(2*avg-1)
		ids := make([]uint64, 0, size)
		if i > 0 && rnd(2) == 0 {
			prev := out[max(0, i-1-rnd(2000))].HashIDs
			ids = append(ids, prev[:min(len(prev), 1+rnd(size))]...)
		} else {
			ids = append(ids, uint64(rnd(16)))
		}
		for len(ids) < size {
			fresh++
			ids = append(ids, fresh)
		}
		out = append(out, trace.Request{Timestamp: int64(i * 300), InputLength: len(ids) * trace.BlockTokens, OutputLength: 1, HashIDs: ids})
	}
	return out
}

func benchTrace(b *testing.B) []trace.Request {
	if reqs, ok := loadShared(b, "conversation"); ok {
		return reqs
	}
	b.Log("conversation trace absent: using a generated trace of the same size")
	return generated()
}

// BenchmarkHitrateLRU replays the conversation trace (or a generated one of
// its size) through one 5,000-block LRU cache and reports block accesses
// per second, end to end (including building the cache).
func BenchmarkHitrateLRU(b *testing.B) {
	benchPolicy(b, benchTrace(b), policy.Spec{Eviction: "lru"})
}

// BenchmarkHitratePolicies does the same for every preset policy.
func BenchmarkHitratePolicies(b *testing.B) {
	reqs := benchTrace(b)
	for _, s := range policy.Presets() {
		b.Run(s.String(), func(b *testing.B) { benchPolicy(b, reqs, s) })
	}
}

func benchPolicy(b *testing.B, reqs []trace.Request, spec policy.Spec) {
	b.ReportAllocs()
	var res Result
	for b.Loop() {
		var err error
		if res, err = Run(reqs, Options{Policy: spec, Capacity: 5000}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res.Accesses)*float64(b.N)/b.Elapsed().Seconds(), "accesses/s")
	b.ReportMetric(res.TokenHitRatio, "token-hit-ratio")
}
