package master

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/policy"
)

// ms returns the master's clock at unix nanoseconds ns in milliseconds
// since the master was made (rounded down), in 32 bits that wrap every
// 49.7 days: the unit of read leases and recency in the index, compared
// modulo 2^32.
func (m *Master) ms(ns int64) uint32 { return uint32(floorDiv(ns-m.epoch, msNs)) }

// msNow is the index's clock at unix nanoseconds ns: ms, but not behind
// a value it returned before by up to maxStepBackMs (modulo 2^32). The
// master's clock is wall time, which an NTP correction can step back; a
// lease's end is checked against the furthest it can be ahead
// (leaseSpan), so a clock stepped back would make every running lease
// look ended and its replica evictable while it is being read. Held
// here, the clock stalls until wall time catches up, which only holds
// leases a little longer. A bigger step back, or a jump ahead to within
// maxStepBackMs of a multiple of 2^32 ms (49.7 days), is taken as it is.
func (m *Master) msNow(ns int64) uint32 {
	cur := m.ms(ns)
	for {
		last := m.lastMs.Load()
		if back := last - cur; back <= maxStepBackMs {
			return last
		}
		if m.lastMs.CompareAndSwap(last, cur) {
			return cur
		}
	}
}

// msCeil is ms rounded up.
func (m *Master) msCeil(ns int64) uint32 { return uint32(-floorDiv(m.epoch-ns, msNs)) }

const msNs = int64(time.Millisecond)

// maxStepBackMs is the largest step back of the wall clock msNow holds
// the index's clock through: an hour.
const maxStepBackMs = 3_600_000

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// visible reports whether readers may see r: its node is alive (within its
// TTL) and no eviction order is pending. The shard lock is held.
func (m *Master) visible(r *replica, nowNs int64) bool {
	return !r.evicting() && m.nodeAt(r.node).deadline.Load() >= nowNs
}

// Lookup finds the longest prefix of ids (blocks of tenant) present on live
// nodes and, for each prefix block, its replicas: RAM before SSD, then by
// node ID. The result goes into dst, whose slices are reused.
//
// With lease true (a Get is coming), every returned replica gets a read
// lease until now+LeaseTTL (an existing longer lease is kept) and every
// returned RAM replica counts as an access for the eviction policy (at most
// one per replica per Options.RecencyResolution). With
// lease false (an existence probe) nothing changes: no lease, no recency,
// no promotion count.
//
// Replicas of a node past its TTL, and replicas under an eviction order,
// are never returned. Lookup runs Expire when a node's TTL may have passed.
// An invalid tenant or a nil dst is an error wrapping ErrBadRequest.
func (m *Master) Lookup(tenant string, ids []uint64, lease bool, dst *meta.LookupResult) error {
	if dst == nil {
		return badRequest("lookup of %d keys of tenant %q: nil result", len(ids), tenant)
	}
	dst.Reset()
	if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
		return fmt.Errorf("%w: lookup: tenant: %w", meta.ErrBadRequest, err)
	}
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	until := nowNs + m.leaseTTL
	th := block.FNV1a(tenant)
	tid := m.tenants.id(tenant)
	granted := 0
	// handles collects the policy handles to touch, in a buffer on the
	// stack. They are touched under polMu, which comes before the shard
	// locks in the lock order (see Master), so between two shards once the
	// buffer is half full, and at the end.
	var handleBuf [64]uint64
	handles := handleBuf[:0]
	if tid != 0 {
		m.warmBatch(th, ids)
	}
	for _, id := range ids {
		h := keyHash(th, id)
		p := keyPlace{s: m.shardOf(h), h: h, tid: tid}
		start := len(dst.Replicas)
		var g int
		g, handles = m.collect(p, block.Key{ID: id}, nowNs, until, lease, dst, handles)
		granted += g
		if len(handles) >= len(handleBuf)/2 {
			m.touch(handles)
			handles = handles[:0]
		}
		if len(dst.Replicas) == start {
			break
		}
		sortReplicas(dst.Replicas[start:])
		dst.Ends = append(dst.Ends, len(dst.Replicas))
	}
	dst.Hit = len(dst.Ends)
	if len(handles) > 0 {
		m.touch(handles)
	}
	var first uint64
	if len(ids) > 0 {
		first = ids[0]
	}
	s := m.shardOf(keyHash(th, first)) // stripe the counters
	s.lookups.Add(1)
	s.lookupKeys.Add(int64(len(ids)))
	s.hitKeys.Add(int64(dst.Hit))
	if granted > 0 {
		m.c.leasesGranted.Add(int64(granted))
	}
	return nil
}

