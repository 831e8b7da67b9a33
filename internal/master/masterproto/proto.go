package masterproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kvpool/kvpool/internal/meta"
)

// Version is the protocol version this package speaks. The frame header
// and the HELLO bodies never change between versions, so two versions can
// always tell each other apart.
const Version uint16 = 1

// Magic starts the body of every HELLO and HELLO response.
const Magic = "KVPM"

// Encoded sizes, in bytes.
const (
	// HeaderLen is the size of a frame header.
	HeaderLen = 16
	// MaxNodeIDLen is the longest node ID the protocol carries. It is
	// tighter than meta.MaxNodeIDLen (128): node IDs are host names or
	// short labels, and 64 bytes keeps a LOOKUP node table small.
	MaxNodeIDLen = 64
	// MaxAddrLen is the longest data-plane address (u8 length).
	MaxAddrLen = math.MaxUint8
	// MaxMessageLen is the longest ERROR or HELLO message; encoders
	// truncate longer ones at a UTF-8 boundary, decoders reject them.
	// 1 KiB is room for a wrapped error chain, not for a data dump.
	MaxMessageLen = 1 << 10
	// MaxTokenLen is the longest auth token the HELLO can carry (u16).
	MaxTokenLen = math.MaxUint16
	// MaxTableLen is the most entries of a tenant or node table (u16
	// indexes).
	MaxTableLen = math.MaxUint16
)

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
	// OpError answers a request that failed as a whole.
	OpError Op = 0xFF
)

const responseBit Op = 0x80

// Valid reports whether o is defined by this protocol version.
func (o Op) Valid() bool {
	base := o &^ responseBit
	return o == OpError || (base >= OpHello && base <= OpQuery)
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
	OpExists: "EXISTS", OpPlace: "PLACE", OpNodes: "NODES", OpQuery: "QUERY"}

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

// Header is a frame header.
type Header struct {
	// Len is the frame's total length in bytes, header included.
	Len uint32
	// Op is the frame's operation.
	Op Op
	// Flags must be zero in version 1.
	Flags uint8
	// Reserved must be zero in version 1.
	Reserved uint16
	// ReqID is chosen by the client; a response echoes its request's.
	ReqID uint64
}

// BodyLen returns the length of the body after the header.
func (h Header) BodyLen() int { return int(h.Len) - HeaderLen }

// Code is a status on the wire: the outcome of a request (ERROR) or of the
// handshake (HELLO response). A decoder accepts any value; ErrorFor maps
// unknown ones to an error wrapping ErrInternal.
type Code uint16

// Status codes. Values are part of the protocol and never change.
const (
	// CodeOK: success.
	CodeOK Code = 0
	// CodeBadRequest: malformed or invalid request (meta.ErrBadRequest,
	// ErrMalformed, ErrBatchTooLong).
	CodeBadRequest Code = 1
	// CodeUnknownNode: the node must re-register (meta.ErrUnknownNode).
	CodeUnknownNode Code = 2
	// CodeNoNodes: no live node can take a placement (meta.ErrNoNodes).
	CodeNoNodes Code = 3
	// CodeUnsupportedOp: the op is unknown or not a request (ErrUnknownOp).
	CodeUnsupportedOp Code = 4
	// CodeUnauthorized: the HELLO's token was refused (ErrUnauthorized).
	CodeUnauthorized Code = 5
	// CodeInternal: the server failed for a reason of its own.
	CodeInternal Code = 6
	// CodeVersionMismatch: the HELLO asked for a version the server does
	// not speak (ErrVersion).
	CodeVersionMismatch Code = 7
	// CodeUnavailable: the master is shutting down (ErrUnavailable).
	CodeUnavailable Code = 8
	// CodeTooLarge: a frame exceeds a limit (ErrFrameTooLarge).
	CodeTooLarge Code = 9
)

var codeNames = [...]string{"ok", "bad request", "unknown node", "no nodes", "unsupported op", "unauthorized",
	"internal error", "version mismatch", "unavailable", "too large"}

// String names the code, or "code(N)" for an unknown one.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Errors of the codec, checked with errors.Is.
var (
	// ErrMalformed: lengths or fields of a frame are inconsistent (a count
	// that does not fit the length, a nonzero reserved field, trailing
	// bytes, a bad tenant, an unknown table index, ...). The frame's length
	// was valid, so the stream is still in sync.
	ErrMalformed = errors.New("malformed frame")
	// ErrUnknownOp: the op is not defined by this version or not served.
	ErrUnknownOp = errors.New("unknown or unsupported op")
	// ErrFrameTooLarge: a frame's length is above Limits.MaxFrame (decoding)
	// or the u32 length field (encoding). The stream cannot be resynchronised.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrBatchTooLong: a list is longer than Limits.MaxBatch or
	// Limits.MaxItems, or than its length field allows.
	ErrBatchTooLong = errors.New("batch too long")
	// ErrTooLong: a string field is longer than its limit (node ID,
	// address, token, message).
	ErrTooLong = errors.New("field too long")
	// ErrUnauthorized: the server refused the HELLO's token.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrVersion: the two sides speak different protocol versions.
	ErrVersion = errors.New("protocol version mismatch")
	// ErrBadMagic: a HELLO body did not start with "KVPM".
	ErrBadMagic = errors.New("bad magic")
	// ErrInternal: the peer failed for a reason of its own.
	ErrInternal = errors.New("internal error")
	// ErrUnavailable: the master cannot be reached or is shutting down.
	ErrUnavailable = errors.New("master unavailable")
)

