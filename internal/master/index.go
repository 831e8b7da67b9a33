package master

import (
	"sync"
	"sync/atomic"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// numShards is the number of index shards: a power of two comfortably above
// the core count of a master host, so two lookups rarely share a lock's
// cache line (64, as the brief suggests; groupcache and otter shard alike).
const numShards = 64

// shard is one slice of the global index: block key → replicas. mu guards m,
// exp and every replica field except lease, which leased lookups extend
// under the read lock with atomic compare-and-swap.
type shard struct {
	mu sync.RWMutex
	m  map[block.Key][]replica
	// exp is the expiry of named keys of m (unix ms on the master's clock,
	// > 0): a key at or past it is hidden from readers (keys.go). A record
	// lives only while its key has a replica in m: the last replica's
	// removal deletes it. nil until the shard's first expiry.
	exp map[block.Key]int64

	// Lookup counters, striped by the shard of a batch's first key so
	// concurrent lookups do not share one cache line.
	lookups, keys, hitKeys atomic.Int64

	_ [64]byte // keep neighbouring shards off each other's cache lines
}

// replica is one copy of a block in the index.
type replica struct {
	node *node
	// handle is the replica's key in the eviction policy (RAM replicas
	// that are not evicting), unique over the master's lifetime; 0 for SSD.
	handle uint64
	// lease is the unix-nanosecond end of the read lease (atomic).
	lease int64
	// touched is when a leased lookup last recorded an access to the
	// replica in the eviction policy (unix ns, atomic).
	touched  int64
	size     int64
	sum      uint32
	tier     meta.Tier
	evicting bool // an eviction order is pending; hidden from readers
}

// keyHash hashes a block key given its tenant's hash (block.FNV1a of the
// tenant): the key's block.Key.Hash, with the tenant hashed once per call
// rather than once per key.
func keyHash(tenantHash, id uint64) uint64 { return block.Mix64(id ^ tenantHash) }

// shardBits is log2(numShards): a key's shard is the low shardBits bits of
// its hash.
const shardBits = 6

func (m *Master) shardOf(h uint64) *shard { return &m.shards[h&(numShards-1)] }

func (m *Master) shardFor(k block.Key) *shard {
	return m.shardOf(k.Hash())
}

// find returns the index of n's replica in tier t within reps, or -1.
func find(reps []replica, n *node, t meta.Tier) int {
	for i := range reps {
		if reps[i].node == n && reps[i].tier == t {
			return i
		}
	}
	return -1
}
