// Package wire is the codec of the node data plane: the length-prefixed
// binary protocol clients speak to a kvpool node over TCP to get, put, test
// and delete blocks, addressed by 64-bit chain IDs or by names, and to wait
// until the node's master has indexed its changes. It encodes
// and decodes; the server and client that use
// it live elsewhere. This comment is the protocol specification.
//
// # Conventions
//
// All integers are little-endian (as in block.Checksum). Sizes are in bytes.
// Reserved fields are written as zero and a decoder rejects any other value
// (frame.ErrMalformed), so every accepted frame has exactly one encoding and
// re-encodes to the same bytes.
//
// # Connection
//
// A connection starts with a handshake: the client sends a hello, the server
// answers with a hello-ack. On CodeOK the connection carries frames in both
// directions; otherwise the server closes it after the ack. The hello and
// hello-ack layouts never change between protocol versions, so a peer can
// always read the other's version and report a mismatch (CodeVersionMismatch
// and frame.ErrVersion on both sides).
//
// Hello (client to server), 12 bytes then tenant and token:
//
//	offset  size  field        meaning
//	0       4     magic        "KVPL"
//	4       2     version      protocol version the client speaks (2)
//	6       1     tenant len   T, at most Limits.MaxTenant (block.MaxTenantLen)
//	7       1     reserved     0
//	8       2     token len    K, at most Limits.MaxToken
//	10      2     reserved     0
//	12      T     tenant       [A-Za-z0-9._-]*, the connection's namespace; may be empty
//	12+T    K     token        opaque auth token; may be empty
//
// Hello-ack (server to client), 24 bytes then the message:
//
//	offset  size  field        meaning
//	0       4     magic        "KVPL"
//	4       2     version      version the server speaks (never 0)
//	6       2     code         CodeOK, or why the connection is refused
//	8       2     message len  M, at most MaxMessageLen
//	10      2     reserved     0
//	12      4     max frame    the server's Limits.MaxFrame
//	16      4     max batch    the server's Limits.MaxBatch
//	20      4     max payload  the server's Limits.MaxPayload
//	24      M     message      why (UTF-8 text)
//
// # Tenant isolation
//
// The tenant is set once per connection by the hello (and, with a token,
// authenticated there); frames carry 64-bit key IDs or object names only,
// never a tenant. The server namespaces every ID and name with the
// connection's tenant, so a client
// can neither read nor probe (by timing) another tenant's prefixes. Keeping
// the tenant out of the frames is deliberate: no request can name one.
//
// # Frames
//
// Every frame is a 16-byte header followed by a body of length-16 bytes:
//
//	offset  size  field        meaning
//	0       4     length       total frame length, header included (16 ≤ length ≤ Limits.MaxFrame)
//	4       1     op           operation (table below)
//	5       1     flags        0 (versions 1 and 2 define none)
//	6       2     reserved     0
//	8       8     request id   chosen by the client; a response echoes its request's
//
// A server may answer pipelined requests in any order; the client matches
// responses to requests by request id.
//
// Ops and bodies (n = count; a response op is its request op | 0x80):
//
//	op    name             body                                   length
//	0x01  GET              key id (u64)                           8
//	0x02  MGET             count (u32), n × key id (u64)          4 + 8n
//	0x03  PUT              block entry (code 0)                   20 + payload
//	0x04  MPUT             count (u32), n × block entry (code 0)  4 + Σ(20 + payload)
//	0x05  EXISTS           count (u32), n × key id (u64)          4 + 8n
//	0x06  DELETE           key id (u64)                           8
//	0x07  STATS            (empty)                                0
//	0x08  GET named        name entry                             2 + N
//	0x09  MGET named       count (u32), n × name entry            4 + Σ(2 + N)
//	0x0A  PUT named        named block entry (code 0)             22 + N + payload
//	0x0B  MPUT named       count (u32), n × named block entry     4 + Σ(22 + N + payload)
//	0x0C  EXISTS named     count (u32), n × name entry            4 + Σ(2 + N)
//	0x0D  DELETE named     name entry                             2 + N
//	0x0E  SYNC             (empty)                                0
//	0x10  ACCESS           count (u32), n × access entry          4 + Σ(36 + payload)
//	0x81  GET response     block entry                            20 + payload
//	0x82  MGET response    count (u32), n × block entry           4 + Σ(20 + payload)
//	0x83  PUT response     status entry                           12
//	0x84  MPUT response    count (u32), n × status entry          4 + 12n
//	0x85  EXISTS response  count (u32), n × status entry          4 + 12n
//	0x86  DELETE response  status entry                           12
//	0x87  STATS response   tier count (u8), tier entries          1 + Σ(97 + name)
//	0x88  GET named resp.  block entry                            20 + payload
//	0x89  MGET named resp. count (u32), n × block entry           4 + Σ(20 + payload)
//	0x8A  PUT named resp.  status entry                           12
//	0x8B  MPUT named resp. count (u32), n × status entry          4 + 12n
//	0x8C  EXISTS nm. resp. count (u32), n × status entry          4 + 12n
//	0x8D  DELETE nm. resp. status entry                           12
//	0x8E  SYNC response    status entry (key id 0)                12
//	0x90  ACCESS response  count (u32), n × status entry          4 + 12n
//	0xFF  ERROR            code (u16), message len (u16), message 4 + M
//
// Batch responses list their entries in request order, one per requested
// key. A batch's count is at most Limits.MaxBatch and may be 0. EXISTS is a
// pure query: the server answers from the tiers' Contains and must not
// change recency, admission or policy state, nor take or extend a read lease
// (CodeOK = present, CodeNotFound = absent). A per-key failure (a missing
// block) is a status in the response; ERROR answers a request that failed as
// a whole (undecodable, unknown op, unauthorized, internal failure), with the
// request's id.
//
// An MGET response never exceeds the server's MaxFrame: when the blocks do
// not all fit, the server answers the ones that do and marks the tail
// CodeTooLarge (no payload); the client asks for that tail again in a new
// request, or with GET when not even one block fits a frame.
//
// # Named objects
//
// The named ops (0x08–0x0D, Version 2) are GET, MGET, PUT, MPUT, EXISTS
// and DELETE with object names in place of key IDs: an LMCache chunk or a
// Redis key is a byte string, not a position in a prefix chain. A name is
// 1 to block.MaxNameLen (1024) bytes, any bytes, within the connection's
// tenant; its key is block.Named(tenant, name), whose ID is
// block.NameID(name). Names are new ops rather than a flag on the old
// ones so that the chain-ID frames the lab sends on every request keep
// their layout, size and speed.
//
// Name entry, 2 bytes then the name:
//
//	offset  size  field        meaning
//	0       2     name len     N, 1 ≤ N ≤ block.MaxNameLen
//	2       N     name         the object's name (any bytes)
//
// Named block entry (PUT named, MPUT named): a name entry, then a block
// entry whose key id is block.NameID(name) (a decoder rejects any other)
// and whose checksum is block.Checksum(block.Named(tenant, name),
// payload), then the payload.
//
// Responses to named ops have the layouts of the ID ops' responses (block
// and status entries in request order), with key id block.NameID(name):
// the name itself is not echoed, since the checksum covers it — a block
// of another name with the same ID fails verification like a flipped bit.
// Two names can share an ID; the node keeps them apart by the full name
// (docs/design.md), and the client verifies every block against the name
// it asked for.
//
// A name longer than block.MaxNameLen is frame.ErrTooLong (CodeBadRequest;
// the limit is fixed); an empty one frame.ErrMalformed. Both leave the
// stream in sync.
//
// # Sizes
//
// An object is 0 bytes to the node's max object size (default 64 MiB,
// at most MaxObjectSize = 512 MiB; node setting max_object_bytes, flag
// --max-object-bytes). A node advertises it as MaxPayload and a MaxFrame
// of MaxPayload + FrameOverhead (LimitsFor); a client refuses a larger
// payload before sending it. A payload over MaxPayload in a frame within
// MaxFrame is refused (CodeTooLarge, the stream stays in sync); a frame
// over MaxFrame loses the stream.
//
// Block entry, 20 bytes then the payload:
//
//	offset  size  field        meaning
//	0       8     key id       the block's ID within the connection's tenant
//	8       2     code         CodeOK in requests; the block's status in responses
//	10      2     reserved     0
//	12      4     checksum     block.Checksum({tenant, id}, payload); 0 unless code is OK
//	16      4     payload len  L ≤ Limits.MaxPayload; 0 unless code is OK
//	20      L     payload      the block's bytes
//
// The checksum covers the connection's tenant, the key ID and the payload,
// so a receiver verifies each block against the key it asked for: a block
// delivered under the wrong key, tenant or connection fails like a flipped
// bit. The payload follows its header directly, so a server sends a block by
// encoding the headers into a small buffer and writing the payload where
// it lies: from the RAM tier's chunks by writev, one buffer per run of
// adjacent chunks (AppendBlockFrameHead with net.Buffers), or from an SSD
// page file by sendfile; and a client reads each payload straight into
// its destination (Reader.NextBlock, Reader.ReadPayload).
//
// Access entry (ACCESS), a 16-byte hint then a block entry (code 0):
//
//	offset  size  field        meaning
//	0       8     parent       key id of the block before this one in its request's chain
//	8       4     depth        the block's position in its request's key list (0 = first)
//	12      1     flags        bit 0: touch; the other bits are 0
//	13      3     reserved     0
//	16      20+L  block entry  a touch has payload length 0 and checksum 0
//
// ACCESS reports one request's accesses to the node's blocks, in request
// order, so that the node's eviction policy sees what the simulator's
// sees (a key, its chain position, its parent, and that a request's
// blocks come first to last): a put entry stores its block as PUT does; a
// touch entry records an access to a block the node already holds — the
// client reused a copy it did not need to read — without moving it
// (CodeOK), or changes nothing when the node does not hold it in memory
// (CodeNotFound). Unlike EXISTS, a touch changes recency and policy state,
// as a read would; like EXISTS, it takes and extends no read lease.
// ACCESS came after the other ops without a version change: a server that
// predates it answers ERROR unsupported op and keeps the connection, and
// the client falls back to MPUT (losing only the hints and touches).
//
// SYNC asks the node to wait until its master's index holds every change
// the node made before the request: a client that put or deleted an
// object on one node and then looks it up through the master (a
// Redis-compatible front serving from several nodes) sees its own write.
// A node reports its changes to the master with every heartbeat (once a
// second by default); SYNC has the node report at once, and answers
// CodeOK when the master has accepted the report, or CodeUnavailable when
// the master could not be reached in time (the node's data is unchanged
// either way). A node without a master answers CodeOK at once: it has no
// index to wait for. SYNC reads and changes nothing a client could see,
// so any authenticated connection may send it. Like ACCESS it came after
// the other ops without a version change: a server that predates it
// answers ERROR unsupported op and keeps the connection.
//
// Status entry, 12 bytes:
//
//	offset  size  field        meaning
//	0       8     key id       the key
//	8       2     code         the key's status
//	10      2     reserved     0
//
// Tier entry of a STATS response, 97 bytes plus the name; the counters are
// tier.Stats's fields in declaration order, as u64 (two's complement for the
// signed ones). Bytes is the payload bytes the tier holds (the sum of the
// objects' lengths), HeldBytes the space they occupy in it (chunks or
// pages, names and metadata included); Version 2 added HeldBytes:
//
//	offset  size  field        meaning
//	0       1     name len     N
//	1       N     name         tier name ("ram", "ssd")
//	1+N     8×12  counters     Blocks, Bytes, HeldBytes, CapacityBytes, Hits, Misses, BytesIn,
//	                           BytesOut, EvictAttempts, Evicted, Corruptions, IOErrors
//
// ERROR body: code (u16, never CodeOK), message length (u16, at most
// MaxMessageLen), message.
//
// # Status codes
//
//	code  name              error (ErrorFor / CodeOf)
//	0     ok                nil
//	1     not found         kvpool.ErrNotFound
//	2     corrupt           kvpool.ErrCorrupt
//	3     too large         kvpool.ErrTooLarge (also frame.ErrFrameTooLarge, frame.ErrPayloadTooLarge)
//	4     full              kvpool.ErrFull
//	5     bad request       frame.ErrBadRequest (also frame.ErrMalformed, frame.ErrBatchTooLong, frame.ErrTooLong, frame.ErrBadMagic, bad tenant or name)
//	6     unsupported op    frame.ErrUnknownOp
//	7     unauthorized      kvpool.ErrUnauthorized
//	8     internal          frame.ErrInternal (and any error CodeOf does not know)
//	9     version mismatch  frame.ErrVersion (hello-ack only)
//	10    unavailable       kvpool.ErrUnavailable (also kvpool.ErrClosed)
//	11    quota exceeded    kvpool.ErrQuota
//
// The numbers are this protocol's; the master protocol
// (internal/master/masterproto) numbers the same meanings differently, and
// both map to the one vocabulary of packages kvpool and frame, so errors.Is
// works the same on a failure from either.
//
// A decoder accepts codes it does not know (a newer peer may send them);
// ErrorFor maps them to an error wrapping frame.ErrInternal.
//
// # Decoding rules
//
// The Reader enforces every limit before reading or allocating what a length
// field announces, and reads only the bytes the frame's length covers, so it
// never waits for bytes beyond the frame (a deadline on the connection bounds
// every call). A frame whose length is below 16 or above Limits.MaxFrame, a
// truncated frame (io.ErrUnexpectedEOF) and any handshake error lose the
// stream and the connection must close. Any other error (an unknown op, a
// batch over Limits.MaxBatch, a payload over Limits.MaxPayload, a name over
// block.MaxNameLen, inconsistent lengths) leaves the stream in sync: the server skips the frame, answers
// ERROR and carries on.
package wire
