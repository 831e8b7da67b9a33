// Package master is the kvpool master's core: the global block index, node
// membership, placement of new blocks, read leases, global eviction and
// SSD→RAM promotion control, as an in-process state machine. It has no
// sockets and starts no goroutines; a network front end calls its methods,
// and the caller drives Expire from its own ticker. The types it speaks
// (node IDs, tiers, replicas, inventories, deltas, tasks, placements) and
// the errors it returns are in package internal/meta, shared with the
// protocol, the node and the client.
//
// # Index
//
// The index maps an object key to its replicas: (node, tier, size,
// checksum). A key is a chain key (tenant, id) or a named key (tenant, id,
// name); the map is keyed by the whole block.Key, so two names sharing an
// id, and a chain key with a name's id, are distinct objects with no extra
// comparison. Tenants are namespaces: the same id under two tenants is two
// blocks. It is sharded by key hash (64 shards, an RWMutex each), so
// Lookup, the hot path, takes only shard read locks. Lookup is the prefix
// lookup of chain ids; Locate and ExistsKeys look keys up one by one,
// which is what named objects (no chain) need.
//
// # Redis key semantics
//
// Named keys carry what the Redis front needs beyond replicas (keys.go):
// an expiry (SetExpiry; unix milliseconds on the master's clock) kept in
// the key's shard next to its replicas and dropped with its last replica;
// a key at or past its expiry is hidden from Locate and ExistsKeys (and
// KeyInfo reports it present but not visible) while its replicas stay
// indexed until eviction reclaims them. KeyInfo is the key query, Scan
// enumerates a tenant's visible names with Redis SCAN semantics (its
// cursor is a shard index and a hash lower bound: one call reads one
// shard), and CountKeys and KeyCounts count them (a scan of the index).
// Chain keys have none of this: Lookup never looks at expiries.
//
// # Bytes
//
// Objects have any size, so everything the master weighs is bytes: a RAM
// replica is charged its footprint on its node, the name and payload
// rounded up to whole RAM chunks of the node's NodeInfo.BlockSize
// (meta.Footprint), which is what the node's arena spends on it. Node and
// pool usage, placement (PlaceObjects charges each choice the object's
// footprint), eviction (victims until the pool is under its low watermark
// in bytes) and promotion admission all count those bytes, so a 28-byte
// object and a 32 MiB one weigh what they take rather than one slot each.
//
// # Membership
//
// A node registers with its full inventory (Register) and then heartbeats
// every HeartbeatInterval with the changes (Heartbeat: inventory delta,
// usage, SSD hits, task results). A node silent for NodeTTL is invisible
// to readers at once and is dropped, with all its replicas and tasks, by the
// next Expire (which Lookup also runs when a node's deadline has passed).
// A node that comes back, or any node after a master restart, re-registers
// its full inventory: the index then holds exactly that inventory for it,
// so a new master is rebuilt purely from registrations.
//
// # Leases
//
// Lookup (or Locate) with lease true gives every returned replica a read
// lease until now+LeaseTTL and counts as an access for the eviction
// policy; a leased replica is never chosen as an eviction victim, named or
// not. Lookup and Locate with lease false, Exists, ExistsKeys and Query
// change nothing.
//
// # Eviction and promotion
//
// See Evict for global eviction (pool RAM watermarks, victims in policy
// order, demote or drop orders delivered in heartbeat replies) and
// considerPromotions (in tasks.go) for promotion control (a count-min
// sketch of SSD hits per node and block, admission on the Threshold-th hit
// under the node's RAM watermark and queue cap, at most MaxPerHeartbeat
// promotions per heartbeat). Both are counted in Stats; the Prometheus
// collector of package masterserver (NewCollector) exports every
// promotion series under Mooncake's master_promotion_ prefix and the rest
// under kvpool_master_.
//
// # Concurrency
//
// Every Master method is safe for concurrent use; the lock order is written
// on the Master type.
package master
