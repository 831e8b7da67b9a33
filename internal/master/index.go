package master

import (
	"encoding/binary"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// The index is flat: no per-key pointer for the garbage collector to
// chase, and a fixed number of bytes per key beside its name
// (docs/design.md, "The master"). Each shard holds
//
//   - entries, one per key, in chunks of chunkLen that never move (so an
//     entry's number, and a pointer to it under the shard's lock, stay
//     valid while the key lives); a freed entry goes on a free list;
//   - slots, an open-addressing hash table (linear probing, backward-shift
//     deletion: no tombstones) of uint32s, each an entry number plus one
//     in its low slotIdxBits bits and a tag of the key's hash above them,
//     so a probe reads an entry only when the tag matches;
//   - overflow replicas, the second and later replicas of a key, in
//     chunks like the entries, linked from the entry (the first replica
//     is inline);
//   - names, the names of named keys, in one byte arena addressed by
//     offset (a uvarint length, then the bytes), compacted when half of
//     it is garbage.
//
// Tenants are interned to small integers (tenantTable) and nodes to
// numbers (Master.nodeTab), so neither costs a pointer per key.

// numShards is the number of index shards: a power of two comfortably above
// the core count of a master host, so two lookups rarely share a lock's
// cache line (64, as the brief suggests; groupcache and otter shard alike).
const numShards = 64

// shardBits is log2(numShards): a key's shard is the low shardBits bits of
// its hash.
const shardBits = 6

const (
	// chunkBits sizes the entry and overflow chunks: 1024 entries (48
	// KiB), small enough that a half-empty last chunk per shard costs
	// under 4 bytes a key at 1M keys, large enough that the chunk table
	// stays short (1,600 chunks a shard at 100M keys).
	chunkBits = 10
	chunkLen  = 1 << chunkBits
	// slotIdxBits is the width of the entry number in a slot. The 6 bits
	// above hold the tag.
	slotIdxBits = 26
	slotIdxMask = 1<<slotIdxBits - 1
	// maxEntries bounds a shard's entries and its overflow replicas:
	// 2^25 − 2, so that an LRU link (lruLink) holds one plus a flag in 32
	// bits; 2.1 billion keys over the 64 shards.
	maxEntries = 1<<25 - 2
	// minSlots is the smallest hash table; a power of two.
	minSlots = 64
	// The table grows (doubles) when it would be over 7/8 full: a hit
	// probes about 4.5 slots at worst and 1.5–2.5 on average over a
	// growth cycle (Knuth, TAOCP vol. 3, §6.4), most rejected by the tag
	// without reading an entry; a slot costs 4.6–9.1 bytes a key.
	maxLoadNum, maxLoadDen = 7, 8
	// minArenaGC is the least garbage worth compacting a name arena for
	// (1 KiB). Compaction also waits for half the arena to be garbage and
	// for a garbage byte per four slots, so its walk of the hash table
	// costs O(1) per byte of names removed.
	minArenaGC = 1 << 10
	// slabDiv and maxSlab size the allocations chunks come from
	// (slabPool): with n chunks handed out over all shards, the next
	// allocation is n/slabDiv chunks, so chunks allocated and not yet
	// used are at most a sixteenth of the index's (3 bytes a key at
	// worst), and from about 700,000 keys an allocation spans at least a
	// whole 2 MiB page, which the kernel can back with a huge page
	// (hugePages): one TLB entry for 43 chunks' worth of entries instead
	// of 512 small pages. At most maxSlab chunks (16 MiB of entries) at
	// once.
	slabDiv = 16
	maxSlab = 340
)

// maxArena is the most bytes a shard's name arena holds: an entry holds
// its name's offset plus one in 32 bits. A variable for tests.
var maxArena = 1<<32 - 2

// shard is one slice of the global index: block key → replicas. mu guards
// every field but the counters, and every replica field except lease and
// touched, which leased lookups update under the read lock with atomics.
type shard struct {
	mu      sync.RWMutex
	si      uint8        // the shard's index in Master.shards
	tenants *tenantTable // the master's, to hash entries

	slots []uint32 // tag<<slotIdxBits | entry+1; 0 is empty
	keys  int      // live entries (occupied slots)
	// view is slots for warm, which reads without the lock: every write
	// of a slot, and of an entry's id, is atomic.
	view atomic.Pointer[[]uint32]
	// ents and ovfs are the chunk tables, replaced (never changed in
	// place) under mu held for writing, so that the holder of the
	// master's lruMu can follow an LRU link into any shard's chunks.
	ents    atomic.Pointer[[]*[chunkLen]entry]
	nEnts   uint32 // entries handed out (live and free)
	freeEnt uint32 // head of the free entries, +1 (0: none)
	ovfs    atomic.Pointer[[]*[chunkLen]overflow]
	nOvfs   uint32
	freeOvf uint32
	nOvfUse int // overflow replicas in use
	// slabs are the master's, where the chunks come from.
	slabs *slabs

	names       []byte
	nameGarbage int // bytes of names[] no entry uses

	// exp is the expiry of named keys (unix ms on the master's clock,
	// > 0), by entry: a key at or past it is hidden from readers
	// (keys.go). A record lives only while its key has a replica: the
	// key's removal deletes it. nil until the shard's first expiry.
	exp map[uint32]int64

	// Lookup counters, striped by the shard of a batch's first key so
	// concurrent lookups do not share one cache line.
	lookups, lookupKeys, hitKeys atomic.Int64
	// leases counts the shard's read leases by when they end
	// (leases.go).
	leases leaseRing

	_ [64]byte // keep neighbouring shards off each other's cache lines
}

// replica is one copy of a block in the index: 24 bytes.
type replica struct {
	// lease is the end of the read lease in milliseconds of the master's
	// clock (Master.ms: 32 bits that wrap every 49.7 days, compared
	// modulo 2^32), 0 for none (atomic).
	lease uint32
	// touched is when a leased lookup last recorded an access to the
	// replica in the eviction order (Master.ms; atomic): what
	// RecencyResolution is measured from.
	touched uint32
	sizeLo  uint32 // the low 32 bits of the size
	sum     uint32
	// node is the holder's number plus one (Master.nodeAt); 0 marks an
	// empty inline replica.
	node   uint16
	flags  uint8 // flagSSD, flagEvicting, flagSize40
	sizeHi uint8 // bits 32 to 39 of the size
	// seq is lruOn plus the position of the replica's latest record in
	// the LRU log (lrulog.go) when the policy is lru and the replica is
	// in the order (RAM, not evicting); 0 otherwise. Guarded by the
	// master's lruMu (and the replica's shard lock, without which the
	// replica cannot join or leave the order).
	seq uint32
}

const (
	flagSSD      = 1 << iota // tier: SSD, else RAM
	flagEvicting             // an eviction order is pending; hidden from readers
	flagSize40               // bit 40 of the size (meta.MaxItemSize is 2^40)
)

func (r *replica) tier() meta.Tier {
	if r.flags&flagSSD != 0 {
		return meta.TierSSD
	}
	return meta.TierRAM
}

func (r *replica) setTier(t meta.Tier) {
	r.flags &^= flagSSD
	if t == meta.TierSSD {
		r.flags |= flagSSD
	}
}

func (r *replica) evicting() bool { return r.flags&flagEvicting != 0 }

func (r *replica) setEvicting(on bool) {
	r.flags &^= flagEvicting
	if on {
		r.flags |= flagEvicting
	}
}

func (r *replica) size() int64 {
	sz := int64(r.sizeHi)<<32 | int64(r.sizeLo)
	if r.flags&flagSize40 != 0 {
		sz |= 1 << 40
	}
	return sz
}

// setSize stores sz, 0 to meta.MaxItemSize (validated).
func (r *replica) setSize(sz int64) {
	r.sizeLo, r.sizeHi = uint32(sz), uint8(sz>>32)
	r.flags &^= flagSize40
	if sz>>40&1 != 0 {
		r.flags |= flagSize40
	}
}

// set stores v's fields in r, all but seq, which only the holder of the
// master's lruMu writes (a replica joins the order with seq 0 and leaves
// it with seq zeroed). The shard's write lock is held.
func (r *replica) set(v replica) {
	r.lease, r.touched, r.sizeLo, r.sum = v.lease, v.touched, v.sizeLo, v.sum
	r.node, r.flags, r.sizeHi = v.node, v.flags, v.sizeHi
}

// newReplica returns the replica of it on node number num.
func newReplica(num uint16, it *meta.Item) replica {
	r := replica{node: num, sum: it.Sum}
	r.setTier(it.Tier)
	r.setSize(it.Size)
	return r
}

// entry is one key of a shard: 44 bytes.
type entry struct {
	// idLo and idHi are the key's chain or name id, in two halves: a
	// uint64 would align the entry to 8 bytes and pad it to 48.
	// Written atomically (warm reads idLo without the lock).
	idLo, idHi uint32
	rep        replica // the first replica (rep.node 0: none inline)
	// tenant is the key's interned tenant plus one; 0 marks a free entry.
	tenant uint32
	// name is the offset plus one of the key's name in the arena; 0 for
	// a chain key.
	name uint32
	// more is the first overflow replica plus one (0: none); in a free
	// entry, the next free entry plus one.
	more uint32
}

// id returns e's chain or name id.
func (e *entry) id() uint64 { return uint64(e.idHi)<<32 | uint64(e.idLo) }

// setID stores e's id.
func (e *entry) setID(id uint64) {
	atomic.StoreUint32(&e.idLo, uint32(id))
	atomic.StoreUint32(&e.idHi, uint32(id>>32))
}

// overflow is a key's second or later replica: 32 bytes.
type overflow struct {
	rep replica // rep.node 0 marks a free one
	// next is the key's next overflow replica plus one (0: none); in a
	// free one, the next free one plus one.
	next uint32
	// owner is the entry of the key: an eviction victim's key is found
	// from its handle.
	owner uint32
}

// Policy handles. Every RAM replica not under an eviction order is in the
// eviction policy under a handle that says where it is: its shard, whether
// it is inline or an overflow replica, and its number there. A replica
// keeps its place while it lives (an inline one is never moved into
// another entry, nor an overflow one inline), and it leaves the policy
// under its shard's lock before its place can be reused, so a handle in
// the policy always names its replica.
const (
	handleBit     = 1 << 63
	handleOvfBit  = 1 << 39
	handleShardSh = 40
)

func inlineHandle(si uint8, ei uint32) uint64 {
	return handleBit | uint64(si)<<handleShardSh | uint64(ei)
}

func ovfHandle(si uint8, oi uint32) uint64 {
	return handleBit | uint64(si)<<handleShardSh | handleOvfBit | uint64(oi)
}

// decodeHandle returns the shard, overflow flag and number of handle h; ok
// is false for a value no handle has.
func decodeHandle(h uint64) (si uint8, ovf bool, idx uint32, ok bool) {
	rest := h &^ handleBit
	if h&handleBit == 0 || rest>>handleShardSh >= numShards || (rest>>32)&0x7f != 0 {
		return 0, false, 0, false
	}
	return uint8(rest >> handleShardSh), h&handleOvfBit != 0, uint32(h), true
}

// keyHash hashes a block key given its tenant's hash (block.FNV1a of the
// tenant): the key's block.Key.Hash, with the tenant hashed once per call
// rather than once per key.
func keyHash(tenantHash, id uint64) uint64 { return block.Mix64(id ^ tenantHash) }

func (m *Master) shardOf(h uint64) *shard { return &m.shards[h&(numShards-1)] }

func (m *Master) shardFor(k block.Key) *shard {
	return m.shardOf(k.Hash())
}

// slotTag is the tag a key of hash h has in its slot: the top bits.
func slotTag(h uint64) uint32 { return uint32(h>>(64-(32-slotIdxBits))) << slotIdxBits }

// home is the slot a key of hash h probes first in a table of mask+1.
func home(h uint64, mask int) int { return int(h>>shardBits) & mask }

func (s *shard) ent(ei uint32) *entry { return &(*s.ents.Load())[ei>>chunkBits][ei&(chunkLen-1)] }

func (s *shard) ovf(oi uint32) *overflow { return &(*s.ovfs.Load())[oi>>chunkBits][oi&(chunkLen-1)] }

// addChunk appends a new chunk from pool to the chunk table t.
func addChunk[T any](t *atomic.Pointer[[]*[chunkLen]T], pool *slabPool[T]) {
	var old []*[chunkLen]T
	if p := t.Load(); p != nil {
		old = *p
	}
	tab := append(slices.Clip(old), pool.chunk())
	t.Store(&tab)
}

// slabs are the master's chunk pools, shared by its shards so that
// chunks are allocated many at a time (big enough for huge pages) while
// few are allocated and unused: one pool's spare chunks, not each
// shard's.
type slabs struct {
	ents slabPool[entry]
	ovfs slabPool[overflow]
}

// slabPool hands out zeroed chunks of T, which holds no pointers, from
// allocations of many chunks (slabDiv, maxSlab). A chunk handed out is
// never taken back: it stays in its shard's table for the master's
// life. The chunks of one allocation keep it all alive while one is in
// a table. Safe for concurrent use; mu is a leaf, taken under a shard's
// write lock.
type slabPool[T any] struct {
	mu     sync.Mutex
	rest   [][chunkLen]T // allocated, not yet handed out
	issued int           // chunks handed out
}

// chunk returns a new zeroed chunk.
func (p *slabPool[T]) chunk() *[chunkLen]T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rest) == 0 {
		n := min(max(1, p.issued/slabDiv), maxSlab)
		p.rest = make([][chunkLen]T, n)
		if sz := uintptr(n) * unsafe.Sizeof(p.rest[0]); sz >= hugePage {
			hugePages(unsafe.Pointer(&p.rest[0]), sz)
		}
	}
	c := &p.rest[0]
	p.rest = p.rest[1:]
	p.issued++
	return c
}

