// Package ram is the RAM tier of a node: a fixed byte budget split into
// fixed-size chunks of one arena allocated at Open. An object — a chain
// key's block or a named object, from 0 bytes to Options.MaxObjectSize —
// is a chain of chunks holding its name and then its payload, handed out
// in place as tier.Segments, one per run of adjacent chunks. A Put copies
// the payload into memory that already exists (no per-object allocation),
// and the garbage collector never scans the tier: the arena, the chunk
// tables, the object table and the index hold no pointers. It implements
// tier.Tier.
//
// Why chunks. The tier must hold objects from a 28-byte metadata record to
// tens of MiB (an LMCache chunk) under churn, in memory that exists from
// start-up. Size classes (a slab per class, as memcached) waste up to a
// class step inside every object and, worse, strand memory in the classes
// the workload has moved away from unless slabs are rebalanced. An extent
// allocator (best fit over byte ranges) wastes nothing inside an object
// but fragments externally under churn: after a while the free space is
// many holes, none large enough for a 4 MiB object, and compaction would
// have to move pinned payloads. Fixed chunks chained per object have no
// external fragmentation at all — any free chunk serves any object, so a
// Put succeeds whenever enough chunks are free — and waste at most one
// chunk per object (the tail of its last chunk; the name is stored, not
// wasted): with 4 KiB chunks a 1–8 MiB object wastes under 0.4%, a
// 32 KiB block only its share of the tables (0.4%), and only tiny objects
// pay a whole chunk each — which the LMCache mix, a 28-byte object beside
// every 1–8 MiB one, amortises (held/payload 1.003 for both mixes after
// 10× churn: TestSpace, BenchmarkSpace). Allocation is next-fit over a
// free bitmap: from where the last allocation ended it takes each free
// run it meets until the object fits, so under churn (an LRU frees the
// oldest objects, just ahead of the cursor) objects mostly come out as
// one or a few runs of adjacent chunks; a reader sends them with one
// writev (the runs are the Segments) and Get copies them with one copy
// per run.
//
// Names. A named object's full name is stored in the arena in front of its
// payload. The index is keyed by (ID, interned tenant); names whose IDs
// collide are chained in the same entry, and every read compares the
// stored name with the key's: a read never returns an object stored under
// another name. The checksum covers tenant, name and payload
// (block.Checksum), and Get verifies it unless Options.SkipVerifyReads.
//
// Eviction and admission are the shared policy objects the simulator
// drives (package policy), and both see what the simulator's see: the
// object's key (a 64-bit hash of tenant and ID, and of the name of a named
// object, PolicyKey), so history a policy keeps about a key (ghosts,
// frequency sketches) follows the object, not the chunks it happened to
// occupy; and, when the caller knows them, the block's position in its
// request's prefix chain (a block.Hint, which policy.Access carries),
// which chain-aware policies (kvchain) need. The policies count objects
// and are sized for HighWatermark × CapacityBytes / BlockSize of them
// (BlockSize is the typical object size), so a tier whose objects are
// BlockSize bytes has the policies it had with slots. A Put of a resident
// key is a hit for the eviction policy, as an access of a resident key is
// in the simulator; Touch records an access without moving data. A pinned
// object — one being read by Get, View or Acquire — is never evicted or
// overwritten: eviction skips it (Stats counts EvictAttempts against
// Evicted), and a Put that cannot free enough chunks fails with
// kvpool.ErrFull. A Put evicts until its chunks are free and, optionally,
// keeps headroom: past a high watermark of the chunks it evicts down to a
// low one (or a batch policy's batch), so promotions from a lower tier
// find free chunks. An object that could never fit (more chunks than the
// arena has, or over MaxObjectSize) is refused up front with
// kvpool.ErrTooLarge, before anything is evicted.
//
// An evicted object is handed to Options.OnEvict before its chunks are
// reused, so a tiered store can demote it to SSD; see Evicted for the
// ordering guarantees. Contents are volatile: Close drops everything.
//
// Space accounting: Stats.Bytes is the sum of the resident payloads;
// Stats.HeldBytes is what they occupy: their chunks (names and the unused
// tail of the last chunk included), plus, per chunk they hold, its 8 bytes
// of chunk tables, plus, per object, its object table entry (ObjectEntryBytes).
// The index and policy maps (a few tens of bytes per object) and the free
// bitmap (one bit per chunk) are not counted.
//
// Concurrency: a RAM is safe for concurrent use. One mutex guards the
// index, the chunk and object tables, the policies and the counters;
// payload copies, checksums and OnEvict run outside it, on pinned objects.
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
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

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

// Evicted is what Options.OnEvict receives for an object the tier evicts.
//
// Ordering guarantees:
//   - OnEvict runs synchronously on the goroutine of the Put (or Insert)
//     whose eviction it is, without the tier's lock held, before that Put
//     returns: before it stores its own object when the eviction makes room
//     for it, after when the Put trims the tier to its low watermark or a
//     batch policy's batch. Evictions caused by concurrent Puts may run
//     concurrently, so OnEvict must be safe for concurrent use.
//   - While OnEvict runs the copy stays resident and pinned: Get, View,
//     Acquire and Contains still find it, and Generation(Key) reports Gen,
//     unless a Put or Delete of the same key supersedes it meanwhile (then
//     Generation reports another generation or absence, and the copy is
//     stale). The copy leaves the tier when OnEvict returns.
//   - Payload is valid only until OnEvict returns (the slice of segments
//     too: it is reused); the chunks are not reused before OnEvict has
//     returned and every reader has released them.
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
	// IfAbsent stores the object only if the key is not resident;
	// otherwise Insert returns ErrExists and changes nothing.
	IfAbsent bool
	// NoEvict stores the object only into free chunks; with too few,
	// Insert returns kvpool.ErrFull rather than evicting.
	NoEvict bool
	// Clean marks the copy clean (see Evicted.Clean).
	Clean bool
	// SkipAdmission stores the object without consulting the admission
	// policy (the caller already decided, as a promotion does).
	SkipAdmission bool
}

