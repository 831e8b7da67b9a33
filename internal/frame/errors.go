package frame

import (
	"errors"

	"github.com/kvpool/kvpool"
)

// Protocol errors, checked with errors.Is. They are the errors of the
// protocols themselves, which a client of the store meets only as a bug on
// one side; what the store can answer (not found, too large, unavailable,
// ...) is in package kvpool. The decode errors unwrap to the error the
// server sends them as: ErrBadRequest, or kvpool.ErrTooLarge for the size
// limits.
var (
	// ErrBadRequest: the request was malformed or broke a limit other than
	// size; the peer rejected it.
	ErrBadRequest = errors.New("bad request")
	// ErrUnknownOp: a frame's op is not defined by this protocol version,
	// or the server does not serve it. The frame's length was valid, so
	// the stream is still in sync.
	ErrUnknownOp = errors.New("unknown or unsupported op")
	// ErrVersion: the two sides speak different protocol versions.
	ErrVersion = errors.New("protocol version mismatch")
	// ErrInternal: the peer failed for a reason of its own.
	ErrInternal = errors.New("internal error")

	// ErrMalformed: lengths or fields inside a frame are inconsistent (a
	// count that does not match the length, a nonzero reserved field,
	// trailing bytes, ...). Unwraps to ErrBadRequest.
	ErrMalformed error = &kind{"malformed frame", ErrBadRequest}
	// ErrBadMagic: a handshake did not start with the protocol's magic:
	// the peer does not speak it. Unwraps to ErrBadRequest.
	ErrBadMagic error = &kind{"bad magic", ErrBadRequest}
	// ErrBatchTooLong: a batch or list is longer than its limit or than
	// its count field allows. Unwraps to ErrBadRequest.
	ErrBatchTooLong error = &kind{"batch too long", ErrBadRequest}
	// ErrTooLong: a string field is longer than its limit (node ID,
	// address, message). Unwraps to ErrBadRequest.
	ErrTooLong error = &kind{"field too long", ErrBadRequest}
	// ErrTenantTooLong: a hello's tenant name exceeds its limit. Unwraps
	// to ErrBadRequest.
	ErrTenantTooLong error = &kind{"tenant name too long", ErrBadRequest}
	// ErrTokenTooLong: a hello's auth token exceeds its limit. Unwraps to
	// ErrBadRequest.
	ErrTokenTooLong error = &kind{"auth token too long", ErrBadRequest}
	// ErrFrameTooLarge: a frame's length exceeds the reader's limit (or,
	// encoding, the u32 length field). The stream cannot be
	// resynchronised. Unwraps to kvpool.ErrTooLarge.
	ErrFrameTooLarge error = &kind{"frame too large", kvpool.ErrTooLarge}
	// ErrPayloadTooLarge: a block's payload length exceeds the limit.
	// Unwraps to kvpool.ErrTooLarge.
	ErrPayloadTooLarge error = &kind{"payload too large", kvpool.ErrTooLarge}
)

// kind is a sentinel with its own text that means another sentinel.
type kind struct {
	msg   string
	means error
}

func (k *kind) Error() string { return k.msg }
func (k *kind) Unwrap() error { return k.means }