// chunks returns the number of chunks in table t.
func chunks[T any](t *atomic.Pointer[[]*[chunkLen]T]) int {
	if p := t.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// name returns the name bytes at arena offset off (e.name − 1).
func (s *shard) nameAt(off uint32) []byte {
	n, w := binary.Uvarint(s.names[off:])
	return s.names[int(off)+w : int(off)+w+int(n)]
}

// nameOf returns e's name ("" for a chain key).
func (s *shard) nameOf(e *entry) string {
	if e.name == 0 {
		return ""
	}
	return string(s.nameAt(e.name - 1))
}

// matches reports whether e is the key (tid, id, name).
func (s *shard) matches(e *entry, tid uint32, id uint64, name string) bool {
	if e.idLo != uint32(id) || e.idHi != uint32(id>>32) || e.tenant != tid {
		return false
	}
	if name == "" {
		return e.name == 0
	}
	return e.name != 0 && string(s.nameAt(e.name-1)) == name
}

// lookup returns the entry of the key (tid, id, name) of hash h, plus
// one, or 0 when absent. tid 0 (an unknown tenant) finds nothing.
func (s *shard) lookup(tid uint32, h, id uint64, name string) uint32 {
	if tid == 0 || s.keys == 0 {
		return 0
	}
	mask := len(s.slots) - 1
	tag := slotTag(h)
	for p := home(h, mask); ; p = (p + 1) & mask {
		v := s.slots[p]
		if v == 0 {
			return 0
		}
		if v&^slotIdxMask == tag && s.matches(s.ent(v&slotIdxMask-1), tid, id, name) {
			return v & slotIdxMask
		}
	}
}

// insert adds the absent key (tid, id, name) of hash h with no replica
// and returns its entry; false when the shard is full (maxEntries).
func (s *shard) insert(tid uint32, h, id uint64, name string) (uint32, bool) {
	if s.freeEnt == 0 && s.nEnts >= maxEntries {
		return 0, false
	}
	if name != "" && !s.roomForName(len(name)) {
		return 0, false
	}
	if (s.keys+1)*maxLoadDen > len(s.slots)*maxLoadNum {
		s.grow(max(minSlots, 2*len(s.slots)))
	}
	var ei uint32
	if s.freeEnt != 0 {
		ei = s.freeEnt - 1
		s.freeEnt = s.ent(ei).more
	} else {
		ei = s.nEnts
		if int(ei>>chunkBits) == chunks(&s.ents) {
			addChunk(&s.ents, &s.slabs.ents)
		}
		s.nEnts++
	}
	e := s.ent(ei)
	e.setID(id)
	e.tenant, e.name, e.more = tid, 0, 0
	e.rep.set(replica{})
	if name != "" {
		e.name = uint32(len(s.names)) + 1
		s.names = binary.AppendUvarint(s.names, uint64(len(name)))
		s.names = append(s.names, name...)
	}
	s.place(slotTag(h)|(ei+1), h)
	s.keys++
	return ei, true
}

// place puts slot value v of hash h at the first empty slot from its home.
func (s *shard) place(v uint32, h uint64) {
	mask := len(s.slots) - 1
	p := home(h, mask)
	for s.slots[p] != 0 {
		p = (p + 1) & mask
	}
	atomic.StoreUint32(&s.slots[p], v)
}

// grow rebuilds the hash table with size slots.
func (s *shard) grow(size int) {
	old := s.slots
	s.slots = newSlots(size)
	defer func() { sl := s.slots; s.view.Store(&sl) }()
	for _, v := range old {
		if v != 0 {
			s.place(v, s.hashOf(s.ent(v&slotIdxMask-1)))
		}
	}
}

// hugePage is the size of a transparent huge page on x86-64 (and arm64
// with 4 KiB pages): what hugePages advises and newSlots aligns on.
const hugePage = 2 << 20

// alignSlotsFrom is the smallest hash table (in bytes) newSlots aligns
// on a huge page: 4 MiB (2^20 slots, from about 50M keys over the 64
// shards), where aligning costs at most half a table more and puts all
// of it, not half, on huge pages; a smaller table is not worth 2 MiB of
// padding.
const alignSlotsFrom = 4 << 20

// newSlots returns a zeroed hash table of size slots, on huge pages
// where its size allows (hugePages).
func newSlots(size int) []uint32 {
	if size*4 < alignSlotsFrom {
		return make([]uint32, size)
	}
	// Go aligns a large allocation on 8 KiB: up to 2 MiB − 8 KiB of
	// padding puts the table's start on a huge page boundary.
	const pad = (hugePage - 8<<10) / 4
	buf := make([]uint32, size+pad)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & (hugePage - 1) / 4)
	if off > pad {
		off = 0 // not 8 KiB aligned after all: the table is still right
	}
	sl := buf[off : off+size : off+size]
	hugePages(unsafe.Pointer(&sl[0]), uintptr(size)*4)
	return sl
}

