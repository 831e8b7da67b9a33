package wire

import (
	"errors"
	"fmt"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// Code is a status on the wire: the outcome of one block in a batch, of a
// whole request (an ERROR frame) or of the handshake (a hello-ack). Codes map
// to the tier error vocabulary both ways: ErrorFor(code) and CodeOf(err).
//
// A decoder accepts any code value, so a newer peer may add codes; ErrorFor
// maps a code it does not know to an error wrapping ErrInternal.
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
	// CodeTooLarge: a payload or frame exceeds a limit (kvpool.ErrTooLarge).
	CodeTooLarge Code = 3
	// CodeFull: the node cannot make room (kvpool.ErrFull).
	CodeFull Code = 4
	// CodeBadRequest: the request was malformed or broke a limit other than
	// size (ErrBadRequest).
	CodeBadRequest Code = 5
	// CodeUnsupportedOp: the op is unknown to the server or not a request
	// (ErrUnknownOp).
	CodeUnsupportedOp Code = 6
	// CodeUnauthorized: the hello's token was refused (ErrUnauthorized).
	CodeUnauthorized Code = 7
	// CodeInternal: the server failed for a reason of its own (ErrInternal).
	CodeInternal Code = 8
	// CodeVersionMismatch: the hello asked for a protocol version the
	// server does not speak (ErrVersion). Only in a hello-ack.
	CodeVersionMismatch Code = 9
	// CodeUnavailable: the node or tier is shutting down (kvpool.ErrClosed);
	// the client should try another replica.
	CodeUnavailable Code = 10
	// CodeQuota: storing the block would take the tenant over its byte
	// quota (kvpool.ErrQuota); nothing was stored.
	CodeQuota Code = 11
)

