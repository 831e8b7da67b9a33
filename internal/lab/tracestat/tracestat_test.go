package tracestat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/trace"
	"github.com/kvpool/kvpool/trace/tracetest"
)

func req(ts int64, in, out int, ids ...uint64) trace.Request {
	return trace.Request{Timestamp: ts, InputLength: in, OutputLength: out, HashIDs: ids}
}

func TestComputeHandTrace(t *testing.T) {
	// Accesses in order: 1,2 | 1,2,3 | 4 | 1,5,3.
	reqs := []trace.Request{
		req(0, 1024, 10, 1, 2),
		req(1000, 1500, 20, 1, 2, 3),
		req(2000, 512, 30, 4),
		req(4000, 1200, 40, 1, 5, 3),
	}
	want := Stats{
		Requests:       4,
		SpanSeconds:    4,
		RatePerSecond:  1,
		Input:          Dist{Mean: 1059, Median: 1024, P99: 1500, Max: 1500, Sum: 4236},
		Output:         Dist{Mean: 25, Median: 20, P99: 40, Max: 40, Sum: 100},
		TotalBlocks:    9,
		UniqueBlocks:   5,
		UsedOnceBlocks: 2, // 4 and 5
		UsedOnceShare:  0.4,
		InfiniteCache: HitRatio{
			// r2 hits 1,2 (1024 tokens); r4 hits 1 (512 tokens).
			HitTokens: 1536, InputTokens: 4236, TokenRatio: 1536.0 / 4236,
			HitBlocks: 3, Blocks: 9, BlockRatio: 3.0 / 9,
		},
		Reuse: ReuseHistogram{
			// t3: 1 after {2} → 1; t4: 2 after {1} → 1;
			// t7: 1 after {2,3,4} → 3; t9: 3 after {4,1,5} → 3.
			FirstAccesses: 5,
			ReAccesses:    4,
			Buckets:       []Bucket{{0, 0, 0}, {1, 1, 2}, {2, 3, 2}},
		},
	}
	if got := Compute(reqs); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestComputeEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		reqs []trace.Request
		want Stats
	}{
		{"empty", nil, Stats{}},
		{"one request: zero span, zero rate", []trace.Request{req(7, 100, 5, 9)}, Stats{
			Requests: 1, Input: Dist{100, 100, 100, 100, 100}, Output: Dist{5, 5, 5, 5, 5},
			TotalBlocks: 1, UniqueBlocks: 1, UsedOnceBlocks: 1, UsedOnceShare: 1,
			InfiniteCache: HitRatio{InputTokens: 100, Blocks: 1},
			Reuse:         ReuseHistogram{FirstAccesses: 1},
		}},
		{"repeated id in a request: distance 0, no self hit; partial last block", []trace.Request{
			req(0, 1024, 1, 7, 7), req(0, 600, 1, 7, 8),
		}, Stats{
			Requests: 2, Input: Dist{812, 600, 1024, 1024, 1624}, Output: Dist{1, 1, 1, 1, 2},
			TotalBlocks: 4, UniqueBlocks: 2, UsedOnceBlocks: 1, UsedOnceShare: 0.5,
			// r2 hits block 7 only: min(512, 600) = 512 tokens.
			InfiniteCache: HitRatio{HitTokens: 512, InputTokens: 1624, TokenRatio: 512.0 / 1624, HitBlocks: 1, Blocks: 4, BlockRatio: 0.25},
			// 7 first, 7 at distance 0, 7 after {} → 0, 8 first.
			Reuse: ReuseHistogram{FirstAccesses: 2, ReAccesses: 2, Buckets: []Bucket{{0, 0, 2}}},
		}},
		{"hit tokens capped by input length", []trace.Request{
			req(0, 1000, 1, 1, 2), req(0, 700, 1, 1, 2),
		}, Stats{
			Requests: 2, Input: Dist{850, 700, 1000, 1000, 1700}, Output: Dist{1, 1, 1, 1, 2},
			TotalBlocks: 4, UniqueBlocks: 2,
			InfiniteCache: HitRatio{HitTokens: 700, InputTokens: 1700, TokenRatio: 700.0 / 1700, HitBlocks: 2, Blocks: 4, BlockRatio: 0.5},
			Reuse:         ReuseHistogram{FirstAccesses: 2, ReAccesses: 2, Buckets: []Bucket{{0, 0, 0}, {1, 1, 2}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compute(tt.reqs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// naiveDistances computes stack distances by brute force.
func naiveDistances(seq []uint64) (first int64, hist map[int]int64) {
	hist = map[int]int64{}
	for t, b := range seq {
		p := -1
		for j := t - 1; j >= 0; j-- {
			if seq[j] == b {
				p = j
				break
			}
		}
		if p < 0 {
			first++
			continue
		}
		distinct := map[uint64]bool{}
		for _, x := range seq[p+1 : t] {
			distinct[x] = true
		}
		hist[bucketOf(int64(len(distinct)))]++
	}
	return first, hist
}

func TestReuseDistanceMatchesBruteForce(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		universe := 1 + rng.IntN(200)
		var reqs []trace.Request
		var seq []uint64
		for range 1 + rng.IntN(60) {
			n := 1 + rng.IntN(10)
			ids := make([]uint64, n)
			for i := range ids {
				ids[i] = uint64(rng.IntN(universe))
			}
			seq = append(seq, ids...)
			reqs = append(reqs, req(0, n*trace.BlockTokens, 1, ids...))
		}
		s := Compute(reqs)
		first, hist := naiveDistances(seq)
		if s.Reuse.FirstAccesses != first {
			t.Fatalf("seed %d: first accesses %d, want %d", seed, s.Reuse.FirstAccesses, first)
		}
		for k, b := range s.Reuse.Buckets {
			if b.Count != hist[k] {
				t.Fatalf("seed %d: bucket %d-%d has %d, want %d", seed, b.Min, b.Max, b.Count, hist[k])
			}
			delete(hist, k)
		}
		if len(hist) != 0 {
			t.Fatalf("seed %d: buckets missing: %v", seed, hist)
		}
	}
}

func TestWriteTextAndJSON(t *testing.T) {
	s := Compute([]trace.Request{
		req(0, 1024, 10, 1, 2),
		req(1000, 1500, 20, 1, 2, 3),
		req(2000, 512, 30, 4),
		req(4000, 1200, 40, 1, 5, 3),
	})
	var buf bytes.Buffer
	if err := s.WriteText(&buf, "hand.jsonl"); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{
		"trace                            hand.jsonl\n",
		"requests                                  4\n",
		"unique blocks used once           2 (40.0%)\n",
		"infinite-cache token hit ratio       36.26%\n",
		"input            1059.0    1024  1500  1500\n",
		"first access                    5  55.56%\n",
		"2-3                             2  22.22%\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
	buf.Reset()
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Stats
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("JSON round trip: got %+v, want %+v", back, s)
	}
	if !strings.Contains(buf.String(), `"token_ratio": 0.3626`) {
		t.Errorf("JSON lacks token_ratio: %s", buf.String())
	}
}

func TestRead(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}` + "\n"
	s, err := Read(context.Background(), trace.NewReader(strings.NewReader(good+good), "g", trace.ReadOptions{}))
	if err != nil || s.Requests != 2 || s.InfiniteCache.HitBlocks != 2 {
		t.Fatalf("Read = %+v, %v", s, err)
	}
	_, err = Read(context.Background(), trace.NewReader(strings.NewReader(good+"oops\n"), "bad.jsonl", trace.ReadOptions{}))
	var le *trace.LineError
	if !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("bad line: err = %v, want LineError at line 2", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, trace.NewReader(strings.NewReader(good), "g", trace.ReadOptions{})); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 12031: "12,031", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}

// sharedTrace returns the path of a published trace in $KVPOOL_TRACE_DIR,
// or skips (see trace/tracetest).
func sharedTrace(tb testing.TB, file string) string {
	tb.Helper()
	return tracetest.Path(tb, file)
}

// TestPublishedTraces pins the figures of the published traces
// (docs/design.md, "The traces", gives requests and mean lengths; the ratios are this package's own
// measurement, recorded so a change shows up).
func TestPublishedTraces(t *testing.T) {
	for _, tt := range []struct {
		file         string
		requests     int
		meanIn       int
		meanOut      int
		tokenRatio   float64
		usedOnce     float64
		uniqueBlocks int64
	}{
		{"conversation_trace.jsonl", 12031, 12035, 343, 0.3736, 0.7585, 182790},
		{"synthetic_trace.jsonl", 3993, 15325, 149, 0.6512, 0.5845, 43924},
	} {
		t.Run(tt.file, func(t *testing.T) {
			reqs, err := trace.ReadFile(sharedTrace(t, tt.file), trace.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s := Compute(reqs)
			near := func(a, b, tol float64) bool { return a-b < tol && b-a < tol }
			if s.Requests != tt.requests || !near(s.Input.Mean, float64(tt.meanIn), 1) || !near(s.Output.Mean, float64(tt.meanOut), 1) ||
				!near(s.InfiniteCache.TokenRatio, tt.tokenRatio, 0.0001) || !near(s.UsedOnceShare, tt.usedOnce, 0.0001) || s.UniqueBlocks != tt.uniqueBlocks {
				t.Fatalf("got requests %d, mean in/out %.1f/%.1f, token ratio %.4f, used once %.4f, unique %d",
					s.Requests, s.Input.Mean, s.Output.Mean, s.InfiniteCache.TokenRatio, s.UsedOnceShare, s.UniqueBlocks)
			}
		})
	}
}

func BenchmarkComputeConversation(b *testing.B) {
	reqs, err := trace.ReadFile(sharedTrace(b, "conversation_trace.jsonl"), trace.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		Compute(reqs)
	}
	b.ReportMetric(float64(len(reqs))*float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