// hashOf returns the hash of e's key.
func (s *shard) hashOf(e *entry) uint64 { return keyHash(s.tenants.hash(e.tenant), e.id()) }

// removeKey deletes entry ei, whose key has no replica left, with its
// expiry record and name, and frees it.
func (s *shard) removeKey(ei uint32) {
	e := s.ent(ei)
	mask := len(s.slots) - 1
	p := home(s.hashOf(e), mask)
	for s.slots[p]&slotIdxMask != ei+1 {
		p = (p + 1) & mask
	}
	// Backward-shift deletion (Knuth's Algorithm R): move later members
	// of the probe run into the hole when their home allows it.
	for q := (p + 1) & mask; s.slots[q] != 0; q = (q + 1) & mask {
		h := home(s.hashOf(s.ent(s.slots[q]&slotIdxMask-1)), mask)
		// Move q to p unless its home lies cyclically in (p, q].
		if (q > p && (h <= p || h > q)) || (q < p && h <= p && h > q) {
			atomic.StoreUint32(&s.slots[p], s.slots[q])
			p = q
		}
	}
	atomic.StoreUint32(&s.slots[p], 0)
	s.keys--
	if e.name != 0 {
		off := int(e.name - 1)
		n, w := binary.Uvarint(s.names[off:])
		s.nameGarbage += w + int(n)
	}
	delete(s.exp, ei)
	e.setID(0)
	e.tenant, e.name, e.more = 0, 0, s.freeEnt
	e.rep.set(replica{})
	s.freeEnt = ei + 1
	if s.keys == 0 {
		s.names, s.nameGarbage = s.names[:0], 0
	} else if s.nameGarbage >= max(minArenaGC, len(s.slots)/4) && 2*s.nameGarbage > len(s.names) {
		s.compactNames()
	}
}