// Locate finds the replicas of each of keys on its own (point lookups, no
// prefix semantics): the lookup of named objects, which have no chain. The
// keys are any mix of named and chain keys, of any tenants; two names
// sharing an id, and a chain key with a name's id, are distinct keys.
// dst.Hit is len(keys) and dst.Block(i) holds key i's replicas (RAM
// before SSD, then by node ID), empty when it is absent. Leases, recency
// and visibility are as Lookup's; a named key whose expiry has come
// (SetExpiry) is absent, as if deleted, though its replicas stay indexed. An invalid key (tenant, or a name over
// block.MaxNameLen) or a nil dst is an error wrapping ErrBadRequest.
func (m *Master) Locate(keys []block.Key, lease bool, dst *meta.LookupResult) error {
	if dst == nil {
		return badRequest("locate %d keys: nil result", len(keys))
	}
	dst.Reset()
	for i := range keys {
		if err := keys[i].Validate(); err != nil {
			return fmt.Errorf("%w: locate: key %d (%v): %w", meta.ErrBadRequest, i, keys[i], err)
		}
	}
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	until := nowNs + m.leaseTTL
	granted, found := 0, 0
	var handleBuf [64]uint64
	handles := handleBuf[:0]
	for _, k := range keys {
		p := m.keyAt(k, false)
		start := len(dst.Replicas)
		var g int
		g, handles = m.collect(p, k, nowNs, until, lease, dst, handles)
		granted += g
		if len(handles) >= len(handleBuf)/2 {
			m.touch(handles)
			handles = handles[:0]
		}
		if len(dst.Replicas) > start {
			found++
			sortReplicas(dst.Replicas[start:])
		}
		dst.Ends = append(dst.Ends, len(dst.Replicas))
	}
	dst.Hit = len(dst.Ends)
	if len(handles) > 0 {
		m.touch(handles)
	}
	if len(keys) > 0 {
		s := m.shardFor(keys[0]) // stripe the counters
		s.lookups.Add(1)
		s.lookupKeys.Add(int64(len(keys)))
		s.hitKeys.Add(int64(found))
	}
	if granted > 0 {
		m.c.leasesGranted.Add(int64(granted))
	}
	return nil
}

// ExistsKeys reports, for each key (named or chain, any tenant), whether
// it is present on a live node and, for a named key, not expired (see
// Locate). It changes nothing. The answers are
// appended to dst[:0]. An invalid key is an error wrapping ErrBadRequest.
func (m *Master) ExistsKeys(keys []block.Key, dst []bool) ([]bool, error) {
	dst = dst[:0]
	for i := range keys {
		if err := keys[i].Validate(); err != nil {
			return dst, fmt.Errorf("%w: exists: key %d (%v): %w", meta.ErrBadRequest, i, keys[i], err)
		}
	}
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	for _, k := range keys {
		p := m.keyAt(k, false)
		p.s.mu.RLock()
		e1 := p.entryOf(k)
		found := e1 != 0 && m.live(p.s, e1-1, nowNs)
		p.s.mu.RUnlock()
		dst = append(dst, found)
	}
	return dst, nil
}

// warmBatch warms the slots and entries of ids (see shard.warm) in
// groups of warmGroup: first every home slot of a group, then each key's
// probe and entry, so that the slots' misses overlap one another and the
// entries' do too, instead of each entry waiting on its own slot.
func (m *Master) warmBatch(th uint64, ids []uint64) {
	var hs [warmGroup]uint64
	var hint uint64
	for len(ids) > 0 {
		g := ids[:min(len(ids), warmGroup)]
		ids = ids[len(g):]
		for i, id := range g {
			hs[i] = keyHash(th, id)
			hint ^= m.shardOf(hs[i]).warmSlot(hs[i])
		}
		for _, h := range hs[:len(g)] {
			hint ^= m.shardOf(h).warm(h)
		}
	}
	_ = hint // the loads are atomic: the compiler keeps them
}

// warmGroup is how many keys warmBatch warms a pass at a time: 32, a
// common batch (a prefix of 32 blocks), whose 32 slot misses fit in the
// core's miss buffers with room to spare.
const warmGroup = 32

// touch records an access to each handle still in the policy, or with
// lru appends a record of each LRU link still in the order to the log:
// under one lock for a whole batch (one per key would serialise lookups
// on it). The replica may have left since collect saw it, and its place
// may hold another replica; a replica is in the order when its seq says
// so (it is zeroed when it leaves), and moving another replica forward
// is only a recency slip.
func (m *Master) touch(handles []uint64) {
	if m.lru {
		m.lruMu.Lock()
		for _, h := range handles {
			m.lruTouch(uint32(h))
		}
		m.lruSweep()
		m.lruMu.Unlock()
		return
	}
	m.polMu.Lock()
	for _, h := range handles {
		if m.pol.Contains(h) {
			m.polSeq++
			m.pol.Hit(policy.Access{Key: h, Time: m.polSeq})
		}
	}
	m.polMu.Unlock()
}

