package nodeserver

import (
	"context"
	"io"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// Backend is the store a Server serves (in a node: the tiered RAM+SSD
// store). Implementations are safe for concurrent use. Errors use the tier
// vocabulary (kvpool.ErrNotFound, kvpool.ErrCorrupt, kvpool.ErrTooLarge,
// kvpool.ErrFull, kvpool.ErrClosed), which the server sends as status codes
// (wire.CodeOf); any other error is sent as CodeInternal.
//
// Package nodeservertest has an in-memory implementation.
type Backend interface {
	// Acquire pins k's block and returns where its payload lies: in memory
	// (Ref.Payload) or in a file region (Ref.File), with its stored
	// checksum. The block must stay unchanged and in place until
	// Ref.Release is called; the server calls it exactly once, after the
	// payload has been sent. Acquire counts as a read (recency, hits), may
	// take a read lease, and need not verify the payload: the client
	// verifies every block against the key it asked for. It returns
	// kvpool.ErrNotFound when k is absent.
	//
	// Acquire returns a handle rather than calling back with the payload
	// because a response frame's header carries its total length: the
	// server pins every block of an MGET, sizes the frame, then sends.
	Acquire(ctx context.Context, k block.Key) (Ref, error)
	// Put stores a copy of payload under k. sum is the client's
	// block.Checksum(k, payload), unverified by the server: Put verifies it
	// and returns kvpool.ErrCorrupt on a mismatch. payload is valid only
	// during the call.
	Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error
	// Exists reports whether k is stored. It must not change recency,
	// admission or policy state, nor take or extend a read lease.
	Exists(k block.Key) bool
	// Delete removes k; it returns kvpool.ErrNotFound when k is absent.
	Delete(ctx context.Context, k block.Key) error
	// Stats returns a snapshot of each tier's counters (at most 255 tiers,
	// names at most 255 bytes), for the STATS op.
	Stats() []wire.TierStats
}

// Syncer is an optional Backend extension for a store whose changes reach
// an index elsewhere some time after they are made (a node's master, told
// with every heartbeat). The server answers SYNC by calling Sync, bounded
// by Options.SyncTimeout and the server's context; a Backend without it
// answers SYNC with CodeOK at once (a standalone node has no index to wait
// for). Implementations are safe for concurrent use.
type Syncer interface {
	// Sync returns nil once every change the backend made before the call
	// is in the index, or an error wrapping ctx's when ctx ends first.
	Sync(ctx context.Context) error
}

// File is an open file holding blocks (an SSD tier's slot file).
// vfs.File satisfies it.
type File interface {
	io.ReaderAt
	// Fd is the operating-system descriptor, used for sendfile; 0 means
	// the file is not a real file and the server reads it with ReadAt.
	Fd() uintptr
}

// Ref is a block pinned by Backend.Acquire. Exactly one of two forms:
//   - in memory: Payload holds the bytes, in one piece or several (a RAM
//     tier's chunks), in order (File is nil);
//   - in a file: the Len bytes at offset Off of File (Payload is nil).
type Ref struct {
	// Sum is the checksum stored with the block:
	// block.Checksum(key, payload).
	Sum uint32
	// Payload is the block's bytes, in place (a RAM tier's chunks), when
	// File is nil. The server sends the pieces with one writev.
	Payload [][]byte
	// File, Off and Len locate the payload in a file when File is not nil.
	File File
	Off  int64
	Len  int
	// Release unpins the block; nil when there is nothing to release.
	Release func()
}

// size returns the payload length.
func (r *Ref) size() int {
	if r.File != nil {
		return r.Len
	}
	n := 0
	for _, p := range r.Payload {
		n += len(p)
	}
	return n
}

// release calls r.Release if set.
func (r *Ref) release() {
	if r.Release != nil {
		r.Release()
	}
}

// Pacer limits the bytes that cross one path (the node's network egress or
// ingress) in a live experiment, such as a token bucket. Implementations
// are safe for concurrent use.
type Pacer interface {
	// Wait blocks until n more bytes may cross the path, or ctx ends (then
	// it returns ctx's error).
	Wait(ctx context.Context, n int) error
}
