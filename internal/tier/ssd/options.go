package ssd

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/vfs"
)

// SyncMode says when the tier makes writes durable with fsync.
type SyncMode string

// Sync modes.
const (
	// SyncNone never syncs before a Put returns (only at Close). A crash
	// may lose any block written since the files were last synced, but
	// never returns one corrupt: every record is verified at Open and Get.
	SyncNone SyncMode = "none"
	// SyncBatch is a group commit: a Put (or Delete) returns once an
	// fsync that started after its writes completed has finished. One
	// fsync covers every Put that finished writing while the previous one
	// ran or the batch window (SyncInterval, or SyncEvery puts) was open.
	SyncBatch SyncMode = "batch"
	// SyncAlways syncs the page files the Put wrote and the side table
	// before each Put or Delete returns.
	SyncAlways SyncMode = "always"
)

// ParseSyncMode parses "none", "batch" or "always" ("" is the default).
func ParseSyncMode(s string) (SyncMode, error) {
	switch m := SyncMode(s); m {
	case "", SyncNone, SyncBatch, SyncAlways:
		return m, nil
	}
	return "", fmt.Errorf("ssd: sync mode %q: want none, batch or always", s)
}

// Defaults. Each says where its value comes from.
const (
	// DefaultBlockSize is the typical object size the eviction policy is
	// sized for: the top of the live-run payload range (64–256 KiB per
	// block; docs/design.md, "Scale model"). It bounds nothing: objects
	// of any size up to MaxObjectSize are stored.
	DefaultBlockSize = 256 << 10
	// DefaultMaxObjectSize is the largest payload accepted by default:
	// an LMCache chunk of an 8B model is ~32 MiB (ISSUE 15), with room to
	// spare.
	DefaultMaxObjectSize = 64 << 20
	// MaxObjectSizeLimit is the largest MaxObjectSize accepted: an object
	// is read and written whole, so a larger one would hold that much
	// memory per request.
	MaxObjectSizeLimit = 512 << 20
	// DefaultCapacityBytes bounds the tier's files on disk: small enough
	// for a laptop run, large enough for ~4k blocks of 256 KiB.
	DefaultCapacityBytes = 1 << 30
	// DefaultPagesPerFile is 65536 pages, 256 MiB per page file: a 1 TiB
	// tier is 4k files, each quick to preallocate.
	DefaultPagesPerFile = 1 << 16
	// DefaultSync is SyncBatch: a restarted node finds the blocks it had
	// (the point of an SSD tier that survives restarts) for one fsync per
	// batch rather than one per block.
	DefaultSync = SyncBatch
	// DefaultSyncInterval bounds how long a batch Put waits for its fsync
	// beyond the fsync itself: a few NVMe flush latencies (~0.5–2 ms),
	// small next to a model-scale block fetch (tens of ms).
	DefaultSyncInterval = 2 * time.Millisecond
	// DefaultSyncEvery closes a batch early after this many puts: 64
	// blocks of 256 KiB is 16 MiB, about 5 ms of writes at 3 GB/s, so a
	// batch rarely waits for the interval under load.
	DefaultSyncEvery = 64
	// DefaultHighWatermark and DefaultLowWatermark: evict when a put
	// would take the used share of pages past 95%, down to 90%. These are
	// Mooncake master's eviction_high_watermark_ratio (0.95) and
	// eviction_ratio (0.05) defaults.
	DefaultHighWatermark = 0.95
	DefaultLowWatermark  = 0.90
)

// maxBlockSize bounds BlockSize (a sizing hint) to the largest object.
const maxBlockSize = MaxObjectSizeLimit

// pageCost is the disk space one page takes: the page and its side-table
// entry.
const pageCost = PageSize + entrySize

