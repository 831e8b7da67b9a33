package wire

import (
	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// Code is a status on the wire: the outcome of one block in a batch, of a
// whole request (an ERROR frame) or of the handshake (a hello-ack). Codes map
// to the shared error vocabulary (package kvpool, package frame) both ways:
// ErrorFor(code) and CodeOf(err). The numbers are this protocol's own; the
// master protocol numbers the same meanings differently.
//
// A decoder accepts any code value, so a newer peer may add codes; ErrorFor
// maps a code it does not know to an error wrapping frame.ErrInternal.
type Code uint16

// Status codes. Values are part of the protocol and never change.
const (
	// CodeOK: success (for EXISTS: the key is present).
	CodeOK Code = 0
	// CodeNotFound: the node does not hold the key (kvpool.ErrNotFound).
	CodeNotFound Code = 1
	// CodeCorrupt: the stored copy failed verification and was dropped
	// (kvpool.ErrCorrupt); a client treats it as a miss.
	CodeCorrupt Code = 2
	// CodeTooLarge: a payload or frame exceeds a limit
	// (kvpool.ErrTooLarge).
	CodeTooLarge Code = 3
	// CodeFull: the node cannot make room (kvpool.ErrFull).
	CodeFull Code = 4
	// CodeBadRequest: the request was malformed or broke a limit other than
	// size (frame.ErrBadRequest).
	CodeBadRequest Code = 5
	// CodeUnsupportedOp: the op is unknown to the server or not a request
	// (frame.ErrUnknownOp).
	CodeUnsupportedOp Code = 6
	// CodeUnauthorized: the hello's token was refused
	// (kvpool.ErrUnauthorized).
	CodeUnauthorized Code = 7
	// CodeInternal: the server failed for a reason of its own
	// (frame.ErrInternal).
	CodeInternal Code = 8
	// CodeVersionMismatch: the hello asked for a protocol version the
	// server does not speak (frame.ErrVersion). Only in a hello-ack.
	CodeVersionMismatch Code = 9
	// CodeUnavailable: the node is shutting down, its tier is closed or it
	// serves its connection limit (kvpool.ErrUnavailable; a server sends
	// kvpool.ErrClosed as this code too); the client should try another
	// replica.
	CodeUnavailable Code = 10
	// CodeQuota: storing the block would take the tenant over its byte
	// quota (kvpool.ErrQuota); nothing was stored.
	CodeQuota Code = 11
)

// codes is the protocol's code table (package frame names the shared
// meanings).
var codes = frame.NewTable("wire",
	frame.Shared[Code]{OK: CodeOK, BadRequest: CodeBadRequest, UnknownOp: CodeUnsupportedOp, Unauthorized: CodeUnauthorized,
		Internal: CodeInternal, Version: CodeVersionMismatch, Unavailable: CodeUnavailable, TooLarge: CodeTooLarge},
	[]frame.Entry[Code]{
		{Code: CodeNotFound, Name: "not found", Err: kvpool.ErrNotFound},
		{Code: CodeCorrupt, Name: "corrupt", Err: kvpool.ErrCorrupt},
		{Code: CodeFull, Name: "full", Err: kvpool.ErrFull},
		{Code: CodeQuota, Name: "quota exceeded", Err: kvpool.ErrQuota},
	},
	frame.Entry[Code]{Code: CodeBadRequest, Err: block.ErrBadTenant},
	frame.Entry[Code]{Code: CodeBadRequest, Err: block.ErrBadName},
)

// String names the code ("not found"), or "code(N)" for an unknown one.
func (c Code) String() string { return codes.Name(c) }

// Err returns ErrorFor(c).
func (c Code) Err() error { return codes.Err(c) }

// ErrorFor returns the error a client reports for code: nil for CodeOK, the
// kvpool or frame sentinel for a known code (so errors.Is works on it), and
// an error wrapping frame.ErrInternal for a code this version does not
// know.
func ErrorFor(c Code) error { return codes.Err(c) }

// CodeOf returns the code a server sends for err: CodeOK for nil, the code
// of a *RemoteError (so a proxy passes codes through), the code of the first
// sentinel err wraps (checked with errors.Is), and CodeInternal otherwise.
// Decode errors map to CodeBadRequest, except the size limits (frame,
// payload), which map to CodeTooLarge.
func CodeOf(err error) Code { return codes.CodeOf(err) }

// RemoteError is a failure reported by the node: an ERROR frame or a
// refused hello. It unwraps to ErrorFor(Code), so errors.Is(err,
// kvpool.ErrNotFound) and friends work on it.
type RemoteError = frame.RemoteError[Code]
