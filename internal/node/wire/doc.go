// Package wire is the codec of the node data plane: the length-prefixed
// binary protocol clients speak to a kvpool node over TCP to get, put, test
// and delete blocks. It encodes and decodes; the server and client that use
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
//	4       2     version      protocol version the client speaks (1)
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
// authenticated there); frames carry 64-bit key IDs only, never a tenant.
// The server namespaces every ID with the connection's tenant, so a client
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
//	5       1     flags        0 (version 1 defines none)
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
//	0x10  ACCESS           count (u32), n × access entry          4 + Σ(36 + payload)
//	0x81  GET response     block entry                            20 + payload
//	0x82  MGET response    count (u32), n × block entry           4 + Σ(20 + payload)
//	0x83  PUT response     status entry                           12
//	0x84  MPUT response    count (u32), n × status entry          4 + 12n
//	0x85  EXISTS response  count (u32), n × status entry          4 + 12n
//	0x86  DELETE response  status entry                           12
//	0x87  STATS response   tier count (u8), tier entries          1 + Σ(89 + name)
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
// encoding the headers into a small buffer and writing the payload from its
// RAM slot by writev (AppendBlockFrameHead with net.Buffers) or
// from its SSD slot by sendfile, and a client reads each payload straight
// into its destination (Reader.NextBlock, Reader.ReadPayload).
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
// Status entry, 12 bytes:
//
//	offset  size  field        meaning
//	0       8     key id       the key
//	8       2     code         the key's status
//	10      2     reserved     0
//
// Tier entry of a STATS response, 89 bytes plus the name; the counters are
// tier.Stats's fields in declaration order, as u64 (two's complement for the
// signed ones):
//
//	offset  size  field        meaning
//	0       1     name len     N
//	1       N     name         tier name ("ram", "ssd")
//	1+N     8×11  counters     Blocks, Bytes, CapacityBytes, Hits, Misses, BytesIn,
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
//	5     bad request       frame.ErrBadRequest (also frame.ErrMalformed, frame.ErrBatchTooLong, frame.ErrBadMagic, bad tenant)
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
// batch over Limits.MaxBatch, a payload over Limits.MaxPayload, inconsistent
// lengths) leaves the stream in sync: the server skips the frame, answers
// ERROR and carries on.
package wire
