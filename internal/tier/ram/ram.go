// Package ram is the RAM tier of a node: a fixed byte budget split into
// fixed-size slots of one arena allocated at Open, so that a Put copies the
// payload into memory that already exists (no per-block allocation) and the
// garbage collector never scans payloads (the arena, the slot table and the
// index hold no pointers). It implements tier.Tier.
//
// Eviction and admission are the shared policy objects the simulator
// drives (package policy), and both see what the simulator's see: the
// block's key (a 64-bit hash of tenant and ID, PolicyKey), so history a
// policy keeps about a key (ghosts, frequency sketches) follows the block,
// not the slot it happened to occupy; and, when the caller knows them, the
// block's position in its request's prefix chain (a block.Hint, which
// policy.Access carries), which chain-aware policies (kvchain) need. A Put of a resident
// key is a hit for the eviction policy, as an access of a resident key is
// in the simulator; Touch records an access without moving data. A pinned slot
// — one being read by Get, View or Acquire — is never evicted or
// overwritten: eviction skips it (Stats counts EvictAttempts against
// Evicted), and a Put that finds every slot pinned fails with
// kvpool.ErrFull. A Put evicts when it finds no free slot and, optionally,
// keeps headroom: past a high watermark it evicts down to a low one (or a
// batch policy's batch), so promotions from a lower tier find free slots.
//
// An evicted block is handed to Options.OnEvict before its slot is reused,
// so a tiered store can demote it to SSD; see Evicted for the ordering
// guarantees. Contents are volatile: Close drops everything.
//
// Concurrency: a RAM is safe for concurrent use. One mutex guards the
// index, the slot table, the policies and the counters; payload copies,
// checksums and OnEvict run outside it, on pinned slots.
package ram

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/tier"
)

// Errors of the RAM tier beyond the tier vocabulary, checked with
// errors.Is.
var (
	// ErrNotAdmitted: the admission policy refused a Put of a key that was
	// not resident. Nothing was stored; a tiered store may write the block
	// to a lower tier instead.
	ErrNotAdmitted = errors.New("block not admitted")
	// ErrExists: an Insert with IfAbsent found the key resident.
	ErrExists = errors.New("block already resident")
)

// Evicted is what Options.OnEvict receives for a block the tier evicts.
//
// Ordering guarantees:
//   - OnEvict runs synchronously on the goroutine of the Put (or Insert)
//     whose eviction it is, without the tier's lock held, before that Put
//     returns: before it stores its own block when the eviction makes room
//     for it, after when the Put trims the tier to its low watermark or a
//     batch policy's batch. Evictions caused by concurrent Puts may run
//     concurrently, so OnEvict must be safe for concurrent use.
//   - While OnEvict runs the copy stays resident and pinned: Get, View,
//     Acquire and Contains still find it, and Generation(Key) reports Gen,
//     unless a Put or Delete of the same key supersedes it meanwhile (then
//     Generation reports another generation or absence, and the copy is
//     stale). The copy leaves the tier when OnEvict returns.
//   - Payload is valid only until OnEvict returns; the slot is not reused
//     before OnEvict has returned and every reader has released it.
//   - OnEvict is called at most once per copy, and never for a Delete, a
//     replacement by Put, a corrupt copy dropped by Get, or Close.
type Evicted struct {
	Key     block.Key
	Payload tier.Segments // the tier's own bytes: read-only, valid during the call
	Sum     uint32        // block.Checksum(Key, Payload)
	// Gen is the copy's generation (see RAM.Generation).
	Gen uint64
	// Clean reports that the copy was stored by an Insert with Clean set
	// (a promotion from a lower tier that still holds the same bytes) and
	// has not been replaced since.
	Clean bool
}

// MaxHintDepth is the largest block.Hint Depth a policy is shown; deeper
// hints are clamped to it. Hints come from clients (the wire carries a u32), so
// no policy may size anything by a raw depth; 1<<16 blocks is a 32M-token
// prompt of 512-token blocks, beyond any model's context.
const MaxHintDepth = 1 << 16

// InsertOptions modify an Insert. The zero value is a plain Put.
type InsertOptions struct {
	// Hint is the access's chain position, for the eviction policy.
	Hint block.Hint
	// IfAbsent stores the block only if the key is not resident; otherwise
	// Insert returns ErrExists and changes nothing.
	IfAbsent bool
	// NoEvict stores the block only into a free slot; with none, Insert
	// returns kvpool.ErrFull rather than evicting.
	NoEvict bool
	// Clean marks the copy clean (see Evicted.Clean).
	Clean bool
	// SkipAdmission stores the block without consulting the admission
	// policy (the caller already decided, as a promotion does).
	SkipAdmission bool
}

