package master

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// ErrInvariant is wrapped by the errors CheckInvariants returns.
var ErrInvariant = errors.New("master invariant violated")

func invariantError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, a...))
}

// nodeTally is what the index says about one node.
type nodeTally struct {
	items, ram, ssd, evicting int
	ramUsed, ssdUsed          int64
}

// CheckInvariants stops the world (every lock, in order) and verifies that
// the index's tables (hash slots, entries and their free list, overflow
// replicas and theirs, the name arena, the tenant and node numbers), its
// expiry records (named keys with a replica only), the usage accounting,
// the eviction policy, the task tables and the counters agree. It is meant for tests and
// debugging: it takes time proportional to the index.
func (m *Master) CheckInvariants() error {
	ns, unlock := m.stopTheWorld()
	defer unlock()

	tally := make(map[*node]*nodeTally, len(ns))
	for _, n := range ns {
		tally[n] = &nodeTally{}
		if n.num == 0 || int(n.num) > len(*m.nodeTab.Load()) || m.nodeAt(n.num) != n {
			return invariantError("node %q has number %d, which names another node", n.id, n.num)
		}
	}
	for i, n := range *m.nodeTab.Load() {
		if n != nil && (n.num != uint16(i+1) || m.nodes[n.id] != n) {
			return invariantError("node number %d names node %q (number %d), not in the membership map", i+1, n.id, n.num)
		}
	}
	var tot invariantTotals
	if m.lru {
		var err error
		if tot.onLRU, err = m.checkLRU(); err != nil {
			return err
		}
	}
	for si := range m.shards {
		if err := m.checkShard(si, tally, &tot); err != nil {
			return err
		}
	}
	for _, n := range ns {
		if err := m.checkNode(n, tally[n]); err != nil {
			return err
		}
		tot.addNode(n)
	}
	return m.checkTotals(&tot)
}

// stopTheWorld takes, in the documented lock order, every lock but the
// index shards' and the policy's: the expiry, eviction and node-table
// locks and each node's lock (by node ID). Every change of the index and
// of the policy's membership holds a node's lock, so only recency moves
// meanwhile. It returns the nodes sorted by ID and the function that
// releases the locks in reverse order.
func (m *Master) stopTheWorld() ([]*node, func()) {
	m.expireMu.Lock()
	m.evictMu.Lock()
	m.nodesMu.Lock()
	ns := make([]*node, 0, len(m.nodes))
	for _, n := range m.nodes {
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b *node) int { return cmp.Compare(a.id, b.id) })
	for _, n := range ns {
		n.mu.Lock()
	}
	return ns, func() {
		for i := len(ns) - 1; i >= 0; i-- {
			ns[i].mu.Unlock()
		}
		m.nodesMu.Unlock()
		m.evictMu.Unlock()
		m.expireMu.Unlock()
	}
}

// invariantTotals are the sums CheckInvariants compares with the master's
// counters and gauges.
type invariantTotals struct {
	ramReps, ssdReps, inPolicy int64           // from the index
	onLRU                      map[uint32]bool // the LRU log's live links (lru)
	poolBytes, poolUsed        int64           // RAM of the live nodes
	promos, queued             int64           // promotion tasks, and those not yet delivered
}

// addNode adds node n's RAM and promotion tasks. Called with n.mu held.
func (tot *invariantTotals) addNode(n *node) {
	if n.alive {
		tot.poolBytes += n.info.RAMBytes
		tot.poolUsed += n.ramUsed.Load()
	}
	for _, t := range n.tasks {
		if t.Kind == meta.TaskPromote {
			tot.promos++
			if !t.delivered {
				tot.queued++
			}
		}
	}
}

