package master

import "sync/atomic"

// A read lease is an atomic end on its replica (replica.lease, in
// Master.ms). To say how many leases run without walking the index (a
// metrics scrape would otherwise read every replica: 217 ms at 4M keys),
// each shard also counts its leases by when they end, on a ring of
// leaseSlots slots of 2^leaseShift ms each: a slot's count is the number
// of the shard's replicas whose lease ends in its window. Whoever
// changes a replica's lease (by compare-and-swap) moves the replica's
// one from the window of the old end to that of the new; removing the
// replica takes it away; a lease that runs out leaves it in a window the
// clock has passed, no longer summed. The moves follow the lease values,
// not the clock of the lookup making them, and they commute: two lookups
// extending one lease at once may move its one out of a window before
// the other has moved it in, so a count may dip below zero for a moment,
// but once they are done every window counts exactly its leases. A slot
// names its window, so the ring, twice as long as a lease can run, is
// reused without being cleared: a slot holding an older window holds
// only ended leases and is taken over. Window numbers wrap with the
// clock, so "older" cannot be judged modulo half the turn: a slot last
// used 24.8 to 49.7 days ago would look later than the windows of now
// and refuse their leases until it came round, and so would a lease that
// ended that long ago, moved out of its window. So a slot's window is
// later than another's only if it is at most laterWindows after it (a
// lookup's clock lags another's by far less than that), and a lease that
// ended more than a ring of windows ago (recentLease), whose one went
// into its window long before, leaves it only if the slot still names
// that window (as does every lease removed with its replica: the shard's
// write lock is held, so no move is in flight). That leaves one blind
// spot: a slot last used within laterWindows of 49.7 days ago refuses
// the leases of its windows until the clock comes round to it. (An end
// that ended 49.7 days ago, on a replica untouched since, is in a
// current window again, and counted there if its slot was not taken over
// meanwhile: as leaseActive, which takes such a lease for a running one,
// for one LeaseTTL.)

// leaseSlots is the length of a shard's lease ring (8 bytes a slot).
const leaseSlots = 256

// leaseRing is one shard's lease counts: a slot holds its window's number
// plus one in the high 32 bits (0: none yet) and its count, signed, in
// the low 32 (atomic).
type leaseRing [leaseSlots]atomic.Uint64

// leaseShiftFor returns the slot width, log2 ms, for leases of at most
// span ms: the narrowest that fits a whole lease in half the ring, and at
// least 2 ms, so that a window's number plus one fits in 32 bits.
func leaseShiftFor(span uint32) uint8 {
	s := uint8(1)
	for span>>s+2 > leaseSlots/2 {
		s++
	}
	return s
}

// windowMask masks a window number: the clock's 32 bits less leaseShift.
func (m *Master) windowMask() uint32 { return 1<<(32-uint(m.leaseShift)) - 1 }

// laterWindows is how far after a window, at most, a slot's window counts
// as later (move): four rings.
const laterWindows = 4 * leaseSlots

// laterMax is laterWindows, or less than half the windows' turn when
// that is shorter.
func (m *Master) laterMax() uint32 { return min(m.windowMask()>>1, laterWindows) }

// ringMs is how many ms a ring of windows spans, a quarter of the
// clock's turn at most.
func (m *Master) ringMs() uint64 { return min(uint64(leaseSlots)<<m.leaseShift, 1<<30) }

// recentLease reports whether a lease ending at l may have been set so
// lately that its one is still on its way into its window: l is at most
// a ring of windows before nowMs, or after it by at most a lease span
// and a ring (the clock of the lookup that set it may have run ahead of
// nowMs). A ring here is a quarter of the clock's turn at most.
func (m *Master) recentLease(l, nowMs uint32) bool {
	ring := m.ringMs()
	return uint64(l-nowMs+uint32(ring)) <= 2*ring+uint64(m.leaseSpan)
}

// window returns the number of the window a lease ending at l is in.
func (m *Master) window(l uint32) uint32 { return l >> m.leaseShift }

// move adds d to the count of window w. A slot holding a later window
// (at most later windows ahead) is left alone: w has long ended, and its
// count went with it. One holding an older window, or none, is taken
// over.
func (l *leaseRing) move(w, mask, later uint32, d int32) {
	slot := &l[w&(leaseSlots-1)]
	tag := uint64(w+1) << 32
	for {
		v := slot.Load()
		c := d
		switch {
		case v&^(1<<32-1) == tag:
			c += int32(uint32(v))
		case v>>32 != 0 && (uint32(v>>32)-1-w)&mask <= later:
			return // a later window's slot
		}
		if slot.CompareAndSwap(v, tag|uint64(uint32(c))) {
			return
		}
	}
}

