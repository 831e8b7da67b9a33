// Package nodeclient is a low-level client of one kvpool node's data plane
// (the wire protocol served by package nodeserver): get, put, test and
// delete blocks by key ID, or objects by name (GetNamed, MGetNamed,
// PutNamed, MPutNamed, ExistsNamed, DeleteNamed), within the connection's
// tenant. It is what tests,
// benchmarks and the public client library use to talk to a node.
//
// A Conn is one connection: Dial performs the handshake (tenant, auth
// token) and learns the node's limits; each method sends one request (or a
// few, when a batch must be split) and waits for its response. A Conn
// serves one request at a time (concurrent calls wait for each other); a
// Pool keeps a few Conns to one address for concurrent use.
//
// Every block received is verified with block.Verify against the key asked
// for (the connection's tenant and the requested ID, or for a named object
// block.Named(tenant, name): the checksum covers the name, so an object of
// another name that shares the ID fails). A block that fails is
// counted (Counters.Corruptions) and reported as kvpool.ErrCorrupt, never
// returned: a corrupt, misdirected or mixed-up block is a miss, not data.
//
// Errors: per-key outcomes (kvpool.ErrNotFound, kvpool.ErrCorrupt,
// kvpool.ErrTooLarge, kvpool.ErrFull) are returned for that key; a request the
// node refused as a whole is a *wire.RemoteError (errors.Is works on its
// code's sentinel). An I/O error, a deadline, a cancelled context or a
// response that breaks the protocol leaves the connection unusable: every
// later call on it fails, and a Pool replaces it. Calls are bounded by
// their context's deadline, or DialOptions.Timeout when it has none.
//
// MAccess reports a request's accesses (touches of blocks the caller
// reused, puts of the others) with their chain positions, for the node's
// eviction policy; against a node without the ACCESS op it falls back to
// MPUT for the puts.
//
// Batches are split by the node's advertised limits (hello-ack): MGET and
// EXISTS by key count (and, named, by frame size), MPUT by key count and
// frame size. A payload over the node's MaxPayload (its max object size)
// or a name over block.MaxNameLen is refused before anything is sent,
// with the size, the limit and the setting that raises it. When a node
// answers the tail of an MGET with CodeTooLarge because the blocks did not
// fit one response frame, the client asks for that tail again.
package nodeclient
