package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// PutOptions configure one Put. The zero value means the client's
// defaults.
type PutOptions struct {
	// Replicas is the number of copies to store (0: Options.Replicas; at
	// most MaxReplicas). The index may place fewer when fewer nodes are
	// live.
	Replicas int
	// Hint is the ID of the node that should get the first copy, usually
	// the writer's own node ("" : Options.LocalNode).
	Hint string
}

// Put stores payloads[i] as block ids[i] on the nodes the index chooses:
// one MPUT per node, in parallel, each bounded by RequestTimeout. It
// returns one error per block, nil when every chosen copy was stored, else
// the failures joined (a block with at least one stored copy is still
// readable once its node reports it to the master). The error is non-nil
// when nothing could be attempted (bad arguments, placement failed).
func (c *Client) Put(ctx context.Context, ids []uint64, payloads [][]byte, po PutOptions) ([]error, error) {
	if len(payloads) != len(ids) {
		return nil, fmt.Errorf("client: put: %d ids but %d payloads", len(ids), len(payloads))
	}
	return c.put(ctx, idBatch(ids), payloads, po)
}

// put stores payloads[i] under key i of b (Put and PutNamed).
func (c *Client) put(ctx context.Context, b batch, payloads [][]byte, po PutOptions) ([]error, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if po.Replicas < 0 || po.Replicas > MaxReplicas {
		return nil, fmt.Errorf("client: put: PutOptions.Replicas is %d; want 0 to %d", po.Replicas, MaxReplicas)
	}
	if b.len() == 0 {
		return nil, nil
	}
	replicas, hint := po.Replicas, po.Hint
	if replicas == 0 {
		replicas = c.opts.Replicas
	}
	if hint == "" {
		hint = c.opts.LocalNode
	}
	sizes := make([]int64, len(payloads))
	for i, p := range payloads {
		if len(p) > wire.MaxObjectSize {
			// No node takes it, whatever its setting: refused before
			// the master is asked for a placement.
			return nil, fmt.Errorf("client: put %s: %d bytes, more than %d (512 MiB), the largest object a node can be set to take (node flag --max-object-bytes): %w",
				b.what(i), len(p), wire.MaxObjectSize, kvpool.ErrTooLarge)
		}
		sizes[i] = int64(len(p))
	}
	place, err := c.idx.Place(ctx, b.keys(c.opts.Tenant), sizes, replicas, hint)
	if err != nil {
		return nil, fmt.Errorf("client: place %d %s of tenant %q: %w", b.len(), b.noun(), c.opts.Tenant, err)
	}
	if len(place) != b.len() {
		return nil, fmt.Errorf("client: place %d %s: index answered %d placements: %w", b.len(), b.noun(), len(place), ErrBadIndex)
	}
	groups := map[string][]int{}
	var order []string
	errs := make([][]error, b.len())
	for i, nodes := range place {
		if len(nodes) == 0 {
			errs[i] = append(errs[i], fmt.Errorf("client: put %s: index chose no node", b.what(i)))
		}
		for _, n := range nodes {
			if groups[n] == nil {
				order = append(order, n)
			}
			groups[n] = append(groups[n], i)
		}
	}
	fanOut(order, groups, errs, func(n string, blocks []int) []error {
		return c.mput(ctx, n, "", b, payloads, blocks)
	})
	return joinEach(errs), nil
}

// fanOut runs call once per group, in parallel, with the keys (indexes)
// grouped under it, and appends each key's non-nil error from call's
// answer (one error per key, in the group's order) to errs[key].
func fanOut[G comparable](order []G, groups map[G][]int, errs [][]error, call func(g G, keys []int) []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, g := range order {
		keys := groups[g]
		wg.Go(func() {
			out := call(g, keys)
			mu.Lock()
			defer mu.Unlock()
			for k, i := range keys {
				if out[k] != nil {
					errs[i] = append(errs[i], out[k])
				}
			}
		})
	}
	wg.Wait()
}

// joinEach returns one error per key: errs[i] joined (nil when empty).
func joinEach(errs [][]error) []error {
	out := make([]error, len(errs))
	for i := range errs {
		out[i] = errors.Join(errs[i]...)
	}
	return out
}