// Counters are the RAM tier's own counters beyond tier.Stats.
type Counters struct {
	ChunkSize     int // bytes per chunk
	Chunks        int // chunks in the arena
	UsedChunks    int // chunks not free (resident, being written, evicted or released objects)
	PinnedChunks  int // chunks of objects held by readers or by an eviction in progress
	Objects       int // object table entries in use (as UsedChunks, in objects)
	PinnedObjects int // objects held by readers or by an eviction in progress
	// Slots, UsedSlots and PinnedSlots are the counters' names from before
	// chunks: Chunks, UsedChunks and PinnedObjects.
	Slots, UsedSlots, PinnedSlots int
	Rejected                      uint64 // Puts the admission policy refused (ErrNotAdmitted)
	Full                          uint64 // Puts and Inserts that found too few chunks (ErrFull)
}

type objState uint8

const (
	objFree     objState = iota // on the free list
	objWriting                  // reserved by a Put copying its name and payload in
	objLive                     // in the index and the eviction policy
	objEvicting                 // chosen as a victim: OnEvict runs; maybe still indexed, not in the policy
	objDropping                 // out of the index; freed when its last pin is released
)

// object is one object's entry in the object table. It holds no
// pointers. Its chunks are a list of runs of adjacent chunks starting at
// first (see RAM.runLen and RAM.runNext); they hold nameLen bytes of name
// and then n bytes of payload.
type object struct {
	gen     uint64
	id      uint64
	pk      policy.Key // PolicyKey of the object: its key in the policies
	n       uint32     // payload bytes
	sum     uint32
	tenant  uint32 // interned tenant (RAM.tenants)
	first   int32  // first chunk (head of the first run)
	chunks  int32  // chunks held
	link    int32  // next object of the same index entry (an ID collision), or -1
	pins    int32
	nameLen uint16
	state   objState
	clean   bool
	indexed bool
}

// ObjectEntryBytes is the size of one object table entry, counted in
// Stats.HeldBytes per resident object.
const ObjectEntryBytes = int64(unsafe.Sizeof(object{}))

// chunkTableBytes is what the chunk tables (runLen, runNext) cost per
// chunk, counted in Stats.HeldBytes per held chunk.
const chunkTableBytes = 8

// ikey is the index key: the object's ID and its interned tenant, with no
// pointers, so the index is not scanned by the garbage collector. Names
// whose IDs collide share one entry, chained through object.link.
type ikey struct {
	id     uint64
	tenant uint32
}

// segBuf is a reusable slice of segments for View and OnEvict, so handing
// out an object in pieces allocates nothing in steady state.
type segBuf struct{ s tier.Segments }

// RAM is the RAM tier. Build it with Open.
type RAM struct {
	bs        int // typical object size (Options.BlockSize)
	cs        int // chunk size
	nChunks   int // chunks in the arena
	maxObject int // Options.MaxObjectSize
	objCap    int // CapacityBytes / BlockSize: the objects the tier is sized for
	arena     []byte
	verify    bool
	onEvict   func(Evicted)
	segs      sync.Pool // *segBuf

	ops sync.WaitGroup // operations in flight; Close waits for them

	mu     sync.Mutex
	closed bool
	// Chunk tables: at the head chunk of each run, the run's length and
	// the head of the object's next run (-1 after the last). freeMap has a
	// set bit per free chunk; cursor is where next-fit looks first.
	// touched is one past the highest chunk ever allocated: the arena's
	// pages from there on have never been written (see allocLocked).
	runLen     []int32
	runNext    []int32
	freeMap    []uint64
	freeChunks int
	cursor     int
	touched    int
	objs       []object // at most one object per chunk
	freeObjs   []int32
	index      map[ikey]int32 // head of each entry's chain
	// Tenants are interned to small integers so that the object table and
	// the index hold no strings. Interned names are never forgotten: there
	// are few tenants, and the server sets them.
	tenantIDs  map[string]uint32
	tenants    []string
	tenantKey  []uint64 // per interned tenant: the tenant part of its policy keys
	keySecret  []byte   // Options.KeySecret
	pol        policy.Eviction
	polObj     map[policy.Key]int32 // the live object of each key in pol
	batch      policy.Batcher       // pol as a Batcher, or nil
	high, low  int                  // trim past high chunks of live objects down to low
	liveChunks int                  // chunks of objects in state objLive
	pinnedLive int                  // chunks of pinned objects in state objLive
	heldChunks int                  // chunks of indexed objects
	adm        policy.Admission     // nil admits everything
	skip       []int32              // scratch: pinned victims to reinsert
	clock      int64
	gen        uint64
	pinned     int // objects with pins
	pinnedCh   int // chunks of objects with pins
	stats      tier.Stats
	rejected   uint64
	full       uint64
}

var _ tier.Tier = (*RAM)(nil)

// Open allocates a RAM tier: the whole arena and every table, up front.
func Open(opts Options) (*RAM, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	n := int(o.CapacityBytes / int64(o.ChunkSize))
	objCap := max(int(o.CapacityBytes/int64(o.BlockSize)), 1)
	// The policies are sized for the objects the tier keeps resident (the
	// high watermark's, of typical size), as the simulator sizes its
	// caches for their capacity: policies that size queues from it
	// (kvchain, S3-FIFO, ARC) then behave as they do there. The epsilon
	// keeps 0.95*20 from rounding to 20 or 0.9*10 to 8.
	polCap := min(max(int(math.Ceil(o.HighWatermark*float64(objCap)-1e-9)), 1), objCap)
	ev, err := policy.NewEviction(o.Eviction, polCap)
	if err != nil {
		return nil, fmt.Errorf("ram: open: %w", err)
	}
	var adm policy.Admission
	if o.Admission != "all" {
		if adm, err = policy.NewAdmission(o.Admission, polCap); err != nil {
			return nil, fmt.Errorf("ram: open: %w", err)
		}
	}
	r := &RAM{
		bs:        o.BlockSize,
		cs:        o.ChunkSize,
		nChunks:   n,
		maxObject: o.MaxObjectSize,
		objCap:    objCap,
		arena:     make([]byte, n*o.ChunkSize),
		verify:    !o.SkipVerifyReads,
		onEvict:   o.OnEvict,
		runLen:    make([]int32, n),
		runNext:   make([]int32, n),
		freeMap:   make([]uint64, (n+63)/64),
		objs:      make([]object, n),
		freeObjs:  make([]int32, n),
		index:     make(map[ikey]int32, min(n, objCap*2)),
		tenantIDs: map[string]uint32{},
		keySecret: bytes.Clone(o.KeySecret),
		pol:       ev,
		polObj:    make(map[policy.Key]int32, min(n, objCap*2)),
		adm:       adm,
	}
	r.segs.New = func() any { return new(segBuf) }
	r.batch, _ = ev.(policy.Batcher)
	r.high = min(max(int(math.Ceil(o.HighWatermark*float64(n)-1e-9)), 1), n)
	r.low = min(max(int(math.Floor(o.LowWatermark*float64(n)+1e-9)), 0), r.high)
	for i := range n {
		r.freeObjs[i] = int32(n - 1 - i) // popped from the end: object 0 first
		r.freeMap[i/64] |= 1 << (i % 64)
	}
	r.freeChunks = n
	r.stats.CapacityBytes = int64(n) * int64(o.ChunkSize)
	return r, nil
}