// Counters are the RAM tier's own counters beyond tier.Stats.
type Counters struct {
	Slots       int    // slots in the tier
	UsedSlots   int    // slots not free (resident, being written, evicted or released)
	PinnedSlots int    // slots held by readers or by an eviction in progress
	Rejected    uint64 // Puts the admission policy refused (ErrNotAdmitted)
	Full        uint64 // Puts and Inserts that found no slot (ErrFull)
}

type slotState uint8

const (
	slotFree     slotState = iota // on the free list
	slotWriting                   // reserved by a Put copying its payload in
	slotLive                      // in the index and the eviction policy
	slotEvicting                  // chosen as a victim: OnEvict runs; maybe still indexed, not in the policy
	slotDropping                  // out of the index; freed when its last pin is released
)

// slotMeta is one slot's entry in the slot table. It holds no pointers.
type slotMeta struct {
	gen    uint64
	id     uint64
	pk     policy.Key // PolicyKey of the block: its key in the policies
	tenant uint32     // interned tenant (RAM.tenants)
	n      uint32
	sum    uint32
	pins   int32
	state  slotState
	clean  bool
}

// ikey is the index key: the block ID and its interned tenant, with no
// pointers, so the index is not scanned by the garbage collector.
type ikey struct {
	id     uint64
	tenant uint32
}

// RAM is the RAM tier. Build it with Open.
type RAM struct {
	bs      int
	nSlots  int
	arena   []byte
	verify  bool
	onEvict func(Evicted)

	ops sync.WaitGroup // operations in flight; Close waits for them

	mu     sync.Mutex
	closed bool
	slots  []slotMeta
	index  map[ikey]int32
	free   []int32
	// Tenants are interned to small integers so that the slot table and
	// the index hold no strings. Interned names are never forgotten: there
	// are few tenants, and the server sets them.
	tenantIDs map[string]uint32
	tenants   []string
	tenantKey []uint64 // per interned tenant: the tenant part of its policy keys
	keySecret []byte   // Options.KeySecret
	pol       policy.Eviction
	polSlot   map[policy.Key]int32 // the live slot of each key in pol
	batch     policy.Batcher       // pol as a Batcher, or nil
	high, low int                  // trim past high resident blocks down to low
	adm       policy.Admission     // nil admits everything
	skip      []int32              // scratch: pinned victims to reinsert
	clock     int64
	gen       uint64
	pinned    int
	stats     tier.Stats
	rejected  uint64
	full      uint64
}

var _ tier.Tier = (*RAM)(nil)

// Open allocates a RAM tier: the whole arena and every table, up front.
func Open(opts Options) (*RAM, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	n := int(o.CapacityBytes / int64(o.BlockSize))
	// The epsilon keeps 0.95*20 from rounding to 20 or 0.9*10 to 8.
	high := min(max(int(math.Ceil(o.HighWatermark*float64(n)-1e-9)), 1), n)
	low := min(max(int(math.Floor(o.LowWatermark*float64(n)+1e-9)), 0), high)
	// The policies are sized for the blocks the tier keeps resident (the
	// high watermark's), as the simulator sizes its caches for their
	// capacity: policies that size queues from it (kvchain, S3-FIFO, ARC)
	// then behave as they do there.
	ev, err := policy.NewEviction(o.Eviction, high)
	if err != nil {
		return nil, fmt.Errorf("ram: open: %w", err)
	}
	var adm policy.Admission
	if o.Admission != "all" {
		if adm, err = policy.NewAdmission(o.Admission, high); err != nil {
			return nil, fmt.Errorf("ram: open: %w", err)
		}
	}
	r := &RAM{
		bs:        o.BlockSize,
		nSlots:    n,
		arena:     make([]byte, n*o.BlockSize),
		verify:    !o.SkipVerifyReads,
		onEvict:   o.OnEvict,
		slots:     make([]slotMeta, n),
		index:     make(map[ikey]int32, n),
		free:      make([]int32, n),
		tenantIDs: map[string]uint32{},
		keySecret: bytes.Clone(o.KeySecret),
		pol:       ev,
		polSlot:   make(map[policy.Key]int32, n),
		adm:       adm,
	}
	r.batch, _ = ev.(policy.Batcher)
	r.high, r.low = high, low
	for i := range n {
		r.free[i] = int32(n - 1 - i) // popped from the end: slot 0 first
	}
	r.stats.CapacityBytes = int64(n) * int64(o.BlockSize)
	return r, nil
}

