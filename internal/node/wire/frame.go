package wire

import (
	"fmt"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/tier"
)

// Version is the protocol version this package speaks. It changes whenever
// a frame's layout or meaning changes; the hello and hello-ack layouts never
// change, so two versions can always tell each other apart. Version 2
// added the named ops (0x08–0x0D and their responses) and HeldBytes in
// the STATS response's tier entries. SYNC (0x0E) came later without a new
// Version, as ACCESS did: a server that predates it answers ERROR
// CodeUnsupportedOp.
const Version uint16 = 2

// Magic starts every hello and hello-ack.
const Magic = "KVPL"

// Encoded sizes, in bytes.
const (
	// HeaderLen is the size of a frame header.
	HeaderLen = frame.HeaderLen
	// BlockHeaderLen is the size of a block entry's header (before its
	// payload).
	BlockHeaderLen = 20
	// StatusLen is the size of a status entry.
	StatusLen = 12
	// HintLen is the size of the hint that precedes each block entry of
	// an ACCESS request.
	HintLen = 16
	// HelloLen is the size of a hello's fixed part (before tenant and token).
	HelloLen = 12
	// HelloAckLen is the size of a hello-ack's fixed part (before the
	// message).
	HelloAckLen = 24
	// NameHeaderLen is the size of the length in front of each name of a
	// named op (u16).
	NameHeaderLen = 2

	countLen      = 4  // u32 count of a batch body
	idLen         = 8  // u64 key ID
	errorFixedLen = 4  // u16 code + u16 message length
	tierFixedLen  = 97 // u8 name length + 12 × u64 counters
	statsCountLen = 1  // u8 tier count
)

// Op is a frame's operation. Requests have the high bit clear; the response
// to request op o is o|0x80; OpError answers any request that failed as a
// whole.
type Op uint8

// Ops. Values are part of the protocol and never change.
const (
	// OpGet asks for one block. Body: key ID.
	OpGet Op = 0x01
	// OpMGet asks for a batch of blocks. Body: count, key IDs.
	OpMGet Op = 0x02
	// OpPut stores one block. Body: a block entry (code OK).
	OpPut Op = 0x03
	// OpMPut stores a batch of blocks. Body: count, block entries.
	OpMPut Op = 0x04
	// OpExists asks which of a batch of keys the node holds. Body: count,
	// key IDs. EXISTS is a pure query: the server answers from Contains and
	// must not change recency, admission or any policy state, nor take or
	// extend a read lease (docs/design.md, "Principles": existence checks
	// never take or extend a lease).
	OpExists Op = 0x05
	// OpDelete removes one block. Body: key ID.
	OpDelete Op = 0x06
	// OpStats asks for the node's per-tier counters. Body: empty.
	OpStats Op = 0x07
	// OpAccess reports a request's accesses to the node's blocks, in
	// order, each with its chain position (a Hint): a touch of a block
	// the client already holds a copy of, or a put. Body: count, n ×
	// (hint, block entry). Added after the first seven ops without a new
	// Version: a server that predates it answers ERROR CodeUnsupportedOp
	// and keeps the connection, so a client can fall back to MPUT.
	OpAccess Op = 0x10

	// The named ops are the six key ops above with object names in place
	// of key IDs (Version 2). Within the connection's tenant a name is 1 to
	// block.MaxNameLen bytes, any bytes; its block.Key is
	// block.Named(tenant, name), whose ID (block.NameID) stands in the
	// key id fields of block and status entries.

	// OpGetNamed asks for one named object. Body: a name.
	OpGetNamed Op = 0x08
	// OpMGetNamed asks for a batch of named objects. Body: count, names.
	OpMGetNamed Op = 0x09
	// OpPutNamed stores one named object. Body: a name then a block entry
	// (code OK).
	OpPutNamed Op = 0x0A
	// OpMPutNamed stores a batch of named objects. Body: count, n × (name,
	// block entry).
	OpMPutNamed Op = 0x0B
	// OpExistsNamed asks which of a batch of names the node holds, as
	// OpExists does (a pure query). Body: count, names.
	OpExistsNamed Op = 0x0C
	// OpDeleteNamed removes one named object. Body: a name.
	OpDeleteNamed Op = 0x0D

	// OpSync waits until the node's master indexes every change the node
	// made before the request (a put or delete on this node is then seen
	// by lookups through the master, read-your-writes across nodes); a
	// standalone node answers at once. Body: empty. Added after Version 2
	// without a new Version: a server that predates it answers ERROR
	// CodeUnsupportedOp and keeps the connection.
	OpSync Op = 0x0E

	// OpGetResponse answers OpGet. Body: a block entry.
	OpGetResponse Op = 0x81
	// OpMGetResponse answers OpMGet. Body: count, block entries in request
	// order.
	OpMGetResponse Op = 0x82
	// OpPutResponse answers OpPut. Body: a status entry.
	OpPutResponse Op = 0x83
	// OpMPutResponse answers OpMPut. Body: count, status entries in request
	// order.
	OpMPutResponse Op = 0x84
	// OpExistsResponse answers OpExists. Body: count, status entries in
	// request order (CodeOK: present, CodeNotFound: absent).
	OpExistsResponse Op = 0x85
	// OpDeleteResponse answers OpDelete. Body: a status entry.
	OpDeleteResponse Op = 0x86
	// OpStatsResponse answers OpStats. Body: tier count, tier stats.
	OpStatsResponse Op = 0x87
	// OpAccessResponse answers OpAccess. Body: count, status entries in
	// request order (a touch of an absent block: CodeNotFound).
	OpAccessResponse Op = 0x90
	// OpGetNamedResponse answers OpGetNamed. Body: a block entry.
	OpGetNamedResponse Op = 0x88
	// OpMGetNamedResponse answers OpMGetNamed. Body: count, block entries
	// in request order.
	OpMGetNamedResponse Op = 0x89
	// OpPutNamedResponse answers OpPutNamed. Body: a status entry.
	OpPutNamedResponse Op = 0x8A
	// OpMPutNamedResponse answers OpMPutNamed. Body: count, status entries
	// in request order.
	OpMPutNamedResponse Op = 0x8B
	// OpExistsNamedResponse answers OpExistsNamed. Body: count, status
	// entries in request order.
	OpExistsNamedResponse Op = 0x8C
	// OpDeleteNamedResponse answers OpDeleteNamed. Body: a status entry.
	OpDeleteNamedResponse Op = 0x8D
	// OpSyncResponse answers OpSync. Body: a status entry, key id 0:
	// CodeOK once the master has the changes, CodeUnavailable when it could
	// not be reached in time.
	OpSyncResponse Op = 0x8E
	// OpError answers a request that failed as a whole (undecodable,
	// unknown op, unauthorized, internal failure). Body: code, message.
	OpError Op = 0xFF
)

