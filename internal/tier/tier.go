// Package tier defines the contract every storage tier of a node meets (the
// RAM tier, the SSD tier). Tiers report failures with the sentinels of
// package kvpool (kvpool.ErrNotFound, kvpool.ErrCorrupt, ...). The
// conformance suite in tiertest runs against every implementation.
//
// A tier stores objects of any size up to its max object size under
// chain keys or named keys (block.Key); it keeps a named object's full
// name and compares it on every read, so two names sharing an ID never
// return each other's bytes. Stats reports both the payload bytes it
// holds and the space they occupy (HeldBytes).
package tier

import (
	"context"

	"github.com/kvpool/kvpool/block"
)

// Tier is one storage tier of a node. Implementations are safe for
// concurrent use.
//
// Contract (checked by tiertest.Run):
//   - Put stores a copy of payload under k with its checksum sum
//     (block.Checksum(k, payload)); the caller keeps ownership of payload.
//     A Put of a key already present replaces it. A block is visible to Get
//     only after Put has returned nil; a failed Put leaves no visible
//     partial block (the old copy, if any, may be gone).
//   - Get appends the payload to dst[:0] and returns it with its checksum,
//     having verified the checksum; on mismatch it drops the copy and
//     returns ErrCorrupt, never the bytes. All of dst's capacity is the
//     tier's to write, past the payload's length too (the SSD tier reads
//     whole pages into it): pass a slice whose capacity is yours.
//   - Delete removes k; deleting an absent key returns ErrNotFound.
//   - Contains never changes recency or any policy state.
//   - A tier may evict blocks at any Put to make room.
type Tier interface {
	Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error
	Get(ctx context.Context, k block.Key, dst []byte) ([]byte, uint32, error)
	Delete(ctx context.Context, k block.Key) error
	Contains(k block.Key) bool
	Stats() Stats
	Close() error
}

// Stats is a snapshot of a tier's counters.
type Stats struct {
	Blocks int   // resident objects
	Bytes  int64 // resident payload bytes: the sum of the objects' lengths
	// HeldBytes is the tier's memory or disk space the resident objects
	// occupy: their chunks or pages (names and padding included) and
	// their per-object metadata. HeldBytes/Bytes is the tier's space
	// overhead.
	HeldBytes     int64
	CapacityBytes int64 // configured capacity
	Hits, Misses  uint64
	BytesIn       uint64 // payload bytes written by Put
	BytesOut      uint64 // payload bytes returned by Get
	EvictAttempts uint64 // victims chosen
	Evicted       uint64 // blocks actually freed by eviction
	Corruptions   uint64 // checksum/header failures detected (copies dropped)
	IOErrors      uint64 // read/write errors from the device
}

// Segments is a payload held in pieces, in order: a RAM tier stores an
// object in chunks that need not be adjacent, and hands it out in place as
// the runs of adjacent chunks it occupies. A writer sends it with writev
// (net.Buffers); a tier that needs it in one piece copies it (AppendTo).
type Segments [][]byte

// Len returns the payload's length.
func (s Segments) Len() int {
	n := 0
	for _, b := range s {
		n += len(b)
	}
	return n
}

// AppendTo appends the payload to dst and returns the result.
func (s Segments) AppendTo(dst []byte) []byte {
	for _, b := range s {
		dst = append(dst, b...)
	}
	return dst
}

// Checksum returns block.Checksum(k, payload) without joining the pieces.
func (s Segments) Checksum(k block.Key) uint32 { return block.ChecksumSegments(k, s) }
