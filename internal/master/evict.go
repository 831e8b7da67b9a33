package master

import (
	"time"

	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/policy"
)

// Global eviction.
//
// Every RAM replica not under an eviction order is in the eviction policy
// under a handle unique over the master's lifetime (never a hash of the
// key, so two replicas cannot collide). Leased lookups touch the policy
// (Hit); nothing else does.
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
	m.polMu.Lock()
	budget := m.pol.Len()
	m.polMu.Unlock()
	ordered := 0
	for ; budget > 0 && m.overLow(); budget-- {
		m.polMu.Lock()
		h, ok := m.pol.Victim()
		ref := m.polRefs[h]
		m.polMu.Unlock()
		if !ok {
			break
		}
		m.c.evictAttempts.Add(1)
		n := ref.node
		if n == nil { // unreachable: every policy key has a ref
			m.polRemove(h)
			continue
		}
		n.mu.Lock()
		state, size := m.markEvicting(n, ref, h, nowNs)
		switch state {
		case victimMarked:
			m.polRemove(h)
			c := charge(n, ref.key, size)
			m.addRAMUsed(n, -c)
			n.evicting++
			kind := meta.TaskDrop
			if n.info.SSDBytes > 0 {
				kind = meta.TaskDemote
			}
			id := m.nextTask.Add(1)
			n.tasks[id] = &task{Task: meta.Task{ID: id, Kind: kind, Key: ref.key}}
			n.evictQ = append(n.evictQ, id)
			n.evictByKey[ref.key] = id
			ordered++
			m.c.evictFreed.Add(1)
			m.c.evictFreedBytes.Add(c)
		case victimLeased:
			m.c.evictSkippedLeased.Add(1)
			m.retouch(h)
		case victimGone:
			m.polRemove(h)
		}
		n.mu.Unlock()
	}
	return ordered
}

// markEvicting marks n's RAM replica ref (policy handle h) as evicting
// unless its lease is active. n.mu is held.
func (m *Master) markEvicting(n *node, ref polRef, h uint64, nowNs int64) (victimState, int64) {
	if !n.alive {
		return victimGone, 0
	}
	s := m.shardFor(ref.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	reps := s.m[ref.key]
	i := find(reps, n, meta.TierRAM)
	if i < 0 || reps[i].handle != h || reps[i].evicting {
		return victimGone, 0
	}
	if leaseActive(&reps[i], nowNs) {
		return victimLeased, 0
	}
	reps[i].evicting = true
	return victimMarked, reps[i].size
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