// PolicyKey is the public policy key of k: a 64-bit hash of its tenant and
// ID, the key a RAM opened without Options.KeySecret gives its policies
// (RAM.PolicyKey). Anyone can compute it, and so construct another
// tenant's collisions: a RAM serving mutually distrusting tenants sets
// KeySecret. It is block.PolicyKey.
func PolicyKey(k block.Key) policy.Key {
	return block.PolicyKey(k)
}

// PublicCollision returns the ID in tenant to whose public PolicyKey equals
// from's. The public key mixes the tenant in with one XOR before a
// bijection, so anyone can compute this; it is why a RAM serving
// mutually distrusting tenants sets Options.KeySecret (and what tests of
// that use).
func PublicCollision(from block.Key, to string) uint64 {
	return from.ID ^ tenantKey(nil, from.Tenant)*block.Golden64 ^ tenantKey(nil, to)*block.Golden64
}

// PolicyKey is the key the eviction and admission policies see for k: a
// 64-bit hash of its tenant (keyed with Options.KeySecret when set) and
// its ID, a bijection of the ID within a tenant; see collisionLocked for
// the rare cross-tenant collision. A tiered store's promotion sketch uses
// the same key.
func (r *RAM) PolicyKey(k block.Key) policy.Key {
	if len(r.keySecret) == 0 {
		return PolicyKey(k)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.policyKeyLocked(k)
}

// policyKeyLocked is PolicyKey with r.mu held. It does not intern a
// tenant it has not seen.
func (r *RAM) policyKeyLocked(k block.Key) policy.Key {
	if t, ok := r.tenantIDs[k.Tenant]; ok {
		return mixKey(k.ID, r.tenantKey[t])
	}
	return mixKey(k.ID, tenantKey(r.keySecret, k.Tenant))
}

// tenantKey is the tenant part of a policy key: FNV-1a of the tenant
// without a secret, else the first 8 bytes of HMAC-SHA256(secret, tenant).
func tenantKey(secret []byte, tenant string) uint64 {
	if len(secret) == 0 {
		return block.FNV1a(tenant)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(tenant))
	return binary.LittleEndian.Uint64(m.Sum(nil))
}

// mixKey combines an ID and a tenant part with SplitMix64's finaliser (a
// bijection, so IDs of one tenant never collide).
func mixKey(id, tenant uint64) policy.Key {
	return block.Mix64(id ^ tenant*block.Golden64)
}

// slot returns the first n bytes of slot s.
func (r *RAM) slot(s int32, n uint32) []byte {
	off := int(s) * r.bs
	return r.arena[off : off+int(n) : off+int(n)]
}

// beginLocked registers an operation; it fails once the tier is closed.
// The caller holds r.mu and calls r.ops.Done when the operation ends.
func (r *RAM) beginLocked(what string, k block.Key) error {
	if r.closed {
		return fmt.Errorf("ram: %s %s: %w", what, k, kvpool.ErrClosed)
	}
	r.ops.Add(1)
	return nil
}

// lookupLocked returns the slot indexed for k.
func (r *RAM) lookupLocked(k block.Key) (int32, bool) {
	t, ok := r.tenantIDs[k.Tenant]
	if !ok {
		return 0, false
	}
	s, ok := r.index[ikey{id: k.ID, tenant: t}]
	return s, ok
}

// internLocked returns the interned ID of tenant, adding it if new.
func (r *RAM) internLocked(tenant string) uint32 {
	if t, ok := r.tenantIDs[tenant]; ok {
		return t
	}
	t := uint32(len(r.tenants))
	r.tenants = append(r.tenants, tenant)
	r.tenantKey = append(r.tenantKey, tenantKey(r.keySecret, tenant))
	r.tenantIDs[tenant] = t
	return t
}

func (r *RAM) pinLocked(s int32) {
	m := &r.slots[s]
	if m.pins == 0 {
		r.pinned++
	}
	m.pins++
}

// unpinLocked releases a pin; the last pin of a dropped slot frees it.
func (r *RAM) unpinLocked(s int32) {
	m := &r.slots[s]
	m.pins--
	if m.pins == 0 {
		r.pinned--
		if m.state == slotDropping {
			r.freeLocked(s)
		}
	}
}

// freeLocked returns slot s to the free list.
func (r *RAM) freeLocked(s int32) {
	r.slots[s] = slotMeta{}
	r.free = append(r.free, s)
}

// accessLocked returns the policy access to the block with policy key pk
// in tenant t described by h, advancing the clock.
func (r *RAM) accessLocked(pk policy.Key, t string, h block.Hint) policy.Access {
	r.clock++
	a := policy.Access{Key: pk, Hint: block.Hint{Depth: max(0, min(h.Depth, MaxHintDepth))}, Time: r.clock, NextUse: policy.NoNextUse}
	if h.Depth > 0 {
		a.Parent = r.policyKeyLocked(block.Key{Tenant: t, ID: h.Parent})
	}
	return a
}

// touchLocked records a read of slot s with the eviction policy.
func (r *RAM) touchLocked(s int32) {
	if m := &r.slots[s]; m.state == slotLive {
		r.pol.Hit(r.accessLocked(m.pk, r.tenants[m.tenant], block.Hint{}))
	}
}

// polInsertLocked puts live slot s into the eviction policy.
func (r *RAM) polInsertLocked(s int32, a policy.Access) {
	r.polSlot[a.Key] = s
	r.pol.Insert(a)
}

// polRemoveLocked takes slot s out of the eviction policy.
func (r *RAM) polRemoveLocked(s int32) {
	pk := r.slots[s].pk
	r.pol.Remove(pk)
	delete(r.polSlot, pk)
}

// Touch records an access to k described by h with the eviction policy,
// as a Put of the resident key would, without moving any data: a caller
// that used a block it already held (a prefill reusing a prefix in its own
// node's memory) tells the tier so, as the simulator's access does. It
// reports whether k was resident; an absent k changes nothing. It is not a
// read: it counts no hit or miss.
func (r *RAM) Touch(k block.Key, h block.Hint) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	s, ok := r.lookupLocked(k)
	if !ok || r.slots[s].state != slotLive {
		return false
	}
	r.pol.Hit(r.accessLocked(r.slots[s].pk, k.Tenant, h))
	return true
}