// Options configure a Tier. The zero value of every field means its
// default; Dir is required.
type Options struct {
	// Dir holds the page files, the side table and the geometry file.
	Dir string
	// FS is the filesystem (default: the operating system's).
	FS vfs.FS
	// BlockSize is the typical object size the eviction policy is sized
	// for: the policy's capacity is the high watermark's bytes over
	// SlotSize(BlockSize) (default DefaultBlockSize). Objects of any size
	// up to MaxObjectSize are stored.
	BlockSize int
	// MaxObjectSize is the largest payload accepted (default
	// DefaultMaxObjectSize, or what CapacityBytes holds if that is less;
	// at most MaxObjectSizeLimit and what CapacityBytes holds). A larger
	// Put fails with kvpool.ErrTooLarge.
	MaxObjectSize int
	// CapacityBytes bounds the tier's files on disk, pages and side table
	// together: the tier has CapacityBytes / (PageSize + 64) pages
	// (default DefaultCapacityBytes).
	CapacityBytes int64
	// PagesPerFile is the number of pages in each preallocated page file
	// (default DefaultPagesPerFile).
	PagesPerFile int
	// MaxObjects, when set, bounds the number of resident objects: a put
	// that would exceed it evicts, like one that would pass the high
	// watermark (default: no bound but the pages).
	MaxObjects int
	// Sync is the durability mode (default DefaultSync).
	Sync SyncMode
	// SyncInterval is the longest a SyncBatch batch stays open (default
	// DefaultSyncInterval).
	SyncInterval time.Duration
	// SyncEvery closes a SyncBatch batch once this many puts joined it
	// (default DefaultSyncEvery).
	SyncEvery int
	// HighWatermark and LowWatermark are fractions of the pages: when a
	// put would take the pages in use past High, objects are evicted until
	// at most Low are in use (defaults DefaultHighWatermark,
	// DefaultLowWatermark). Set both to 1 to evict only what a put needs
	// when the tier is full.
	HighWatermark, LowWatermark float64
	// NewEviction builds the eviction policy for a tier of the given
	// number of objects of BlockSize; the tier drives it, keyed by object
	// number, under its lock (default policy.NewLRU).
	NewEviction func(capacity int) policy.Eviction
	// DirectIO opens the page files with O_DIRECT and does all their I/O
	// with 4096-aligned buffers (the side table is written buffered and
	// synced per Sync). Open fails with ErrNoDirectIO where the platform
	// or filesystem refuses it; the caller decides whether to retry
	// without (and says so in its startup line).
	DirectIO bool
	// SkipScanVerify skips verifying payload checksums during the
	// start-up scan (side-table entries, chains, tenants and names are
	// always checked; payloads are still verified on every Get). The
	// default verifies.
	SkipScanVerify bool
	// OnRemove, when set, is called for every block the tier removes on
	// its own: evicted to make room for a Put, or dropped because a Get
	// found its pages corrupt or unreadable. It is called after the block
	// has left the index (Contains reports false), without the tier's
	// lock held, on the goroutine of the Put or Get, possibly
	// concurrently; it must be safe for concurrent use and must not block
	// for long. It is not called for Delete, for a copy replaced by a Put
	// of the same key, or for the records the start-up scan drops (they
	// were never in the index). A node uses it to tell its master which
	// replicas are gone.
	OnRemove func(Removed)
}

// RemoveReason says why the tier removed a block on its own.
type RemoveReason uint8

// The reasons of Removed.
const (
	// RemovedEvicted: the eviction policy chose the block to make room.
	RemovedEvicted RemoveReason = iota + 1
	// RemovedCorrupt: a read found the record corrupt or unreadable.
	RemovedCorrupt
)

