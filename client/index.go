package client

import (
	"context"
	"fmt"

	"github.com/kvpool/kvpool/block"
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
	// Locate returns, for each key on its own (no prefix semantics), its
	// replicas on live nodes (RAM before SSD; none when it is absent): the
	// lookup of named objects. The keys are of one tenant and all named
	// or all chain keys; a name is compared in full, so two names sharing
	// an id are two keys. Lease as Lookup's.
	Locate(ctx context.Context, keys []block.Key, lease bool) ([][]Location, error)
	// Exists reports which of keys (of one tenant, all named or all
	// chain keys) are present on live nodes, with no side effects (no
	// lease, no recency).
	Exists(ctx context.Context, keys []block.Key) ([]bool, error)
	// Place chooses the nodes for new objects: keys[i] of sizes[i] payload
	// bytes (of one tenant, all named or all chain keys), up to replicas
	// distinct node IDs each, the preferred first. The index places by
	// bytes: each choice weighs what the object takes on the node. hint
	// is the node ID the caller would like the first copy on ("" for
	// none).
	Place(ctx context.Context, keys []block.Key, sizes []int64, replicas int, hint string) ([][]string, error)
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
	// BlockSize is the node's RAM chunk size in bytes, as it registered
	// it: an object of n bytes under a name of l bytes takes
	// ceil((l+n)/BlockSize) chunks of its RAM (0: not known).
	BlockSize int64
}
