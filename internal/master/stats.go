package master

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/kvpool/kvpool/internal/meta"
)

// counters are the master's event counts and gauges (atomics).
type counters struct {
	registers, heartbeats, nodesDropped, placements atomic.Int64
	ramReplicas, ssdReplicas                        atomic.Int64
	deltaUnknown, resultsIgnored                    atomic.Int64
	leasesGranted                                   atomic.Int64
	// indexFull counts replicas refused because their shard held
	// maxEntries keys or overflow replicas (index.go).
	indexFull atomic.Int64

	evictAttempts, evictFreed, evictFreedBytes, evictSkippedLeased atomic.Int64
	evictConfirmed, evictFailed, evictExpired                      atomic.Int64

	promoAdmitted, promoCompleted, promoCompletedBytes        atomic.Int64
	promoRejectedFrequency, promoRejectedWatermark            atomic.Int64
	promoRejectedCap, promoFailed, promoExpired, promoIgnored atomic.Int64
	promoInFlight, promoQueued                                atomic.Int64
}

// PromotionStats counts SSD→RAM promotion decisions and outcomes. Every
// admitted promotion ends exactly once, so at any moment
// Admitted = Completed + Failed + Expired + InFlight.
type PromotionStats struct {
	// Admitted promotions (queued for their node).
	Admitted int64
	// Completed promotions (the node reported success) and the bytes they
	// moved.
	Completed, CompletedBytes int64
	// RejectedFrequency counts SSD-hit reports whose block had not yet
	// reached Threshold hits on that node; RejectedWatermark those at the
	// threshold refused because the node's RAM was at RAMWatermark;
	// RejectedCap those refused because the node's queue held QueueCap
	// promotions.
	RejectedFrequency, RejectedWatermark, RejectedCap int64
	// Failed promotions (the node reported failure).
	Failed int64
	// Expired promotions: handed out and not acknowledged within
	// TaskTimeout, or still open when their node was dropped or
	// re-registered.
	Expired int64
	// InFlight promotions: admitted and not yet ended (Queued of them not
	// yet handed out).
	InFlight, Queued int64
	// Ignored SSD-hit reports: the block was already in the node's RAM or
	// already had a promotion open there.
	Ignored int64
}

// Stats is a snapshot of the master's counters.
type Stats struct {
	// NodesLive counts registered nodes within their TTL; NodesDropped the
	// nodes dropped for silence so far.
	NodesLive, NodesDropped int64
	// Registers and Heartbeats accepted.
	Registers, Heartbeats int64
	// RAMReplicas and SSDReplicas in the index.
	RAMReplicas, SSDReplicas int64
	// PoolRAMBytes and PoolRAMUsed: the live nodes' RAM and the index's
	// usage of it (see Evict).
	PoolRAMBytes, PoolRAMUsed int64
	// Lookups calls, the keys they asked for and the prefix keys they
	// found.
	Lookups, LookupKeys, LookupHitKeys int64
	// LeasesGranted counts replica leases granted or extended by leased
	// lookups; LeasesActive the replicas whose lease runs now, and those
	// whose lease ended in the current window of the lease counts (a
	// window is 2 ms or at most LeaseTTL/63: 64 ms at the default 5 s;
	// leases.go).
	LeasesGranted, LeasesActive int64
	// Placements counts successful Place calls.
	Placements int64
	// EvictAttempts counts victims the policy proposed; EvictFreed those
	// ordered out (EvictFreedBytes their RAM), EvictSkippedLeased those
	// skipped for an active lease. EvictConfirmed counts orders the node's
	// delta confirmed; EvictFailed orders the node reported failed (or
	// acknowledged without the delta); EvictExpired orders not acknowledged
	// in time or withdrawn because their node was dropped or re-registered.
	EvictAttempts, EvictFreed, EvictFreedBytes, EvictSkippedLeased int64
	EvictConfirmed, EvictFailed, EvictExpired                      int64
	// DeltaUnknown counts Removed and Moved entries naming a replica the
	// index did not hold; ResultsIgnored task results for tasks already
	// closed or never handed out.
	DeltaUnknown, ResultsIgnored int64
	// IndexFull counts replicas nodes reported that the index could not
	// hold, their shard being at its limit of keys or of overflow
	// replicas (2^25 − 2 each, 2.1 billion over the 64 shards): lookups
	// do not find them.
	IndexFull int64
	// Promotion counts promotion control.
	Promotion PromotionStats
	// Expiring counts the named keys with an expiry still ahead (SetExpiry;
	// keys already hidden by theirs are not counted), over every tenant:
	// the "expires=" of Redis INFO keyspace. KeyCounts gives one tenant's.
	Expiring int64
}

