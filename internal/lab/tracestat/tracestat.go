// Package tracestat describes a request trace: its size and rate, the
// distributions of input and output lengths, how its blocks are reused (the
// share of blocks used only once, the infinite-cache prefix hit ratio) and
// a reuse-distance histogram. It is the numbers behind "kvpool trace stats".
package tracestat

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/kvpool/kvpool/trace"
)

// Stats are the figures of one trace. Lengths are in tokens, times in
// seconds. The JSON field names are stable.
type Stats struct {
	// Requests is the number of requests.
	Requests int `json:"requests"`
	// SpanSeconds is last timestamp minus first timestamp, in seconds.
	SpanSeconds float64 `json:"span_s"`
	// RatePerSecond is Requests / SpanSeconds (0 when the span is 0).
	RatePerSecond float64 `json:"arrival_rate_per_s"`
	// Input is the distribution of input (prompt) lengths.
	Input Dist `json:"input_length"`
	// Output is the distribution of output lengths.
	Output Dist `json:"output_length"`
	// TotalBlocks is the number of block accesses (sum of len(hash_ids)).
	TotalBlocks int64 `json:"total_blocks"`
	// UniqueBlocks is the number of distinct hash ids.
	UniqueBlocks int64 `json:"unique_blocks"`
	// UsedOnceBlocks is the number of distinct hash ids accessed exactly once.
	UsedOnceBlocks int64 `json:"used_once_blocks"`
	// UsedOnceShare is UsedOnceBlocks / UniqueBlocks.
	UsedOnceShare float64 `json:"used_once_share"`
	// InfiniteCache is the hit ratio of a cache that never evicts.
	InfiniteCache HitRatio `json:"infinite_cache"`
	// Reuse is the reuse-distance histogram over block accesses.
	Reuse ReuseHistogram `json:"reuse_distance"`
}

// Dist summarises a distribution of lengths. Quantiles use the nearest-rank
// definition: the q-quantile of n sorted values is value number ceil(q*n)
// (so the median of an even count is the lower middle value).
type Dist struct {
	// Mean is the arithmetic mean.
	Mean float64 `json:"mean"`
	// Median is the nearest-rank 50th percentile.
	Median int `json:"median"`
	// P99 is the nearest-rank 99th percentile.
	P99 int `json:"p99"`
	// Max is the largest value.
	Max int `json:"max"`
	// Sum is the total.
	Sum int64 `json:"sum"`
}

// HitRatio is the infinite-cache prefix hit ratio: a request's hit length
// is the longest prefix of its hash_ids all seen in EARLIER requests (the
// request's own blocks are added after it is checked); its hit tokens are
// min(hit_blocks*512, input_length).
type HitRatio struct {
	// HitTokens is the sum of hit tokens.
	HitTokens int64 `json:"hit_tokens"`
	// InputTokens is the sum of input lengths.
	InputTokens int64 `json:"input_tokens"`
	// TokenRatio is HitTokens / InputTokens: the headline figure.
	TokenRatio float64 `json:"token_ratio"`
	// HitBlocks is the sum of hit lengths in blocks.
	HitBlocks int64 `json:"hit_blocks"`
	// Blocks is the sum of request lengths in blocks.
	Blocks int64 `json:"blocks"`
	// BlockRatio is HitBlocks / Blocks.
	BlockRatio float64 `json:"block_ratio"`
}

// ReuseHistogram counts block accesses by stack distance. Accesses are the
// hash ids of the requests in trace order, each request's ids first to
// last. The distance of a re-access of block b is the number of distinct
// OTHER blocks accessed since the previous access of b (0: b was the last
// block accessed). An LRU cache of capacity C blocks hits exactly the
// re-accesses with distance < C.
type ReuseHistogram struct {
	// FirstAccesses counts accesses to a block never accessed before.
	FirstAccesses int64 `json:"first_accesses"`
	// ReAccesses counts the other accesses (the sum of the bucket counts).
	ReAccesses int64 `json:"re_accesses"`
	// Buckets are powers of two: [0,0], [1,1], [2,3], [4,7], ... up to the
	// largest distance seen; empty buckets in between are included.
	Buckets []Bucket `json:"buckets"`
}

// Bucket is one bucket of a ReuseHistogram: distances in [Min, Max].
type Bucket struct {
	// Min is the smallest distance in the bucket.
	Min int64 `json:"min"`
	// Max is the largest distance in the bucket.
	Max int64 `json:"max"`
	// Count is the number of re-accesses with a distance in [Min, Max].
	Count int64 `json:"count"`
}

// Accumulator computes Stats over requests added one at a time, in trace
// order. Memory is O(requests + block accesses); time is O(N log N) over
// N block accesses. The zero value is ready to use. An Accumulator is not
// safe for concurrent use.
type Accumulator struct {
	n             int
	first, last   int64
	inputs        []int
	outputs       []int
	uses          map[uint64]int64 // block → access count
	lastAccess    map[uint64]int   // block → 1-based time of its latest access
	fen           fenwick          // marks the latest access time of every block
	now           int
	hist          []int64
	firstAccesses int64
	hit           HitRatio
}

// New returns an empty Accumulator.
func New() *Accumulator { return &Accumulator{} }