// String names the code ("not found"), or "code(N)" for an unknown one.
func (c Code) String() string {
	switch c {
	case CodeOK:
		return "ok"
	case CodeNotFound:
		return "not found"
	case CodeCorrupt:
		return "corrupt"
	case CodeTooLarge:
		return "too large"
	case CodeFull:
		return "full"
	case CodeBadRequest:
		return "bad request"
	case CodeUnsupportedOp:
		return "unsupported op"
	case CodeUnauthorized:
		return "unauthorized"
	case CodeInternal:
		return "internal error"
	case CodeVersionMismatch:
		return "version mismatch"
	case CodeUnavailable:
		return "unavailable"
	case CodeQuota:
		return "quota exceeded"
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Errors of the wire package, checked with errors.Is. The decode errors
// (ErrMalformed and the limit errors) are wrapped with the frame, the
// offending value, the limit and the stream offset.
var (
	// ErrBadRequest: the peer rejected a request as malformed
	// (CodeBadRequest).
	ErrBadRequest = errors.New("bad request")
	// ErrUnknownOp: a frame's op is not defined by this protocol version, or
	// the server does not serve it (CodeUnsupportedOp). The frame's length
	// was valid, so the reader can Skip it and go on.
	ErrUnknownOp = errors.New("unknown or unsupported op")
	// ErrUnauthorized: the server refused the hello's token
	// (CodeUnauthorized).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInternal: the peer failed for a reason of its own (CodeInternal).
	ErrInternal = errors.New("internal error")
	// ErrVersion: the two sides speak different protocol versions
	// (CodeVersionMismatch).
	ErrVersion = errors.New("protocol version mismatch")
	// ErrBadMagic: a hello or hello-ack did not start with "KVPL": the peer
	// does not speak this protocol.
	ErrBadMagic = errors.New("bad magic")
	// ErrMalformed: lengths or fields inside a frame are inconsistent
	// (a count that does not match the length, a nonzero reserved field,
	// trailing bytes, a payload on a failed block, ...).
	ErrMalformed = errors.New("malformed frame")
	// ErrFrameTooLarge: a frame's length exceeds Limits.MaxFrame (or, when
	// encoding, the 32-bit length field). The stream cannot be resynchronised.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrBatchTooLong: a batch's count exceeds Limits.MaxBatch.
	ErrBatchTooLong = errors.New("batch too long")
	// ErrPayloadTooLarge: a block's payload length exceeds Limits.MaxPayload.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrTenantTooLong: a hello's tenant name exceeds Limits.MaxTenant.
	ErrTenantTooLong = errors.New("tenant name too long")
	// ErrTokenTooLong: a hello's auth token exceeds Limits.MaxToken.
	ErrTokenTooLong = errors.New("auth token too long")
)

// ErrorFor returns the error a client reports for code: nil for CodeOK, the
// tier or wire sentinel for a known code (so errors.Is works on it), and an
// error wrapping ErrInternal for a code this version does not know.
func ErrorFor(c Code) error {
	switch c {
	case CodeOK:
		return nil
	case CodeNotFound:
		return kvpool.ErrNotFound
	case CodeCorrupt:
		return kvpool.ErrCorrupt
	case CodeTooLarge:
		return kvpool.ErrTooLarge
	case CodeFull:
		return kvpool.ErrFull
	case CodeBadRequest:
		return ErrBadRequest
	case CodeUnsupportedOp:
		return ErrUnknownOp
	case CodeUnauthorized:
		return ErrUnauthorized
	case CodeInternal:
		return ErrInternal
	case CodeVersionMismatch:
		return ErrVersion
	case CodeUnavailable:
		return kvpool.ErrClosed
	case CodeQuota:
		return kvpool.ErrQuota
	}
	return fmt.Errorf("wire: unknown status %v: %w", c, ErrInternal)
}

// CodeOf returns the code a server sends for err: CodeOK for nil, the code
// of a *RemoteError (so a proxy passes codes through), the code of the first
// sentinel err wraps (checked with errors.Is), and CodeInternal otherwise.
// Decode errors map to CodeBadRequest, except the size limits (frame,
// payload), which map to CodeTooLarge.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	if re, ok := errors.AsType[*RemoteError](err); ok {
		return re.Code
	}
	// Most specific first: the size limits before the decode errors.
	table := [...]struct {
		err  error
		code Code
	}{
		{kvpool.ErrNotFound, CodeNotFound},
		{kvpool.ErrCorrupt, CodeCorrupt},
		{kvpool.ErrTooLarge, CodeTooLarge},
		{ErrFrameTooLarge, CodeTooLarge},
		{ErrPayloadTooLarge, CodeTooLarge},
		{kvpool.ErrFull, CodeFull},
		{kvpool.ErrClosed, CodeUnavailable},
		{kvpool.ErrQuota, CodeQuota},
		{ErrUnknownOp, CodeUnsupportedOp},
		{ErrUnauthorized, CodeUnauthorized},
		{ErrVersion, CodeVersionMismatch},
		{ErrInternal, CodeInternal},
		{ErrBadRequest, CodeBadRequest},
		{ErrMalformed, CodeBadRequest},
		{ErrBadMagic, CodeBadRequest},
		{ErrBatchTooLong, CodeBadRequest},
		{ErrTenantTooLong, CodeBadRequest},
		{ErrTokenTooLong, CodeBadRequest},
		{block.ErrBadTenant, CodeBadRequest},
	}
	for _, m := range table {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return CodeInternal
}

// RemoteError is a failure reported by the peer: an ERROR frame or a refused
// hello. It unwraps to ErrorFor(Code), so errors.Is(err, kvpool.ErrNotFound)
// and friends work on it.
type RemoteError struct {
	Code    Code
	Message string
}

// Error formats the error as "remote: <code>: <message>".
func (e *RemoteError) Error() string {
	if e.Message == "" {
		return "remote: " + e.Code.String()
	}
	return "remote: " + e.Code.String() + ": " + e.Message
}

// Unwrap returns ErrorFor(e.Code) (nil for CodeOK).
func (e *RemoteError) Unwrap() error { return ErrorFor(e.Code) }