// PromotionStats returns the promotion counters.
func (m *Master) PromotionStats() PromotionStats {
	c := &m.c
	return PromotionStats{
		Admitted:          c.promoAdmitted.Load(),
		Completed:         c.promoCompleted.Load(),
		CompletedBytes:    c.promoCompletedBytes.Load(),
		RejectedFrequency: c.promoRejectedFrequency.Load(),
		RejectedWatermark: c.promoRejectedWatermark.Load(),
		RejectedCap:       c.promoRejectedCap.Load(),
		Failed:            c.promoFailed.Load(),
		Expired:           c.promoExpired.Load(),
		InFlight:          c.promoInFlight.Load(),
		Queued:            c.promoQueued.Load(),
		Ignored:           c.promoIgnored.Load(),
	}
}

// Stats returns a snapshot of the counters. It scans the expiry records
// of named keys to count those expiring (under each shard's read lock in
// turn); the rest are counters.
func (m *Master) Stats() Stats {
	c := &m.c
	_, nowNs := m.now()
	st := Stats{
		NodesDropped:       c.nodesDropped.Load(),
		Registers:          c.registers.Load(),
		Heartbeats:         c.heartbeats.Load(),
		RAMReplicas:        c.ramReplicas.Load(),
		SSDReplicas:        c.ssdReplicas.Load(),
		PoolRAMBytes:       m.poolRAMBytes.Load(),
		PoolRAMUsed:        m.poolRAMUsed.Load(),
		LeasesGranted:      c.leasesGranted.Load(),
		Placements:         c.placements.Load(),
		EvictAttempts:      c.evictAttempts.Load(),
		EvictFreed:         c.evictFreed.Load(),
		EvictFreedBytes:    c.evictFreedBytes.Load(),
		EvictSkippedLeased: c.evictSkippedLeased.Load(),
		EvictConfirmed:     c.evictConfirmed.Load(),
		EvictFailed:        c.evictFailed.Load(),
		EvictExpired:       c.evictExpired.Load(),
		DeltaUnknown:       c.deltaUnknown.Load(),
		ResultsIgnored:     c.resultsIgnored.Load(),
		IndexFull:          c.indexFull.Load(),
		Promotion:          m.PromotionStats(),
	}
	m.nodesMu.RLock()
	for _, n := range m.nodes {
		if n.deadline.Load() >= nowNs {
			st.NodesLive++
		}
	}
	m.nodesMu.RUnlock()
	for i := range m.shards {
		s := &m.shards[i]
		st.Lookups += s.lookups.Load()
		st.LookupKeys += s.lookupKeys.Load()
		st.LookupHitKeys += s.hitKeys.Load()
		st.LeasesActive += m.leasesRunning(s, m.msNow(nowNs))
		s.mu.RLock()
		nowMs := unixMs(nowNs)
		for _, at := range s.exp {
			if at > nowMs {
				st.Expiring++
			}
		}
		s.mu.RUnlock()
	}
	return st
}

// Nodes returns the status of every node the master knows (live ones, and
// silent ones not yet dropped by Expire), sorted by ID.
func (m *Master) Nodes() []meta.NodeStatus {
	now, nowNs := m.now()
	m.nodesMu.RLock()
	ns := make([]*node, 0, len(m.nodes))
	for _, n := range m.nodes {
		ns = append(ns, n)
	}
	m.nodesMu.RUnlock()
	slices.SortFunc(ns, func(a, b *node) int { return cmp.Compare(a.id, b.id) })
	out := make([]meta.NodeStatus, 0, len(ns))
	for _, n := range ns {
		n.mu.Lock()
		if n.alive {
			out = append(out, meta.NodeStatus{
				Info:             n.info,
				Session:          n.session,
				Alive:            n.deadline.Load() >= nowNs,
				LastHeartbeat:    n.lastHB,
				HeartbeatAge:     now.Sub(n.lastHB),
				Reported:         n.reported,
				Indexed:          meta.NodeUsage{RAMUsed: n.ramUsed.Load(), SSDUsed: n.ssdUsed},
				RAMReplicas:      n.ramCount,
				SSDReplicas:      n.ssdCount,
				Evicting:         n.evicting,
				PromotionsQueued: n.promoQueued,
				TasksInFlight:    n.inflight,
			})
		}
		n.mu.Unlock()
	}
	return out
}