// take takes one from the count of window w if its slot holds w: the
// window of a lease whose one went into it long ago, or was taken with
// the slot.
func (l *leaseRing) take(w uint32) {
	slot := &l[w&(leaseSlots-1)]
	tag := uint64(w+1) << 32
	for {
		v := slot.Load()
		if v&^(1<<32-1) != tag || slot.CompareAndSwap(v, tag|uint64(uint32(v)-1)) {
			return
		}
	}
}

// count returns the leases counted in window w.
func (l *leaseRing) count(w uint32) int64 {
	v := l[w&(leaseSlots-1)].Load()
	if v>>32 != uint64(w+1) {
		return 0
	}
	return int64(int32(uint32(v)))
}

// leasesRunning returns how many of s's replicas hold a lease at nowMs:
// the windows from the one holding nowMs+1 to the one holding
// nowMs+leaseSpan, so give or take the leases that ended in the window of
// nowMs itself (under 2^leaseShift ms ago), which are still counted.
func (m *Master) leasesRunning(s *shard, nowMs uint32) int64 {
	mask := m.windowMask()
	first := m.window(nowMs + 1)
	n := (m.window(nowMs+m.leaseSpan)-first)&mask + 1
	var sum int64
	for i := range n {
		sum += s.leases.count((first + i) & mask)
	}
	return max(sum, 0) // a count below zero for a moment (see above)
}

// leaseActive reports whether r's read lease runs past nowMs: its end is
// at most leaseSpan milliseconds ahead (a lease is never granted further;
// so an end that wrapped round is not taken for a running lease, except,
// conservatively, for one LeaseTTL every 49.7 days).
func (m *Master) leaseActive(r *replica, nowMs uint32) bool {
	return m.leaseRuns(atomic.LoadUint32(&r.lease), nowMs)
}

// leaseRuns reports whether a lease ending at l runs past nowMs.
func (m *Master) leaseRuns(l, nowMs uint32) bool {
	d := l - nowMs
	return l != 0 && d != 0 && d <= m.leaseSpan
}

// extendLease makes r, a replica of s, hold a lease until at least
// untilMs (never shortens a running one) and reports whether it changed
// the lease. The shard's lock is held (for reading is enough). nowMs
// may lag the clock of another lookup that has just extended r's lease
// (it was read first, and its lookup held up since): a lease that looks
// further ahead than a lease can run, by at most a ring of windows, is
// judged again by the clock of now.
func (m *Master) extendLease(s *shard, r *replica, untilMs, nowMs uint32) bool {
	if untilMs == 0 {
		untilMs = 1 // 0 is no lease: a millisecond longer
	}
	judged := false
	for {
		cur := atomic.LoadUint32(&r.lease)
		if d := cur - nowMs; cur != 0 && !judged && d > m.leaseSpan && uint64(d) <= uint64(m.leaseSpan)+m.ringMs() {
			nowMs, judged = m.nowMs(), true
		}
		if m.leaseRuns(cur, nowMs) && (cur-nowMs >= untilMs-nowMs || !m.leaseRuns(untilMs, nowMs)) {
			return false
		}
		if !atomic.CompareAndSwapUint32(&r.lease, cur, untilMs) {
			continue
		}
		if w := m.window(untilMs); cur == 0 || m.window(cur) != w {
			switch {
			case cur == 0:
			case m.recentLease(cur, nowMs):
				// Its one may be still on its way in.
				s.leases.move(m.window(cur), m.windowMask(), m.laterMax(), -1)
			default:
				// Ended over a ring ago: its one went in long since.
				s.leases.take(m.window(cur))
			}
			s.leases.move(w, m.windowMask(), m.laterMax(), 1)
		}
		return true
	}
}

// dropLease uncounts r's lease, r being about to leave s. The shard's
// write lock is held, so every move is done: r's one is in its window's
// slot unless the slot went on to a later window.
func (m *Master) dropLease(s *shard, r *replica) {
	if cur := r.lease; cur != 0 {
		s.leases.take(m.window(cur))
	}
}