// unindexLocked takes indexed slot s out of the index and the resident
// counters.
func (r *RAM) unindexLocked(s int32) {
	m := &r.slots[s]
	delete(r.index, ikey{id: m.id, tenant: m.tenant})
	r.stats.Blocks--
	r.stats.Bytes -= int64(m.n)
}

// dropLocked removes indexed slot s (a Delete, a replacement, a corrupt
// copy). A live slot leaves the policy and is freed now or by its last
// reader; an evicting slot is finished by the Put evicting it.
func (r *RAM) dropLocked(s int32) {
	r.unindexLocked(s)
	m := &r.slots[s]
	if m.state != slotLive {
		return
	}
	r.polRemoveLocked(s)
	m.state = slotDropping
	if m.pins == 0 {
		r.freeLocked(s)
	}
}

// Put stores payload under k (see tier.Tier). A key that is not resident
// is first offered to the admission policy: a refusal returns
// ErrNotAdmitted. With every slot pinned it returns kvpool.ErrFull.
func (r *RAM) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	_, err := r.Insert(ctx, k, payload, sum, InsertOptions{})
	return err
}

// Insert is Put with options; it returns the generation of the stored
// copy (see Generation). If a concurrent Put of k stored a newer copy
// first, Insert returns its own copy's generation and nil, and the newer
// copy stays.
//
// It decides and reserves a slot under r.mu, copies the payload in
// without the lock (the slot is slotWriting, so no one else touches it),
// and publishes the copy under r.mu again, deciding then against whatever
// copy of k arrived meanwhile.
func (r *RAM) Insert(ctx context.Context, k block.Key, payload []byte, sum uint32, how InsertOptions) (uint64, error) {
	if err := r.checkPut(ctx, k, payload, sum); err != nil {
		return 0, err
	}

	r.mu.Lock()
	if err := r.beginLocked("put", k); err != nil {
		r.mu.Unlock()
		return 0, err
	}
	defer r.ops.Done()
	ik := ikey{id: k.ID, tenant: r.internLocked(k.Tenant)}
	pk := r.policyKeyLocked(k)
	if err := r.admitLocked(k, ik, pk, how); err != nil {
		r.mu.Unlock()
		return 0, err
	}
	s, err := r.reserveLocked(how.NoEvict)
	if err != nil {
		r.mu.Unlock()
		return 0, fmt.Errorf("ram: put %s: %w", k, err)
	}
	r.gen++
	gen := r.gen
	r.slots[s] = slotMeta{gen: gen, id: k.ID, pk: pk, tenant: ik.tenant, n: uint32(len(payload)), sum: sum, state: slotWriting, clean: how.Clean}
	r.mu.Unlock()

	copy(r.slot(s, uint32(len(payload))), payload)

	r.mu.Lock()
	defer r.mu.Unlock()
	return r.publishLocked(s, gen, len(payload), k, ik, pk, how)
}