// checkShard checks index shard si — its hash table, entries, overflow
// replicas, name arena, expiry records and lease counts — and every key
// in it, adding its replicas to their nodes' tallies and to tot. It takes
// the shard's write lock (lookups extend leases under the read lock) and,
// inside it, the policy's; the caller has stopped the world.
func (m *Master) checkShard(si int, tally map[*node]*nodeTally, tot *invariantTotals) error {
	s := &m.shards[si]
	s.mu.Lock()
	defer s.mu.Unlock()
	m.polMu.Lock()
	defer m.polMu.Unlock()
	if err := s.checkTables(); err != nil {
		return fmt.Errorf("shard %d: %w", si, err)
	}
	// inPolicy reports whether the replica of handle h is in the
	// eviction order: live in the LRU log (lru), or in the policy.
	var inPolicy func(h uint64) bool
	if m.lru {
		inPolicy = func(h uint64) bool { return tot.onLRU[lruLink(h)] }
	} else {
		inPolicy = m.pol.Contains
	}
	nameBytes := 0
	for ei := range s.entries() {
		e := s.ent(ei)
		k := s.keyOf(e)
		h := s.hashOf(e)
		if int(h&(numShards-1)) != si {
			return invariantError("key %v is in shard %d, not its own", k, si)
		}
		if got := s.lookup(e.tenant, h, e.id(), k.Name); got != ei+1 {
			return invariantError("key %v (entry %d) is found at entry %d: a duplicate, or off its probe run", k, ei, int64(got)-1)
		}
		if !hasReps(e) {
			return invariantError("key %v has no replica", k)
		}
		if e.name != 0 {
			name := s.nameAt(e.name - 1)
			nameBytes += binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(name))) + len(name)
		}
		var seen []*replica
		for r, rh := range s.replicas(ei) {
			if err := m.checkReplica(k, r, rh, seen, tally, inPolicy); err != nil {
				return err
			}
			if m.lru && !inPolicy(rh) && r.seq != 0 {
				return invariantError("%v: replica out of the LRU order has seq %#x", k, r.seq)
			}
			seen = append(seen, r)
			if r.tier() == meta.TierRAM {
				tot.ramReps++
				if !r.evicting() {
					tot.inPolicy++
				}
			} else {
				tot.ssdReps++
			}
		}
	}
	if err := m.checkLeases(s); err != nil {
		return err
	}
	if nameBytes+s.nameGarbage != len(s.names) {
		return invariantError("shard %d: names take %d bytes and %d are garbage, arena has %d", si, nameBytes, s.nameGarbage, len(s.names))
	}
	for ei, at := range s.exp {
		switch {
		case ei >= s.nEnts || s.ent(ei).tenant == 0:
			return invariantError("shard %d: expiry record of free entry %d", si, ei)
		case s.ent(ei).name == 0:
			return invariantError("chain key %v has an expiry record", s.keyOf(s.ent(ei)))
		case at <= 0:
			return invariantError("key %v has expiry %d (want a unix time in ms > 0)", s.keyOf(s.ent(ei)), at)
		}
	}
	return nil
}

// checkLeases checks s's lease counts: no window from the current one to
// a lease TTL ahead counts more than the replicas whose lease ends in it.
// It counts exactly as many but for leases that ended 49.7 days ago on
// replicas untouched since: those fall in a current window again, while
// their count may have gone with the slot (leases.go). The tests of the
// counts compare them exactly. s.mu is held for writing.
func (m *Master) checkLeases(s *shard) error {
	nowMs, mask := m.nowMs(), m.windowMask()
	first := m.window(nowMs)
	want := make([]int64, (m.window(nowMs+m.leaseSpan)-first)&mask+1)
	for ei := range s.entries() {
		for r := range s.replicas(ei) {
			if l := r.lease; l != 0 {
				if i := (m.window(l) - first) & mask; int(i) < len(want) {
					want[i]++
				}
			}
		}
	}
	for i, w := range want {
		win := (first + uint32(i)) & mask
		if got := s.leases.count(win); got > w {
			return invariantError("shard %d: %d leases end in ms %d to %d, the lease counts say %d", s.si, w, win<<m.leaseShift, (win+1)<<m.leaseShift-1, got)
		}
	}
	return nil
}