const responseBit Op = frame.ResponseBit

// shape is the layout of an op's body.
type shape uint8

const (
	shapeUnknown     shape = iota
	shapeEmpty             // STATS, SYNC
	shapeID                // GET, DELETE
	shapeIDs               // MGET, EXISTS
	shapeBlock             // PUT, GET response
	shapeBlocks            // MPUT, MGET response
	shapeStatus            // PUT response, DELETE response, SYNC response
	shapeStatuses          // MPUT response, EXISTS response
	shapeStats             // STATS response
	shapeError             // ERROR
	shapeAccess            // ACCESS
	shapeName              // GET named, DELETE named
	shapeNames             // MGET named, EXISTS named
	shapeNamedBlock        // PUT named
	shapeNamedBlocks       // MPUT named
)

func (o Op) shape() shape {
	switch o {
	case OpStats, OpSync:
		return shapeEmpty
	case OpGet, OpDelete:
		return shapeID
	case OpMGet, OpExists:
		return shapeIDs
	case OpPut, OpGetResponse, OpGetNamedResponse:
		return shapeBlock
	case OpMPut, OpMGetResponse, OpMGetNamedResponse:
		return shapeBlocks
	case OpPutResponse, OpDeleteResponse, OpPutNamedResponse, OpDeleteNamedResponse, OpSyncResponse:
		return shapeStatus
	case OpMPutResponse, OpExistsResponse, OpAccessResponse, OpMPutNamedResponse, OpExistsNamedResponse:
		return shapeStatuses
	case OpGetNamed, OpDeleteNamed:
		return shapeName
	case OpMGetNamed, OpExistsNamed:
		return shapeNames
	case OpPutNamed:
		return shapeNamedBlock
	case OpMPutNamed:
		return shapeNamedBlocks
	case OpAccess:
		return shapeAccess
	case OpStatsResponse:
		return shapeStats
	case OpError:
		return shapeError
	}
	return shapeUnknown
}

// named reports whether a shape carries names (a request of a named op).
func (s shape) named() bool {
	return s == shapeName || s == shapeNames || s == shapeNamedBlock || s == shapeNamedBlocks
}

// Named reports whether o is a named op or its response.
func (o Op) Named() bool { return (o&^responseBit) >= OpGetNamed && (o&^responseBit) <= OpDeleteNamed }

// Valid reports whether o is defined by this protocol version.
func (o Op) Valid() bool { return o.shape() != shapeUnknown }

// IsRequest reports whether o is a valid request op.
func (o Op) IsRequest() bool { return o.Valid() && o&responseBit == 0 }

// Response returns the op answering request o, or OpError when o is not a
// request.
func (o Op) Response() Op {
	if !o.IsRequest() {
		return OpError
	}
	return o | responseBit
}

// String names the op ("MGET response"), or "op(0xNN)" for an unknown one.
func (o Op) String() string {
	switch o {
	case OpGet:
		return "GET"
	case OpMGet:
		return "MGET"
	case OpPut:
		return "PUT"
	case OpMPut:
		return "MPUT"
	case OpExists:
		return "EXISTS"
	case OpDelete:
		return "DELETE"
	case OpStats:
		return "STATS"
	case OpAccess:
		return "ACCESS"
	case OpGetNamed:
		return "GET named"
	case OpMGetNamed:
		return "MGET named"
	case OpPutNamed:
		return "PUT named"
	case OpMPutNamed:
		return "MPUT named"
	case OpExistsNamed:
		return "EXISTS named"
	case OpDeleteNamed:
		return "DELETE named"
	case OpSync:
		return "SYNC"
	case OpError:
		return "ERROR"
	}
	if o&responseBit != 0 && (o &^ responseBit).IsRequest() {
		return (o &^ responseBit).String() + " response"
	}
	return fmt.Sprintf("op(0x%02x)", uint8(o))
}

