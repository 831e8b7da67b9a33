package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// Access is one use of a block by a request, as a node's RAM eviction
// policy receives it: the block's place in the request's prefix chain
// (Depth, Parent) and either its bytes (a put) or nothing (a touch of the
// copy the node holds). Chain builds the accesses of a whole request.
type Access struct {
	// ID is the block's key ID.
	ID uint64
	// Hint is the block's place in its request's prefix chain: its depth
	// (0 = first) and the ID of the block before it (ignored at depth 0).
	// Chain-aware policies (kvchain) rank blocks by them.
	block.Hint
	// Payload is the block's bytes, stored on the node. Empty makes the
	// access a touch: the node records a use of the copy it holds in RAM
	// and changes nothing when it holds none (AccessNotHeld).
	Payload []byte
}

// Touch reports whether a is a touch (it carries no payload).
func (a Access) Touch() bool { return len(a.Payload) == 0 }

// Chain returns the accesses of a request whose blocks are ids, first to
// last: block i at depth i with parent ids[i-1], carrying payloads[i] (a
// put), or a touch when i >= len(payloads) or payloads[i] is empty.
func Chain(ids []uint64, payloads [][]byte) []Access {
	out := make([]Access, len(ids))
	for i, id := range ids {
		out[i] = Access{ID: id, Hint: block.Hint{Depth: i}}
		if i > 0 {
			out[i].Parent = ids[i-1]
		}
		if i < len(payloads) {
			out[i].Payload = payloads[i]
		}
	}
	return out
}

// AccessOptions configure one Client.Access. The zero value means the
// client's defaults.
type AccessOptions struct {
	// Node is the ID of the node whose cache sees the accesses (""
	// : Options.LocalNode; one of them is required).
	Node string
}

// AccessStatus is the outcome of one Access entry.
type AccessStatus uint8

// The access outcomes.
const (
	// AccessFailed: the entry failed; AccessResult.Errs says why.
	AccessFailed AccessStatus = iota
	// AccessStored: a put stored its block.
	AccessStored
	// AccessTouched: the node recorded a touch of a block it holds.
	AccessTouched
	// AccessNotHeld: a touch of a block the node does not hold in RAM
	// (evicted since the caller last looked); nothing changed. Put the
	// block to store it.
	AccessNotHeld
	// AccessNoTouch: a touch the node could not record because it
	// predates touches (the ACCESS op); the call's puts were stored as
	// plain puts.
	AccessNoTouch
)

// String returns "failed", "stored", "touched", "not-held", "no-touch" or
// "access(N)".
func (s AccessStatus) String() string {
	switch s {
	case AccessFailed:
		return "failed"
	case AccessStored:
		return "stored"
	case AccessTouched:
		return "touched"
	case AccessNotHeld:
		return "not-held"
	case AccessNoTouch:
		return "no-touch"
	}
	return fmt.Sprintf("access(%d)", uint8(s))
}

// AccessResult is the outcome of an Access, entry by entry.
type AccessResult struct {
	// Status of each entry.
	Status []AccessStatus
	// Errs holds the error of each AccessFailed entry, nil for the others.
	Errs []error
}

// Count returns the number of entries with status s.
func (r *AccessResult) Count(s AccessStatus) int {
	n := 0
	for _, x := range r.Status {
		if x == s {
			n++
		}
	}
	return n
}

// Access reports a request's uses of its blocks to one node, in order, so
// that node's RAM eviction policy sees the request as it happened: a
// touch for each block the request reused from that node's memory, a put
// for each block it computed or fetched from elsewhere, each with its
// chain position. It is how a serving engine tells its local node what a
// prefill used after the prefill ends (Put places blocks by the index
// instead and carries no chain positions). The entries go in one ACCESS
// exchange (split into frames by the node's limits), bounded by
// RequestTimeout within ctx.
//
// Access goes to the named node even when the client marked it down
// (the caller chose it); a failure of the call as a whole marks it down
// for Get and Put and is returned as the error, with no result. Per-entry
// outcomes are in the result.
func (c *Client) Access(ctx context.Context, accesses []Access, ao AccessOptions) (AccessResult, error) {
	if err := c.check(); err != nil {
		return AccessResult{}, err
	}
	node := ao.Node
	if node == "" {
		node = c.opts.LocalNode
	}
	if node == "" {
		return AccessResult{}, errors.New("client: access: no node (AccessOptions.Node and Options.LocalNode are empty)")
	}
	res := AccessResult{Status: make([]AccessStatus, len(accesses)), Errs: make([]error, len(accesses))}
	if len(accesses) == 0 {
		return res, nil
	}
	ids := make([]uint64, len(accesses))
	hints := make([]wire.Hint, len(accesses))
	payloads := make([][]byte, len(accesses))
	for i, a := range accesses {
		if a.Depth < 0 || int64(a.Depth) > int64(^uint32(0)) {
			return AccessResult{}, fmt.Errorf("client: access %d blocks on node %q: entry %d (block %016x) has depth %d; want 0 to %d",
				len(accesses), node, i, a.ID, a.Depth, ^uint32(0))
		}
		ids[i], payloads[i] = a.ID, a.Payload
		hints[i] = wire.Hint{Hint: block.Hint{Depth: a.Depth}, Touch: a.Touch()}
		if a.Depth > 0 {
			hints[i].Parent = a.Parent
		}
	}
	p, err := c.pool(ctx, node, "")
	if err != nil {
		return AccessResult{}, fmt.Errorf("client: access %d blocks on node %q: %w", len(accesses), node, err)
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	errs, err := p.MAccess(rctx, ids, hints, payloads)
	if err == nil && len(errs) != len(ids) {
		err = fmt.Errorf("%d results", len(errs))
	}
	if err != nil {
		if !expired(ctx) && !errors.Is(err, kvpool.ErrClosed) {
			c.markDown(node, err)
		}
		return AccessResult{}, fmt.Errorf("client: access %d blocks on node %q: %w", len(accesses), node, err)
	}
	for i, e := range errs {
		touch := hints[i].Touch
		switch {
		case e == nil && touch:
			res.Status[i] = AccessTouched
		case e == nil:
			res.Status[i] = AccessStored
			c.ctr.stored.Add(1)
		case touch && notHeld(e):
			res.Status[i] = AccessNotHeld
		case touch && noTouches(e):
			res.Status[i] = AccessNoTouch
		default:
			res.Status[i] = AccessFailed
			res.Errs[i] = fmt.Errorf("client: access block %016x on node %q: %w", ids[i], node, e)
			if !touch {
				c.ctr.putFailed.Add(1)
			}
		}
	}
	return res, nil
}
