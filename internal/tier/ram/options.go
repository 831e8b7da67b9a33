package ram

import (
	"fmt"
	"math"

	"github.com/kvpool/kvpool/internal/policy"
)

// Defaults. Each says where its value comes from.
const (
	// DefaultBlockSize is the largest payload a slot holds: the top of the
	// live-run payload range (64–256 KiB per block; docs/design.md, "Scale
	// model"), and the SSD tier's default, so a demoted block always fits.
	DefaultBlockSize = 256 << 10
	// DefaultCapacityBytes is the node's default RAM budget (1 GiB, the
	// node configuration's default RAM size): 4096 slots of 256 KiB.
	DefaultCapacityBytes = 1 << 30
	// DefaultEviction and DefaultAdmission: LRU admitting everything, the
	// zero policy.Spec and the baseline every other policy is compared to.
	DefaultEviction  = "lru"
	DefaultAdmission = "all"
)

// maxBlockSize keeps a payload length within the slot table's 32-bit field.
const maxBlockSize = 1 << 30

// MaxSlots is the most slots a RAM tier has: slot numbers stay within
// the index's int32.
const MaxSlots = math.MaxInt32

// Options configure a RAM tier. The zero value of every field means its
// default.
type Options struct {
	// BlockSize is the largest payload a slot holds (default
	// DefaultBlockSize).
	BlockSize int
	// CapacityBytes is the byte budget; the tier has CapacityBytes /
	// BlockSize slots, allocated at Open (default DefaultCapacityBytes).
	CapacityBytes int64
	// Eviction names the eviction policy (policy.EvictionNames; default
	// DefaultEviction). Oracle policies (belady) need the future and are
	// refused.
	Eviction string
	// Admission names the admission policy (policy.AdmissionNames; default
	// DefaultAdmission). It is consulted by Put for a key that is not
	// resident: a Put it refuses returns ErrNotAdmitted.
	Admission string
	// HighWatermark and LowWatermark are fractions of the slots: once a
	// Put leaves more than HighWatermark of them holding blocks, blocks are
	// evicted until at most LowWatermark do, keeping free slots for
	// promotions (which never evict). Defaults 1 and 1: evict only when a
	// Put finds no free slot, one block at a time (exact LRU). Mooncake's
	// master uses 0.95 and 0.90 (eviction_high_watermark_ratio,
	// eviction_ratio 0.05). A batch eviction policy (policy.Batcher, e.g.
	// "mooncake") may evict more. The eviction and admission policies
	// are sized for the blocks the tier keeps: HighWatermark of the slots.
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
	// OnEvict, when set, is called for every block the tier evicts (a
	// demotion hook); see Evicted for what it is given and the ordering
	// guarantees.
	OnEvict func(Evicted)
}

// Validate reports the first bad field, by name.
func (o Options) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("ram: Options.%s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case o.BlockSize < 0 || o.BlockSize > maxBlockSize:
		return bad("BlockSize", "%d out of range [0, %d]", o.BlockSize, maxBlockSize)
	case o.CapacityBytes < 0:
		return bad("CapacityBytes", "%d is negative", o.CapacityBytes)
	case o.HighWatermark < 0 || o.HighWatermark > 1 || o.HighWatermark != o.HighWatermark:
		return bad("HighWatermark", "%v outside [0 (default 1), 1]", o.HighWatermark)
	case o.LowWatermark < 0 || o.LowWatermark > 1 || o.LowWatermark != o.LowWatermark:
		return bad("LowWatermark", "%v outside [0 (default HighWatermark), 1]", o.LowWatermark)
	}
	d := o.withDefaults()
	if d.LowWatermark > d.HighWatermark {
		return bad("LowWatermark", "%v above HighWatermark %v", d.LowWatermark, d.HighWatermark)
	}
	slots := d.CapacityBytes / int64(d.BlockSize)
	switch {
	case slots < 1:
		return bad("CapacityBytes", "%d holds no slot of %d bytes (BlockSize)", d.CapacityBytes, d.BlockSize)
	case slots > MaxSlots:
		return bad("CapacityBytes", "%d makes %d slots of %d bytes, limit %d", d.CapacityBytes, slots, d.BlockSize, MaxSlots)
	case d.CapacityBytes > math.MaxInt:
		return bad("CapacityBytes", "%d exceeds this platform's address space", d.CapacityBytes)
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
	if o.CapacityBytes == 0 {
		o.CapacityBytes = DefaultCapacityBytes
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
