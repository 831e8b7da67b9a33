package client

import (
	"context"
	"fmt"
)

// Index is the client's view of the master: the global block index,
// placement and membership. Implementations are safe for concurrent use;
// every method blocks at most until ctx ends.
type Index interface {
	// Lookup returns the length of the longest prefix of ids present on
	// live nodes and, for each of those prefix blocks, its replicas (RAM
	// before SSD). With lease true the returned replicas are protected from
	// eviction for the master's lease TTL and the lookup counts as an
	// access; with lease false nothing changes on the master.
	Lookup(ctx context.Context, tenant string, ids []uint64, lease bool) (prefix int, replicas [][]Location, err error)
	// Exists reports which of ids are present on live nodes, with no side
	// effects (no lease, no recency).
	Exists(ctx context.Context, tenant string, ids []uint64) ([]bool, error)
	// Place chooses the nodes for new blocks: for each id, up to replicas
	// distinct node IDs, the preferred first. hint is the node ID the
	// caller would like the first copy on ("" for none).
	Place(ctx context.Context, tenant string, ids []uint64, replicas int, hint string) ([][]string, error)
	// Nodes lists the nodes the master knows with their data-plane
	// addresses.
	Nodes(ctx context.Context) ([]Node, error)
}

// Tier is the storage tier of a replica.
type Tier uint8

// The tiers (the master's numbering: RAM before SSD).
const (
	TierRAM Tier = 1
	TierSSD Tier = 2
)

// String returns "ram", "ssd" or "tier(N)".
func (t Tier) String() string {
	switch t {
	case TierRAM:
		return "ram"
	case TierSSD:
		return "ssd"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Location is one replica of a block.
type Location struct {
	// Node is the ID of the node holding the copy.
	Node string
	// Addr is the node's data-plane address when the index knows it; ""
	// makes the client resolve Node through Index.Nodes.
	Addr string
	// Tier is where on the node the copy is.
	Tier Tier
	// Size is the block's length in bytes.
	Size int64
	// Sum is the block's checksum as the node reported it.
	Sum uint32
}

// Node is one node of the cluster as the index lists it.
type Node struct {
	// ID names the node.
	ID string
	// Addr is its data-plane address (host:port).
	Addr string
	// Live is false for a node that has missed its heartbeat TTL.
	Live bool
	// BlockSize is the node's slot size in bytes, as it registered it: a
	// block of n bytes takes ceil(n/BlockSize) slots of its capacity (0:
	// not known).
	BlockSize int64
}