// ErrorFor returns the error a client reports for code: nil for CodeOK,
// the master or codec sentinel for a known code (so errors.Is works), and
// an error wrapping ErrInternal for an unknown one.
func ErrorFor(c Code) error {
	switch c {
	case CodeOK:
		return nil
	case CodeBadRequest:
		return meta.ErrBadRequest
	case CodeUnknownNode:
		return meta.ErrUnknownNode
	case CodeNoNodes:
		return meta.ErrNoNodes
	case CodeUnsupportedOp:
		return ErrUnknownOp
	case CodeUnauthorized:
		return ErrUnauthorized
	case CodeInternal:
		return ErrInternal
	case CodeVersionMismatch:
		return ErrVersion
	case CodeUnavailable:
		return ErrUnavailable
	case CodeTooLarge:
		return ErrFrameTooLarge
	}
	return fmt.Errorf("masterproto: unknown status %v: %w", c, ErrInternal)
}

// CodeOf returns the code a server sends for err: CodeOK for nil, the code
// of a *RemoteError, the code of the first sentinel err wraps, and
// CodeInternal otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	if re, ok := errors.AsType[*RemoteError](err); ok {
		return re.Code
	}
	table := [...]struct {
		err  error
		code Code
	}{
		{meta.ErrUnknownNode, CodeUnknownNode},
		{meta.ErrNoNodes, CodeNoNodes},
		{ErrFrameTooLarge, CodeTooLarge},
		{ErrUnknownOp, CodeUnsupportedOp},
		{ErrUnauthorized, CodeUnauthorized},
		{ErrVersion, CodeVersionMismatch},
		{ErrUnavailable, CodeUnavailable},
		{ErrInternal, CodeInternal},
		{meta.ErrBadRequest, CodeBadRequest},
		{ErrMalformed, CodeBadRequest},
		{ErrBatchTooLong, CodeBadRequest},
		{ErrTooLong, CodeBadRequest},
		{ErrBadMagic, CodeBadRequest},
	}
	for _, m := range table {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return CodeInternal
}

// RemoteError is a failure reported by the peer: an ERROR frame or a
// refused HELLO. It unwraps to ErrorFor(Code).
type RemoteError struct {
	Code    Code
	Message string
}

// Error formats the error as "master: <code>: <message>".
func (e *RemoteError) Error() string {
	if e.Message == "" {
		return "master: " + e.Code.String()
	}
	return "master: " + e.Code.String() + ": " + e.Message
}

// Unwrap returns ErrorFor(e.Code).
func (e *RemoteError) Unwrap() error { return ErrorFor(e.Code) }

// Default limits. Each bounds what a peer can make a decoder allocate.
const (
	// DefaultMaxFrame is the largest frame: 64 MiB, which holds the
	// REGISTER of a node with DefaultMaxItems blocks (24 bytes each: 48 MiB)
	// plus its tenant table.
	DefaultMaxFrame = 64 << 20
	// DefaultMaxBatch is the most keys of one LOOKUP, EXISTS or PLACE: 4096,
	// as the node protocol (wire.DefaultMaxBatch): 4096 blocks of 512
	// tokens cover a 2M-token prefix, twice the longest trace input.
	DefaultMaxBatch = 4096
	// DefaultMaxItems is the most entries of one inventory or delta list:
	// 2^21, the blocks of a node with 1 TiB of SSD at 512 KiB per block.
	DefaultMaxItems = 1 << 21
	// DefaultMaxToken is the longest auth token accepted: 4 KiB, as the
	// node protocol (wire.DefaultMaxToken).
	DefaultMaxToken = 4 << 10
)

// Limits bounds what a decoder accepts. The zero value of each field
// means its default.
type Limits struct {
	// MaxFrame is the largest frame, header included, in bytes.
	MaxFrame int
	// MaxBatch is the most keys of a LOOKUP, EXISTS or PLACE request.
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
	fields := [...]struct {
		name string
		v    *int
		def  int
		max  int
	}{
		{"MaxFrame", &l.MaxFrame, d.MaxFrame, math.MaxUint32},
		{"MaxBatch", &l.MaxBatch, d.MaxBatch, math.MaxUint32},
		{"MaxItems", &l.MaxItems, d.MaxItems, math.MaxUint32},
		{"MaxToken", &l.MaxToken, d.MaxToken, MaxTokenLen},
	}
	for _, f := range fields {
		switch {
		case *f.v < 0:
			return l, fmt.Errorf("masterproto: Limits.%s is %d; want >= 0 (0 means the default, %d)", f.name, *f.v, f.def)
		case *f.v == 0:
			*f.v = f.def
		case *f.v > f.max:
			return l, fmt.Errorf("masterproto: Limits.%s is %d; the encoding allows at most %d", f.name, *f.v, f.max)
		}
	}
	if l.MaxFrame < 1<<10 {
		return l, fmt.Errorf("masterproto: Limits.MaxFrame is %d; want at least 1024 (an ERROR frame with a full message)", l.MaxFrame)
	}
	return l, nil
}
