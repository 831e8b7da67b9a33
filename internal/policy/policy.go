// Package policy holds the cache eviction and admission policies that the
// simulator, the hit-ratio engine and the real store all drive. The very same
// objects run in model time and in the node, so a policy measured in the lab
// is the policy that runs in production.
//
// Concurrency: no type in this package is safe for concurrent use. A caller
// drives a policy under its own lock (one policy per cache shard).
//
// Capacities are counted in blocks: every block in a cache has the same size
// (the node's slot size, or 512 tokens of KV in model units).
package policy

import "github.com/kvpool/kvpool/block"

// Key identifies a block. In the traces it is a hash_id; in the store it is
// the tenant-namespaced block key.
type Key = uint64

// NoNextUse is the Access.NextUse of a key that is never accessed again.
const NoNextUse int64 = 1<<63 - 1

// Access describes one access to a block as the cache that drives a policy
// sees it. Policies may ignore any field but Key.
type Access struct {
	// Key is the block accessed.
	Key Key
	// Hint is the block's place in its request's prefix chain: Depth, its
	// position in its request's key list (0 = first), and Parent, the key
	// of the previous block in the chain, meaningful only when Depth > 0.
	// It is the hint the store's clients send (block.Hint), with Parent
	// translated into the policy's keys.
	block.Hint
	// Time is the caller's logical clock: strictly increasing across the
	// accesses of one cache (for example the global access sequence number).
	Time int64
	// NextUse is the Time of this key's next access, or NoNextUse. It is set
	// only for policies that implement Oracle; others must not rely on it.
	NextUse int64
}

// Eviction orders the resident blocks of one cache and names the next
// victim. The driving cache calls Insert for a block that becomes resident,
// Hit for an access to a resident block, Victim to choose what to evict and
// Remove to take a block out (after eviction or an explicit delete).
//
// Contract (checked by policytest.Run):
//   - Insert is called only for keys that are not resident; Hit and Remove
//     only for keys that are.
//   - Victim never removes anything and returns a resident key, or false
//     when the policy holds no keys.
//   - Len and Contains reflect exactly the inserted-and-not-removed keys.
//   - Ghost or history state a policy keeps about non-resident keys is its
//     own business and must be bounded by a small multiple of the capacity.
type Eviction interface {
	// Name is the policy's registry name (see EvictionNames).
	Name() string
	Insert(a Access)
	Hit(a Access)
	Victim() (Key, bool)
	Remove(k Key)
	Contains(k Key) bool
	Len() int
}

// Admission decides whether a block that missed becomes resident.
// Admit is called exactly once for every access to a non-resident block, so
// frequency-based admitters see every miss.
type Admission interface {
	Name() string
	Admit(a Access) bool
}

// Oracle is implemented by offline policies (Belady) that need each
// access's NextUse. A cache driving an Oracle must fill Access.NextUse.
type Oracle interface {
	NeedsFuture()
}

// Batcher is implemented by policies that evict in batches rather than one
// block at a time. After an insert, the cache evicts while Len() >
// EvictTo(Len(), capacity). Policies without it evict while Len() > capacity.
type Batcher interface {
	EvictTo(length, capacity int) int
}
