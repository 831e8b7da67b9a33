package client

import (
	"context"
	"errors"
	"fmt"
)

// FetchOptions configure one Client.Fetch. The zero value fetches from
// the node's RAM or SSD, whichever holds the block.
type FetchOptions struct {
	// Dst, when set, receives block i in Dst[i] when i < len(Dst) and its
	// capacity suffices (as Get's dst).
	Dst [][]byte
}

// Fetch gets blocks ids from the one replica from: the node (and tier) a
// caller's planner chose, for example from a Lookup's replicas by its own
// estimate of link loads. Unlike Get it takes no lease, sends one MGET to
// that node only, bounded by RequestTimeout within ctx, and tries no other
// replica: a block the node does not hold or could not serve (it is
// stopping, the block exceeds a limit, ...) is Missing, a copy that fails
// verification (key and checksum) is Corrupt and counted, and the rest are
// Loaded, with From set to from (the node serves a block from whichever of
// its tiers holds it; from.Tier is the caller's expectation). Fetches are
// not coalesced with concurrent Gets.
//
// Fetch goes to the named node even when the client marked it down (the
// caller chose it); a failure of the call as a whole marks it down for
// Get and Put and is returned as the error, with every block TimedOut if
// ctx ended and Missing otherwise.
func (c *Client) Fetch(ctx context.Context, from Location, ids []uint64, fo FetchOptions) (GetResult, error) {
	res := newGetResult(len(ids))
	if err := c.check(); err != nil {
		return res, err
	}
	if from.Node == "" {
		return res, fmt.Errorf("client: fetch %d blocks: the location names no node", len(ids))
	}
	if len(ids) == 0 {
		return res, nil
	}
	blocks := make([]int, len(ids))
	for i := range blocks {
		blocks[i] = i
	}
	out, err := c.mget(ctx, from, idBatch(ids), blocks, fo.Dst)
	if err != nil {
		st := Missing
		if expired(ctx) {
			st = TimedOut
		}
		for i := range res.Status {
			res.Status[i] = st
		}
		if errors.Is(err, ErrClosed) {
			return res, err
		}
		return res, fmt.Errorf("client: fetch %d blocks from node %q: %w", len(ids), from.Node, err)
	}
	for i, r := range out {
		switch {
		case r.Err == nil:
			res.Status[i], res.Blocks[i] = Loaded, r.Payload
			res.From[i] = from
			res.From[i].Size, res.From[i].Sum = int64(len(r.Payload)), r.Sum
		case corrupt(r.Err):
			res.Status[i] = Corrupt
			res.Corruptions++
			c.ctr.corruptions.Add(1)
		default:
			res.Status[i] = Missing
		}
	}
	return res, nil
}