// Add accounts for the next request of the trace.
func (a *Accumulator) Add(r trace.Request) {
	if a.uses == nil {
		a.uses = make(map[uint64]int64)
		a.lastAccess = make(map[uint64]int)
	}
	if a.n == 0 {
		a.first = r.Timestamp
	}
	a.last = r.Timestamp
	a.n++
	a.inputs = append(a.inputs, r.InputLength)
	a.outputs = append(a.outputs, r.OutputLength)

	// Infinite-cache prefix hit: check before adding the request's blocks.
	hit := 0
	for _, id := range r.HashIDs {
		if a.uses[id] == 0 {
			break
		}
		hit++
	}
	a.hit.HitBlocks += int64(hit)
	a.hit.Blocks += int64(len(r.HashIDs))
	a.hit.HitTokens += int64(r.HitTokens(hit))
	a.hit.InputTokens += int64(r.InputLength)

	for _, id := range r.HashIDs {
		a.uses[id]++
		a.now++
		t := a.now
		if p, ok := a.lastAccess[id]; ok {
			d := a.fen.prefix(t-1) - a.fen.prefix(p)
			a.fen.add(p, -1)
			a.record(int64(d))
		} else {
			a.firstAccesses++
		}
		a.fen.push(1)
		a.lastAccess[id] = t
	}
}

func (a *Accumulator) record(d int64) {
	b := bucketOf(d)
	for len(a.hist) <= b {
		a.hist = append(a.hist, 0)
	}
	a.hist[b]++
}

// bucketOf returns the histogram bucket of distance d: 0 for 0, else k for
// d in [2^(k-1), 2^k - 1].
func bucketOf(d int64) int {
	return bits.Len64(uint64(d))
}

// bucketRange returns the bounds of bucket k.
func bucketRange(k int) (lo, hi int64) {
	if k == 0 {
		return 0, 0
	}
	return 1 << (k - 1), 1<<k - 1
}

// Stats returns the figures for the requests added so far.
func (a *Accumulator) Stats() Stats {
	s := Stats{Requests: a.n}
	if a.n == 0 {
		return s
	}
	s.SpanSeconds = float64(a.last-a.first) / 1000
	if s.SpanSeconds > 0 {
		s.RatePerSecond = float64(a.n) / s.SpanSeconds
	}
	s.Input = dist(a.inputs)
	s.Output = dist(a.outputs)
	s.TotalBlocks = int64(a.now)
	s.UniqueBlocks = int64(len(a.uses))
	for _, c := range a.uses {
		if c == 1 {
			s.UsedOnceBlocks++
		}
	}
	s.UsedOnceShare = ratio(s.UsedOnceBlocks, s.UniqueBlocks)
	s.InfiniteCache = a.hit
	s.InfiniteCache.TokenRatio = ratio(a.hit.HitTokens, a.hit.InputTokens)
	s.InfiniteCache.BlockRatio = ratio(a.hit.HitBlocks, a.hit.Blocks)
	s.Reuse.FirstAccesses = a.firstAccesses
	for k, c := range a.hist {
		lo, hi := bucketRange(k)
		s.Reuse.Buckets = append(s.Reuse.Buckets, Bucket{Min: lo, Max: hi, Count: c})
		s.Reuse.ReAccesses += c
	}
	return s
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func dist(v []int) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	var sum int64
	for _, x := range s {
		sum += int64(x)
	}
	rank := func(q float64) int {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return Dist{
		Mean:   float64(sum) / float64(len(s)),
		Median: rank(0.50),
		P99:    rank(0.99),
		Max:    s[len(s)-1],
		Sum:    sum,
	}
}

// Compute returns the Stats of reqs, taken in order.
func Compute(reqs []trace.Request) Stats {
	a := New()
	for _, r := range reqs {
		a.Add(r)
	}
	return a.Stats()
}

// ctxCheckEvery is how many requests Read handles between context checks:
// about a millisecond of work, so cancellation is prompt but cheap.
const ctxCheckEvery = 1024

// Read computes the Stats of every remaining request of r, streaming. It
// stops early with ctx's error if ctx is cancelled.
func Read(ctx context.Context, r *trace.Reader) (Stats, error) {
	a := New()
	for i := 0; ; i++ {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return Stats{}, fmt.Errorf("tracestat: read %s: %w", r.Name(), err)
			}
		}
		req, err := r.Next()
		if err == io.EOF {
			return a.Stats(), nil
		}
		if err != nil {
			return Stats{}, fmt.Errorf("tracestat: %w", err)
		}
		a.Add(req)
	}
}

// fenwick is a binary indexed tree over positions 1..n that can grow by
// appending positions, with O(log n) add, prefix sum and append.
// Counts are int32: a count is at most the number of distinct blocks, and
// a trace with 2^31 distinct blocks would need far more memory elsewhere.
type fenwick struct {
	t []int32 // t[0] unused; node i covers (i - lowbit(i), i]
}

// push appends position n+1 with value v.
func (f *fenwick) push(v int32) {
	if len(f.t) == 0 {
		f.t = append(f.t, 0)
	}
	i := len(f.t)
	lo := i - (i & -i) // node i covers (lo, i]: sum (lo, i-1] from existing nodes
	f.t = append(f.t, f.prefix(i-1)-f.prefix(lo)+v)
}

// add adds v at position i (1-based, existing).
func (f *fenwick) add(i int, v int32) {
	for ; i < len(f.t); i += i & -i {
		f.t[i] += v
	}
}

// prefix returns the sum of positions 1..i.
func (f *fenwick) prefix(i int) int32 {
	var s int32
	for ; i > 0; i -= i & -i {
		s += f.t[i]
	}
	return s
}
