// Package hitrate is the order-only hit-ratio engine: it replays a trace's
// requests through one or more block caches, with no notion of time beyond
// order, and reports the token and block hit ratios (Mooncake FAST'25,
// Fig 9 and the hit-ratio half of Fig 10).
//
// Semantics, each pinned by a test:
//   - Requests are replayed in timestamp order, ties in input order (a
//     stable sort; the caller's slice is not modified).
//   - A request's hit length is the number of leading hash_ids present in
//     the cache it is routed to, checked before the request changes
//     anything: a key that repeats inside one request cannot hit on its
//     own earlier copy.
//   - Then the request's blocks are accessed first to last through
//     policy.Cache.Access with Depth = index in the request, Parent = the
//     previous key, Time = the global access sequence number, and, when
//     the policy needs the future, NextUse = the sequence number of the
//     next access of the same key anywhere in the sorted trace (or
//     policy.NoNextUse).
//   - Hit tokens are min(hit_blocks × 512, input_length)
//     (trace.Request.HitTokens); the token hit ratio is Σ hit tokens /
//     Σ input tokens, the block hit ratio Σ hit blocks / Σ blocks.
//   - Nodes separate caches of Capacity blocks each; routing "rr" sends
//     request i (in replay order) to cache i mod Nodes, "affinity" to the
//     cache with the longest cached prefix, ties to the cache that has
//     received the fewest requests so far, then the lowest index.
//
// With several nodes NextUse is still global: a Belady cache sees when a
// key is next used by any node, which is what the brief specifies and an
// upper bound on per-node foresight.
package hitrate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// Routing names.
const (
	// RoundRobin sends request i to cache i mod Nodes.
	RoundRobin = "rr"
	// Affinity sends a request to the cache holding its longest prefix.
	Affinity = "affinity"
)

// Routings returns the valid Options.Routing values.
func Routings() []string { return []string{RoundRobin, Affinity} }

// Options configures a Run. The zero value is one LRU cache that holds
// nothing.
type Options struct {
	// Policy is the eviction and admission policy of every cache (the
	// zero Spec is LRU admitting everything).
	Policy policy.Spec
	// Capacity is each cache's size in blocks. 0 is a cache that holds
	// nothing (the recompute baseline), not a default.
	Capacity int
	// Nodes is the number of separate caches (0 means 1: one global cache).
	Nodes int
	// Routing chooses a request's cache: RoundRobin (default) or Affinity.
	Routing string
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	if o.Capacity < 0 {
		return fmt.Errorf("hitrate: %w", option.Errorf("Capacity", "%d: want >= 0", o.Capacity))
	}
	if o.Nodes < 0 {
		return fmt.Errorf("hitrate: %w", option.Errorf("Nodes", "%d: want >= 1 (0 means 1)", o.Nodes))
	}
	if o.Routing != "" && !slices.Contains(Routings(), o.Routing) {
		return fmt.Errorf("hitrate: %w", option.Errorf("Routing", "unknown routing %q (known: %s)", o.Routing, strings.Join(Routings(), ", ")))
	}
	if _, err := policy.ParseSpec(o.Policy.String()); err != nil {
		return fmt.Errorf("hitrate: %w", option.Errorf("Policy", "%w", err))
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Routing == "" {
		o.Routing = RoundRobin
	}
	return o
}

// Result is the outcome of a Run.
type Result struct {
	// Policy is the spec that ran, as ParseSpec reads it.
	Policy string `json:"policy"`
	// Capacity is each cache's size in blocks.
	Capacity int `json:"capacity"`
	// Nodes is the number of caches.
	Nodes int `json:"nodes"`
	// Routing is the routing rule.
	Routing string `json:"routing"`
	// Requests is the number of requests replayed.
	Requests int `json:"requests"`
	// TokenHitRatio is HitTokens / InputTokens (0 for an empty trace).
	TokenHitRatio float64 `json:"token_hit_ratio"`
	// BlockHitRatio is HitBlocks / Blocks (0 for an empty trace).
	BlockHitRatio float64 `json:"block_hit_ratio"`
	// HitTokens is Σ min(hit blocks × 512, input_length).
	HitTokens int64 `json:"hit_tokens"`
	// InputTokens is Σ input_length.
	InputTokens int64 `json:"input_tokens"`
	// HitBlocks is Σ hit length in blocks.
	HitBlocks int64 `json:"hit_blocks"`
	// Blocks is Σ len(hash_ids).
	Blocks int64 `json:"blocks"`
	// Accesses is the number of Cache.Access calls (one per block).
	Accesses int64 `json:"accesses"`
	// NodeRequests is the number of requests each cache received; it is
	// set only when Nodes > 1.
	NodeRequests []int `json:"node_requests,omitempty"`
}

// Run replays reqs through the caches opts describes and returns the hit
// ratios. It does not modify reqs and is safe to call concurrently.
func Run(reqs []trace.Request, opts Options) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	p, err := prepare(reqs)
	if err != nil {
		return Result{}, err
	}
	if opts.Policy.NeedsFuture() {
		p.computeNextUses()
	}
	return p.run(opts.withDefaults(), nil)
}

