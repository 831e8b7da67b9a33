package ram

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/kvpool/kvpool/internal/policy"
)

// Defaults and limits. Each says where its value comes from.
const (
	// DefaultBlockSize is the typical object size the eviction and
	// admission policies are sized for: the top of the live-run payload
	// range (64–256 KiB per block; docs/design.md, "Scale model"), which
	// was the slot size before chunks, so a node keeps the policy sizes
	// (and the lab its hit ratios) it had with slots.
	DefaultBlockSize = 256 << 10
	// DefaultCapacityBytes is the node's default RAM budget (1 GiB, the
	// node configuration's default RAM size).
	DefaultCapacityBytes = 1 << 30
	// DefaultChunkSize is the arena's chunk size: a memory page, so a
	// 28-byte metadata object wastes under 4 KiB and an object of many
	// pages is sent as few long runs (see the package doc). It is the
	// default when BlockSize is a multiple of it (as the default 256 KiB
	// is) or above MaxChunkSize; otherwise the chunk defaults to BlockSize
	// itself, so that a tier configured by its typical object size alone
	// (CapacityBytes / BlockSize objects, as slots were; the tests of the
	// packages above the tier do this) holds exactly that many objects of
	// up to BlockSize bytes, one chunk each.
	DefaultChunkSize = 4 << 10
	// MinChunkSize and MaxChunkSize bound Options.ChunkSize: a chunk costs
	// 72 bytes of tables (its object table entry and run tables), 14% of a
	// 512-byte chunk and more below; above 1 MiB a small object wastes
	// more than a whole typical KV object.
	MinChunkSize = 512
	MaxChunkSize = 1 << 20
	// DefaultMaxObjectSize is the largest payload accepted by default:
	// 64 MiB holds a 256-token LMCache chunk of an 8B model (about 32 MiB)
	// twice over. MaxMaxObjectSize is the most it may be set to (the
	// object table's payload length is 32 bits, and no KV chunk in use is
	// near it).
	DefaultMaxObjectSize = 64 << 20
	MaxMaxObjectSize     = 512 << 20
	// DefaultEviction and DefaultAdmission: LRU admitting everything, the
	// zero policy.Spec and the baseline every other policy is compared to.
	DefaultEviction  = "lru"
	DefaultAdmission = "all"
)

// maxBlockSize keeps a typical object size within the payload length's
// 32-bit field.
const maxBlockSize = 1 << 30

// MaxChunks is the most chunks a RAM tier has: chunk and object numbers
// stay within the tables' int32.
const MaxChunks = math.MaxInt32

// MaxSlots is MaxChunks, under its name from before chunks (a node's
// configuration check uses it).
const MaxSlots = MaxChunks

// Options configure a RAM tier. The zero value of every field means its
// default.
type Options struct {
	// BlockSize is the typical object size the eviction and admission
	// policies are sized for (default DefaultBlockSize): they are given a
	// capacity of HighWatermark × CapacityBytes / BlockSize objects, as
	// the simulator sizes its caches. It does not limit an object's size
	// (MaxObjectSize does); it sets the default ChunkSize when below
	// 4 KiB or not a multiple of 4 KiB (see DefaultChunkSize).
	BlockSize int
	// ChunkSize is the arena's allocation unit (a power of two from
	// MinChunkSize to MaxChunkSize; default DefaultChunkSize when
	// BlockSize is a multiple of it, else BlockSize: see
	// DefaultChunkSize).
	ChunkSize int
	// CapacityBytes is the byte budget; the arena has CapacityBytes /
	// ChunkSize chunks, allocated at Open (default DefaultCapacityBytes).
	CapacityBytes int64
	// MaxObjectSize is the largest payload accepted (default
	// DefaultMaxObjectSize, or CapacityBytes when that is smaller; at most
	// MaxMaxObjectSize and CapacityBytes). A larger Put fails with
	// kvpool.ErrTooLarge, naming both sizes. An object whose name and
	// payload need more chunks than the arena has is refused the same way.
	MaxObjectSize int
	// Eviction names the eviction policy (policy.EvictionNames; default
	// DefaultEviction). Oracle policies (belady) need the future and are
	// refused.
	Eviction string
	// Admission names the admission policy (policy.AdmissionNames; default
	// DefaultAdmission). It is consulted by Put for a key that is not
	// resident: a Put it refuses returns ErrNotAdmitted.
	Admission string
	// HighWatermark and LowWatermark are fractions of the chunks: once a
	// Put leaves more than HighWatermark of them holding resident objects,
	// objects are evicted until at most LowWatermark do, keeping free
	// chunks for promotions (which never evict). Defaults 1 and 1: evict
	// only when a Put finds too few free chunks (exact LRU). Mooncake's
	// master uses 0.95 and 0.90 (eviction_high_watermark_ratio,
	// eviction_ratio 0.05). A batch eviction policy (policy.Batcher, e.g.
	// "mooncake") may evict more: its batch, counted in objects as the
	// policy is sized.
	HighWatermark, LowWatermark float64
	// SkipVerifyReads turns off checksum verification in Get. By default
	// (VerifyReads on) Get verifies every copy it returns, as the tier
	// contract says; View and Acquire never verify (the receiver does).
	// BenchmarkGet measures what verification costs.
	SkipVerifyReads bool
	// KeySecret, when not empty, keys the tenant part of the policy key
	// (RAM.PolicyKey) with HMAC-SHA256, so that no client can construct a
	// block ID whose policy key collides with another tenant's block: a
	// collision makes the two blocks share admission and promotion
	// statistics and refuses the second from RAM, which another tenant
	// could otherwise observe. Empty means the public mapping PolicyKey
	// (reproducible, for a single trusted tenant population and for the
	// validation that simulates on the node's keys). A node derives it from
	// its auth token.
	KeySecret []byte
	// OnEvict, when set, is called for every object the tier evicts (a
	// demotion hook); see Evicted for what it is given and the ordering
	// guarantees.
	OnEvict func(Evicted)
}