// PolicyKey is the public policy key of k, the key a RAM opened without
// Options.KeySecret gives its policies (RAM.PolicyKey): for a chain key a
// 64-bit hash of its tenant and ID (block.PolicyKey); for a named object
// the name is mixed in too, so two names whose IDs collide are two keys to
// the policies. Anyone can compute it, and so construct another tenant's
// collisions: a RAM serving mutually distrusting tenants sets KeySecret.
func PolicyKey(k block.Key) policy.Key {
	if k.Name == "" {
		return block.PolicyKey(k)
	}
	return mixKey(k.ID^nameSalt(k.Name), tenantKey(nil, k.Tenant))
}

// nameSalt is the name's part of a named object's policy key: a second
// hash of the name, independent of block.NameID's, so that names sharing
// an ID do not share a policy key.
func nameSalt(name string) uint64 {
	return bits.RotateLeft64(block.FNV1a(name)*block.Golden64, 29) | 1
}

// PublicCollision returns the ID in tenant to whose public PolicyKey equals
// from's (a chain key). The public key mixes the tenant in with one XOR
// before a bijection, so anyone can compute this; it is why a RAM serving
// mutually distrusting tenants sets Options.KeySecret (and what tests of
// that use).
func PublicCollision(from block.Key, to string) uint64 {
	return from.ID ^ tenantKey(nil, from.Tenant)*block.Golden64 ^ tenantKey(nil, to)*block.Golden64
}

// PolicyKey is the key the eviction and admission policies see for k: a
// 64-bit hash of its tenant (keyed with Options.KeySecret when set) and
// its ID (and name, for a named object), a bijection of the ID within a
// tenant for chain keys; see collisionLocked for the rare collision. A
// tiered store's promotion sketch uses the same key.
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
	id := k.ID
	if k.Name != "" {
		id ^= nameSalt(k.Name)
	}
	if t, ok := r.tenantIDs[k.Tenant]; ok {
		return mixKey(id, r.tenantKey[t])
	}
	return mixKey(id, tenantKey(r.keySecret, k.Tenant))
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

// chunksFor returns the chunks an object of nameLen + n bytes takes (at
// least one, so the object table never runs out before the chunks).
func (r *RAM) chunksFor(nameLen, n int) int {
	return max((nameLen+n+r.cs-1)/r.cs, 1)
}

// walker reads an object's bytes (name, then payload) run by run. The
// object must be pinned or being written by the caller, so its runs do
// not change; the chunk tables are read without r.mu.
type walker struct {
	r        *RAM
	run      int32
	off, end int // the current run's unread arena bytes
}

func (r *RAM) walk(first int32) walker {
	w := walker{r: r, run: first}
	w.off = int(first) * r.cs
	w.end = w.off + int(r.runLen[first])*r.cs
	return w
}

// next returns the next at most n bytes of the object, within one run.
func (w *walker) next(n int) []byte {
	if w.off == w.end {
		w.run = w.r.runNext[w.run]
		w.off = int(w.run) * w.r.cs
		w.end = w.off + int(w.r.runLen[w.run])*w.r.cs
	}
	m := min(n, w.end-w.off)
	b := w.r.arena[w.off : w.off+m : w.off+m]
	w.off += m
	return b
}

// skip passes over n bytes.
func (w *walker) skip(n int) {
	for n > 0 {
		n -= len(w.next(n))
	}
}

// appendSegs appends object o's payload to segs, one piece per run.
func (r *RAM) appendSegs(segs tier.Segments, o *object) tier.Segments {
	w := r.walk(o.first)
	w.skip(int(o.nameLen))
	for n := int(o.n); n > 0; {
		b := w.next(n)
		segs = append(segs, b)
		n -= len(b)
	}
	return segs
}

// nameEq reports whether object o's stored name is name.
func (r *RAM) nameEq(o *object, name string) bool {
	if int(o.nameLen) != len(name) {
		return false
	}
	w := r.walk(o.first)
	for len(name) > 0 {
		b := w.next(len(name))
		if string(b) != name[:len(b)] {
			return false
		}
		name = name[len(b):]
	}
	return true
}

