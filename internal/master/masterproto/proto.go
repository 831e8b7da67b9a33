package masterproto

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/meta"
)

// Version is the protocol version this package speaks. The frame header
// and the HELLO bodies never change between versions, so two versions can
// always tell each other apart.
//
// Version 2 carries named keys (block.Key.Name) in every key of every
// message, object sizes in PLACE, and the LOCATE op; a version 1 peer is
// refused at HELLO (code version mismatch). The named-key ops KEYINFO,
// EXPIRE, SCAN and COUNT came later within version 2: they change no
// existing frame, and a master of an older build answers them with code
// unsupported op.
const Version uint16 = 2

// Magic starts the body of every HELLO and HELLO response.
const Magic = "KVPM"

// Encoded sizes, in bytes.
const (
	// HeaderLen is the size of a frame header.
	HeaderLen = frame.HeaderLen
	// MaxNodeIDLen is the longest node ID the protocol carries. It is
	// tighter than meta.MaxNodeIDLen (128): node IDs are host names or
	// short labels, and 64 bytes keeps a LOOKUP node table small.
	MaxNodeIDLen = 64
	// MaxAddrLen is the longest data-plane address (u8 length).
	MaxAddrLen = math.MaxUint8
	// MaxMessageLen is the longest ERROR or HELLO message
	// (frame.MaxMessageLen); encoders truncate longer ones at a UTF-8
	// boundary, decoders reject them.
	MaxMessageLen = frame.MaxMessageLen
	// MaxTokenLen is the longest auth token the HELLO can carry (u16).
	MaxTokenLen = frame.MaxTokenLen
	// MaxTableLen is the most entries of a node table (u16 indexes).
	MaxTableLen = math.MaxUint16
	// MaxTenants is the most entries of a tenant table: a tenant
	// reference is a u16 whose top bit says the key is named.
	MaxTenants = 1<<15 - 1
)

// namedRef is the bit of a tenant reference that marks a named key: the
// entry's fixed part is followed by the name (u16 length, bytes).
const namedRef uint16 = 1 << 15

// FlagNamed, in the header of an EXISTS, PLACE, LOCATE, QUERY, KEYINFO or
// EXPIRE request,
// says its keys are named: each key's id is followed by its name (u16
// length, 1 to block.MaxNameLen bytes). A frame of chain keys carries no
// flag and no names, byte for byte the compact form.
const FlagNamed uint8 = 0x01

// FlagBacklog, in the header of a REGISTER or HEARTBEAT request, says the
// report leaves part of the node's inventory for the heartbeats that
// follow (meta.NodeUsage.Backlog). It is not part of the body, so a
// report without a backlog keeps its bytes.
const FlagBacklog uint8 = 0x02

var le = binary.LittleEndian

// Op is a frame's operation. The response to request op o is o|0x80; OpError
// answers any request that failed as a whole.
type Op uint8

// Ops. Values are part of the protocol and never change.
const (
	// OpHello opens a connection: version and auth token.
	OpHello Op = 0x01
	// OpRegister registers a node with its full inventory.
	OpRegister Op = 0x02
	// OpHeartbeat carries a node's inventory delta, usage, SSD hits and
	// task results; its response carries the node's tasks.
	OpHeartbeat Op = 0x03
	// OpLookup finds the longest cached prefix of a batch of keys and the
	// replicas of its blocks.
	OpLookup Op = 0x04
	// OpExists asks which of a batch of keys are present (no side effects).
	OpExists Op = 0x05
	// OpPlace chooses nodes for new blocks.
	OpPlace Op = 0x06
	// OpNodes lists the nodes with their data-plane addresses.
	OpNodes Op = 0x07
	// OpQuery shows every replica of one key with its state.
	OpQuery Op = 0x08
	// OpLocate finds the replicas of each of a batch of keys on its own
	// (point lookups, no prefix semantics): the lookup of named objects.
	OpLocate Op = 0x09
	// OpKeyInfo reports what the master knows of each of a batch of named
	// keys: present, visible, expiry, holders (the Redis front's key
	// query).
	OpKeyInfo Op = 0x0A
	// OpExpire sets or clears the expiry of each of a batch of named keys
	// (Redis EXPIRE, PEXPIREAT, PERSIST).
	OpExpire Op = 0x0B
	// OpScan enumerates a tenant's visible named keys, a page per call
	// (Redis SCAN).
	OpScan Op = 0x0C
	// OpCount counts a tenant's visible named keys and those with an
	// expiry (Redis DBSIZE, INFO keyspace).
	OpCount Op = 0x0D

	// OpHelloResponse answers OpHello.
	OpHelloResponse Op = 0x81
	// OpRegisterResponse answers OpRegister.
	OpRegisterResponse Op = 0x82
	// OpHeartbeatResponse answers OpHeartbeat.
	OpHeartbeatResponse Op = 0x83
	// OpLookupResponse answers OpLookup.
	OpLookupResponse Op = 0x84
	// OpExistsResponse answers OpExists.
	OpExistsResponse Op = 0x85
	// OpPlaceResponse answers OpPlace.
	OpPlaceResponse Op = 0x86
	// OpNodesResponse answers OpNodes.
	OpNodesResponse Op = 0x87
	// OpQueryResponse answers OpQuery.
	OpQueryResponse Op = 0x88
	// OpLocateResponse answers OpLocate.
	OpLocateResponse Op = 0x89
	// OpKeyInfoResponse answers OpKeyInfo.
	OpKeyInfoResponse Op = 0x8A
	// OpExpireResponse answers OpExpire.
	OpExpireResponse Op = 0x8B
	// OpScanResponse answers OpScan.
	OpScanResponse Op = 0x8C
	// OpCountResponse answers OpCount.
	OpCountResponse Op = 0x8D
	// OpError answers a request that failed as a whole.
	OpError Op = 0xFF
)

