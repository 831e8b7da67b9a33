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
	// never returns one corrupt: every slot is verified at Open and Get.
	SyncNone SyncMode = "none"
	// SyncBatch is a group commit: a Put (or Delete) returns once an
	// fsync that started after its writes completed has finished. One
	// fsync covers every Put that finished writing while the previous one
	// ran or the batch window (SyncInterval, or SyncEvery puts) was open.
	SyncBatch SyncMode = "batch"
	// SyncAlways syncs the slot's file (and any file the Put invalidated a
	// slot in) before each Put or Delete returns.
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
	// DefaultBlockSize is the largest payload a slot holds: the top of the
	// live-run payload range (64–256 KiB per block; docs/design.md, "Scale
	// model").
	DefaultBlockSize = 256 << 10
	// DefaultCapacityBytes bounds the slot files' size on disk: small
	// enough for a laptop run, large enough for ~4k blocks of 256 KiB.
	DefaultCapacityBytes = 1 << 30
	// DefaultSlotsPerFile keeps the file count low (a 1 TiB tier of
	// 256 KiB blocks is ~4k files) while each file stays quick to
	// preallocate and scan.
	DefaultSlotsPerFile = 1024
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
	// would take the used share of slots past 95%, down to 90%. These are
	// Mooncake master's eviction_high_watermark_ratio (0.95) and
	// eviction_ratio (0.05) defaults.
	DefaultHighWatermark = 0.95
	DefaultLowWatermark  = 0.90
)

// maxBlockSize keeps payload lengths within the header's 32-bit field and
// a slot within what one ReadAt can return.
const maxBlockSize = 1 << 30

// Options configure a Tier. The zero value of every field means its
// default; Dir is required.
type Options struct {
	// Dir holds the slot files and the geometry file.
	Dir string
	// FS is the filesystem (default: the operating system's).
	FS vfs.FS
	// BlockSize is the largest payload of a slot (default DefaultBlockSize).
	BlockSize int
	// CapacityBytes bounds the size of the slot files on disk; the tier
	// has CapacityBytes / SlotSize(BlockSize) slots (default
	// DefaultCapacityBytes).
	CapacityBytes int64
	// SlotsPerFile is the number of slots in each preallocated slot file
	// (default DefaultSlotsPerFile).
	SlotsPerFile int
	// Sync is the durability mode (default DefaultSync).
	Sync SyncMode
	// SyncInterval is the longest a SyncBatch batch stays open (default
	// DefaultSyncInterval).
	SyncInterval time.Duration
	// SyncEvery closes a SyncBatch batch once this many puts joined it
	// (default DefaultSyncEvery).
	SyncEvery int
	// HighWatermark and LowWatermark are fractions of the slots: when a
	// put would take the slots in use past High, blocks are evicted until
	// at most Low are in use (defaults DefaultHighWatermark,
	// DefaultLowWatermark). Set both to 1 to evict one block per put only
	// when the tier is full.
	HighWatermark, LowWatermark float64
	// NewEviction builds the eviction policy for a tier of the given
	// number of slots; the tier drives it, keyed by slot number, under
	// its lock (default policy.NewLRU).
	NewEviction func(capacity int) policy.Eviction
	// DirectIO opens the slot files with O_DIRECT and does all their I/O
	// with 4096-aligned buffers. Open fails with ErrNoDirectIO where the
	// platform or filesystem refuses it; the caller decides whether to
	// retry without (and says so in its startup line).
	DirectIO bool
	// SkipScanVerify skips verifying payload checksums during the
	// start-up scan (headers are always checked; payloads are still
	// verified on every Get). The default verifies.
	SkipScanVerify bool
	// OnRemove, when set, is called for every block the tier removes on
	// its own: evicted to make room for a Put, or dropped because a Get
	// found its slot corrupt or unreadable. It is called after the block
	// has left the index (Contains reports false), without the tier's
	// lock held, on the goroutine of the Put or Get, possibly
	// concurrently; it must be safe for concurrent use and must not block
	// for long. It is not called for Delete, for a copy replaced by a Put
	// of the same key, or for the slots the start-up scan drops (they
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
	// RemovedCorrupt: a read found the slot corrupt or unreadable.
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

// SlotSize is the on-disk size of a slot holding payloads of up to
// blockSize bytes: a 4 KiB header region plus the payload rounded up to
// 4 KiB, so that both are aligned for O_DIRECT.
func SlotSize(blockSize int) int64 {
	return headerSize + roundUp(int64(blockSize), vfs.DirectIOAlign)
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

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
	case o.CapacityBytes < 0:
		return bad("CapacityBytes", "%d is negative", o.CapacityBytes)
	case o.SlotsPerFile < 0:
		return bad("SlotsPerFile", "%d is negative", o.SlotsPerFile)
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
	if d.CapacityBytes < SlotSize(d.BlockSize) {
		return bad("CapacityBytes", "%d holds no slot of %d bytes (BlockSize %d)", d.CapacityBytes, SlotSize(d.BlockSize), d.BlockSize)
	}
	return nil
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
	if o.SlotsPerFile == 0 {
		o.SlotsPerFile = DefaultSlotsPerFile
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