// roomForName reports whether the name arena can take a name of n bytes
// without passing maxArena, compacting it first if that makes room.
func (s *shard) roomForName(n int) bool {
	need := binary.MaxVarintLen16 + n
	if len(s.names)+need <= maxArena {
		return true
	}
	if s.nameGarbage > 0 {
		s.compactNames()
	}
	return len(s.names)+need <= maxArena
}

// compactNames rewrites the name arena without its garbage.
func (s *shard) compactNames() {
	out := make([]byte, 0, len(s.names)-s.nameGarbage)
	for _, v := range s.slots {
		if v == 0 {
			continue
		}
		e := s.ent(v&slotIdxMask - 1)
		if e.name == 0 {
			continue
		}
		name := s.nameAt(e.name - 1)
		e.name = uint32(len(out)) + 1
		out = binary.AppendUvarint(out, uint64(len(name)))
		out = append(out, name...)
	}
	s.names, s.nameGarbage = out, 0
}

// warm loads, without the lock, the slots the key of hash h probes up to
// the first whose tag matches, and the entry that slot names, so that a
// batch's cache misses overlap (each key's lookup under its shard's lock
// then finds them in cache) rather than come one after the other behind
// each lock's barrier. Most keys do not sit in their home slot (at the
// table's usual load a hit probes 1.5–2.5 slots), so reading the home
// slot's entry alone would warm another key's. What it reads is only a
// hint and is returned to be ignored; a slot changed under it costs a
// miss later, nothing else.
func (s *shard) warm(h uint64) uint64 {
	p := s.view.Load()
	if p == nil {
		return 0
	}
	sl := *p
	mask := len(sl) - 1
	tag := slotTag(h)
	i := home(h, mask)
	for range warmProbes {
		v := atomic.LoadUint32(&sl[i])
		if v == 0 {
			return 0
		}
		if v&^slotIdxMask == tag {
			ei := v&slotIdxMask - 1
			tab := s.ents.Load()
			if tab == nil || int(ei>>chunkBits) >= len(*tab) {
				return 0
			}
			return uint64(atomic.LoadUint32(&(*tab)[ei>>chunkBits][ei&(chunkLen-1)].idLo))
		}
		i = (i + 1) & mask
	}
	return 0
}

