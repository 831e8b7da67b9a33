package master

import (
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/policy"
)

// Global eviction.
//
// Every RAM replica not under an eviction order is in the eviction policy
// under a handle that says where the replica is in the index (index.go):
// never a hash of the key, so two replicas cannot collide. A replica
// enters and leaves the policy under its shard's lock. Leased lookups
// touch the policy (Hit); nothing else does.
//
// Pool RAM usage is computed from the index, not from the nodes' reports:
// the sum over live nodes of their RAM replicas' sizes rounded up to whole
// slots (NodeInfo.BlockSize), divided by the sum of their RAMBytes. The index
// is what the master's victims and the deltas that confirm them change, so
// the projection is exact and a pass never double-counts a victim that a
// lagging usage report still includes. A replica under an eviction order no
// longer counts.
//
// When an Added delta or a registration takes the usage over
// HighWatermark (or a dropped node shrinks the pool under it), a pass picks
// victims in policy order until the usage is at or under LowWatermark. A
// victim with an active read lease is re-touched (Hit, or re-inserted for a
// policy whose Hit does not move it, like FIFO) and skipped; every victim
// proposed counts in EvictAttempts, every one ordered out in EvictFreed.
// A pass tries each resident replica at most once, so when everything is
// leased it ends having freed less than wanted and the next trigger tries
// again.
//
// An ordered victim is hidden from readers at once and queued for its node
// as a demotion (the node has SSD) or a drop, delivered in the node's next
// heartbeat reply (the reply of the very heartbeat that triggered the pass).
// The node's delta (Removed, or Moved RAM→SSD) confirms it. An order that
// fails, expires unacknowledged, or is acknowledged without its delta is
// withdrawn: the replica is visible again and back in the policy.

// Evict runs an eviction pass if the pool is over its high watermark and
// returns the number of eviction orders it queued. Register, Heartbeat and
// Expire call it; a caller may also drive it from a ticker.
func (m *Master) Evict() int { return m.evict() }

// HoldEviction makes the master order no eviction for d from now, by any
// path (Register, Heartbeat, Expire and Evict all run passes): a new
// leader's index knows nothing of the read leases its predecessor
// granted, and waits them out before it evicts.
func (m *Master) HoldEviction(d time.Duration) {
	_, now := m.now()
	m.holdUntil.Store(now + int64(d))
}

func (m *Master) overHigh() bool {
	total := m.poolRAMBytes.Load()
	return total > 0 && float64(m.poolRAMUsed.Load()) > m.opts.HighWatermark*float64(total)
}

func (m *Master) overLow() bool {
	total := m.poolRAMBytes.Load()
	return total > 0 && float64(m.poolRAMUsed.Load()) > m.opts.LowWatermark*float64(total)
}

type victimState uint8

const (
	victimMarked victimState = iota // ordered out
	victimLeased                    // lease active: skipped
	victimGone                      // the handle names no evictable replica
)

func (m *Master) evict() int {
	if !m.overHigh() {
		return 0
	}
	_, nowNs := m.now()
	if nowNs < m.holdUntil.Load() || !m.evictMu.TryLock() {
		return 0
	}
	defer m.evictMu.Unlock()
	budget := m.policyLen()
	ordered := 0
	for ; budget > 0 && m.overLow(); budget-- {
		h, ok := m.victim()
		if !ok {
			break
		}
		m.c.evictAttempts.Add(1)
		n, key, ok := m.victimAt(h)
		if !ok {
			continue // gone since the policy named it
		}
		n.mu.Lock()
		state, size := m.markEvicting(n, key, h, nowNs)
		switch state {
		case victimMarked:
			c := charge(n, key, size)
			m.addRAMUsed(n, -c)
			n.evicting++
			kind := meta.TaskDrop
			if n.info.SSDBytes > 0 {
				kind = meta.TaskDemote
			}
			id := m.nextTask.Add(1)
			n.tasks[id] = &task{Task: meta.Task{ID: id, Kind: kind, Key: key}}
			n.evictQ = append(n.evictQ, id)
			n.evictByKey[key] = id
			ordered++
			m.c.evictFreed.Add(1)
			m.c.evictFreedBytes.Add(c)
		case victimLeased:
			m.c.evictSkippedLeased.Add(1)
			if !m.lru { // markEvicting re-touched it in the LRU log
				m.retouch(h)
			}
		}
		n.mu.Unlock()
	}
	return ordered
}