// checkPut rejects a put that must not reach the arena: a done context,
// an invalid key, a payload larger than a slot, or a checksum that does
// not match the payload.
func (r *RAM) checkPut(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ram: put %s: %w", k, err)
	}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("ram: put %s: %w", k, err)
	}
	if len(payload) > r.bs {
		return fmt.Errorf("ram: put %s: %d bytes, block size %d: %w", k, len(payload), r.bs, kvpool.ErrTooLarge)
	}
	if got := block.Checksum(k, payload); got != sum {
		return fmt.Errorf("ram: put %s: checksum %08x given, payload has %08x: %w", k, sum, got, kvpool.ErrCorrupt)
	}
	return nil
}

// admitLocked decides, before a slot is reserved, whether a new copy of k
// (index key ik, policy key pk) may be stored: with IfAbsent, k must not
// be resident; a key that is not resident must not collide with another
// tenant's policy key and, unless SkipAdmission is set, must pass the
// admission policy. Called with r.mu held.
func (r *RAM) admitLocked(k block.Key, ik ikey, pk policy.Key, how InsertOptions) error {
	if _, ok := r.index[ik]; ok {
		if how.IfAbsent {
			return fmt.Errorf("ram: insert %s: %w", k, ErrExists)
		}
		return nil
	}
	if err := r.collisionLocked(k, ik, pk); err != nil {
		return err
	}
	if r.adm != nil && !how.SkipAdmission && !r.adm.Admit(r.accessLocked(pk, k.Tenant, how.Hint)) {
		r.rejected++
		return fmt.Errorf("ram: put %s: %s admission: %w", k, r.adm.Name(), ErrNotAdmitted)
	}
	return nil
}

// publishLocked makes slot s, into which Insert copied a new copy of k
// (generation gen, n bytes), the resident copy of k, unless the copy of k
// resident now wins (see below), and then trims the tier unless NoEvict is
// set. It returns the copy's generation, or the error for which it freed
// slot s. Called with r.mu held.
func (r *RAM) publishLocked(s int32, gen uint64, n int, k block.Key, ik ikey, pk policy.Key, how InsertOptions) (uint64, error) {
	replaced := false // k's policy entry passes from a live older copy to s
	if cur, ok := r.index[ik]; ok {
		switch {
		case how.IfAbsent:
			r.freeLocked(s)
			return 0, fmt.Errorf("ram: insert %s: %w", k, ErrExists)
		case r.slots[cur].gen > gen && !(r.slots[cur].clean && !how.Clean):
			// A concurrent Put of k stored a newer copy: ours loses. A
			// clean copy never beats a Put, whatever the generations: it
			// is a lower tier's older bytes (a promotion), written before
			// this Put began or concurrently with it, so the Put is the
			// later write (or an equally valid order of two overlapping
			// ones).
			r.freeLocked(s)
			r.stats.BytesIn += uint64(n)
			return gen, nil
		}
		replaced = r.supersedeLocked(cur)
	}
	if !replaced {
		// Another tenant's block with the same policy key may have arrived
		// while this one was copied in — also while an older copy of k
		// was being evicted, its policy entry already gone.
		if err := r.collisionLocked(k, ik, pk); err != nil {
			r.freeLocked(s)
			return 0, err
		}
	}
	r.index[ik] = s
	r.slots[s].state = slotLive
	a := r.accessLocked(pk, k.Tenant, how.Hint)
	if replaced {
		r.polSlot[pk] = s
		r.pol.Hit(a)
	} else {
		r.polInsertLocked(s, a)
	}
	r.stats.Blocks++
	r.stats.Bytes += int64(n)
	r.stats.BytesIn += uint64(n)
	if !how.NoEvict {
		r.trimLocked()
	}
	return gen, nil
}

// supersedeLocked takes indexed slot cur, the older copy of a key an
// Insert is replacing, out of the index. A live cur is freed now or by its
// last reader, and supersedeLocked reports true: the key stays in the
// policy, for which this Put is a hit on a resident key, as the
// simulator's access is. A cur being evicted has already left the policy;
// it is dropped (finished by the Put evicting it) and the result is false.
// Called with r.mu held.
func (r *RAM) supersedeLocked(cur int32) bool {
	if r.slots[cur].state != slotLive {
		r.dropLocked(cur)
		return false
	}
	r.unindexLocked(cur)
	r.slots[cur].state = slotDropping
	if r.slots[cur].pins == 0 {
		r.freeLocked(cur)
	}
	return true
}