// checkTables checks the shard's hash table against its entries, and its
// free lists. The shard's lock is held.
func (s *shard) checkTables() error {
	if len(s.slots)&(len(s.slots)-1) != 0 || (s.keys > 0 && len(s.slots) < minSlots) {
		return invariantError("hash table of %d slots is not a power of two ≥ %d", len(s.slots), minSlots)
	}
	if s.keys*maxLoadDen > len(s.slots)*maxLoadNum {
		return invariantError("hash table holds %d keys in %d slots, over %d/%d", s.keys, len(s.slots), maxLoadNum, maxLoadDen)
	}
	used := 0
	for p, v := range s.slots {
		if v == 0 {
			continue
		}
		used++
		ei := v&slotIdxMask - 1
		if v&slotIdxMask == 0 || ei >= s.nEnts || s.ent(ei).tenant == 0 {
			return invariantError("slot %d names entry %d, which is free or was never handed out (%d were)", p, int64(v&slotIdxMask)-1, s.nEnts)
		}
		e := s.ent(ei)
		if int(e.tenant) > len(*s.tenants.list.Load()) {
			return invariantError("entry %d has tenant number %d, unknown", ei, e.tenant)
		}
		if v&^slotIdxMask != slotTag(s.hashOf(e)) {
			return invariantError("slot %d: tag %#x, entry %d's hash has %#x", p, v>>slotIdxBits, ei, slotTag(s.hashOf(e))>>slotIdxBits)
		}
		if e.name != 0 && (int(e.name-1) >= len(s.names) || !validName(s.names[e.name-1:])) {
			return invariantError("entry %d: name at %d is outside the arena of %d bytes", ei, e.name-1, len(s.names))
		}
	}
	if used != s.keys {
		return invariantError("%d slots in use, %d keys", used, s.keys)
	}
	live, free := 0, 0
	for ei := range s.nEnts {
		if s.ent(ei).tenant != 0 {
			live++
		}
	}
	for f := s.freeEnt; f != 0; f = s.ent(f - 1).more {
		if f-1 >= s.nEnts || s.ent(f-1).tenant != 0 || free > int(s.nEnts) {
			return invariantError("free entry list reaches entry %d: live, out of range or a cycle", int64(f)-1)
		}
		free++
	}
	if live != s.keys || live+free != int(s.nEnts) {
		return invariantError("%d live and %d free entries of %d handed out, %d keys", live, free, s.nEnts, s.keys)
	}
	inUse, freeOvf := 0, 0
	for ei := range s.entries() {
		for o := s.ent(ei).more; o != 0; o = s.ovf(o - 1).next {
			if o-1 >= s.nOvfs || s.ovf(o-1).rep.node == 0 || s.ovf(o-1).owner != ei || inUse > int(s.nOvfs) {
				return invariantError("entry %d: overflow replica %d free, out of range, another's or in a cycle", ei, int64(o)-1)
			}
			inUse++
		}
	}
	for f := s.freeOvf; f != 0; f = s.ovf(f - 1).next {
		if f-1 >= s.nOvfs || s.ovf(f-1).rep.node != 0 || freeOvf > int(s.nOvfs) {
			return invariantError("free overflow list reaches %d: in use, out of range or a cycle", int64(f)-1)
		}
		freeOvf++
	}
	if inUse != s.nOvfUse || inUse+freeOvf != int(s.nOvfs) {
		return invariantError("%d overflow replicas in use and %d free of %d handed out, count says %d", inUse, freeOvf, s.nOvfs, s.nOvfUse)
	}
	return nil
}

// checkLRU walks the LRU log, checking its chunks' positions, its counts
// and that no replica has two live records, and returns the links of the
// live records; checkReplica checks that they are exactly the RAM
// replicas not evicting. The caller has stopped the world, so no replica
// joins or leaves the order; lruMu is taken for the records lookups
// append.
func (m *Master) checkLRU() (map[uint32]bool, error) {
	m.lruMu.Lock()
	defer m.lruMu.Unlock()
	g := &m.lruLog
	on := make(map[uint32]bool, g.live)
	recs := 0
	for i, c := range g.chunks {
		switch {
		case c.lo < 0 || c.lo > c.n || c.n > lruChunkLen:
			return nil, invariantError("LRU log chunk %d holds records %d to %d", i, c.lo, c.n)
		case i > 0 && (c.base-g.chunks[i-1].base)&lruPosMask < lruChunkLen:
			return nil, invariantError("LRU log chunk %d starts at position %d, inside chunk %d's range (from %d)", i, c.base, i-1, g.chunks[i-1].base)
		case i == len(g.chunks)-1 && (c.base+uint32(c.n))&lruPosMask != g.next:
			return nil, invariantError("LRU log's last chunk ends at position %d, next is %d", c.base+uint32(c.n), g.next)
		}
		for j := c.lo; j < c.n; j++ {
			l := c.recs[j]
			s := &m.shards[l>>lruShardShift]
			idx := l&lruIdxMask - 1
			if l&lruIdxMask == 0 || l&lruOvf == 0 && idx >= s.nEnts || l&lruOvf != 0 && idx >= s.nOvfs {
				return nil, invariantError("LRU log record %#x names no replica", l)
			}
			recs++
			if !m.lruLive(l, c.base+uint32(j)) {
				continue
			}
			r := m.lruRep(l)
			switch {
			case on[l]:
				return nil, invariantError("LRU log holds two live records of link %#x", l)
			case l&lruOvf == 0 && s.ent(idx).tenant == 0, r.node == 0 || r.tier() != meta.TierRAM || r.evicting():
				return nil, invariantError("LRU log holds link %#x, a free, SSD or evicting replica", l)
			}
			on[l] = true
		}
	}
	// The chunks' ranges are disjoint: sorted by base, each starts at
	// least a chunk's length after the one before, round the positions.
	bases := make([]uint32, 0, len(g.chunks))
	for _, c := range g.chunks {
		bases = append(bases, c.base)
	}
	slices.Sort(bases)
	for i, b := range bases {
		if len(bases) > 1 && (bases[(i+1)%len(bases)]-b)&lruPosMask < lruChunkLen {
			return nil, invariantError("LRU log chunks at positions %d and %d overlap", b, bases[(i+1)%len(bases)])
		}
	}
	if recs != g.recs || len(on) != g.live {
		return nil, invariantError("LRU log: %d records, %d live; counts say %d, %d", recs, len(on), g.recs, g.live)
	}
	return on, nil
}