// Header is a frame header (package frame): ReqID is chosen by the client;
// a response carries the ID of the request it answers. Servers may answer
// pipelined requests in any order, so clients match responses by ReqID.
// Flags and Reserved must be zero (versions 1 and 2 define none).
type Header = frame.Header[Op]

// BlockHeader is the fixed part of a block entry; Len payload bytes follow.
// The checksum is block.Checksum over the connection's tenant, the ID and
// the payload: a PUT whose client and server disagree on the tenant fails
// verification on the server, and a client verifies every block it gets
// against the key it asked for.
type BlockHeader struct {
	// ID is the block's key ID within the connection's tenant.
	ID uint64
	// Code is CodeOK in requests; in responses, the block's outcome. A
	// block with any other code has Checksum 0 and Len 0.
	Code Code
	// Checksum is block.Checksum(block.Key{Tenant, ID}, payload), or for
	// a named op block.Checksum(block.Named(tenant, name), payload).
	Checksum uint32
	// Len is the payload length in bytes.
	Len uint32
}

// Block is a block entry with its payload, as ReadFrame decodes it and the
// copying encoders take it.
type Block struct {
	// ID, Code and Checksum are as in BlockHeader.
	ID       uint64
	Code     Code
	Checksum uint32
	// Payload is the block's bytes (empty unless Code is CodeOK); its
	// length is the entry's payload length.
	Payload []byte
}

// Hint is the part of an ACCESS entry before its block entry: the
// block's place in its request's prefix chain (block.Hint: Depth and
// Parent, the key ID of the block before this one), which the node's
// eviction policy receives as the simulator's policies do, and whether
// the access is a touch. On the wire the depth is an unsigned 32-bit
// number: AppendHint clamps a Depth outside [0, 2^32-1] into it.
type Hint struct {
	block.Hint
	// Touch marks an access to a block the node already holds: the entry
	// carries no payload (length 0, checksum 0), and the node records the
	// access if it holds the block (CodeOK) or changes nothing
	// (CodeNotFound). Otherwise the entry is a put.
	Touch bool
}

// hintTouch is the Touch bit of a hint's flags byte.
const hintTouch = 0x01

// Status is a status entry: the outcome of one key.
type Status struct {
	// ID is the key the status is about.
	ID uint64
	// Code is its outcome (for EXISTS: CodeOK present, CodeNotFound absent).
	Code Code
}

// TierStats is one tier's counters in a STATS response.
type TierStats struct {
	// Name is the tier's name ("ram", "ssd"); at most 255 bytes.
	Name  string
	Stats tier.Stats
}

// Frame is a whole decoded frame (ReadFrame); the tests encode one with
// appendframe_test.go's AppendFrame, ReadFrame's inverse.
// Which fields are used depends on Header.Op; the others are empty. A Frame
// is reusable: ReadFrame keeps its slices' capacity, and the payloads of
// Blocks live in a buffer the Frame owns, valid until the next ReadFrame.
type Frame struct {
	// Header: ReadFrame fills all of it.
	Header Header
	// IDs: GET and DELETE (exactly one), MGET and EXISTS.
	IDs []uint64
	// Names: GET named and DELETE named (exactly one), MGET named and
	// EXISTS named; PUT named and MPUT named, one per block (Names[i]
	// goes with Blocks[i]).
	Names []string
	// Blocks: PUT and PUT named (exactly one), MPUT, MPUT named, GET and
	// GET named responses (exactly one), MGET and MGET named responses,
	// ACCESS.
	Blocks []Block
	// Hints: ACCESS, one per block (Hints[i] goes with Blocks[i]).
	Hints []Hint
	// Statuses: PUT, DELETE and SYNC responses (exactly one), MPUT and
	// EXISTS responses.
	Statuses []Status
	// Tiers: STATS response.
	Tiers []TierStats
	// Code and Message: ERROR (Code is never CodeOK).
	Code    Code
	Message string

	arena []byte // payload storage for Blocks
	offs  []int  // payload offsets in arena while decoding
}

// reset empties f for a frame with header h, keeping capacity.
func (f *Frame) reset(h Header) {
	f.Header = h
	f.IDs = f.IDs[:0]
	clear(f.Names)
	f.Names = f.Names[:0]
	clear(f.Blocks) // drop references to old payloads
	f.Blocks = f.Blocks[:0]
	f.Hints = f.Hints[:0]
	f.Statuses = f.Statuses[:0]
	f.Tiers = f.Tiers[:0]
	f.Code = CodeOK
	f.Message = ""
	f.arena = f.arena[:0]
	f.offs = f.offs[:0]
}