// policyLen returns the number of replicas in the eviction order.
func (m *Master) policyLen() int {
	if !m.lru {
		m.polMu.Lock()
		defer m.polMu.Unlock()
		return m.pol.Len()
	}
	m.lruMu.Lock()
	defer m.lruMu.Unlock()
	return m.lruLog.live
}

// victim returns the handle of the replica the policy would evict next:
// with lru, the LRU log's oldest live record.
func (m *Master) victim() (uint64, bool) {
	if !m.lru {
		m.polMu.Lock()
		defer m.polMu.Unlock()
		return m.pol.Victim()
	}
	for {
		m.lruMu.Lock()
		l, more := m.lruVictim()
		m.lruMu.Unlock()
		switch {
		case l != 0:
			return lruHandle(l), true
		case !more:
			return 0, false
		}
		// The search stopped after a chunk's walk of stale records: the
		// lock is let go for the lookups waiting on it.
	}
}

// victimAt returns the node and key of the RAM replica policy handle h
// names, read under its shard's read lock; false when the place holds no
// replica in the policy (it left since the policy named it).
func (m *Master) victimAt(h uint64) (*node, block.Key, bool) {
	si, _, _, ok := decodeHandle(h)
	if !ok {
		return nil, block.Key{}, false
	}
	s := &m.shards[si]
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ei := s.repAt(h)
	if r == nil || r.tier() != meta.TierRAM || r.evicting() {
		return nil, block.Key{}, false
	}
	return m.nodeAt(r.node), s.keyOf(s.ent(ei)), true
}

// markEvicting marks n's RAM replica of key, at policy handle h, as
// evicting and takes it out of the policy, unless its lease is active.
// The place is checked again under the shard's lock: the replica there
// may have gone, or be another key's, since victimAt read it. n.mu is
// held.
func (m *Master) markEvicting(n *node, key block.Key, h uint64, nowNs int64) (victimState, int64) {
	if !n.alive {
		return victimGone, 0
	}
	p := m.keyAt(key, false)
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ei := s.repAt(h)
	if r == nil || r.node != n.num || r.tier() != meta.TierRAM || r.evicting() ||
		!s.matches(s.ent(ei), p.tid, key.ID, key.Name) {
		return victimGone, 0
	}
	nowMs := m.msNow(nowNs)
	if m.leaseActive(r, nowMs) {
		if m.lru { // re-touch: away from the eviction end
			m.lruMu.Lock()
			m.lruTouch(lruLink(h))
			m.lruSweep()
			m.lruMu.Unlock()
		}
		return victimLeased, 0
	}
	m.polRemove(s, h, r)
	r.setEvicting(true)
	return victimMarked, r.size()
}

// retouch moves a leased victim away from the eviction end of the policy:
// a Hit, or for a policy whose Hit leaves it the victim (FIFO), a
// re-insertion.
func (m *Master) retouch(h uint64) {
	m.polMu.Lock()
	defer m.polMu.Unlock()
	if !m.pol.Contains(h) {
		return
	}
	m.polSeq++
	m.pol.Hit(policy.Access{Key: h, Time: m.polSeq})
	if v, ok := m.pol.Victim(); ok && v == h {
		m.pol.Remove(h)
		m.polSeq++
		m.pol.Insert(policy.Access{Key: h, Time: m.polSeq})
	}
}