// SweepOptions configures a Sweep: every policy at every capacity.
type SweepOptions struct {
	// Policies are the specs to run (at least one).
	Policies []policy.Spec
	// Capacities are the per-cache sizes in blocks (at least one, each
	// >= 0).
	Capacities []int
	// Nodes and Routing are as in Options.
	Nodes   int
	Routing string
	// Workers bounds how many runs execute at once (0 means GOMAXPROCS).
	Workers int
}

// Validate reports the first invalid field.
func (o SweepOptions) Validate() error {
	if len(o.Policies) == 0 {
		return fmt.Errorf("hitrate: %w", option.Errorf("Policies", "none given"))
	}
	if len(o.Capacities) == 0 {
		return fmt.Errorf("hitrate: %w", option.Errorf("Capacities", "none given"))
	}
	if o.Workers < 0 {
		return fmt.Errorf("hitrate: %w", option.Errorf("Workers", "%d: want >= 0 (0 means GOMAXPROCS)", o.Workers))
	}
	for _, s := range o.Policies {
		for _, c := range o.Capacities {
			if err := (Options{Policy: s, Capacity: c, Nodes: o.Nodes, Routing: o.Routing}).Validate(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Sweep runs every policy at every capacity over the same trace, sharing
// the sorting and next-use work, with up to Workers runs in parallel. The
// results are in a fixed order: policy by policy as listed, each at every
// capacity as listed. It stops early when ctx is cancelled or a run fails.
func Sweep(ctx context.Context, reqs []trace.Request, opts SweepOptions) ([]Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p, err := prepare(reqs)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(opts.Policies, policy.Spec.NeedsFuture) {
		p.computeNextUses()
	}
	jobs := make([]Options, 0, len(opts.Policies)*len(opts.Capacities))
	for _, s := range opts.Policies {
		for _, c := range opts.Capacities {
			jobs = append(jobs, Options{Policy: s, Capacity: c, Nodes: opts.Nodes, Routing: opts.Routing}.withDefaults())
		}
	}
	workers := opts.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(jobs))

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]Result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := p.run(jobs[i], nil)
				if err != nil {
					cancel(err)
					continue
				}
				results[i] = r
			}
		}()
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("hitrate: sweep: %w", err)
	}
	return results, nil
}

// prepared is a trace sorted for replay, with its totals and, when a
// policy needs them, the next-use times of every access. It is read-only
// once built, so runs share it.
type prepared struct {
	reqs        []trace.Request
	accesses    int64
	inputTokens int64
	next        []int64
}

// prepare checks reqs and sorts a copy into replay order.
func prepare(reqs []trace.Request) (*prepared, error) {
	p := &prepared{}
	for i := range reqs {
		r := &reqs[i]
		if r.InputLength < 0 {
			return nil, fmt.Errorf("hitrate: request %d (timestamp %d): input_length %d is negative", i, r.Timestamp, r.InputLength)
		}
		p.accesses += int64(len(r.HashIDs))
		p.inputTokens += int64(r.InputLength)
	}
	sorted := slices.IsSortedFunc(reqs, byTimestamp)
	if sorted {
		p.reqs = reqs // read-only from here on
	} else {
		p.reqs = slices.Clone(reqs)
		slices.SortStableFunc(p.reqs, byTimestamp)
	}
	return p, nil
}

func byTimestamp(a, b trace.Request) int {
	switch {
	case a.Timestamp < b.Timestamp:
		return -1
	case a.Timestamp > b.Timestamp:
		return 1
	}
	return 0
}

// computeNextUses fills p.next: for access number s (in replay order), the
// number of the next access of the same key, or policy.NoNextUse.
func (p *prepared) computeNextUses() {
	p.next = make([]int64, p.accesses)
	last := make(map[policy.Key]int64, p.accesses/2)
	s := p.accesses
	for i := len(p.reqs) - 1; i >= 0; i-- {
		ids := p.reqs[i].HashIDs
		for j := len(ids) - 1; j >= 0; j-- {
			s--
			k := ids[j]
			if n, ok := last[k]; ok {
				p.next[s] = n
			} else {
				p.next[s] = policy.NoNextUse
			}
			last[k] = s
		}
	}
}