// sortReplicas orders one block's replicas: RAM before SSD, then by node
// ID (an insertion sort: a block has a handful of replicas).
func sortReplicas(rs []meta.Replica) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && replicaLess(&rs[j], &rs[j-1]); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func replicaLess(a, b *meta.Replica) bool {
	if a.Tier != b.Tier {
		return a.Tier < b.Tier
	}
	return a.Node < b.Node
}

// Exists reports, for each id, whether the block is present on a live node
// (each id on its own, not as a prefix). It changes nothing: no lease, no
// recency, no promotion count. The answers are appended to dst[:0].
func (m *Master) Exists(tenant string, ids []uint64, dst []bool) ([]bool, error) {
	dst = dst[:0]
	if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
		return dst, fmt.Errorf("%w: exists: tenant: %w", meta.ErrBadRequest, err)
	}
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	th := block.FNV1a(tenant)
	tid := m.tenants.id(tenant)
	for _, id := range ids {
		h := keyHash(th, id)
		s := m.shardOf(h)
		found := false
		s.mu.RLock()
		if e1 := s.lookup(tid, h, id, ""); e1 != 0 {
			for r := range s.replicas(e1 - 1) {
				if m.visible(r, nowNs) {
					found = true
					break
				}
			}
		}
		s.mu.RUnlock()
		dst = append(dst, found)
	}
	return dst, nil
}

// Query returns every indexed replica of k with its state, for the admin
// key query: including replicas of nodes past their TTL and replicas under
// an eviction order, which readers do not see. Sorted like Lookup. It
// changes nothing.
func (m *Master) Query(k block.Key) []meta.ReplicaStatus {
	_, nowNs := m.now()
	p := m.keyAt(k, false)
	s := p.s
	var out []meta.ReplicaStatus
	s.mu.RLock()
	if e1 := p.entryOf(k); e1 != 0 {
		for r := range s.replicas(e1 - 1) {
			n := m.nodeAt(r.node)
			st := meta.ReplicaStatus{
				Replica:   meta.Replica{Node: n.id, Tier: r.tier(), Size: r.size(), Sum: r.sum},
				NodeAlive: n.deadline.Load() >= nowNs,
				Evicting:  r.evicting(),
			}
			if l := atomic.LoadUint32(&r.lease); l != 0 {
				// The lease's end nearest to now (it is within 2^31 ms).
				now := floorDiv(nowNs-m.epoch, msNs)
				st.LeaseUntil = time.Unix(0, m.epoch+(now+int64(int32(l-uint32(now))))*msNs)
			}
			out = append(out, st)
		}
	}
	s.mu.RUnlock()
	if out == nil {
		out = []meta.ReplicaStatus{}
	}
	slices.SortFunc(out, func(a, b meta.ReplicaStatus) int {
		switch {
		case replicaLess(&a.Replica, &b.Replica):
			return -1
		case replicaLess(&b.Replica, &a.Replica):
			return 1
		}
		return 0
	})
	return out
}

// collect appends the replicas of k (at p; k.Tenant is not read: p has
// its number) visible at nowNs to dst and, with lease, extends their
// leases to until and gathers the policy handles due a touch. It returns
// the leases granted and handles.
func (m *Master) collect(p keyPlace, k block.Key, nowNs, until int64, lease bool, dst *meta.LookupResult, handles []uint64) (int, []uint64) {
	granted := 0
	s := p.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	e1 := s.lookup(p.tid, p.h, k.ID, k.Name)
	if e1 == 0 || s.expired(e1-1, nowNs) {
		return 0, handles
	}
	nodes := *m.nodeTab.Load()
	// The lease's length as the wall clock measures it, from the index's
	// clock (msNow), which may be held behind wall time.
	nowMs := m.msNow(nowNs)
	untilMs := nowMs + (m.msCeil(until) - m.ms(nowNs))
	for r, h := range s.replicas(e1 - 1) {
		n := nodes[r.node-1]
		if r.evicting() || n.deadline.Load() < nowNs {
			continue
		}
		dst.Replicas = append(dst.Replicas, meta.Replica{Node: n.id, Tier: r.tier(), Size: r.size(), Sum: r.sum})
		if !lease {
			continue
		}
		if m.extendLease(s, r, untilMs, nowMs) {
			granted++
		}
		if r.tier() != meta.TierRAM || nowMs-atomic.LoadUint32(&r.touched) < m.recencyMs {
			continue
		}
		atomic.StoreUint32(&r.touched, nowMs)
		if m.lru {
			h = uint64(lruLink(h))
		}
		handles = append(handles, h)
	}
	return granted, handles
}