// validName reports whether b starts with a uvarint length and that many
// bytes, 1 to block.MaxNameLen.
func validName(b []byte) bool {
	n, w := binary.Uvarint(b)
	return w > 0 && n >= 1 && n <= block.MaxNameLen && uint64(len(b)-w) >= n
}

// checkTotals compares tot with the eviction policy, the counters, the
// pool gauges and the promotion statistics. The caller has stopped the
// world.
func (m *Master) checkTotals(tot *invariantTotals) error {
	inPol := len(tot.onLRU)
	if !m.lru {
		m.polMu.Lock()
		inPol = m.pol.Len()
		m.polMu.Unlock()
	}
	switch {
	case inPol != int(tot.inPolicy):
		// Every evictable RAM replica's handle is in the policy
		// (checkReplica) and handles are distinct places: equal counts
		// mean the policy holds nothing else.
		return invariantError("policy holds %d keys, index has %d evictable RAM replicas", inPol, tot.inPolicy)
	case m.c.ramReplicas.Load() != tot.ramReps || m.c.ssdReplicas.Load() != tot.ssdReps:
		return invariantError("replica counters %d RAM / %d SSD, index has %d / %d", m.c.ramReplicas.Load(), m.c.ssdReplicas.Load(), tot.ramReps, tot.ssdReps)
	case m.poolRAMBytes.Load() != tot.poolBytes || m.poolRAMUsed.Load() != tot.poolUsed:
		return invariantError("pool RAM %d used of %d, nodes sum to %d of %d", m.poolRAMUsed.Load(), m.poolRAMBytes.Load(), tot.poolUsed, tot.poolBytes)
	case m.c.promoInFlight.Load() != tot.promos || m.c.promoQueued.Load() != tot.queued:
		return invariantError("promotion gauges %d in flight / %d queued, tasks say %d / %d", m.c.promoInFlight.Load(), m.c.promoQueued.Load(), tot.promos, tot.queued)
	}
	p := m.PromotionStats()
	if p.Admitted != p.Completed+p.Failed+p.Expired+p.InFlight {
		return invariantError("promotions: admitted %d != completed %d + failed %d + expired %d + in flight %d", p.Admitted, p.Completed, p.Failed, p.Expired, p.InFlight)
	}
	return nil
}

