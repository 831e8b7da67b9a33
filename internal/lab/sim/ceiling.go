package sim

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// Ceiling is the pooled ceiling of a trace on opts' cluster: what no cache
// policy, placement or routing of this model can beat. Every request reuses
// the longest prefix of its keys that any earlier-arriving request
// contained (an infinite cache that holds a block from the moment a
// request asking for it arrives, with free and instant transfers), and
// requests wait in one central FIFO queue that starts each on the first of
// opts.Instances instances to free up (perfect load balance, no
// transfer, no estimate error). Only the prefill compute remains. It is
// not safe for concurrent use.
type Ceiling struct {
	// TokenHitRatio is the reuse every request gets.
	TokenHitRatio float64
	// WorkSeconds is the total prefill compute of the trace with that
	// reuse, in model seconds.
	WorkSeconds float64
	// SpanSeconds is the trace's span at rate multiplier 1.
	SpanSeconds float64
	// CapacityMultiplier is the rate multiplier at which the work fills
	// every instance (Instances × span / work): no arm can sustain more.
	CapacityMultiplier float64

	reqs    []trace.Request // sorted by arrival
	work    []float64       // by sorted index
	servers []float64
	opts    Options
}

// NewCeiling computes the pooled ceiling of reqs on opts' cluster (Mode,
// Routing, Policy, RAM and network options do not matter; Instances,
// Profile and SLOSeconds do).
func NewCeiling(reqs []trace.Request, opts Options) (*Ceiling, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("sim: ceiling: no requests")
	}
	opts = opts.withDefaults()
	c := &Ceiling{opts: opts, reqs: slices.Clone(reqs), servers: make([]float64, opts.Instances)}
	slices.SortStableFunc(c.reqs, func(a, b trace.Request) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	seen := make(map[policy.Key]struct{})
	var in, hit int64
	c.work = make([]float64, len(c.reqs))
	for k := range c.reqs {
		r := &c.reqs[k]
		if r.InputLength <= 0 || len(r.HashIDs) != trace.Blocks(r.InputLength) {
			return nil, fmt.Errorf("sim: ceiling: request at timestamp %d ms: %d hash_ids for %d input tokens", r.Timestamp, len(r.HashIDs), r.InputLength)
		}
		j := 0
		for j < len(r.HashIDs) {
			if _, ok := seen[r.HashIDs[j]]; !ok {
				break
			}
			j++
		}
		tok := min(j*trace.BlockTokens, r.InputLength)
		in += int64(r.InputLength)
		hit += int64(tok)
		c.work[k] = opts.Profile.PrefillSeconds(r.InputLength, tok)
		c.WorkSeconds += c.work[k]
		for _, key := range r.HashIDs {
			seen[key] = struct{}{}
		}
	}
	c.TokenHitRatio = ratio(float64(hit), float64(in))
	c.SpanSeconds = float64(c.reqs[len(c.reqs)-1].Timestamp-c.reqs[0].Timestamp) / 1000
	c.CapacityMultiplier = ratio(float64(opts.Instances)*c.SpanSeconds, c.WorkSeconds)
	return c, nil
}

// Attainment returns the share of requests whose TTFT in the pooled model
// at rate multiplier m is within the SLO.
func (c *Ceiling) Attainment(m float64) float64 { return c.attainment(m, false) }

// AttainmentRejecting is Attainment with Algorithm 1's rejection
// (Options.Reject): a request whose TTFT would exceed the SLO is rejected
// on arrival, counts as a miss and takes no instance time. The pooled
// model knows every TTFT exactly, so no admitted request misses.
func (c *Ceiling) AttainmentRejecting(m float64) float64 { return c.attainment(m, true) }

func (c *Ceiling) attainment(m float64, reject bool) float64 {
	clear(c.servers)
	t0 := c.reqs[0].Timestamp
	within := 0
	for k := range c.reqs {
		a := float64(c.reqs[k].Timestamp-t0) / 1000 / m
		first := 0
		for s := range c.servers {
			if c.servers[s] < c.servers[first] {
				first = s
			}
		}
		end := max(a, c.servers[first]) + c.work[k]
		ok := end-a <= c.opts.SLOSeconds
		if ok || !reject {
			c.servers[first] = end
		}
		if ok {
			within++
		}
	}
	return float64(within) / float64(len(c.reqs))
}

// AttainmentShortestFirst is Attainment with the central queue serving
// the waiting request of least prefill work first (ties: the earlier
// arrival) instead of the oldest. It is not a bound on the simulator,
// whose instances serve FIFO: it shows how much of the SLO attainment
// the queue discipline decides, because starving the longest requests is
// enough to meet the SLO for 90% of them at far higher rates.
func (c *Ceiling) AttainmentShortestFirst(m float64) float64 {
	clear(c.servers)
	t0 := c.reqs[0].Timestamp
	arrival := func(k int) float64 { return float64(c.reqs[k].Timestamp-t0) / 1000 / m }
	q := &workHeap{work: c.work}
	within, next := 0, 0
	for range c.reqs {
		first := 0
		for s := range c.servers {
			if c.servers[s] < c.servers[first] {
				first = s
			}
		}
		now := c.servers[first]
		if len(q.idx) == 0 {
			now = max(now, arrival(next))
		}
		for next < len(c.reqs) && arrival(next) <= now {
			heap.Push(q, next)
			next++
		}
		k := heap.Pop(q).(int)
		end := now + c.work[k]
		c.servers[first] = end
		if end-arrival(k) <= c.opts.SLOSeconds {
			within++
		}
	}
	return float64(within) / float64(len(c.reqs))
}

// workHeap orders waiting requests (sorted indices) by work, then index.
type workHeap struct {
	idx  []int
	work []float64
}

func (h *workHeap) Len() int { return len(h.idx) }
func (h *workHeap) Less(i, j int) bool {
	a, b := h.idx[i], h.idx[j]
	return h.work[a] < h.work[b] || (h.work[a] == h.work[b] && a < b)
}
func (h *workHeap) Swap(i, j int) { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *workHeap) Push(x any)    { h.idx = append(h.idx, x.(int)) }
func (h *workHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// Goodput is the ceiling's goodput, searched exactly as Goodput searches a
// simulated arm's (same bracket, tolerance and target).
func (c *Ceiling) Goodput(ctx context.Context, target float64) (multiplier, reqPerSec float64, err error) {
	return c.goodput(ctx, target, c.Attainment)
}

// GoodputRejecting is Goodput with AttainmentRejecting: the ceiling of
// arms that run with Options.Reject.
func (c *Ceiling) GoodputRejecting(ctx context.Context, target float64) (multiplier, reqPerSec float64, err error) {
	return c.goodput(ctx, target, c.AttainmentRejecting)
}

// GoodputShortestFirst is Goodput with AttainmentShortestFirst.
func (c *Ceiling) GoodputShortestFirst(ctx context.Context, target float64) (multiplier, reqPerSec float64, err error) {
	return c.goodput(ctx, target, c.AttainmentShortestFirst)
}

func (c *Ceiling) goodput(ctx context.Context, target float64, attainment func(float64) float64) (float64, float64, error) {
	target, rate, err := goodputSetup(c.reqs, c.opts, target)
	if err != nil {
		return 0, 0, err
	}
	m, err := bisectRate(func(m float64) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("sim: ceiling goodput: %w", err)
		}
		return attainment(m) >= target, nil
	})
	return m, m * rate, err
}
