package master

import (
	"cmp"
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
// the index, its expiry records (named keys with a replica only), the
// nodes' inventory sets, the usage accounting, the eviction
// policy, the task tables and the counters agree. It is meant for tests and
// debugging: it takes time proportional to the index.
func (m *Master) CheckInvariants() error {
	ns, unlock := m.stopTheWorld()
	defer unlock()

	tally := make(map[*node]*nodeTally, len(ns))
	for _, n := range ns {
		tally[n] = &nodeTally{}
	}
	var tot invariantTotals
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
// index shards': the expiry, eviction and node-table locks, each node's
// lock (by node ID) and the policy lock. It returns the nodes sorted by ID
// and the function that releases the locks in reverse order.
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
	m.polMu.Lock()
	return ns, func() {
		m.polMu.Unlock()
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
	ramReps, ssdReps, inPolicy int64 // from the index
	poolBytes, poolUsed        int64 // RAM of the live nodes
	promos, queued             int64 // promotion tasks, and those not yet delivered
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

// checkShard checks every key of index shard si, adding its replicas to
// their nodes' tallies and to tot. It takes the shard's read lock; the
// caller has stopped the world.
func (m *Master) checkShard(si int, tally map[*node]*nodeTally, tot *invariantTotals) error {
	s := &m.shards[si]
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, at := range s.exp {
		switch {
		case k.Name == "":
			return invariantError("chain key %v has an expiry record", k)
		case at <= 0:
			return invariantError("key %v has expiry %d (want a unix time in ms > 0)", k, at)
		case len(s.m[k]) == 0:
			return invariantError("key %v has an expiry record and no replica", k)
		}
	}
	for k, reps := range s.m {
		if len(reps) == 0 {
			return invariantError("key %v has an empty replica list", k)
		}
		if m.shardFor(k) != s {
			return invariantError("key %v is in shard %d, not its own", k, si)
		}
		for i := range reps {
			if err := m.checkReplica(k, reps, i, tally); err != nil {
				return err
			}
			r := &reps[i]
			if r.tier == meta.TierRAM {
				tot.ramReps++
				if !r.evicting {
					tot.inPolicy++
				}
			} else {
				tot.ssdReps++
			}
		}
	}
	return nil
}

// checkTotals compares tot with the eviction policy, the counters, the
// pool gauges and the promotion statistics. The caller has stopped the
// world.
func (m *Master) checkTotals(tot *invariantTotals) error {
	switch {
	case m.pol.Len() != int(tot.inPolicy) || len(m.polRefs) != int(tot.inPolicy):
		return invariantError("policy holds %d keys and %d refs, index has %d evictable RAM replicas", m.pol.Len(), len(m.polRefs), tot.inPolicy)
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
	for h, ref := range m.polRefs {
		if !m.pol.Contains(h) {
			return invariantError("policy ref %d (%v on %s) not in the policy", h, ref.key, ref.node.id)
		}
	}
	return nil
}

// checkReplica checks replica i of key k and adds it to its node's tally.
func (m *Master) checkReplica(k block.Key, reps []replica, i int, tally map[*node]*nodeTally) error {
	r := &reps[i]
	t := tally[r.node]
	switch {
	case t == nil:
		return invariantError("%v: replica on node %q, which is not registered", k, r.node.id)
	case !r.node.alive:
		return invariantError("%v: replica on dropped node %q", k, r.node.id)
	case !r.tier.Valid():
		return invariantError("%v on %q: bad tier %v", k, r.node.id, r.tier)
	}
	for j := range i {
		if reps[j].node == r.node && reps[j].tier == r.tier {
			return invariantError("%v: two %v replicas on %q", k, r.tier, r.node.id)
		}
	}
	t.items++
	if r.tier == meta.TierSSD {
		if r.handle != 0 || r.evicting {
			return invariantError("%v: SSD replica on %q has handle %d, evicting %v", k, r.node.id, r.handle, r.evicting)
		}
		t.ssd++
		t.ssdUsed += r.size
		return nil
	}
	t.ram++
	if r.handle == 0 {
		return invariantError("%v: RAM replica on %q has no policy handle", k, r.node.id)
	}
	if r.evicting {
		t.evicting++
		if m.pol.Contains(r.handle) {
			return invariantError("%v on %q: evicting, yet still in the policy", k, r.node.id)
		}
		id, ok := r.node.evictByKey[k]
		if tk := r.node.tasks[id]; !ok || tk == nil || tk.Kind == meta.TaskPromote {
			return invariantError("%v on %q: evicting without an eviction order", k, r.node.id)
		}
		return nil
	}
	t.ramUsed += charge(r.node, k, r.size)
	if !m.pol.Contains(r.handle) {
		return invariantError("%v on %q: RAM replica (handle %d) not in the policy", k, r.node.id, r.handle)
	}
	if ref := m.polRefs[r.handle]; ref.key != k || ref.node != r.node {
		return invariantError("%v on %q: policy ref of handle %d names %v on %p", k, r.node.id, r.handle, ref.key, ref.node)
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