// String returns "evicted", "corrupt" or "reason(N)".
func (r RemoveReason) String() string {
	switch r {
	case RemovedEvicted:
		return "evicted"
	case RemovedCorrupt:
		return "corrupt"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Removed is what Options.OnRemove receives.
type Removed struct {
	Key    block.Key
	Reason RemoveReason
}

// ErrNoDirectIO is returned by Open when DirectIO is set but the platform
// or the filesystem does not support O_DIRECT.
var ErrNoDirectIO = errors.New("direct I/O not supported")

// SlotSize is the disk space (pages and their side-table entries) an
// object of payload blockSize bytes takes under a key of the longest
// tenant and a name of up to 64 bytes: what a caller sizing CapacityBytes
// for N such objects multiplies by N.
func SlotSize(blockSize int) int64 {
	return int64(pagesFor(block.MaxTenantLen+64+blockSize)) * pageCost
}

// pagesOf is the number of pages the tier has for capacity bytes.
func pagesOf(capacity int64) int64 { return capacity / pageCost }

// recordLen is the length of the record of a payload of n bytes under k:
// the payload, after the tenant and name unless they go in the head entry.
func recordLen(k block.Key, n int) int {
	if keyInEntry(k, n) {
		return n
	}
	return len(k.Tenant) + len(k.Name) + n
}

// prefixLen is the number of bytes in front of the payload of an object of
// n bytes under k.
func prefixLen(k block.Key, n int) int { return recordLen(k, n) - n }

// Validate reports the first bad field, by name.
func (o Options) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("ssd: Options.%s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case o.Dir == "":
		return bad("Dir", "empty (the tier needs a directory)")
	case o.BlockSize < 0 || o.BlockSize > maxBlockSize:
		return bad("BlockSize", "%d out of range [0, %d]", o.BlockSize, maxBlockSize)
	case o.MaxObjectSize < 0 || o.MaxObjectSize > MaxObjectSizeLimit:
		return bad("MaxObjectSize", "%d out of range [0, %d]", o.MaxObjectSize, MaxObjectSizeLimit)
	case o.CapacityBytes < 0:
		return bad("CapacityBytes", "%d is negative", o.CapacityBytes)
	case o.PagesPerFile < 0:
		return bad("PagesPerFile", "%d is negative", o.PagesPerFile)
	case o.MaxObjects < 0:
		return bad("MaxObjects", "%d is negative", o.MaxObjects)
	case o.SyncInterval < 0:
		return bad("SyncInterval", "%v is negative", o.SyncInterval)
	case o.SyncEvery < 0:
		return bad("SyncEvery", "%d is negative", o.SyncEvery)
	case o.HighWatermark < 0 || o.HighWatermark > 1 || o.HighWatermark != o.HighWatermark:
		return bad("HighWatermark", "%v outside [0, 1]", o.HighWatermark)
	case o.LowWatermark < 0 || o.LowWatermark > 1 || o.LowWatermark != o.LowWatermark:
		return bad("LowWatermark", "%v outside [0, 1]", o.LowWatermark)
	case o.DirectIO && vfs.ODirect == 0:
		return bad("DirectIO", "%v: O_DIRECT does not exist on this platform", ErrNoDirectIO)
	}
	if _, err := ParseSyncMode(string(o.Sync)); err != nil {
		return bad("Sync", "%v", err)
	}
	d := o.withDefaults()
	if d.LowWatermark > d.HighWatermark {
		return bad("LowWatermark", "%v above HighWatermark %v", d.LowWatermark, d.HighWatermark)
	}
	if pagesOf(d.CapacityBytes) < 1 {
		return bad("CapacityBytes", "%d holds no page of %d bytes (with its %d-byte side-table entry)", d.CapacityBytes, PageSize, entrySize)
	}
	if d.MaxObjectSize > capacityPayload(d.CapacityBytes) {
		return bad("MaxObjectSize", "%d bytes do not fit in CapacityBytes %d (at most %d with the longest key)", d.MaxObjectSize, d.CapacityBytes, capacityPayload(d.CapacityBytes))
	}
	if pagesOf(d.CapacityBytes) > int64(noPage-1) {
		return bad("CapacityBytes", "%d is %d pages, over the side table's %d", d.CapacityBytes, pagesOf(d.CapacityBytes), noPage-1)
	}
	return nil
}

// CapacityPayload is the largest payload a tier of capacity bytes (0: the
// default capacity) holds under a key of the longest tenant and name: the
// most MaxObjectSize may be for that capacity.
func CapacityPayload(capacity int64) int {
	if capacity == 0 {
		capacity = DefaultCapacityBytes
	}
	return capacityPayload(capacity)
}

// capacityPayload is the largest payload a tier of capacity bytes holds
// under a key of the longest tenant and name.
func capacityPayload(capacity int64) int {
	return int(max(0, min(pagesOf(capacity)*PageSize-block.MaxTenantLen-block.MaxNameLen, MaxObjectSizeLimit)))
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default()
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.CapacityBytes == 0 {
		o.CapacityBytes = DefaultCapacityBytes
	}
	if o.MaxObjectSize == 0 {
		o.MaxObjectSize = min(DefaultMaxObjectSize, capacityPayload(o.CapacityBytes))
	}
	if o.PagesPerFile == 0 {
		o.PagesPerFile = DefaultPagesPerFile
	}
	if o.Sync == "" {
		o.Sync = DefaultSync
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.HighWatermark == 0 {
		o.HighWatermark = DefaultHighWatermark
	}
	if o.LowWatermark == 0 {
		o.LowWatermark = min(DefaultLowWatermark, o.HighWatermark)
	}
	if o.NewEviction == nil {
		o.NewEviction = func(capacity int) policy.Eviction { return policy.NewLRU(capacity) }
	}
	return o
}
