// Package masterproto is the codec of the master's control plane: the
// length-prefixed binary protocol nodes and clients speak to the kvpool
// master over TCP to register, heartbeat, look up prefixes, check
// existence, place new objects, list nodes, and query, expire, scan and
// count named keys (the Redis front's key semantics). It encodes and
// decodes; the server (masterserver) and the client (masterclient) live
// elsewhere. This
// comment is the protocol specification. It follows the conventions of the
// node data plane (package wire).
//
// # Conventions
//
// All integers are little-endian. Sizes are in bytes, durations in
// nanoseconds (u64), times in unix nanoseconds (i64, 0 = no time).
// Reserved fields are written as zero and a decoder rejects any other value
// (frame.ErrMalformed), booleans are one byte 0 or 1, and tables list their
// entries once each in order of first use, so every accepted frame has
// exactly one encoding and re-encodes to the same bytes (FuzzDecode checks
// this). str8 is a u8 length then that many bytes. Node IDs are at most
// MaxNodeIDLen (64) bytes, addresses at most 255, tenants are block tenant
// names (at most 64 bytes of [A-Za-z0-9._-], validated on decode).
//
// # Frames
//
// Every frame is a 16-byte header followed by a body of length-16 bytes:
//
//	offset  size  field        meaning
//	0       4     length       total frame length, header included (16 ≤ length ≤ Limits.MaxFrame)
//	4       1     op           operation (table below)
//	5       1     flags        0, or FlagNamed (0x01) on EXISTS, PLACE, LOCATE, QUERY, KEYINFO and EXPIRE requests,
//	                           or FlagBacklog (0x02: more inventory follows) on REGISTER and HEARTBEAT requests
//	6       2     reserved     0
//	8       8     request id   chosen by the client; a response echoes its request's
//
// A connection starts with HELLO; the server answers with a HELLO response
// and, unless its code is OK, closes the connection. Then the client may
// pipeline requests; the server answers them in order, each with the
// response op (request op | 0x80) or ERROR, carrying the request's id. The
// header and the fixed part of the HELLO bodies never change between
// versions.
//
// Both HELLO bodies may end with an optional cluster ID trailer, str8 id
// (1 to 64 bytes of [A-Za-z0-9._-], meta.CheckClusterID), absent when the
// ID is empty: a HELLO without it is byte for byte the original encoding.
// A node started for a cluster sends its ID; the master refuses (code
// unauthorized) a HELLO whose ID is not its own, and answers an accepted
// HELLO that carried one with its own ID in the response's trailer, which
// the node checks in turn. A master with an ID refuses REGISTER and
// HEARTBEAT (code unauthorized) on a connection whose HELLO carried none,
// so a node joins only the master it was started for, checked on both
// sides; clients (no REGISTER) need not send one. A peer of an older
// build rejects a trailer as malformed, so a mismatch is never silent.
//
// After it, both HELLO bodies may end with the term trailer, which starts
// with the byte 0xFE (no cluster ID length is that large). A client that
// follows a cluster's leader among several masters sends it: 0xFE, then
// the highest leader epoch it has seen (u64, 0 for none). The master then
// answers with its own: 0xFE, an epoch (u64: the one it leads; 0 for a
// master without an election; in a refusal, the leader's as far as it
// knows), the margin in milliseconds (u32, at most an hour: how long after
// a client sent a request an order in the answer may still be trusted, a
// tenth of the leader's lease; 0 for no limit), and str8 the control
// address of the leader it knows ("" for none). A standby, a leader whose term has
// ended, or a leader of an epoch older than the client's refuses with
// code not leader (10); with the trailer the client goes to the leader
// it names. Without the trailer, a HELLO keeps its earlier encoding.
//
//	op    name        request body                          response body
//	0x01  HELLO       magic "KVPM", version u16,             magic, version u16, code u16, max frame u32,
//	                  token len u16, reserved u32, token,    max batch u32, max items u32, msg len u16,
//	                  [str8 cluster id], [0xFE epoch u64]    reserved u16, message, [str8 cluster id],
//	                                                         [0xFE epoch u64, margin ms u32, str8 leader]
//	0x02  REGISTER    str8 node, str8 addr, ram u64, ssd     session u64, heartbeat u64, node TTL u64
//	                  u64, block size u64, usage (ram u64,
//	                  ssd u64), tenants, inventory
//	0x03  HEARTBEAT   str8 node, session u64, usage,         heartbeat u64, tenants, u32 n, n × task
//	                  tenants, added, removed, moved,
//	                  ssd hits, done
//	0x04  LOOKUP      lease u8, str8 tenant, u32 n, n × id   hit u32, node table, hit × (u16 r, r × replica)
//	0x05  EXISTS      str8 tenant, keys                      u32 n, n × u8 (1 present, 0 absent)
//	0x06  PLACE       str8 tenant, str8 hint, replicas u16,  per block u16, degraded u8, reserved u8,
//	                  strategy u8, reserved u8, keys,        node table, u32 m, m × u16 node index
//	                  n × size u64
//	0x07  NODES       (empty)                                u32 n, n × node status
//	0x08  QUERY       str8 tenant, id u64, [name]            u32 n, n × replica status
//	0x09  LOCATE      lease u8, str8 tenant, keys            u32 n, node table, n × (u16 r, r × replica)
//	0x0A  KEYINFO     str8 tenant, keys                      id table, u32 n, n × key info
//	0x0B  EXPIRE      force u8, str8 tenant, keys,           u32 n, n × u8 (1 applied, 0 not)
//	                  n × expire at i64
//	0x0C  SCAN        str8 tenant, cursor u64, count u32     cursor u64, u32 n, n × name
//	0x0D  COUNT       str8 tenant                            keys u64, expiring u64
//	0xFF  ERROR       —                                      code u16 (never 0), msg len u16, message
//
// Tables and entries:
//
//	tenants         u16 n (at most 32767), n × str8 tenant; entries refer to a tenant by a
//	                tenant ref: u16 index, bit 15 (0x8000) set for a named key
//	name            u16 length (1 to 1024), the name's bytes
//	item (24)       tenant ref u16, tier u8, reserved u8, checksum u32, id u64, size u64, [name]
//	inventory,
//	added           u32 n, n × item
//	removed         u32 n, n × (tenant ref u16, tier u8, reserved u8, id u64, [name])
//	moved           u32 n, n × (tenant ref u16, from tier u8, to tier u8, id u64, [name])
//	ssd hits        u32 n, n × (tenant ref u16, id u64, [name])
//	done            u32 n, n × (task id u64, bytes u64, ok u8)
//	task (20)       task id u64, kind u8 (1 demote, 2 drop, 3 promote), reserved u8,
//	                tenant ref u16, key id u64, [name]
//	keys            u32 n, n × id u64; with FlagNamed n × (id u64, name)
//	node table      u16 n, n × (str8 node, str8 data-plane address)
//	replica (16)    node index u16, tier u8, reserved u8, checksum u32, size u64
//	node status     str8 node, str8 addr, ram u64, ssd u64, block size u64, session u64, alive u8,
//	                last heartbeat i64, heartbeat age i64, reported (2 × u64), indexed (2 × u64),
//	                ram replicas, ssd replicas, evicting, promotions queued, tasks in flight (5 × u32)
//	replica status  str8 node, str8 addr, tier u8, flags u8 (0x01 node alive, 0x02 evicting),
//	                checksum u32, size u64, lease until i64
//	id table        u16 n, n × str8 node (distinct, in order of first use)
//	key info        flags u8 (0x01 present, 0x02 visible), expire at i64 (unix ms, 0 none),
//	                u16 h, h × u16 id table index (holders, sorted by node ID, distinct)
//
// # Names
//
// A key is a chain key (tenant, id) or a named key (tenant, id, name:
// block.Key.Name, 1 to 1024 bytes, any bytes; its id is block.NameID of
// the name, carried anyway so the master indexes exactly the key the node
// stored). A named key's name is written after the fixed part of its entry
// and flagged where the key's tenant is referenced (bit 15 of the tenant
// ref), or for a batch of one tenant (EXISTS, PLACE, LOCATE, QUERY) by
// FlagNamed in the request header. Chain keys carry no flag and no name:
// their entries are the version 1 bytes, so the lab's hot path (LOOKUP,
// chain ids only) did not grow. Names are never compared by id: two names
// sharing an id, and a chain key whose id equals a name's, are three keys.
// PLACE carries each object's size, so the master places by bytes: a
// node's free RAM against the object's footprint (meta.Footprint). LOCATE
// is the point lookup of named objects: every key on its own, n blocks in
// the response, an absent key's with 0 replicas (LOOKUP stays the prefix
// lookup of chain ids).
//
// KEYINFO, EXPIRE, SCAN and COUNT give the Redis front the key semantics
// the master holds for named keys (see master.Master.SetExpiry, KeyInfo,
// Scan and KeyCounts): a key's expiry (unix milliseconds on the master's
// clock; a key at or past it is hidden as if deleted), whether it is
// present and visible and which nodes hold it, a page of a tenant's
// visible names per SCAN (cursor 0 starts and ends a scan; the master's
// Scan documents its encoding, and every u64 is a valid cursor), and a
// tenant's key counts. KEYINFO and EXPIRE take a batch of named keys
// (FlagNamed; the master answers a batch of chain keys with code bad
// request); an EXPIRE without force applies to visible keys only, with
// force to any key the index holds. A KEYINFO entry of an absent key has
// flags 0, expiry 0 and no holder; a visible key is present. A COUNT
// response has expiring ≤ keys. The four ops came within version 2:
// they change no other frame, and a master of an older build answers them
// with code unsupported op.
//
// Version 2 introduced names, PLACE sizes and LOCATE. The HELLO layout is
// unchanged from version 1 (testdata/golden/hello.hex still decodes), so a
// peer of version 1 is refused with code version mismatch.
//
// Tiers are 1 (RAM) and 2 (SSD). A LOOKUP response lists each distinct node
// of its replicas once, with its data-plane address, so a client needs no
// second round trip to reach the blocks, and a 32-key response of a few
// nodes stays small. Every prefix block has at least one replica.
//
// # Status codes
//
//	code  name              error (ErrorFor / CodeOf)
//	0     ok                nil
//	1     bad request       frame.ErrBadRequest = meta.ErrBadRequest (also frame.ErrMalformed, frame.ErrBatchTooLong, frame.ErrTooLong)
//	2     unknown node      meta.ErrUnknownNode: re-register with the full inventory
//	3     no nodes          meta.ErrNoNodes
//	4     unsupported op    frame.ErrUnknownOp
//	5     unauthorized      kvpool.ErrUnauthorized (HELLO; REGISTER and HEARTBEAT of a peer of another cluster)
//	6     internal          frame.ErrInternal
//	7     version mismatch  frame.ErrVersion (HELLO only)
//	8     unavailable       kvpool.ErrUnavailable: the master is shutting down or at its connection limit
//	9     too large         kvpool.ErrTooLarge (also frame.ErrFrameTooLarge)
//
// The numbers are this protocol's; the node protocol (internal/node/wire)
// numbers the same meanings differently, and both map to the one
// vocabulary of packages kvpool and frame. The frame header, the reader
// and the handshake's magic-and-version prefix are package frame's.
//
// # Decoding rules
//
// The Reader checks a frame's length against Limits.MaxFrame before
// reading its body and grows its buffer as the bytes arrive, never to the
// announced length up front. Every count is checked against its limit
// (Limits.MaxBatch for the keys of LOOKUP, EXISTS, PLACE, LOCATE, KEYINFO
// and EXPIRE and the answers to them, Limits.MaxItems for other lists,
// SCAN names included) and against the bytes left in the frame
// before anything is allocated for it. A length out of range, a truncated
// frame or an I/O error loses the stream: the connection closes. Any other
// error (unknown op, malformed body, batch over a limit) leaves the stream
// in sync: the server answers ERROR with the request's id and carries on.
//
// # Performance
//
// LOOKUP is the hot path. DecodeLookup reuses the request's id slice and
// its tenant string when unchanged; AppendLookupResult and
// DecodeLookupResult reuse the result's slices and intern node IDs and
// addresses across calls; no reflection, no maps: a server or client
// holding one Lookup and one LookupResult per connection allocates nothing
// per request in steady state (TestLookupDecodeAllocs).
package masterproto