// warmSlot loads, without the lock, the home slot of the key of hash h
// (see warm).
func (s *shard) warmSlot(h uint64) uint64 {
	p := s.view.Load()
	if p == nil {
		return 0
	}
	sl := *p
	return uint64(atomic.LoadUint32(&sl[home(h, len(sl)-1)]))
}

// warmProbes bounds warm's probe: 8 slots, past the longest probe a hit
// takes on average at the table's highest load (4.5 slots at 7/8 full).
const warmProbes = 8

// hasReps reports whether entry e has a replica.
func hasReps(e *entry) bool { return e.rep.node != 0 || e.more != 0 }

// replicas yields entry ei's replicas with their policy handles.
func (s *shard) replicas(ei uint32) iter.Seq2[*replica, uint64] {
	return func(yield func(*replica, uint64) bool) {
		e := s.ent(ei)
		if e.rep.node != 0 && !yield(&e.rep, inlineHandle(s.si, ei)) {
			return
		}
		for o := e.more; o != 0; {
			ov := s.ovf(o - 1)
			if !yield(&ov.rep, ovfHandle(s.si, o-1)) {
				return
			}
			o = ov.next
		}
	}
}

// findRep returns entry ei's replica on node number num (plus one) in
// tier t and its handle, or nil.
func (s *shard) findRep(ei uint32, num uint16, t meta.Tier) (*replica, uint64) {
	for r, h := range s.replicas(ei) {
		if r.node == num && r.tier() == t {
			return r, h
		}
	}
	return nil, 0
}