// keyOf returns object o's key, its name read from the arena.
func (r *RAM) keyOf(o *object) block.Key {
	k := block.Key{Tenant: r.tenants[o.tenant], ID: o.id}
	if o.nameLen > 0 {
		var buf [block.MaxNameLen]byte
		name := buf[:0]
		w := r.walk(o.first)
		for n := int(o.nameLen); n > 0; {
			b := w.next(n)
			name = append(name, b...)
			n -= len(b)
		}
		k.Name = string(name)
	}
	return k
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

// lookupLocked returns the indexed object of k: the one in k's index
// entry whose stored name is k.Name. Another name with k's ID is a miss.
func (r *RAM) lookupLocked(k block.Key) (int32, bool) {
	t, ok := r.tenantIDs[k.Tenant]
	if !ok {
		return 0, false
	}
	o, ok := r.index[ikey{id: k.ID, tenant: t}]
	if !ok {
		return 0, false
	}
	for ; o >= 0; o = r.objs[o].link {
		if r.nameEq(&r.objs[o], k.Name) {
			return o, true
		}
	}
	return 0, false
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

func (r *RAM) pinLocked(o int32) {
	m := &r.objs[o]
	if m.pins == 0 {
		r.pinned++
		r.pinnedCh += int(m.chunks)
		if m.state == objLive {
			r.pinnedLive += int(m.chunks)
		}
	}
	m.pins++
}

// unpinLocked releases a pin; the last pin of a dropped object frees it.
func (r *RAM) unpinLocked(o int32) {
	m := &r.objs[o]
	m.pins--
	if m.pins == 0 {
		r.pinned--
		r.pinnedCh -= int(m.chunks)
		if m.state == objLive {
			r.pinnedLive -= int(m.chunks)
		}
		if m.state == objDropping {
			r.freeLocked(o)
		}
	}
}

// allocLocked takes need free chunks (need <= r.freeChunks) by next-fit:
// from the cursor on, each free run it meets, as long as needed. It
// returns the head of the first run; the runs are chained.
//
// Next-fit stays below touched while the free chunks there suffice, so
// the arena's pages are written for the first time only as the data
// grows: a page's first write is a page fault (on this project's VM about
// as costly as copying the page ten times over: a 256 KiB SET spent 65 %
// of the node's CPU faulting in arena pages while next-fit marched
// through a 2 GiB arena that held one live object), and a node holding
// little keeps a small resident set. Once the data has touched the whole
// arena, allocation is plain next-fit over all of it.
func (r *RAM) allocLocked(need int) int32 {
	limit := r.nChunks
	if need <= r.freeChunks-(r.nChunks-r.touched) {
		limit = r.touched
	}
	r.freeChunks -= need
	first, prev := int32(-1), int32(-1)
	for need > 0 {
		if r.cursor >= limit {
			r.cursor = 0
		}
		start := r.nextFree(r.cursor, limit)
		end := start + 1
		for lim := min(start+need, limit); end < lim && r.freeMap[end>>6]&(1<<(end&63)) != 0; end++ {
		}
		for c := start; c < end; c++ {
			r.freeMap[c>>6] &^= 1 << (c & 63)
		}
		r.runLen[start], r.runNext[start] = int32(end-start), -1
		if prev >= 0 {
			r.runNext[prev] = int32(start)
		} else {
			first = int32(start)
		}
		prev = int32(start)
		need -= end - start
		r.touched = max(r.touched, end)
		r.cursor = end
	}
	if r.cursor >= limit {
		r.cursor = 0
	}
	return first
}

// nextFree returns the first free chunk at or after from and below limit,
// wrapping around at limit. There must be one.
func (r *RAM) nextFree(from, limit int) int {
	last := (limit - 1) >> 6
	lastMask := ^uint64(0)
	if limit&63 != 0 {
		lastMask = 1<<(limit&63) - 1
	}
	w := from >> 6
	word := r.freeMap[w] &^ (1<<(from&63) - 1)
	for {
		if w == last {
			word &= lastMask
		}
		if word != 0 {
			return w<<6 + bits.TrailingZeros64(word)
		}
		w++
		if w > last {
			w = 0
		}
		word = r.freeMap[w]
	}
}

// releaseChunksLocked returns the chunks of the run list at first.
func (r *RAM) releaseChunksLocked(first int32) {
	for run := first; run >= 0; {
		n := int(r.runLen[run])
		for c := int(run); c < int(run)+n; c++ {
			r.freeMap[c>>6] |= 1 << (c & 63)
		}
		r.freeChunks += n
		next := r.runNext[run]
		r.runLen[run], r.runNext[run] = 0, 0
		run = next
	}
}

// freeLocked returns object o's chunks and table entry.
func (r *RAM) freeLocked(o int32) {
	r.releaseChunksLocked(r.objs[o].first)
	r.objs[o] = object{}
	r.freeObjs = append(r.freeObjs, o)
}

// accessLocked returns the policy access to the object with policy key
// pk in tenant t described by h, advancing the clock.
func (r *RAM) accessLocked(pk policy.Key, t string, h block.Hint) policy.Access {
	r.clock++
	a := policy.Access{Key: pk, Hint: block.Hint{Depth: max(0, min(h.Depth, MaxHintDepth))}, Time: r.clock, NextUse: policy.NoNextUse}
	if h.Depth > 0 {
		a.Parent = r.policyKeyLocked(block.Key{Tenant: t, ID: h.Parent})
	}
	return a
}

// touchLocked records a read of object o with the eviction policy.
func (r *RAM) touchLocked(o int32) {
	if m := &r.objs[o]; m.state == objLive {
		r.pol.Hit(r.accessLocked(m.pk, r.tenants[m.tenant], block.Hint{}))
	}
}

// polInsertLocked puts live object o into the eviction policy.
func (r *RAM) polInsertLocked(o int32, a policy.Access) {
	r.polObj[a.Key] = o
	r.pol.Insert(a)
}

// polRemoveLocked takes object o out of the eviction policy.
func (r *RAM) polRemoveLocked(o int32) {
	pk := r.objs[o].pk
	r.pol.Remove(pk)
	delete(r.polObj, pk)
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
	o, ok := r.lookupLocked(k)
	if !ok || r.objs[o].state != objLive {
		return false
	}
	r.pol.Hit(r.accessLocked(r.objs[o].pk, k.Tenant, h))
	return true
}

// indexLocked adds object o to the index (at the head of its entry's
// chain) and to the resident counters.
func (r *RAM) indexLocked(o int32) {
	m := &r.objs[o]
	ik := ikey{id: m.id, tenant: m.tenant}
	m.link = -1
	if h, ok := r.index[ik]; ok {
		m.link = h
	}
	r.index[ik] = o
	m.indexed = true
	r.stats.Blocks++
	r.stats.Bytes += int64(m.n)
	r.heldChunks += int(m.chunks)
	r.stats.HeldBytes += r.heldBytes(m)
}

// heldBytes is what object m adds to Stats.HeldBytes.
func (r *RAM) heldBytes(m *object) int64 {
	return int64(m.chunks)*(int64(r.cs)+chunkTableBytes) + ObjectEntryBytes
}

// unindexLocked takes indexed object o out of the index and the resident
// counters.
func (r *RAM) unindexLocked(o int32) {
	m := &r.objs[o]
	ik := ikey{id: m.id, tenant: m.tenant}
	h := r.index[ik]
	switch {
	case h == o && m.link < 0:
		delete(r.index, ik)
	case h == o:
		r.index[ik] = m.link
	default:
		p := h
		for r.objs[p].link != o {
			p = r.objs[p].link
		}
		r.objs[p].link = m.link
	}
	m.link = -1
	m.indexed = false
	r.stats.Blocks--
	r.stats.Bytes -= int64(m.n)
	r.heldChunks -= int(m.chunks)
	r.stats.HeldBytes -= r.heldBytes(m)
}

// dropLocked removes indexed object o (a Delete, a replacement, a corrupt
// copy). A live object leaves the policy and is freed now or by its last
// reader; an evicting object is finished by the Put evicting it.
func (r *RAM) dropLocked(o int32) {
	r.unindexLocked(o)
	m := &r.objs[o]
	if m.state != objLive {
		return
	}
	r.polRemoveLocked(o)
	r.leaveLiveLocked(m)
	m.state = objDropping
	if m.pins == 0 {
		r.freeLocked(o)
	}
}

// leaveLiveLocked takes live object m out of the live counters, before
// its state changes.
func (r *RAM) leaveLiveLocked(m *object) {
	r.liveChunks -= int(m.chunks)
	if m.pins > 0 {
		r.pinnedLive -= int(m.chunks)
	}
}

// Put stores payload under k (see tier.Tier). A key that is not resident
// is first offered to the admission policy: a refusal returns
// ErrNotAdmitted. When not enough chunks can be freed (every resident
// object pinned) it returns kvpool.ErrFull.
func (r *RAM) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	_, err := r.Insert(ctx, k, payload, sum, InsertOptions{})
	return err
}

// Insert is Put with options; it returns the generation of the stored
// copy (see Generation). If a concurrent Put of k stored a newer copy
// first, Insert returns its own copy's generation and nil, and the newer
// copy stays.
//
// It decides and reserves chunks under r.mu, copies the name and payload
// in without the lock (the object is objWriting, so no one else touches
// it), and publishes the copy under r.mu again, deciding then against
// whatever copy of k arrived meanwhile.
func (r *RAM) Insert(ctx context.Context, k block.Key, payload []byte, sum uint32, how InsertOptions) (uint64, error) {
	need, err := r.checkPut(ctx, k, payload, sum)
	if err != nil {
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
	if err := r.admitLocked(k, pk, how); err != nil {
		r.mu.Unlock()
		return 0, err
	}
	first, err := r.reserveLocked(need, how.NoEvict)
	if err != nil {
		r.mu.Unlock()
		return 0, fmt.Errorf("ram: put %s (%d bytes): %w", k, len(payload), err)
	}
	o := r.freeObjs[len(r.freeObjs)-1]
	r.freeObjs = r.freeObjs[:len(r.freeObjs)-1]
	r.gen++
	gen := r.gen
	r.objs[o] = object{gen: gen, id: k.ID, pk: pk, tenant: ik.tenant, n: uint32(len(payload)), sum: sum,
		first: first, chunks: int32(need), link: -1, nameLen: uint16(len(k.Name)), state: objWriting, clean: how.Clean}
	r.mu.Unlock()

	w := r.walk(first)
	for name := k.Name; len(name) > 0; {
		b := w.next(len(name))
		copy(b, name)
		name = name[len(b):]
	}
	for p := payload; len(p) > 0; {
		b := w.next(len(p))
		copy(b, p)
		p = p[len(b):]
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	return r.publishLocked(o, gen, k, pk, how)
}

// checkPut rejects a put that must not reach the arena: a done context,
// an invalid key or name, a payload over the maximum object size or
// needing more chunks than the arena has, or a checksum that does not
// match the payload. It returns the chunks the object takes.
func (r *RAM) checkPut(ctx context.Context, k block.Key, payload []byte, sum uint32) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("ram: put %s: %w", k, err)
	}
	if err := k.Validate(); err != nil {
		return 0, fmt.Errorf("ram: put %s: %w", k, err)
	}
	if len(payload) > r.maxObject {
		return 0, fmt.Errorf("ram: put %s: %d-byte payload over the maximum object size of %d bytes (RAM tier option MaxObjectSize; a node's --max-object-bytes): %w",
			k, len(payload), r.maxObject, kvpool.ErrTooLarge)
	}
	need := r.chunksFor(len(k.Name), len(payload))
	if need > r.nChunks {
		return 0, fmt.Errorf("ram: put %s: %d-byte name and %d-byte payload need %d chunks of %d bytes, the RAM tier has %d (%d bytes; a node's --ram-bytes): %w",
			k, len(k.Name), len(payload), need, r.cs, r.nChunks, r.stats.CapacityBytes, kvpool.ErrTooLarge)
	}
	if keep := r.keepChunks(); need > keep {
		// Past the high watermark the tier trims down to the low one,
		// the newest object last: one larger than the low watermark would
		// be evicted by the Put that stored it (and, without a lower
		// tier, lost right after it was acknowledged).
		return 0, fmt.Errorf("ram: put %s: %d-byte name and %d-byte payload need %d chunks of %d bytes, more than the %d (%d bytes) the RAM tier keeps below its low watermark (a node's --ram-bytes, --ram-low-watermark): %w",
			k, len(k.Name), len(payload), need, r.cs, keep, int64(keep)*int64(r.cs), kvpool.ErrTooLarge)
	}
	if got := block.Checksum(k, payload); got != sum {
		return 0, fmt.Errorf("ram: put %s: checksum %08x given, payload has %08x: %w", k, sum, got, kvpool.ErrCorrupt)
	}
	return need, nil
}

// admitLocked decides, before chunks are reserved, whether a new copy of
// k (policy key pk) may be stored: with IfAbsent, k must not be resident;
// a key that is not resident must not collide with another object's
// policy key and, unless SkipAdmission is set, must pass the admission
// policy. Called with r.mu held.
func (r *RAM) admitLocked(k block.Key, pk policy.Key, how InsertOptions) error {
	if _, ok := r.lookupLocked(k); ok {
		if how.IfAbsent {
			return fmt.Errorf("ram: insert %s: %w", k, ErrExists)
		}
		return nil
	}
	if err := r.collisionLocked(k, pk); err != nil {
		return err
	}
	if r.adm != nil && !how.SkipAdmission && !r.adm.Admit(r.accessLocked(pk, k.Tenant, how.Hint)) {
		r.rejected++
		return fmt.Errorf("ram: put %s: %s admission: %w", k, r.adm.Name(), ErrNotAdmitted)
	}
	return nil
}

// publishLocked makes object o, into which Insert copied a new copy of k
// (generation gen), the resident copy of k, unless the copy of k resident
// now wins (see below), and then trims the tier unless NoEvict is set. It
// returns the copy's generation, or the error for which it freed object
// o. Called with r.mu held.
func (r *RAM) publishLocked(o int32, gen uint64, k block.Key, pk policy.Key, how InsertOptions) (uint64, error) {
	m := &r.objs[o]
	replaced := false // k's policy entry passes from a live older copy to o
	if cur, ok := r.lookupLocked(k); ok {
		switch {
		case how.IfAbsent:
			r.freeLocked(o)
			return 0, fmt.Errorf("ram: insert %s: %w", k, ErrExists)
		case r.objs[cur].gen > gen && !(r.objs[cur].clean && !how.Clean):
			// A concurrent Put of k stored a newer copy: ours loses. A
			// clean copy never beats a Put, whatever the generations: it
			// is a lower tier's older bytes (a promotion), written before
			// this Put began or concurrently with it, so the Put is the
			// later write (or an equally valid order of two overlapping
			// ones).
			r.stats.BytesIn += uint64(m.n)
			r.freeLocked(o)
			return gen, nil
		}
		replaced = r.supersedeLocked(cur)
	}
	if !replaced {
		// Another object with the same policy key may have arrived while
		// this one was copied in — also while an older copy of k was being
		// evicted, its policy entry already gone.
		if err := r.collisionLocked(k, pk); err != nil {
			r.freeLocked(o)
			return 0, err
		}
	}
	r.indexLocked(o)
	m.state = objLive
	r.liveChunks += int(m.chunks)
	a := r.accessLocked(pk, k.Tenant, how.Hint)
	if replaced {
		r.polObj[pk] = o
		r.pol.Hit(a)
	} else {
		r.polInsertLocked(o, a)
	}
	r.stats.BytesIn += uint64(m.n)
	if !how.NoEvict {
		r.trimLocked()
	}
	return gen, nil
}

// supersedeLocked takes indexed object cur, the older copy of a key an
// Insert is replacing, out of the index. A live cur is freed now or by its
// last reader, and supersedeLocked reports true: the key stays in the
// policy, for which this Put is a hit on a resident key, as the
// simulator's access is. A cur being evicted has already left the policy;
// it is dropped (finished by the Put evicting it) and the result is false.
// Called with r.mu held.
func (r *RAM) supersedeLocked(cur int32) bool {
	m := &r.objs[cur]
	if m.state != objLive {
		r.dropLocked(cur)
		return false
	}
	r.unindexLocked(cur)
	r.leaveLiveLocked(m)
	m.state = objDropping
	if m.pins == 0 {
		r.freeLocked(cur)
	}
	return true
}

// collisionLocked refuses a new copy of k (not resident) when another
// resident object has the same policy key pk: the policies could not tell
// the two apart. Chain keys of one tenant never collide (PolicyKey is a
// bijection of the ID within a tenant); other keys do with probability
// about n²/2⁶⁴ for n resident objects; the refusal is ErrNotAdmitted, so a
// tiered store writes the object to SSD instead.
func (r *RAM) collisionLocked(k block.Key, pk policy.Key) error {
	o, ok := r.polObj[pk]
	if !ok {
		return nil
	}
	if m := &r.objs[o]; m.id == k.ID && r.tenants[m.tenant] == k.Tenant && r.nameEq(m, k.Name) {
		return nil
	}
	r.rejected++
	return fmt.Errorf("ram: put %s: its policy key %016x is held by another object: %w", k, pk, ErrNotAdmitted)
}

// reserveLocked returns need chunks for a new copy: free ones, and ones
// it frees by evicting. It releases r.mu while OnEvict runs and returns
// with r.mu held.
func (r *RAM) reserveLocked(need int, noEvict bool) (int32, error) {
	for r.freeChunks < need {
		if noEvict {
			r.full++
			return 0, fmt.Errorf("%d chunks needed, %d of %d free, and eviction not allowed: %w", need, r.freeChunks, r.nChunks, kvpool.ErrFull)
		}
		if r.freeChunks+r.liveChunks-r.pinnedLive < need {
			// Not even evicting every unpinned resident object would make
			// room: the rest is pinned or being written. Evict nothing.
			r.full++
			return 0, fmt.Errorf("%d chunks needed, %d of %d free and %d held by pinned objects or writes in progress: %w",
				need, r.freeChunks, r.nChunks, r.nChunks-r.freeChunks-r.liveChunks+r.pinnedLive, kvpool.ErrFull)
		}
		if !r.evictLocked() {
			r.full++
			return 0, fmt.Errorf("%d chunks needed, %d of %d free, and every resident object is pinned: %w", need, r.freeChunks, r.nChunks, kvpool.ErrFull)
		}
	}
	return r.allocLocked(need), nil
}

// keepChunks is the most chunks one object may take: all of them, or
// when a Put past the high watermark trims down to the low one, the low
// watermark's.
func (r *RAM) keepChunks() int {
	if r.high >= r.nChunks {
		return r.nChunks
	}
	return r.low
}

// trimLocked evicts after a Put published an object: past the high
// watermark of chunks held by resident objects down to the low one, and
// a batch policy's batch. A batch policy counts in its own unit, objects
// (it is sized for Slots of them, as in the simulator), so its batch is
// asked for and evicted in objects. Pinned objects stay; it gives up when
// only they are left.
func (r *RAM) trimLocked() {
	target := r.nChunks
	if r.liveChunks > r.high {
		target = r.low
	}
	objects := math.MaxInt
	if r.batch != nil {
		objects = r.batch.EvictTo(r.pol.Len(), r.objCap)
	}
	for r.liveChunks > target || r.pol.Len() > objects {
		if !r.evictLocked() {
			return
		}
	}
}

// evictLocked evicts one unpinned object, calling OnEvict (with r.mu
// released) if set. Its chunks are free when it returns unless a reader
// pinned it during OnEvict (then its last unpin frees them). It reports
// false when every resident object is pinned.
func (r *RAM) evictLocked() bool {
	v, found := r.victimLocked()
	if !found {
		return false
	}
	m := &r.objs[v]
	r.leaveLiveLocked(m) // a victim is never pinned
	if r.onEvict == nil {
		r.unindexLocked(v)
		r.stats.Evicted++
		r.freeLocked(v)
		return true
	}
	m.state = objEvicting
	r.pinLocked(v)
	buf := r.segs.Get().(*segBuf)
	buf.s = r.appendSegs(buf.s[:0], m)
	ev := Evicted{Key: r.keyOf(m), Payload: buf.s, Sum: m.sum, Gen: m.gen, Clean: m.clean}
	r.mu.Unlock()
	r.onEvict(ev)
	clear(buf.s)
	r.segs.Put(buf)
	r.mu.Lock()
	r.stats.Evicted++
	if m.indexed {
		r.unindexLocked(v)
	}
	m.state = objDropping
	r.unpinLocked(v)
	return true
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
		o := r.polObj[key]
		r.polRemoveLocked(o)
		if r.objs[o].pins > 0 {
			r.skip = append(r.skip, o)
		} else {
			v, found = o, true
			break
		}
	}
	for _, o := range r.skip {
		m := &r.objs[o]
		r.polInsertLocked(o, r.accessLocked(m.pk, r.tenants[m.tenant], block.Hint{}))
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
	o, ok := r.lookupLocked(k)
	if !ok {
		r.stats.Misses++
		r.mu.Unlock()
		return dst[:0], 0, &missError{what: "get", key: k}
	}
	m := r.objs[o]
	r.pinLocked(o)
	r.touchLocked(o)
	r.mu.Unlock()

	out := dst[:0]
	w := r.walk(m.first)
	w.skip(int(m.nameLen))
	for n := int(m.n); n > 0; {
		b := w.next(n)
		out = append(out, b...)
		n -= len(b)
	}
	good := !r.verify || block.Verify(k, out, m.sum)

	r.mu.Lock()
	if good {
		r.stats.Hits++
		r.stats.BytesOut += uint64(m.n)
	} else {
		r.stats.Misses++
		r.stats.Corruptions++
		if cur, ok := r.lookupLocked(k); ok && cur == o && r.objs[o].gen == m.gen {
			r.dropLocked(o)
		}
	}
	r.unpinLocked(o)
	r.mu.Unlock()
	if !good {
		return dst[:0], 0, fmt.Errorf("ram: get %s from chunk %d: payload checksum %08x, stored %08x: %w",
			k, m.first, block.Checksum(k, out), m.sum, kvpool.ErrCorrupt)
	}
	return out, m.sum, nil
}

// pin finds and pins k's object for a zero-copy read, counting a hit or a
// miss. On success the caller must unpin and call r.ops.Done.
func (r *RAM) pin(what string, k block.Key) (int32, object, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.beginLocked(what, k); err != nil {
		return 0, object{}, err
	}
	o, ok := r.lookupLocked(k)
	if !ok {
		r.stats.Misses++
		r.ops.Done()
		return 0, object{}, &missError{what: what, key: k}
	}
	r.pinLocked(o)
	r.touchLocked(o)
	m := r.objs[o]
	r.stats.Hits++
	r.stats.BytesOut += uint64(m.n)
	return o, m, nil
}

// View calls fn with k's payload and checksum in place, without copying:
// the object is pinned while fn runs, so it is neither evicted nor
// overwritten, and fn may hand the segments to writev. fn must not modify
// or retain them (the slice of segments is reused after fn returns). View
// does not verify the checksum (the receiver does). It counts as a hit;
// fn's error is returned wrapped.
func (r *RAM) View(k block.Key, fn func(payload tier.Segments, sum uint32) error) error {
	o, m, err := r.pin("view", k)
	if err != nil {
		return err
	}
	defer r.ops.Done()
	buf := r.segs.Get().(*segBuf)
	buf.s = r.appendSegs(buf.s[:0], &m)
	ferr := fn(buf.s, m.sum)
	clear(buf.s)
	r.segs.Put(buf)
	r.mu.Lock()
	r.unpinLocked(o)
	r.mu.Unlock()
	if ferr != nil {
		return fmt.Errorf("ram: view %s: %w", k, ferr)
	}
	return nil
}

// Acquire pins k's object and returns its payload in place, for a sender
// that finishes asynchronously. The bytes stay valid and unchanged until
// release is called (once; later calls do nothing); they must not be
// modified. Like View it does not verify, and counts a hit. An object
// held for long keeps eviction from reusing its chunks: release promptly.
func (r *RAM) Acquire(k block.Key) (payload tier.Segments, sum uint32, release func(), err error) {
	o, m, err := r.pin("acquire", k)
	if err != nil {
		return nil, 0, nil, err
	}
	r.ops.Done()
	segs := r.appendSegs(make(tier.Segments, 0, 1), &m)
	sum = m.sum
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			r.mu.Lock()
			r.unpinLocked(o)
			r.mu.Unlock()
		}
	}
	return segs, sum, release, nil
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
	o, ok := r.lookupLocked(k)
	if !ok {
		return fmt.Errorf("ram: delete %s: %w", k, kvpool.ErrNotFound)
	}
	r.dropLocked(o)
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
	o, ok := r.lookupLocked(k)
	if !ok {
		return 0, false
	}
	return r.objs[o].gen, true
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
	used := r.nChunks - r.freeChunks
	objects := r.nChunks - len(r.freeObjs)
	return Counters{
		ChunkSize:     r.cs,
		Chunks:        r.nChunks,
		UsedChunks:    used,
		PinnedChunks:  r.pinnedCh,
		Objects:       objects,
		PinnedObjects: r.pinned,
		Slots:         r.nChunks,
		UsedSlots:     used,
		PinnedSlots:   r.pinned,
		Rejected:      r.rejected,
		Full:          r.full,
	}
}

