package master

import (
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/policy"
)

// Task life cycle (all under the node's mu):
//
//	queued ──deliverTasks──> delivered ──TaskResult / delta──> closed
//	   │                         └──TaskTimeout──> expired
//	   └──node dropped or re-registered──> expired (promotions) / withdrawn (evictions)
//
// A task is in node.tasks from creation until it is closed; the queues
// hold IDs and skip the ones no longer in node.tasks.

// closeEviction closes the eviction order of key on n because the delta
// confirmed it (the RAM replica is gone or demoted).
func (m *Master) closeEviction(n *node, key block.Key) {
	id, ok := n.evictByKey[key]
	if !ok {
		return
	}
	delete(n.evictByKey, key)
	if t := n.tasks[id]; t != nil {
		delete(n.tasks, id)
		if t.delivered {
			n.inflight--
		}
	}
	m.c.evictConfirmed.Add(1)
}

// withdrawEviction closes t, an eviction order the node did not confirm,
// and gives its replica back to the eviction policy.
func (m *Master) withdrawEviction(n *node, t *task) {
	delete(n.tasks, t.ID)
	delete(n.evictByKey, t.Key)
	if t.delivered {
		n.inflight--
	}
	p := m.keyAt(t.Key, false)
	s := p.s
	s.mu.Lock()
	var r *replica
	var h uint64
	if e1 := p.entryOf(t.Key); e1 != 0 {
		r, h = s.findRep(e1-1, n.num, meta.TierRAM)
	}
	if r == nil || !r.evicting() {
		s.mu.Unlock()
		return // unreachable while the invariants hold
	}
	r.setEvicting(false)
	size := r.size()
	m.polInsert(s, h, r)
	s.mu.Unlock()
	n.evicting--
	m.addRAMUsed(n, charge(n, t.Key, size))
}

// closePromotion closes promotion t.
func (m *Master) closePromotion(n *node, t *task) {
	delete(n.tasks, t.ID)
	delete(n.promoByKey, t.Key)
	n.promoWant.Add(-t.charge)
	m.c.promoInFlight.Add(-1)
	if t.delivered {
		n.inflight--
	} else {
		n.promoQueued--
		m.c.promoQueued.Add(-1)
	}
}

// closeAllTasks closes every task of n (the node is being dropped or is
// re-registering): promotions count as expired, eviction orders are
// withdrawn (and counted as expired orders).
func (m *Master) closeAllTasks(n *node) {
	for _, t := range n.tasks {
		if t.Kind == meta.TaskPromote {
			m.closePromotion(n, t)
			m.c.promoExpired.Add(1)
		} else {
			m.withdrawEviction(n, t)
			m.c.evictExpired.Add(1)
		}
	}
	n.evictQ = n.evictQ[:0]
	n.promoQ = n.promoQ[:0]
}

// applyResults closes the tasks a node reports on. n.mu is held.
func (m *Master) applyResults(n *node, done []meta.TaskResult) {
	for _, r := range done {
		t := n.tasks[r.ID]
		if t == nil || !t.delivered {
			// Closed already (an eviction its delta confirmed, an expired
			// task) or never handed out.
			m.c.resultsIgnored.Add(1)
			continue
		}
		switch {
		case t.Kind == meta.TaskPromote && r.OK:
			m.closePromotion(n, t)
			m.c.promoCompleted.Add(1)
			m.c.promoCompletedBytes.Add(r.Bytes)
		case t.Kind == meta.TaskPromote:
			m.closePromotion(n, t)
			m.c.promoFailed.Add(1)
		default:
			// An eviction order whose replica is still indexed: failed, or
			// done without the delta that should confirm it. Either way
			// the index keeps the replica, and it becomes a candidate again.
			m.withdrawEviction(n, t)
			m.c.evictFailed.Add(1)
		}
	}
}

// expireTasks expires n's delivered tasks not acknowledged within
// TaskTimeout. n.mu is held.
func (m *Master) expireTasks(n *node, nowNs int64) {
	if n.inflight == 0 {
		return
	}
	for _, t := range n.tasks {
		if !t.delivered || nowNs <= t.deadline {
			continue
		}
		if t.Kind == meta.TaskPromote {
			m.closePromotion(n, t)
			m.c.promoExpired.Add(1)
		} else {
			m.withdrawEviction(n, t)
			m.c.evictExpired.Add(1)
		}
	}
}