// checkReplica checks replica r of key k, at handle h, against the
// replicas of k seen before it, and adds it to its node's tally. The
// shard's lock and polMu are held.
func (m *Master) checkReplica(k block.Key, r *replica, h uint64, seen []*replica, tally map[*node]*nodeTally, inPolicy func(uint64) bool) error {
	if r.node == 0 || int(r.node) > len(*m.nodeTab.Load()) || m.nodeAt(r.node) == nil {
		return invariantError("%v: replica on node number %d, which names no node", k, r.node)
	}
	n := m.nodeAt(r.node)
	t := tally[n]
	switch {
	case t == nil:
		return invariantError("%v: replica on node %q, which is not registered", k, n.id)
	case !n.alive:
		return invariantError("%v: replica on dropped node %q", k, n.id)
	case r.flags&^(flagSSD|flagEvicting|flagSize40) != 0 || r.size() > meta.MaxItemSize:
		return invariantError("%v on %q: bad flags %#x or size %d", k, n.id, r.flags, r.size())
	}
	for _, o := range seen {
		if o.node == r.node && o.tier() == r.tier() {
			return invariantError("%v: two %v replicas on %q", k, r.tier(), n.id)
		}
	}
	t.items++
	if r.tier() == meta.TierSSD {
		if r.evicting() || inPolicy(h) {
			return invariantError("%v: SSD replica on %q is evicting (%v) or in the policy (%v)", k, n.id, r.evicting(), inPolicy(h))
		}
		t.ssd++
		t.ssdUsed += r.size()
		return nil
	}
	t.ram++
	if r.evicting() {
		t.evicting++
		if inPolicy(h) {
			return invariantError("%v on %q: evicting, yet still in the policy", k, n.id)
		}
		id, ok := n.evictByKey[k]
		if tk := n.tasks[id]; !ok || tk == nil || tk.Kind == meta.TaskPromote {
			return invariantError("%v on %q: evicting without an eviction order", k, n.id)
		}
		return nil
	}
	t.ramUsed += charge(n, k, r.size())
	if !inPolicy(h) {
		return invariantError("%v on %q: RAM replica (handle %#x) not in the policy", k, n.id, h)
	}
	return nil
}

// checkNode compares n's own accounting with the index's tally.
func (m *Master) checkNode(n *node, t *nodeTally) error {
	if !n.alive && (n.ramCount+n.ssdCount > 0 || len(n.tasks) > 0 || n.ramUsed.Load() != 0) {
		return invariantError("dropped node %q keeps %d items, %d tasks, %d RAM bytes", n.id, n.ramCount+n.ssdCount, len(n.tasks), n.ramUsed.Load())
	}
	switch {
	case n.ramCount+n.ssdCount != t.items:
		return invariantError("node %q: counts %d items, index %d", n.id, n.ramCount+n.ssdCount, t.items)
	case n.ramCount != t.ram || n.ssdCount != t.ssd || n.evicting != t.evicting:
		return invariantError("node %q: counts RAM %d SSD %d evicting %d, index %d %d %d", n.id, n.ramCount, n.ssdCount, n.evicting, t.ram, t.ssd, t.evicting)
	case n.ramUsed.Load() != t.ramUsed || n.ssdUsed != t.ssdUsed:
		return invariantError("node %q: usage RAM %d SSD %d, index %d %d", n.id, n.ramUsed.Load(), n.ssdUsed, t.ramUsed, t.ssdUsed)
	}
	var queued, delivered, evictions int
	var want int64
	for id, tk := range n.tasks {
		if tk.ID != id {
			return invariantError("node %q: task %d filed under %d", n.id, tk.ID, id)
		}
		if tk.delivered {
			delivered++
		}
		if tk.Kind == meta.TaskPromote {
			want += tk.charge
			if !tk.delivered {
				queued++
			}
			if n.promoByKey[tk.Key] != id {
				return invariantError("node %q: promotion %d of %v not indexed by key", n.id, id, tk.Key)
			}
		} else {
			evictions++
			if n.evictByKey[tk.Key] != id {
				return invariantError("node %q: eviction order %d of %v not indexed by key", n.id, id, tk.Key)
			}
		}
	}
	switch {
	case queued != n.promoQueued || delivered != n.inflight:
		return invariantError("node %q: %d queued promotions and %d tasks in flight, tables say %d and %d", n.id, n.promoQueued, n.inflight, queued, delivered)
	case evictions != n.evicting || len(n.evictByKey) != evictions || len(n.promoByKey)+evictions != len(n.tasks):
		return invariantError("node %q: %d eviction orders for %d evicting replicas; key tables %d+%d for %d tasks", n.id, evictions, n.evicting, len(n.evictByKey), len(n.promoByKey), len(n.tasks))
	case want != n.promoWant.Load():
		return invariantError("node %q: promotions want %d bytes, gauge says %d", n.id, want, n.promoWant.Load())
	}
	return nil
}