const responseBit Op = frame.ResponseBit

// Valid reports whether o is defined by this protocol version.
func (o Op) Valid() bool {
	base := o &^ responseBit
	return o == OpError || (base >= OpHello && base <= OpCount)
}

// IsRequest reports whether o is a valid request op.
func (o Op) IsRequest() bool { return o.Valid() && o&responseBit == 0 }

// Response returns the op answering request o (OpError when o is not a
// request).
func (o Op) Response() Op {
	if !o.IsRequest() {
		return OpError
	}
	return o | responseBit
}

var opNames = [...]string{OpHello: "HELLO", OpRegister: "REGISTER", OpHeartbeat: "HEARTBEAT", OpLookup: "LOOKUP",
	OpExists: "EXISTS", OpPlace: "PLACE", OpNodes: "NODES", OpQuery: "QUERY", OpLocate: "LOCATE",
	OpKeyInfo: "KEYINFO", OpExpire: "EXPIRE", OpScan: "SCAN", OpCount: "COUNT"}

// String names the op ("LOOKUP response"), or "op(0xNN)" for an unknown one.
func (o Op) String() string {
	switch {
	case o == OpError:
		return "ERROR"
	case !o.Valid():
		return fmt.Sprintf("op(0x%02x)", uint8(o))
	case o&responseBit != 0:
		return opNames[o&^responseBit] + " response"
	}
	return opNames[o]
}

// Header is a frame header (package frame); a response echoes its
// request's ReqID. Reserved must be zero; Flags too, except FlagNamed on
// the requests that take it.
type Header = frame.Header[Op]

// Code is a status on the wire: the outcome of a request (ERROR) or of the
// handshake (HELLO response). The numbers are this protocol's own (the node
// protocol numbers the same meanings differently); ErrorFor maps them to
// the shared error vocabulary (packages kvpool and frame). A decoder
// accepts any value; ErrorFor maps unknown ones to an error wrapping
// frame.ErrInternal.
type Code uint16

// Status codes, numbered 0 to 10 in this order. Values are part of the
// protocol and never change: add a code at the end, never reorder
// (TestCodeNumbers pins them).
const (
	// CodeOK: success.
	CodeOK Code = iota
	// CodeBadRequest: malformed or invalid request (frame.ErrBadRequest,
	// which meta.ErrBadRequest is, and the decode errors wrapping it).
	CodeBadRequest
	// CodeUnknownNode: the node must re-register (meta.ErrUnknownNode).
	CodeUnknownNode
	// CodeNoNodes: no live node can take a placement (meta.ErrNoNodes).
	CodeNoNodes
	// CodeUnsupportedOp: the op is unknown or not a request
	// (frame.ErrUnknownOp).
	CodeUnsupportedOp
	// CodeUnauthorized: the HELLO's token was refused
	// (kvpool.ErrUnauthorized).
	CodeUnauthorized
	// CodeInternal: the server failed for a reason of its own
	// (frame.ErrInternal).
	CodeInternal
	// CodeVersionMismatch: the HELLO asked for a version the server does
	// not speak (frame.ErrVersion).
	CodeVersionMismatch
	// CodeUnavailable: the master is shutting down or serves its
	// connection limit (kvpool.ErrUnavailable).
	CodeUnavailable
	// CodeTooLarge: a frame exceeds a limit (kvpool.ErrTooLarge, which
	// frame.ErrFrameTooLarge wraps).
	CodeTooLarge
	// CodeNotLeader: the master does not lead its cluster's current term
	// (meta.ErrNotLeader); a HELLO refused so names the leader in its
	// term trailer when the client follows leaders.
	CodeNotLeader
)

// codes is the protocol's code table (package frame names the shared
// meanings).
var codes = frame.NewTable("masterproto",
	frame.Shared[Code]{OK: CodeOK, BadRequest: CodeBadRequest, UnknownOp: CodeUnsupportedOp, Unauthorized: CodeUnauthorized,
		Internal: CodeInternal, Version: CodeVersionMismatch, Unavailable: CodeUnavailable, TooLarge: CodeTooLarge},
	[]frame.Entry[Code]{
		{Code: CodeUnknownNode, Name: "unknown node", Err: meta.ErrUnknownNode},
		{Code: CodeNoNodes, Name: "no nodes", Err: meta.ErrNoNodes},
		{Code: CodeNotLeader, Name: "not leader", Err: meta.ErrNotLeader},
	},
)