// collisionLocked refuses a new copy of k (index key ik, not resident)
// when another resident block has the same policy key pk: the policies
// could not tell the two apart. Only blocks of different tenants can
// collide (PolicyKey is a bijection of the ID within a tenant), with
// probability about n²/2⁶⁴ for n resident blocks; the refusal is
// ErrNotAdmitted, so a tiered store writes the block to SSD instead.
func (r *RAM) collisionLocked(k block.Key, ik ikey, pk policy.Key) error {
	s, ok := r.polSlot[pk]
	if !ok {
		return nil
	}
	if m := r.slots[s]; m.id == ik.id && m.tenant == ik.tenant {
		return nil
	}
	r.rejected++
	return fmt.Errorf("ram: put %s: its policy key %016x is held by another tenant's block: %w", k, pk, ErrNotAdmitted)
}

// reserveLocked returns a slot for a new copy: a free one, or one it
// frees by evicting. It releases r.mu while OnEvict runs and returns with
// r.mu held.
func (r *RAM) reserveLocked(noEvict bool) (int32, error) {
	for {
		if n := len(r.free); n > 0 {
			s := r.free[n-1]
			r.free = r.free[:n-1]
			return s, nil
		}
		if noEvict {
			r.full++
			return 0, fmt.Errorf("no free slot among %d, and eviction not allowed: %w", r.nSlots, kvpool.ErrFull)
		}
		s, reusable, ok := r.evictLocked()
		if !ok {
			r.full++
			return 0, fmt.Errorf("all %d slots are pinned or being written: %w", r.nSlots, kvpool.ErrFull)
		}
		if reusable {
			return s, nil
		}
	}
}

// trimLocked evicts after a Put published a block: past the high
// watermark down to the low one, or a batch policy's batch. Pinned blocks
// stay; it gives up when only they are left.
func (r *RAM) trimLocked() {
	n := r.pol.Len()
	target := r.nSlots
	if n > r.high {
		target = r.low
	}
	if r.batch != nil {
		target = min(target, r.batch.EvictTo(n, r.nSlots))
	}
	for r.pol.Len() > target {
		s, reusable, ok := r.evictLocked()
		if !ok {
			return
		}
		if reusable {
			r.freeLocked(s)
		}
	}
}

// evictLocked evicts one unpinned block, calling OnEvict (with r.mu
// released) if set. It returns the victim's slot and whether the caller
// may reuse it now; a slot a reader pinned during OnEvict is freed by its
// last unpin instead. ok is false when every resident block is pinned.
func (r *RAM) evictLocked() (s int32, reusable, ok bool) {
	v, found := r.victimLocked()
	if !found {
		return 0, false, false
	}
	if r.onEvict == nil {
		r.unindexLocked(v)
		r.stats.Evicted++
		return v, true, true
	}
	m := &r.slots[v]
	m.state = slotEvicting
	r.pinLocked(v)
	ev := Evicted{
		Key:     block.Key{Tenant: r.tenants[m.tenant], ID: m.id},
		Payload: tier.Segments{r.slot(v, m.n)},
		Sum:     m.sum,
		Gen:     m.gen,
		Clean:   m.clean,
	}
	r.mu.Unlock()
	r.onEvict(ev)
	r.mu.Lock()
	r.stats.Evicted++
	if cur, ok := r.index[ikey{id: m.id, tenant: m.tenant}]; ok && cur == v {
		r.unindexLocked(v)
	}
	m.pins--
	if m.pins == 0 {
		r.pinned--
		return v, true, true
	}
	m.state = slotDropping // a reader holds it: its last unpin frees it
	return v, false, true
}

// victimLocked asks the eviction policy for victims until one is not
// pinned, and takes it out of the policy. Pinned victims are put back as
// most recently used (they are being read).
func (r *RAM) victimLocked() (int32, bool) {
	v, found := int32(-1), false
	for tries := r.pol.Len(); tries > 0; tries-- {
		key, ok := r.pol.Victim()
		if !ok {
			break
		}
		r.stats.EvictAttempts++
		s := r.polSlot[key]
		r.polRemoveLocked(s)
		if r.slots[s].pins > 0 {
			r.skip = append(r.skip, s)
		} else {
			v, found = s, true
			break
		}
	}
	for _, s := range r.skip {
		m := &r.slots[s]
		r.polInsertLocked(s, r.accessLocked(m.pk, r.tenants[m.tenant], block.Hint{}))
	}
	r.skip = r.skip[:0]
	return v, found
}

