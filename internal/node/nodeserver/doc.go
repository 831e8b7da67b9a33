// Package nodeserver is a kvpool node's data plane: a TCP server that speaks
// the wire protocol (package wire) and serves the blocks of a Backend (the
// node's tiered RAM+SSD store).
//
// # Connections
//
// A connection starts with the handshake: the server reads the hello within
// Options.HandshakeTimeout, checks the protocol version, the auth token
// and the tenant (block.Key.Validate; then package auth: the token must be
// the cluster token, Options.Token, or the tenant's own token from
// Options.TenantTokens, or the tenant must be a shared namespace, which
// any valid token may read; then Options.TenantPolicy), and answers with a
// hello-ack carrying its limits. A refused hello gets an ack saying why
// (CodeVersionMismatch, CodeUnauthorized, CodeBadRequest) and the connection
// closes. Connections beyond Options.MaxConns are refused with
// CodeUnavailable.
//
// After the handshake one goroutine serves the connection: it reads a
// request, answers it, and reads the next, so responses go out in request
// order and a client may pipeline (send several requests before reading).
// Every key on the connection is namespaced by the hello's tenant. A
// connection that may read but not write its namespace (a tenant token on a
// shared namespace it is not a writer of) gets an ERROR frame with
// CodeUnauthorized for each PUT, MPUT and DELETE (named or not), and stays
// usable.
//
// # Errors
//
// A per-key outcome (a missing or corrupt block, a failed put) is a status
// in the response. A request that cannot be served as a whole gets an ERROR
// frame with its request id and the connection carries on; this covers the
// recoverable decode errors (unknown op, a response op sent as a request,
// malformed body, batch too long, payload too large). Errors that lose the
// frame boundary (a length below the header or above Limits.MaxFrame, a
// truncated frame, a read or write timeout, a failed write) close the
// connection. A panic while serving a connection closes it and is counted
// (Stats.Panics) and logged as a bug; the server carries on.
//
// An MPUT answered with ERROR (a malformed block entry part-way through) may
// have stored the blocks before the bad one.
//
// # Named objects
//
// The named ops (GET, MGET, PUT, MPUT, EXISTS and DELETE named) carry
// object names instead of key IDs; the server keys each with
// block.Named(tenant, name) and serves it through the same Backend calls
// and send paths (writev of the payload's pieces, sendfile) as a chain
// key, so a Backend sees named keys as block.Keys with Name set. The
// write ops' grant check covers PUT, MPUT and DELETE named alike.
//
// The server's limits come from the node's max object size
// (wire.LimitsFor): a payload over Limits.MaxPayload is answered with an
// ERROR (CodeTooLarge) giving its size, the max object size and the node
// setting that raises it (--max-object-bytes, max_object_bytes); a name
// over block.MaxNameLen with an ERROR (CodeBadRequest) giving its length
// and the fixed limit. Both leave the connection usable.
//
// A PUT payload is read whole into a buffer before the backend stores it.
// The buffers held at once, across connections, are bounded by
// Options.MaxPutBytes (two maximum payloads, at least 256 MiB): a PUT
// beyond it waits, first come first served, before its payload is read,
// so TCP pushes back on its sender rather than the node allocating a
// buffer per connection. Buffers up to 8 MiB are recycled; larger ones
// are allocated per PUT and freed by the GC, so one 512 MiB PUT does not
// leave a 512 MiB buffer pooled.
//
// # Access hints
//
// ACCESS carries a request's accesses in order, each with its chain
// position (wire.Hint): puts go to AccessBackend.PutHinted, touches to
// AccessBackend.Touch. A Backend that does not implement AccessBackend
// gets ACCESS answered with ERROR CodeUnsupportedOp, as a server that
// predates the op answers it; a connection that may not write refuses it
// like a PUT.
//
// # Sync
//
// SYNC asks the backend to wait until its changes are in an index kept
// elsewhere (a node's master): a Backend that implements Syncer gets the
// call, bounded by Options.SyncTimeout and the server's context, and the
// response's status is CodeOK or the code of its error (CodeUnavailable
// when the wait ran out or the server is shutting down); any other
// Backend answers CodeOK at once. Any authenticated connection may send
// SYNC: it reveals nothing and changes no data. The connection serves
// its next request after the answer.
//
// # Deadlines
//
// Nothing waits forever: the next frame's header must arrive within
// Options.IdleTimeout, the rest of a frame (and each PUT payload, counted
// from when the ingress pacer lets it in) within Options.ReadTimeout, and
// each piece of a response (counted from when the egress pacer lets it out)
// must be accepted by the socket within Options.WriteTimeout.
//
// # Zero copy
//
// Blocks are sent by reference. A GET or MGET response is assembled as a
// small buffer of headers plus the payloads where they lie: a RAM block's
// payload is written from its chunks with writev (net.Buffers, one buffer
// per run of adjacent chunks); an SSD block's payload is sent from its page
// file with sendfile(2) where the backend hands out a file section (one run
// of adjacent pages) and the platform allows it (Linux), and otherwise
// from a verified read into a pooled buffer. One MGET
// response mixes both, in request order. The backend pins every block of a
// response (Backend.Acquire) until it has been written. PUT payloads are read
// from the socket straight into a pooled buffer of the payload's size class
// and handed to Backend.Put, which copies them and verifies the client's
// checksum.
//
// # Frame budget
//
// A response frame never exceeds the server's Limits.MaxFrame. When the
// blocks an MGET asks for do not all fit, the server sends those that fit
// and answers the rest, a suffix of the batch, with CodeTooLarge and no
// payload; the client asks for that suffix again (package nodeclient does).
// A block larger than Limits.MaxPayload is answered with CodeTooLarge too.
//
// # Shutdown
//
// Serve returns when its context ends or Close is called. Either stops
// accepting, interrupts connections waiting for a request, cancels the
// context of requests in flight (pacer waits, backend calls), and waits for
// every connection goroutine to finish. The accept loop, the connection
// limit and this stop are package server's (the skeleton every kvpool
// front shares); this package is the node protocol's connection handler.
package nodeserver