// run replays the prepared trace under opts (already defaulted). observe,
// when not nil, sees each request's replay index, cache and hit length.
func (p *prepared) run(opts Options, observe func(i, node, hit int)) (Result, error) {
	caches := make([]*policy.Cache, opts.Nodes)
	for i := range caches {
		c, err := opts.Policy.NewCache(opts.Capacity)
		if err != nil {
			return Result{}, fmt.Errorf("hitrate: cache %d: %w", i, err)
		}
		caches[i] = c
	}
	if opts.Policy.NeedsFuture() && p.next == nil {
		return Result{}, fmt.Errorf("hitrate: policy %s needs next-use times that were not computed", opts.Policy)
	}
	res := Result{
		Policy:      opts.Policy.String(),
		Capacity:    opts.Capacity,
		Nodes:       opts.Nodes,
		Routing:     opts.Routing,
		Requests:    len(p.reqs),
		Blocks:      p.accesses,
		InputTokens: p.inputTokens,
	}
	counts := make([]int, opts.Nodes)
	var next []int64
	if opts.Policy.NeedsFuture() {
		next = p.next
	}
	affinity := opts.Routing == Affinity && opts.Nodes > 1
	var seq int64
	for i := range p.reqs {
		r := &p.reqs[i]
		var node, hit int
		if affinity {
			node, hit = route(caches, counts, r.HashIDs)
			seq = accessAll(caches[node], r.HashIDs, seq, next)
		} else {
			node = i % opts.Nodes
			hit, seq = accessCounting(caches[node], r.HashIDs, seq, next)
		}
		counts[node]++
		if observe != nil {
			observe(i, node, hit)
		}
		res.HitBlocks += int64(hit)
		res.HitTokens += int64(r.HitTokens(hit))
	}
	res.Accesses = seq
	if res.InputTokens > 0 {
		res.TokenHitRatio = float64(res.HitTokens) / float64(res.InputTokens)
	}
	if res.Blocks > 0 {
		res.BlockHitRatio = float64(res.HitBlocks) / float64(res.Blocks)
	}
	if opts.Nodes > 1 {
		res.NodeRequests = counts
	}
	return res, nil
}

// prefixLen returns how many leading ids c holds.
func prefixLen(c *policy.Cache, ids []uint64) int {
	for j, k := range ids {
		if !c.Contains(k) {
			return j
		}
	}
	return len(ids)
}

// route picks the cache with the longest cached prefix of ids; ties go to
// the cache with the fewest requests so far, then the lowest index.
func route(caches []*policy.Cache, counts []int, ids []uint64) (node, hit int) {
	node, hit = 0, prefixLen(caches[0], ids)
	for i := 1; i < len(caches); i++ {
		h := prefixLen(caches[i], ids)
		if h > hit || (h == hit && counts[i] < counts[node]) {
			node, hit = i, h
		}
	}
	return node, hit
}

// accessAll accesses ids in order, numbering accesses from seq, and returns
// the next sequence number.
func accessAll(c *policy.Cache, ids []uint64, seq int64, next []int64) int64 {
	var parent uint64
	for j, k := range ids {
		a := policy.Access{Key: k, Hint: block.Hint{Depth: j, Parent: parent}, Time: seq, NextUse: policy.NoNextUse}
		if next != nil {
			a.NextUse = next[seq]
		}
		c.Access(a)
		parent = k
		seq++
	}
	return seq
}

// accessCounting is accessAll that also returns the request's hit length
// as it was before the request: the number of leading accesses that hit.
// This equals checking the prefix first because a hit never changes which
// keys are resident (policy.Cache.Access only inserts, and so only evicts,
// on a miss): until the first miss the cache's contents are exactly those
// it had when the request arrived, and after it nothing more is counted.
// It saves one lookup per hit block.
func accessCounting(c *policy.Cache, ids []uint64, seq int64, next []int64) (hit int, _ int64) {
	var parent uint64
	prefix := true
	for j, k := range ids {
		a := policy.Access{Key: k, Hint: block.Hint{Depth: j, Parent: parent}, Time: seq, NextUse: policy.NoNextUse}
		if next != nil {
			a.NextUse = next[seq]
		}
		if c.Access(a) {
			if prefix {
				hit++
			}
		} else {
			prefix = false
		}
		parent = k
		seq++
	}
	return hit, seq
}