// mput stores the keys blocks (indexes into b) on node n with one MPUT
// (or MPUT of names) bounded by RequestTimeout, and returns one error per
// key.
func (c *Client) mput(ctx context.Context, n, addr string, b batch, payloads [][]byte, blocks []int) []error {
	out := make([]error, len(blocks))
	fail := func(err error) []error {
		for k := range out {
			out[k] = err
		}
		c.ctr.putFailed.Add(uint64(len(blocks)))
		return out
	}
	if !c.usable(n) {
		c.ctr.skipped.Add(1)
		return fail(fmt.Errorf("client: put %d %s on node %q: %w", len(blocks), b.noun(), n, ErrNodeDown))
	}
	p, err := c.pool(ctx, n, addr)
	if err != nil {
		return fail(fmt.Errorf("client: put %d %s on node %q: %w", len(blocks), b.noun(), n, err))
	}
	sub := b.pick(blocks)
	bp := make([][]byte, len(blocks))
	for k, i := range blocks {
		bp[k] = payloads[i]
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	var perKey []error
	if sub.named() {
		perKey, err = p.MPutNamed(rctx, sub.names, bp)
	} else {
		perKey, err = p.MPut(rctx, sub.ids, bp)
	}
	if err == nil && len(perKey) != sub.len() {
		err = fmt.Errorf("%d results", len(perKey))
	}
	if err != nil {
		if !expired(ctx) && !refusedAsAWhole(err) {
			c.markDown(n, err)
		}
		return fail(fmt.Errorf("client: put %d %s on node %q: %w", len(blocks), b.noun(), n, err))
	}
	for k, e := range perKey {
		if e != nil {
			out[k] = fmt.Errorf("client: put %s on node %q: %w", sub.what(k), n, e)
			c.ctr.putFailed.Add(1)
		} else {
			c.ctr.stored.Add(1)
		}
	}
	return out
}

// PrefetchResult is the outcome of a Prefetch.
type PrefetchResult struct {
	// Cached is the length of the cached prefix of the request.
	Cached int
	// Present counts prefix blocks already in the node's RAM.
	Present int
	// Moved counts blocks copied into the node's RAM.
	Moved int
	// Failed counts blocks that could not be fetched or stored (they stay
	// where they were; the request will fetch or recompute them).
	Failed int
}

// Prefetch brings the cached prefix of ids into node's RAM ahead of use:
// each prefix block without a RAM copy on node is fetched from where it is
// (verified, coalesced like Get) and stored on node. Blocks already there
// cost nothing. ctx bounds the whole call; the error is non-nil only when
// the lookup failed.
func (c *Client) Prefetch(ctx context.Context, ids []uint64, node string) (PrefetchResult, error) {
	var r PrefetchResult
	if err := c.check(); err != nil {
		return r, err
	}
	if node == "" {
		return r, fmt.Errorf("client: prefetch of %d blocks: empty target node", len(ids))
	}
	n, reps, err := c.lookup(ctx, ids, true)
	if err != nil {
		return r, err
	}
	r.Cached = n
	var need []uint64
	var needReps [][]Location
	for i := 0; i < n; i++ {
		inRAM := false
		for _, l := range reps[i] {
			if l.Node == node && l.Tier == TierRAM {
				inRAM = true
				break
			}
		}
		if inRAM {
			r.Present++
			continue
		}
		need = append(need, ids[i])
		needReps = append(needReps, reps[i])
	}
	if len(need) == 0 {
		return r, nil
	}
	got := newGetResult(len(need))
	c.getLocated(ctx, idBatch(need), needReps, nil, &got)
	var pids []uint64
	var payloads [][]byte
	for i, s := range got.Status {
		if s == Loaded {
			pids = append(pids, need[i])
			payloads = append(payloads, got.Blocks[i])
		} else {
			r.Failed++
		}
	}
	if len(pids) == 0 {
		return r, nil
	}
	blocks := make([]int, len(pids))
	for i := range blocks {
		blocks[i] = i
	}
	for _, e := range c.mput(ctx, node, "", idBatch(pids), payloads, blocks) {
		if e == nil {
			r.Moved++
		} else {
			r.Failed++
		}
	}
	return r, nil
}
