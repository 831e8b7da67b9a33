package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// Status is the outcome of one block of a Get.
type Status uint8

// The block outcomes.
const (
	// Missing: the block is not cached (past the cached prefix, or every
	// replica was absent or on a failed node). Recompute it.
	Missing Status = iota
	// Loaded: the block's verified bytes are in GetResult.Blocks.
	Loaded
	// Corrupt: every copy tried failed verification (counted); no bytes
	// are returned. Recompute it.
	Corrupt
	// TimedOut: the caller's deadline passed before the block arrived.
	// Recompute it.
	TimedOut
)

// String returns "missing", "loaded", "corrupt", "timed-out" or
// "status(N)".
func (s Status) String() string {
	switch s {
	case Missing:
		return "missing"
	case Loaded:
		return "loaded"
	case Corrupt:
		return "corrupt"
	case TimedOut:
		return "timed-out"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// GetResult is the outcome of a Get, block by block.
type GetResult struct {
	// Status of each requested block.
	Status []Status
	// Blocks holds each Loaded block's verified bytes (in the caller's
	// dst[i] when it was large enough); nil for the others.
	Blocks [][]byte
	// From says which replica each Loaded block came from.
	From []Location
	// Cached is the length of the cached prefix the index reported.
	Cached int
	// Corruptions counts copies that failed verification during this Get
	// (a block may still have loaded from another replica).
	Corruptions int
}

// Prefix returns the number of leading blocks Loaded: the part of the
// request that need not be recomputed.
func (r *GetResult) Prefix() int {
	for i, s := range r.Status {
		if s != Loaded {
			return i
		}
	}
	return len(r.Status)
}

// Count returns the number of blocks with status s.
func (r *GetResult) Count(s Status) int {
	n := 0
	for _, x := range r.Status {
		if x == s {
			n++
		}
	}
	return n
}

// Get looks up the cached prefix of ids with a read lease and fetches its
// blocks, block i into dst[i] when i < len(dst) and its capacity suffices.
// See the package documentation for how blocks are fetched, verified and
// coalesced. ctx's deadline bounds the whole call: past it, Get returns
// what has arrived, the rest TimedOut. The error is non-nil only when the
// lookup itself failed (then every block is Missing, or TimedOut if ctx
// ended); per-block failures are in the result.
func (c *Client) Get(ctx context.Context, ids []uint64, dst [][]byte) (GetResult, error) {
	c.ctr.gets.Add(1)
	res := newGetResult(len(ids))
	if err := c.check(); err != nil {
		return res, err
	}
	n, reps, err := c.lookup(ctx, ids, true)
	if err != nil {
		if expired(ctx) {
			for i := range res.Status {
				res.Status[i] = TimedOut
			}
		}
		c.count(&res)
		return res, err
	}
	res.Cached = n
	c.getLocated(ctx, idBatch(ids).head(n), reps, dst, &res)
	c.count(&res)
	return res, nil
}

func newGetResult(n int) GetResult {
	return GetResult{Status: make([]Status, n), Blocks: make([][]byte, n), From: make([]Location, n)}
}

func (c *Client) count(r *GetResult) {
	for _, s := range r.Status {
		switch s {
		case Loaded:
			c.ctr.loaded.Add(1)
		case Corrupt:
			c.ctr.corrupt.Add(1)
		case TimedOut:
			c.ctr.timedOut.Add(1)
		default:
			c.ctr.missing.Add(1)
		}
	}
}

// getLocated fetches the keys of b (key i at reps[i]; a key without
// replicas is Missing) into res, coalescing with concurrent fetches of the
// same keys.
func (c *Client) getLocated(ctx context.Context, b batch, reps [][]Location, dst [][]byte, res *GetResult) {
	type wait struct {
		i int
		f *flight
	}
	var lead []int
	var leadF []*flight
	var waits []wait
	for i := range b.len() {
		f, leader := c.fl.join(b.key(c.opts.Tenant, i))
		if leader {
			lead = append(lead, i)
			leadF = append(leadF, f)
		} else {
			waits = append(waits, wait{i, f})
		}
	}
	if len(lead) > 0 {
		c.fetch(ctx, b, reps, lead, dst, res)
		for j, i := range lead {
			c.fl.land(b.key(c.opts.Tenant, i), leadF[j], res.Status[i], res.Blocks[i], res.From[i])
		}
	}
	for _, w := range waits {
		select {
		case <-w.f.done:
		case <-ctx.Done():
			res.Status[w.i] = TimedOut
			continue
		}
		c.ctr.coalesced.Add(1)
		res.Status[w.i], res.From[w.i] = w.f.status, w.f.from
		if w.f.status == Loaded {
			var d []byte
			if w.i < len(dst) {
				d = dst[w.i]
			}
			res.Blocks[w.i] = append(d[:0], w.f.payload...)
		}
	}
}

// order returns block i's replicas in the order to try them: RAM before
// SSD, the local node first within a tier, then as the index listed them.
func (c *Client) order(locs []Location) []Location {
	out := append([]Location(nil), locs...)
	local := c.opts.LocalNode
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Tier != out[b].Tier {
			return out[a].Tier < out[b].Tier
		}
		return local != "" && out[a].Node == local && out[b].Node != local
	})
	return out
}