// ForObjects returns options for a tier that holds n objects of up to size
// bytes, chain keys or names of up to 64 bytes, one chunk each, before it
// evicts anything — so n objects of any size up to size are evicted in
// exact LRU order — and accepts payloads up to maxObject bytes (size if
// 0; the capacity grows to hold one). It is what tests that think in
// slots (tiertest.Config) open.
func ForObjects(size, n, maxObject int) Options {
	if maxObject <= 0 {
		maxObject = size
	}
	cs := MinChunkSize
	for cs < size+64 && cs < MaxChunkSize {
		cs <<= 1
	}
	per := (size + 64 + cs - 1) / cs
	chunks := max(n*per, (maxObject+64+cs-1)/cs)
	// BlockSize, the typical object, is what one holds (per chunks), so
	// the policies are sized for n objects, as for n slots before chunks.
	return Options{BlockSize: per * cs, ChunkSize: cs, CapacityBytes: int64(chunks) * int64(cs), MaxObjectSize: maxObject}
}

// Validate reports the first bad field, by name.
func (o Options) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("ram: Options.%s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case o.BlockSize < 0 || o.BlockSize > maxBlockSize:
		return bad("BlockSize", "%d out of range [0, %d]", o.BlockSize, maxBlockSize)
	case o.ChunkSize != 0 && (o.ChunkSize < MinChunkSize || o.ChunkSize > MaxChunkSize || bits.OnesCount(uint(o.ChunkSize)) != 1):
		return bad("ChunkSize", "%d is not a power of two from %d to %d", o.ChunkSize, MinChunkSize, MaxChunkSize)
	case o.CapacityBytes < 0:
		return bad("CapacityBytes", "%d is negative", o.CapacityBytes)
	case o.MaxObjectSize < 0 || o.MaxObjectSize > MaxMaxObjectSize:
		return bad("MaxObjectSize", "%d out of range [0 (default %d), %d]", o.MaxObjectSize, DefaultMaxObjectSize, MaxMaxObjectSize)
	case o.HighWatermark < 0 || o.HighWatermark > 1 || o.HighWatermark != o.HighWatermark:
		return bad("HighWatermark", "%v outside [0 (default 1), 1]", o.HighWatermark)
	case o.LowWatermark < 0 || o.LowWatermark > 1 || o.LowWatermark != o.LowWatermark:
		return bad("LowWatermark", "%v outside [0 (default HighWatermark), 1]", o.LowWatermark)
	}
	d := o.withDefaults()
	if d.LowWatermark > d.HighWatermark {
		return bad("LowWatermark", "%v above HighWatermark %v", d.LowWatermark, d.HighWatermark)
	}
	chunks := d.CapacityBytes / int64(d.ChunkSize)
	switch {
	case chunks < 1:
		return bad("CapacityBytes", "%d holds no chunk of %d bytes (ChunkSize)", d.CapacityBytes, d.ChunkSize)
	case chunks > MaxChunks:
		return bad("CapacityBytes", "%d makes %d chunks of %d bytes, limit %d", d.CapacityBytes, chunks, d.ChunkSize, MaxChunks)
	case d.CapacityBytes > math.MaxInt:
		return bad("CapacityBytes", "%d exceeds this platform's address space", d.CapacityBytes)
	case int64(d.MaxObjectSize) > d.CapacityBytes:
		return bad("MaxObjectSize", "%d above CapacityBytes %d", d.MaxObjectSize, d.CapacityBytes)
	}
	if _, err := policy.NewEviction(d.Eviction, 0); err != nil {
		return bad("Eviction", "%v", err)
	}
	if (policy.Spec{Eviction: d.Eviction}).NeedsFuture() {
		return bad("Eviction", "%q is an offline (oracle) policy: it needs each access's next use, which a live tier does not know", d.Eviction)
	}
	if _, err := policy.NewAdmission(d.Admission, 0); err != nil {
		return bad("Admission", "%v", err)
	}
	return nil
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
		if o.BlockSize%DefaultChunkSize != 0 && o.BlockSize <= MaxChunkSize {
			o.ChunkSize = o.BlockSize
		}
	}
	if o.CapacityBytes == 0 {
		o.CapacityBytes = DefaultCapacityBytes
	}
	if o.MaxObjectSize == 0 {
		o.MaxObjectSize = int(min(DefaultMaxObjectSize, o.CapacityBytes))
	}
	if o.Eviction == "" {
		o.Eviction = DefaultEviction
	}
	if o.Admission == "" {
		o.Admission = DefaultAdmission
	}
	if o.HighWatermark == 0 {
		o.HighWatermark = 1
	}
	if o.LowWatermark == 0 {
		o.LowWatermark = o.HighWatermark
	}
	return o
}