// Get appends the payload of k to dst[:0] (see tier.Tier). Unless
// Options.SkipVerifyReads is set, it verifies the copy's checksum; a
// mismatch drops the copy and returns kvpool.ErrCorrupt.
func (r *RAM) Get(ctx context.Context, k block.Key, dst []byte) ([]byte, uint32, error) {
	if err := ctx.Err(); err != nil {
		return dst[:0], 0, fmt.Errorf("ram: get %s: %w", k, err)
	}
	r.mu.Lock()
	if err := r.beginLocked("get", k); err != nil {
		r.mu.Unlock()
		return dst[:0], 0, err
	}
	defer r.ops.Done()
	s, ok := r.lookupLocked(k)
	if !ok {
		r.stats.Misses++
		r.mu.Unlock()
		return dst[:0], 0, fmt.Errorf("ram: get %s: %w", k, kvpool.ErrNotFound)
	}
	m := r.slots[s]
	r.pinLocked(s)
	r.touchLocked(s)
	r.mu.Unlock()

	out := append(dst[:0], r.slot(s, m.n)...)
	good := !r.verify || block.Verify(k, out, m.sum)

	r.mu.Lock()
	if good {
		r.stats.Hits++
		r.stats.BytesOut += uint64(m.n)
	} else {
		r.stats.Misses++
		r.stats.Corruptions++
		if cur, ok := r.lookupLocked(k); ok && cur == s && r.slots[s].gen == m.gen {
			r.dropLocked(s)
		}
	}
	r.unpinLocked(s)
	r.mu.Unlock()
	if !good {
		return dst[:0], 0, fmt.Errorf("ram: get %s from slot %d: payload checksum %08x, stored %08x: %w",
			k, s, block.Checksum(k, out), m.sum, kvpool.ErrCorrupt)
	}
	return out, m.sum, nil
}

// pin finds and pins k's slot for a zero-copy read, counting a hit or a
// miss. On success the caller must unpin and call r.ops.Done.
func (r *RAM) pin(what string, k block.Key) (int32, slotMeta, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.beginLocked(what, k); err != nil {
		return 0, slotMeta{}, err
	}
	s, ok := r.lookupLocked(k)
	if !ok {
		r.stats.Misses++
		r.ops.Done()
		return 0, slotMeta{}, &missError{what: what, key: k}
	}
	r.pinLocked(s)
	r.touchLocked(s)
	m := r.slots[s]
	r.stats.Hits++
	r.stats.BytesOut += uint64(m.n)
	return s, m, nil
}

// View calls fn with k's payload and checksum in place, without copying:
// the slot is pinned while fn runs, so it is neither evicted nor
// overwritten, and fn may hand the bytes to writev. fn must not modify or
// retain them. View does not verify the checksum (the receiver does). It
// counts as a hit; fn's error is returned wrapped.
func (r *RAM) View(k block.Key, fn func(payload tier.Segments, sum uint32) error) error {
	s, m, err := r.pin("view", k)
	if err != nil {
		return err
	}
	defer r.ops.Done()
	ferr := fn(tier.Segments{r.slot(s, m.n)}, m.sum)
	r.mu.Lock()
	r.unpinLocked(s)
	r.mu.Unlock()
	if ferr != nil {
		return fmt.Errorf("ram: view %s: %w", k, ferr)
	}
	return nil
}

// Acquire pins k's slot and returns its payload in place, for a sender
// that finishes asynchronously. The bytes stay valid and unchanged until
// release is called (once; later calls do nothing); they must not be
// modified. Like View it does not verify, and counts a hit. A slot held
// for long keeps eviction from reusing it: release promptly.
func (r *RAM) Acquire(k block.Key) (payload tier.Segments, sum uint32, release func(), err error) {
	s, m, err := r.pin("acquire", k)
	if err != nil {
		return nil, 0, nil, err
	}
	r.ops.Done()
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			r.mu.Lock()
			r.unpinLocked(s)
			r.mu.Unlock()
		}
	}
	return tier.Segments{r.slot(s, m.n)}, m.sum, release, nil
}

// Delete removes k (see tier.Tier). A copy being read is freed when its
// last reader releases it.
func (r *RAM) Delete(ctx context.Context, k block.Key) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ram: delete %s: %w", k, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("ram: delete %s: %w", k, kvpool.ErrClosed)
	}
	s, ok := r.lookupLocked(k)
	if !ok {
		return fmt.Errorf("ram: delete %s: %w", k, kvpool.ErrNotFound)
	}
	r.dropLocked(s)
	return nil
}

// Contains reports whether k is resident. It changes no policy state and
// no counter.
func (r *RAM) Contains(k block.Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	_, ok := r.lookupLocked(k)
	return ok
}

// Generation returns the generation of k's resident copy (one copy's
// generation is unique within the tier and grows with every Put), and
// whether k is resident. It changes no policy state.
func (r *RAM) Generation(k block.Key) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, false
	}
	s, ok := r.lookupLocked(k)
	if !ok {
		return 0, false
	}
	return r.slots[s].gen, true
}