// fetch fetches the keys lead (indexes into b) in rounds: each round
// sends one MGET per node for the blocks whose next replica is there, in
// parallel; a block that was absent, corrupt or on a failed node moves to
// its next replica for the next round.
func (c *Client) fetch(ctx context.Context, b batch, reps [][]Location, lead []int, dst [][]byte, res *GetResult) {
	type state struct {
		locs    []Location
		next    int
		corrupt bool
	}
	st := make(map[int]*state, len(lead))
	pending := make([]int, 0, len(lead))
	for _, i := range lead {
		st[i] = &state{locs: c.order(reps[i])}
		pending = append(pending, i)
	}
	var mu sync.Mutex // guards res and st during a round
	for len(pending) > 0 {
		if expired(ctx) {
			for _, i := range pending {
				res.Status[i] = TimedOut
			}
			return
		}
		groups := map[string][]int{}
		var order []string
		for _, i := range pending {
			s := st[i]
			for s.next < len(s.locs) && !c.usable(s.locs[s.next].Node) {
				c.ctr.skipped.Add(1)
				s.next++
			}
			if s.next == len(s.locs) {
				if s.corrupt {
					res.Status[i] = Corrupt
				} else {
					res.Status[i] = Missing
				}
				continue
			}
			n := s.locs[s.next].Node
			if groups[n] == nil {
				order = append(order, n)
			}
			groups[n] = append(groups[n], i)
		}
		var again []int
		var wg sync.WaitGroup
		for _, n := range order {
			blocks := groups[n]
			wg.Add(1)
			go func() {
				defer wg.Done()
				loc := st[blocks[0]].locs[st[blocks[0]].next]
				out, err := c.mget(ctx, loc, b, blocks, dst)
				mu.Lock()
				defer mu.Unlock()
				for k, i := range blocks {
					s := st[i]
					from := s.locs[s.next]
					s.next++
					switch {
					case err != nil:
						again = append(again, i)
					case out[k].Err == nil:
						res.Status[i], res.Blocks[i], res.From[i] = Loaded, out[k].Payload, from
					case errors.Is(out[k].Err, kvpool.ErrCorrupt):
						s.corrupt = true
						res.Corruptions++
						c.ctr.corruptions.Add(1)
						again = append(again, i)
					default:
						again = append(again, i)
					}
				}
			}()
		}
		wg.Wait()
		pending = again
	}
}

// mget fetches the keys blocks (indexes into b) from the node of loc, with
// one MGET (or MGET of names) bounded by RequestTimeout. The node client
// verifies every payload against its key and checksum (for a name,
// against block.Named(tenant, name): a copy stored under another name
// never passes). A failure of the call as a whole while ctx is still
// alive marks the node down.
func (c *Client) mget(ctx context.Context, loc Location, b batch, blocks []int, dst [][]byte) ([]nodeclient.Result, error) {
	p, err := c.pool(ctx, loc.Node, loc.Addr)
	if err != nil {
		if !errors.Is(err, ErrClosed) && !expired(ctx) {
			c.markDown(loc.Node, err)
		}
		return nil, err
	}
	sub := b.pick(blocks)
	bdst := make([][]byte, len(blocks))
	for k, i := range blocks {
		if i < len(dst) {
			bdst[k] = dst[i]
		}
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	c.ctr.fetches.Add(1)
	var out []nodeclient.Result
	if sub.named() {
		out, err = p.MGetNamed(rctx, sub.names, bdst)
	} else {
		out, err = p.MGet(rctx, sub.ids, bdst)
	}
	if err == nil && len(out) != sub.len() {
		err = fmt.Errorf("client: mget of %d %s from node %q: %d results", sub.len(), b.noun(), loc.Node, len(out))
	}
	if err != nil {
		if !expired(ctx) && !errors.Is(err, nodeclient.ErrClosed) {
			c.markDown(loc.Node, err)
		}
		return nil, fmt.Errorf("client: mget of %d %s from node %q: %w", sub.len(), b.noun(), loc.Node, err)
	}
	return out, nil
}

// expired reports whether ctx is done or past its deadline. A connection
// deadline set from ctx's deadline can fire a moment before ctx's own
// timer marks it done; an I/O timeout at that moment is the caller's
// deadline, not a node failure.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