// findNodeRep returns entry ei's first replica on node number num (plus
// one), in either tier, and its handle, or nil.
func (s *shard) findNodeRep(ei uint32, num uint16) (*replica, uint64) {
	for r, h := range s.replicas(ei) {
		if r.node == num {
			return r, h
		}
	}
	return nil, 0
}

// addRep adds r to entry ei (inline when that place is empty) and returns
// its place and handle; nil when the overflow table is full.
func (s *shard) addRep(ei uint32, r replica) (*replica, uint64) {
	e := s.ent(ei)
	if e.rep.node == 0 {
		e.rep.set(r)
		return &e.rep, inlineHandle(s.si, ei)
	}
	var oi uint32
	switch {
	case s.freeOvf != 0:
		oi = s.freeOvf - 1
		s.freeOvf = s.ovf(oi).next
	case s.nOvfs < maxEntries:
		oi = s.nOvfs
		if int(oi>>chunkBits) == chunks(&s.ovfs) {
			addChunk(&s.ovfs, &s.slabs.ovfs)
		}
		s.nOvfs++
	default:
		return nil, 0
	}
	ov := s.ovf(oi)
	ov.rep.set(r)
	ov.next, ov.owner = e.more, ei
	e.more = oi + 1
	s.nOvfUse++
	return &ov.rep, ovfHandle(s.si, oi)
}

