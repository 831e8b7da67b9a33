package kvpool

import "errors"

// These errors can be returned by the client, the node and the master, and
// by every layer below them; check for them with errors.Is.
var (
	// ErrNotFound is returned when the store does not hold the key: a tier
	// miss, a node answering not found, a block no replica has.
	ErrNotFound = errors.New("block not found")

	// ErrCorrupt is returned when a stored copy failed its checksum or
	// header check, on the node or in the client. The copy has been
	// dropped; callers treat it as a miss.
	ErrCorrupt = errors.New("block corrupt")

	// ErrTooLarge is returned when a payload or a frame exceeds a limit: a
	// node's max object size (its --max-object-bytes, config
	// max_object_bytes), what a tier can ever hold, the payload or frame
	// limit a node or the master advertises.
	ErrTooLarge = errors.New("too large")

	// ErrFull is returned when a tier or node cannot make room for a block
	// (every resident block is pinned, or the device has no space left).
	ErrFull = errors.New("full")

	// ErrQuota is returned when storing a block would take its tenant over
	// its byte quota; nothing was stored.
	ErrQuota = errors.New("tenant quota exceeded")

	// ErrUnavailable is returned when a node or the master cannot serve
	// now: it is shutting down, serves its connection limit, or cannot be
	// reached. Try again later or another replica.
	ErrUnavailable = errors.New("unavailable")

	// ErrUnauthorized is returned when a node or the master refused the
	// connection's auth token, or the token does not allow the tenant or
	// the operation.
	ErrUnauthorized = errors.New("unauthorized")

	// ErrClosed is returned by an object used after its Close: a tier, a
	// store, a client or a connection.
	ErrClosed = errors.New("closed")
)