// Stats returns a snapshot of the counters.
func (r *RAM) Stats() tier.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Counters returns the RAM tier's own counters.
func (r *RAM) Counters() Counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Counters{
		Slots:       r.nSlots,
		UsedSlots:   r.nSlots - len(r.free),
		PinnedSlots: r.pinned,
		Rejected:    r.rejected,
		Full:        r.full,
	}
}

// Watermark returns the fraction of slots in use (not free), in [0, 1].
func (r *RAM) Watermark() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return float64(r.nSlots-len(r.free)) / float64(r.nSlots)
}

// BlockSize returns the largest payload a slot holds.
func (r *RAM) BlockSize() int { return r.bs }

// Slots returns the number of slots.
func (r *RAM) Slots() int { return r.nSlots }

// Close waits for operations in flight and closes the tier; its contents
// are gone. Payloads still held through Acquire stay readable until
// released. Closing twice returns kvpool.ErrClosed.
func (r *RAM) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("ram: close: %w", kvpool.ErrClosed)
	}
	r.closed = true
	r.mu.Unlock()
	r.ops.Wait()
	return nil
}

// Check verifies the tier's invariants: index, slot table, free list and
// policy agree, and every counter matches. Call it only while no operation
// is in flight and no slot is held through Acquire (tests call it in
// t.Cleanup).
func (r *RAM) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("ram: check: "+format, a...)) }
	freeSet := make(map[int32]bool, len(r.free))
	for _, s := range r.free {
		if freeSet[s] {
			bad("slot %d twice on the free list", s)
		}
		freeSet[s] = true
		if r.slots[s].state != slotFree {
			bad("slot %d on the free list in state %d", s, r.slots[s].state)
		}
	}
	var bytes int64
	live, pinned := 0, 0
	for i, m := range r.slots {
		s := int32(i)
		if m.pins != 0 {
			pinned++
			bad("slot %d has %d pins at rest", s, m.pins)
		}
		switch m.state {
		case slotFree:
			if !freeSet[s] {
				bad("free slot %d not on the free list", s)
			}
		case slotLive:
			live++
			bytes += int64(m.n)
			if int(m.tenant) >= len(r.tenants) {
				bad("live slot %d has tenant %d of %d interned", s, m.tenant, len(r.tenants))
				continue
			}
			if got, ok := r.index[ikey{id: m.id, tenant: m.tenant}]; !ok || got != s {
				bad("live slot %d (%s) not indexed", s, block.Key{Tenant: r.tenants[m.tenant], ID: m.id})
			}
			if !r.pol.Contains(m.pk) || r.polSlot[m.pk] != s {
				bad("live slot %d not in the policy under its key %016x", s, m.pk)
			}
			if want := mixKey(m.id, r.tenantKey[m.tenant]); m.pk != want {
				bad("live slot %d has policy key %016x, want %016x", s, m.pk, want)
			}
			if int(m.n) > r.bs {
				bad("live slot %d holds %d bytes > block size %d", s, m.n, r.bs)
			}
		default:
			bad("slot %d in transient state %d at rest", s, m.state)
		}
	}
	if pinned != r.pinned {
		bad("%d slots pinned, counter says %d", pinned, r.pinned)
	}
	if live != len(r.index) || live != r.pol.Len() || live != len(r.polSlot) || live != r.stats.Blocks {
		bad("live slots %d, index %d, policy %d (slot map %d), Stats.Blocks %d", live, len(r.index), r.pol.Len(), len(r.polSlot), r.stats.Blocks)
	}
	if bytes != r.stats.Bytes {
		bad("live bytes %d, Stats.Bytes %d", bytes, r.stats.Bytes)
	}
	if r.stats.Evicted > r.stats.EvictAttempts {
		bad("Evicted %d > EvictAttempts %d", r.stats.Evicted, r.stats.EvictAttempts)
	}
	if c, ok := r.pol.(interface{ CheckInvariants() error }); ok {
		if err := c.CheckInvariants(); err != nil {
			bad("policy: %w", err)
		}
	}
	return errors.Join(errs...)
}

// missError is the error of a read of an absent key. Misses are the hot
// path of a cache, so the message is formatted only when asked for.
type missError struct {
	what string
	key  block.Key
}

func (e *missError) Error() string {
	return fmt.Sprintf("ram: %s %s: %v", e.what, e.key, kvpool.ErrNotFound)
}

// Unwrap returns kvpool.ErrNotFound.
func (e *missError) Unwrap() error { return kvpool.ErrNotFound }