// String names the code, or "code(N)" for an unknown one.
func (c Code) String() string { return codes.Name(c) }

// Err returns ErrorFor(c).
func (c Code) Err() error { return codes.Err(c) }

// Peer names the master in a RemoteError's text.
func (Code) Peer() string { return "master" }

// ErrorFor returns the error a client reports for code: nil for CodeOK,
// the kvpool, frame or master sentinel for a known code (so errors.Is
// works), and an error wrapping frame.ErrInternal for an unknown one.
func ErrorFor(c Code) error { return codes.Err(c) }

// CodeOf returns the code a server sends for err: CodeOK for nil, the code
// of a *RemoteError, the code of the first sentinel err wraps, and
// CodeInternal otherwise.
func CodeOf(err error) Code { return codes.CodeOf(err) }

// RemoteError is a failure reported by the master: an ERROR frame or a
// refused HELLO. It unwraps to ErrorFor(Code); its text starts "master: ".
type RemoteError = frame.RemoteError[Code]

// Default limits. Each bounds what a peer can make a decoder allocate.
const (
	// DefaultMaxFrame is the largest frame: 64 MiB, which holds the
	// REGISTER of a node with DefaultMaxItems chain blocks (24 bytes each:
	// 48 MiB) plus its tenant table. Named entries take 2 bytes and the
	// name more (ItemLen); a node whose inventory does not fit in one
	// frame registers with part of it and reports the rest in the
	// heartbeats that follow, each within the limits (the node agent's
	// reportLimits).
	DefaultMaxFrame = 64 << 20
	// DefaultMaxBatch is the most keys of one LOOKUP, EXISTS or PLACE, as
	// the node protocol's (frame.DefaultMaxBatch, 4096).
	DefaultMaxBatch = frame.DefaultMaxBatch
	// DefaultMaxItems is the most entries of one inventory or delta list:
	// 2^21, the blocks of a node with 1 TiB of SSD at 512 KiB per block.
	DefaultMaxItems = 1 << 21
	// DefaultMaxToken is the longest auth token accepted, as the node
	// protocol's (frame.DefaultMaxToken, 4 KiB).
	DefaultMaxToken = frame.DefaultMaxToken
)

// Limits bounds what a decoder accepts. The zero value of each field
// means its default.
type Limits struct {
	// MaxFrame is the largest frame, header included, in bytes.
	MaxFrame int
	// MaxBatch is the most keys of a LOOKUP, EXISTS, PLACE, LOCATE,
	// KEYINFO or EXPIRE request (and answers of their responses).
	MaxBatch int
	// MaxItems is the most entries of any other list (inventory, delta
	// lists, SSD hits, task results, tasks, nodes, replicas).
	MaxItems int
	// MaxToken is the longest auth token of a HELLO.
	MaxToken int
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{MaxFrame: DefaultMaxFrame, MaxBatch: DefaultMaxBatch, MaxItems: DefaultMaxItems, MaxToken: DefaultMaxToken}
}

// withDefaults fills zero (and, defensively, negative) fields with their
// defaults; unlike Resolve it never fails, for the decoders' hot path.
func (l Limits) withDefaults() Limits {
	if l.MaxFrame <= 0 {
		l.MaxFrame = DefaultMaxFrame
	}
	if l.MaxBatch <= 0 {
		l.MaxBatch = DefaultMaxBatch
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultMaxItems
	}
	if l.MaxToken <= 0 {
		l.MaxToken = DefaultMaxToken
	}
	return l
}

// Validate reports the first bad field.
func (l Limits) Validate() error {
	_, err := l.Resolve()
	return err
}

// Resolve returns l with defaults filled in, or the error Validate reports.
func (l Limits) Resolve() (Limits, error) {
	d := DefaultLimits()
	if err := frame.ResolveLimits("masterproto",
		frame.Limit{Name: "MaxFrame", V: &l.MaxFrame, Default: d.MaxFrame, Max: math.MaxUint32},
		frame.Limit{Name: "MaxBatch", V: &l.MaxBatch, Default: d.MaxBatch, Max: math.MaxUint32},
		frame.Limit{Name: "MaxItems", V: &l.MaxItems, Default: d.MaxItems, Max: math.MaxUint32},
		frame.Limit{Name: "MaxToken", V: &l.MaxToken, Default: d.MaxToken, Max: MaxTokenLen},
	); err != nil {
		return l, err
	}
	if l.MaxFrame < 1<<10 {
		return l, fmt.Errorf("masterproto: Limits.MaxFrame is %d; want at least 1024 (an ERROR frame with a full message)", l.MaxFrame)
	}
	return l, nil
}