// Watermark returns the fraction of chunks in use (not free), in [0, 1].
func (r *RAM) Watermark() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return float64(r.nChunks-r.freeChunks) / float64(r.nChunks)
}

// BlockSize returns the typical object size the policies are sized for
// (Options.BlockSize).
func (r *RAM) BlockSize() int { return r.bs }

// ChunkSize returns the arena's chunk size.
func (r *RAM) ChunkSize() int { return r.cs }

// MaxObjectSize returns the largest payload a Put accepts.
func (r *RAM) MaxObjectSize() int { return r.maxObject }

// Slots returns how many objects of BlockSize bytes the tier holds
// (CapacityBytes / BlockSize), the number the policies are sized from.
func (r *RAM) Slots() int { return r.objCap }

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

// Check verifies the tier's invariants: the free bitmap, the run chains,
// the object table, the index and its collision chains and the policy
// agree, and every counter matches. Call it only while no operation is in
// flight and no object is held through Acquire (tests call it in
// t.Cleanup).
func (r *RAM) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	bad := func(format string, a ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf("ram: check: "+format, a...))
		}
	}
	free := 0
	for c := range r.nChunks {
		if r.freeMap[c>>6]&(1<<(c&63)) != 0 {
			free++
		}
	}
	if free != r.freeChunks {
		bad("free bitmap has %d chunks, counter %d", free, r.freeChunks)
	}
	owner := make([]int32, r.nChunks) // object+1 holding each chunk
	freeObj := make(map[int32]bool, len(r.freeObjs))
	for _, o := range r.freeObjs {
		if freeObj[o] {
			bad("object %d twice on the free list", o)
		}
		freeObj[o] = true
		if r.objs[o].state != objFree {
			bad("object %d on the free list in state %d", o, r.objs[o].state)
		}
	}
	var payload int64
	live, pinned, liveChunks, used := 0, 0, 0, 0
	for i := range r.objs {
		o, m := int32(i), &r.objs[i]
		if m.pins != 0 {
			pinned++
			bad("object %d has %d pins at rest", o, m.pins)
		}
		switch m.state {
		case objFree:
			if !freeObj[o] {
				bad("free object %d not on the free list", o)
			}
			continue
		case objLive:
		default:
			bad("object %d in transient state %d at rest", o, m.state)
			continue
		}
		live++
		payload += int64(m.n)
		liveChunks += int(m.chunks)
		// Its runs: in range, used, owned by it alone, as many chunks as
		// it counts and enough for its name and payload.
		got, runs := 0, 0
		for run := m.first; run >= 0 && runs <= r.nChunks; run = r.runNext[run] {
			runs++
			if int(run) >= r.nChunks || r.runLen[run] < 1 || int(run)+int(r.runLen[run]) > r.nChunks {
				bad("object %d has a bad run at chunk %d (length %d)", o, run, r.runLen[run])
				break
			}
			for c := int(run); c < int(run)+int(r.runLen[run]); c++ {
				if r.freeMap[c>>6]&(1<<(c&63)) != 0 {
					bad("object %d holds free chunk %d", o, c)
				}
				if owner[c] != 0 {
					bad("chunk %d held by objects %d and %d", c, owner[c]-1, o)
				}
				owner[c] = o + 1
			}
			got += int(r.runLen[run])
		}
		used += got
		if got != int(m.chunks) || got != r.chunksFor(int(m.nameLen), int(m.n)) {
			bad("object %d holds %d chunks, counts %d, needs %d", o, got, m.chunks, r.chunksFor(int(m.nameLen), int(m.n)))
		}
		if int(m.n) > r.maxObject || int(m.nameLen) > block.MaxNameLen {
			bad("object %d holds %d bytes named by %d (limits %d, %d)", o, m.n, m.nameLen, r.maxObject, block.MaxNameLen)
		}
		if int(m.tenant) >= len(r.tenants) {
			bad("live object %d has tenant %d of %d interned", o, m.tenant, len(r.tenants))
			continue
		}
		k := r.keyOf(m)
		if !m.indexed {
			bad("live object %d (%s) not indexed", o, k)
		} else if got, ok := r.lookupLocked(k); !ok || got != o {
			bad("live object %d (%s) not found by its key (found %d, %v)", o, k, got, ok)
		}
		if !r.pol.Contains(m.pk) || r.polObj[m.pk] != o {
			bad("live object %d not in the policy under its key %016x", o, m.pk)
		}
		if want := r.policyKeyLocked(k); m.pk != want {
			bad("live object %d has policy key %016x, want %016x", o, m.pk, want)
		}
	}
	if used+r.freeChunks != r.nChunks {
		bad("objects hold %d chunks, %d free, of %d", used, r.freeChunks, r.nChunks)
	}
	// Index: every chain's objects are live, indexed under the entry's key,
	// with distinct names; together they are the live objects.
	chained := 0
	for ik, h := range r.index {
		var names []string
		for o, n := h, 0; o >= 0; o, n = r.objs[o].link, n+1 {
			if n > r.nChunks {
				bad("index entry %016x/%d: chain loops", ik.id, ik.tenant)
				break
			}
			m := &r.objs[o]
			chained++
			if m.state != objLive || !m.indexed || m.id != ik.id || m.tenant != ik.tenant {
				bad("index entry %016x/%d chains object %d (state %d, indexed %v, id %016x, tenant %d)", ik.id, ik.tenant, o, m.state, m.indexed, m.id, m.tenant)
				continue
			}
			name := r.keyOf(m).Name
			for _, other := range names {
				if other == name {
					bad("index entry %016x/%d chains name %q twice", ik.id, ik.tenant, name)
				}
			}
			names = append(names, name)
		}
	}
	if pinned != r.pinned || r.pinnedCh != 0 || r.pinnedLive != 0 {
		bad("%d objects pinned, counters say %d objects, %d chunks", pinned, r.pinned, r.pinnedCh)
	}
	if live != chained || live != r.pol.Len() || live != len(r.polObj) || live != r.stats.Blocks {
		bad("live objects %d, indexed %d, policy %d (object map %d), Stats.Blocks %d", live, chained, r.pol.Len(), len(r.polObj), r.stats.Blocks)
	}
	if liveChunks != r.liveChunks || liveChunks != r.heldChunks {
		bad("live objects hold %d chunks, counters say %d live, %d held", liveChunks, r.liveChunks, r.heldChunks)
	}
	if payload != r.stats.Bytes {
		bad("live bytes %d, Stats.Bytes %d", payload, r.stats.Bytes)
	}
	if want := int64(liveChunks)*(int64(r.cs)+chunkTableBytes) + int64(live)*ObjectEntryBytes; want != r.stats.HeldBytes {
		bad("Stats.HeldBytes %d, want %d", r.stats.HeldBytes, want)
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