// deliverTasks hands out n's queued eviction orders and up to
// MaxPerHeartbeat promotions, oldest first. n.mu is held.
func (m *Master) deliverTasks(n *node, nowNs int64) []meta.Task {
	nPromo := min(n.promoQueued, m.opts.Promotion.MaxPerHeartbeat)
	if len(n.evictQ)+nPromo == 0 {
		return nil
	}
	out := make([]meta.Task, 0, len(n.evictQ)+nPromo)
	deadline := nowNs + m.taskTimeout
	deliver := func(id uint64) bool {
		t := n.tasks[id]
		if t == nil || t.delivered {
			return false
		}
		t.delivered, t.deadline = true, deadline
		n.inflight++
		out = append(out, t.Task)
		return true
	}
	for _, id := range n.evictQ {
		deliver(id)
	}
	n.evictQ = n.evictQ[:0]
	k, handed := 0, 0
	for k < len(n.promoQ) && handed < nPromo {
		if deliver(n.promoQ[k]) {
			handed++
			n.promoQueued--
			m.c.promoQueued.Add(-1)
		}
		k++
	}
	n.promoQ = n.promoQ[:copy(n.promoQ, n.promoQ[k:])]
	return out
}

// considerPromotions decides on every SSD hit n reports. For each report,
// in order:
//
//   - a block n already holds in RAM, or already has a promotion queued or
//     in flight for, is ignored (Stats.PromotionIgnored; the sketch is not
//     touched);
//   - otherwise the hit is counted in the sketch (per node and block), and
//     if the count is still under Threshold the report increments
//     rejected_frequency (so every report of a block below the threshold
//     counts once);
//   - at or over the threshold, it is rejected_watermark if n has no RAM
//     or if n's RAM usage, counting the promotions already admitted for it
//     and this one (the SSD copy's size in whole slots), would exceed
//     RAMWatermark;
//   - else rejected_cap if n has QueueCap promotions waiting to be handed
//     out;
//   - else admitted: a promotion task is queued for n.
//
// n.mu is held.
func (m *Master) considerPromotions(n *node, hits []block.Key) {
	o := &m.opts.Promotion
	for _, k := range hits {
		if _, ok := n.promoByKey[k]; ok {
			m.c.promoIgnored.Add(1)
			continue
		}
		if m.hasReplica(n, k, meta.TierRAM) {
			m.c.promoIgnored.Add(1)
			continue
		}
		m.sketchMu.Lock()
		if m.sketch == nil {
			// New validated the options, so this cannot fail.
			if sk, err := policy.NewCMSWith(o.SketchKeys, m.sketchOpts); err == nil {
				m.sketch = sk
			}
		}
		reached := m.sketch != nil && m.sketch.Admit(policy.Access{Key: block.Mix64(objectHash(block.FNV1a(k.Tenant), k) ^ n.idHash)})
		m.sketchMu.Unlock()
		if !reached {
			m.c.promoRejectedFrequency.Add(1)
			continue
		}
		c := m.promotionCharge(n, k)
		ramBytes := n.info.RAMBytes
		if ramBytes <= 0 || float64(n.ramUsed.Load()+n.promoWant.Load()+c) > o.RAMWatermark*float64(ramBytes) {
			m.c.promoRejectedWatermark.Add(1)
			continue
		}
		if n.promoQueued >= o.QueueCap {
			m.c.promoRejectedCap.Add(1)
			continue
		}
		id := m.nextTask.Add(1)
		n.tasks[id] = &task{Task: meta.Task{ID: id, Kind: meta.TaskPromote, Key: k}, charge: c}
		n.promoQ = append(n.promoQ, id)
		n.promoByKey[k] = id
		n.promoQueued++
		n.promoWant.Add(c)
		m.c.promoAdmitted.Add(1)
		m.c.promoInFlight.Add(1)
		m.c.promoQueued.Add(1)
	}
}

// promotionCharge is the RAM a promotion of k to n will take: the SSD
// replica's size when indexed, else one slot. n.mu is held.
func (m *Master) promotionCharge(n *node, k block.Key) int64 {
	size := n.info.BlockSize
	p := m.keyAt(k, false)
	p.s.mu.RLock()
	if e1 := p.entryOf(k); e1 != 0 {
		if r, _ := p.s.findRep(e1-1, n.num, meta.TierSSD); r != nil {
			size = r.size()
		}
	}
	p.s.mu.RUnlock()
	return charge(n, k, size)
}
