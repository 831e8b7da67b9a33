package client

import (
	"context"
	"fmt"
	"time"

	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// This file holds the client's admin calls: what an operator's tool (kvpool
// ctl) asks of a cluster besides reading and writing blocks.

// indexPoll is how often WaitIndexed asks the index again: 50 ms, a
// twentieth of the default 1 s heartbeat that brings a stored block into
// the index, so the wait ends within 5% of a heartbeat of the block
// appearing, at a cost of 20 small lookups a second.
const indexPoll = 50 * time.Millisecond

// NodeStats is one node's answer to Client.NodeStats.
type NodeStats struct {
	// Node is the node as the index lists it.
	Node Node
	// Reached is false when the node could not be connected to (Err says
	// why); true when it was, even if its STATS call then failed.
	Reached bool
	// Err is why the node's counters are missing; nil when Tiers holds
	// them.
	Err error
	// Tiers are the node's per-tier counters, in the node's order (RAM
	// first).
	Tiers []TierStats
}

// TierStats are one tier's counters on one node, since the node started.
type TierStats struct {
	// Name is the tier's name ("ram", "ssd").
	Name string
	// Blocks (objects: chain blocks and named objects) and Bytes (the sum
	// of their payload lengths) are what the tier holds now; HeldBytes is
	// the space they occupy in it, names and metadata included (RAM
	// chunks, SSD pages), so HeldBytes/Bytes is the tier's overhead;
	// CapacityBytes is its configured capacity.
	Blocks        int
	Bytes         int64
	HeldBytes     int64
	CapacityBytes int64
	// Hits and Misses count the tier's reads by outcome.
	Hits, Misses uint64
	// BytesIn counts payload bytes stored, BytesOut payload bytes read.
	BytesIn, BytesOut uint64
	// Evicted counts blocks freed by eviction.
	Evicted uint64
	// Corruptions counts copies that failed verification and were dropped.
	Corruptions uint64
	// IOErrors counts read and write errors from the device.
	IOErrors uint64
}

// NodeStats asks every node the index lists for its per-tier counters,
// one node after another, each on a connection of its own (outside the
// client's pools, so a node that fails here is not marked down for Get and
// Put). A node that cannot be asked is reported in its NodeStats.Err, not
// as the call's error, which is only for the node list itself.
func (c *Client) NodeStats(ctx context.Context) ([]NodeStats, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeStats, len(nodes))
	for i, n := range nodes {
		out[i] = c.nodeStats(ctx, n)
	}
	return out, nil
}

// nodeStats asks one node for its counters.
func (c *Client) nodeStats(ctx context.Context, n Node) NodeStats {
	s := NodeStats{Node: n}
	conn, err := nodeclient.Dial(ctx, n.Addr, c.nodeDialOptions())
	if err != nil {
		s.Err = fmt.Errorf("client: connect to node %q at %s: %w", n.ID, n.Addr, err)
		return s
	}
	defer conn.Close()
	s.Reached = true
	tiers, err := conn.Stats(ctx)
	if err != nil {
		s.Err = fmt.Errorf("client: stats of node %q at %s: %w", n.ID, n.Addr, err)
		return s
	}
	for _, t := range tiers {
		st := t.Stats
		s.Tiers = append(s.Tiers, TierStats{
			Name: t.Name, Blocks: st.Blocks, Bytes: st.Bytes, HeldBytes: st.HeldBytes, CapacityBytes: st.CapacityBytes,
			Hits: st.Hits, Misses: st.Misses, BytesIn: st.BytesIn, BytesOut: st.BytesOut,
			Evicted: st.Evicted, Corruptions: st.Corruptions, IOErrors: st.IOErrors,
		})
	}
	return s
}

// Locate returns the replicas of block id as the index lists them (RAM
// before SSD), or none when the block is not cached on a live node. Like
// Lookup, it takes no lease and changes nothing on the master.
func (c *Client) Locate(ctx context.Context, id uint64) ([]Location, error) {
	p, err := c.Lookup(ctx, []uint64{id})
	if err != nil {
		return nil, err
	}
	if p.Len == 0 {
		return nil, nil
	}
	return p.Replicas[0], nil
}

// LocateNamed returns the replicas of the object name as the index lists
// them (RAM before SSD), or none when it is not stored on a live node. It
// takes no lease and changes nothing on the master.
func (c *Client) LocateNamed(ctx context.Context, name string) ([]Location, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := checkNames("locate", []string{name}); err != nil {
		return nil, err
	}
	reps, err := c.locate(ctx, nameBatch([]string{name}), false)
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// WaitIndexedNamed is WaitIndexed for named objects.
func (c *Client) WaitIndexedNamed(ctx context.Context, names []string, within time.Duration) (bool, error) {
	if err := checkNames("wait", names); err != nil {
		return false, err
	}
	return c.waitIndexed(ctx, nameBatch(names), within)
}

// WaitIndexed waits until the index lists every block of ids on a live
// node, asking it every 50 ms. A block Put stores enters the index only
// with its node's next heartbeat, so a reader that must find it right
// after Put (an operator's put then get) waits here first. It returns true
// once every block is listed, false when within passes first, and an error
// when the index cannot be asked or ctx ends.
func (c *Client) WaitIndexed(ctx context.Context, ids []uint64, within time.Duration) (bool, error) {
	return c.waitIndexed(ctx, idBatch(ids), within)
}

func (c *Client) waitIndexed(ctx context.Context, b batch, within time.Duration) (bool, error) {
	if err := c.check(); err != nil {
		return false, err
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(indexPoll)
	defer tick.Stop()
	for {
		present, err := c.exists(ctx, b)
		if err != nil {
			return false, err
		}
		all := true
		for _, p := range present {
			all = all && p
		}
		if all {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("client: wait for %d %s of tenant %q to be indexed: %w", b.len(), b.noun(), c.opts.Tenant, ctx.Err())
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		}
	}
}
