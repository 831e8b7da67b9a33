// Package client is the kvpool client library: what an LLM serving engine
// (or the live trace replayer) links to use a kvpool cluster as a shared KV
// cache block store.
//
// A Client talks to the master's index (through the Index interface:
// normally the master's network protocol, an in-process adapter in tests)
// and to the nodes' data planes (one connection pool per node address).
//
//   - Lookup finds the longest cached prefix of a request's block IDs and
//     where each of its blocks lives, changing nothing on the master.
//   - Get looks the prefix up with a read lease and fetches its blocks in
//     parallel: one MGET per node, RAM replicas first, a second replica as
//     the fallback. Every block is verified against its key and checksum
//     (a corrupt copy is counted and never returned). Concurrent Gets of the
//     same block share one network fetch. The caller's context deadline
//     (see DeadlineFor) bounds the whole Get: past it, Get returns what has
//     arrived and marks the rest TimedOut, for the caller to recompute.
//   - Put asks the index where new blocks go (placed by bytes: each block
//     weighs what it takes in a node's RAM) and stores them there with one
//     MPUT per node, in parallel.
//   - Prefetch copies the cached prefix of a request into one node's RAM
//     ahead of use.
//   - Exists says which blocks are present, with no side effects.
//   - Access tells one node what a request used, in order, with each
//     block's chain position (depth and parent) for that node's eviction
//     policy: a touch of each block reused from its memory, a put of each
//     block computed or fetched.
//   - Fetch gets blocks from one replica the caller chose (say, by its own
//     planner), with no lease and no fallback.
//   - Delete removes blocks from every node the index lists them on.
//
// # Named objects
//
// Besides the chain ids of prefix blocks, an object may have a name of its
// own: 1 to 1024 bytes (block.MaxNameLen), any bytes, within the client's
// tenant, for a payload of any size from 0 bytes to the nodes' maximum
// object size (default 64 MiB; a node's --max-object-bytes, or
// max_object_bytes in its config, raises it up to 512 MiB). PutNamed,
// GetNamed, ExistsNamed and DeleteNamed are the batch forms for names.
// Names have no prefix: each is looked up on its own (the master's point
// lookup), and everything else is as for blocks: placement by bytes,
// read leases, RAM replicas first with a fallback, coalescing. The full
// name travels to the master and the node and is compared on every read,
// and every payload read is verified against block.Named(tenant, name) and
// its checksum (tenant, name and payload), so a read never returns an
// object stored under another name, even one whose internal id
// (block.NameID) collides. An object over the limit, or a name over 1 KiB,
// is refused with an error giving its size, the limit and the setting.
//
// # Failures and retries
//
// Every call sent to one node is bounded by Options.RequestTimeout within
// the caller's context. A node that fails a call (refused connection, I/O
// error, timeout) is marked down: later requests skip its replicas without
// contacting it until the index reports it live again (it went missing
// from the node list, or reported not live, and came back, or its address
// changed) or Options.DownRetry has passed. So a dead node costs a request
// at most one RequestTimeout, and only the first request after it died.
//
// Reads (Get, Exists, Lookup) are idempotent: a failed read is retried on
// the block's next replica. Puts are idempotent too, because a block's key
// names its content (a prefix-chain hash), so storing it twice stores the
// same bytes; still, the client does not retry a failed Put on another
// node: a block that could not be stored is simply recomputed next time,
// and a retry would spend the transfer budget of the request that is
// waiting for it. The connection pool's single reconnect after a stale
// idle connection is the only Put retry.
//
// # Concurrency
//
// A Client is safe for concurrent use by any number of goroutines.
package client