// dropRep removes the replica of handle h from entry ei, and the key when
// it was the last. The caller has taken the replica out of the policy.
func (s *shard) dropRep(ei uint32, h uint64) {
	e := s.ent(ei)
	_, ovf, idx, _ := decodeHandle(h)
	if !ovf {
		e.rep.set(replica{})
	} else {
		for p := &e.more; *p != 0; p = &s.ovf(*p - 1).next {
			if *p-1 == idx {
				ov := s.ovf(idx)
				*p = ov.next
				ov.rep.set(replica{})
				ov.next, ov.owner = s.freeOvf, 0
				s.freeOvf = idx + 1
				s.nOvfUse--
				break
			}
		}
	}
	if !hasReps(e) {
		s.removeKey(ei)
	}
}

// repAt returns the replica of handle h in s and its entry, or nil when
// the place holds none. The shard lock is held.
func (s *shard) repAt(h uint64) (*replica, uint32) {
	_, ovf, idx, ok := decodeHandle(h)
	if !ok {
		return nil, 0
	}
	if !ovf {
		if idx >= s.nEnts {
			return nil, 0
		}
		e := s.ent(idx)
		if e.tenant == 0 || e.rep.node == 0 {
			return nil, 0
		}
		return &e.rep, idx
	}
	if idx >= s.nOvfs {
		return nil, 0
	}
	ov := s.ovf(idx)
	if ov.rep.node == 0 {
		return nil, 0
	}
	return &ov.rep, ov.owner
}

// entries yields the shard's live entries.
func (s *shard) entries() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for _, v := range s.slots {
			if v != 0 && !yield(v&slotIdxMask-1) {
				return
			}
		}
	}
}

// keyOf returns the block key of entry e.
func (s *shard) keyOf(e *entry) block.Key {
	return block.Key{Tenant: s.tenants.name(e.tenant), ID: e.id(), Name: s.nameOf(e)}
}

// tenantTable interns tenant names to numbers (plus one in entries, so 0
// means none). Tenants are never forgotten: a tenant costs its name and
// a few words for the master's lifetime. Lookups read it without a lock.
type tenantTable struct {
	mu   sync.Mutex // serialises interning
	ids  atomic.Pointer[map[string]uint32]
	list atomic.Pointer[[]tenantInfo]
}

type tenantInfo struct {
	name string
	hash uint64 // block.FNV1a(name)
}

// id returns tenant's number plus one, or 0 when it has none yet.
func (t *tenantTable) id(tenant string) uint32 {
	if p := t.ids.Load(); p != nil {
		return (*p)[tenant]
	}
	return 0
}

// intern returns tenant's number plus one, giving it one if needed.
func (t *tenantTable) intern(tenant string) uint32 {
	if id := t.id(tenant); id != 0 {
		return id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var old map[string]uint32
	if p := t.ids.Load(); p != nil {
		old = *p
	}
	if id := old[tenant]; id != 0 {
		return id
	}
	var list []tenantInfo
	if p := t.list.Load(); p != nil {
		list = *p
	}
	ids := make(map[string]uint32, len(old)+1)
	for k, v := range old {
		ids[k] = v
	}
	list = append(list[:len(list):len(list)], tenantInfo{name: tenant, hash: block.FNV1a(tenant)})
	id := uint32(len(list))
	ids[tenant] = id
	t.list.Store(&list)
	t.ids.Store(&ids)
	return id
}

func (t *tenantTable) info(id uint32) tenantInfo { return (*t.list.Load())[id-1] }

func (t *tenantTable) hash(id uint32) uint64 { return t.info(id).hash }

func (t *tenantTable) name(id uint32) string { return t.info(id).name }

// LRU links. With the lru policy, the LRU log (lrulog.go) names a
// replica by its link code: the shard in the top 6 bits, lruOvf for an
// overflow replica, and the replica's number plus one in the low 25 bits.
const (
	lruShardShift = 26
	lruOvf        = 1 << 25
	lruIdxMask    = lruOvf - 1
)

// lruLink is the link code of the replica of handle h.
func lruLink(h uint64) uint32 {
	si, ovf, idx, _ := decodeHandle(h)
	l := uint32(si)<<lruShardShift | (idx + 1)
	if ovf {
		l |= lruOvf
	}
	return l
}

// lruHandle returns the policy handle of link l.
func lruHandle(l uint32) uint64 {
	si, idx := uint8(l>>lruShardShift), l&lruIdxMask-1
	if l&lruOvf != 0 {
		return ovfHandle(si, idx)
	}
	return inlineHandle(si, idx)
}
