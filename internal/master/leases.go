package master

import "sync/atomic"

// A read lease is an atomic end on its replica (replica.lease, in
// Master.ms). To say how many leases run without walking the index (a
// metrics scrape would otherwise read every replica: 170 ms at 4M keys),
// each shard also counts its leases by when they end, on a ring of
// leaseSlots slots of 2^leaseShift ms each: the count of a slot is the
// number of the shard's replicas whose lease ends within it. Granting,
// extending and dropping a lease move one count; a lease that simply runs
// out leaves it where it is, in a slot that is behind the clock and no
// longer summed. Slots are tagged with their window (the end's ms shifted
// right by leaseShift), so the ring, twice as long as a lease can run, is
// reused without being cleared: a slot found holding an older window holds
// only ended leases, and is taken over.

// leaseSlots is the length of a shard's lease ring (8 bytes a slot).
const leaseSlots = 256

// leaseRing is one shard's lease counts: a slot holds its window in the
// high 32 bits and its count, signed, in the low 32 (atomic). A count may
// dip below zero for a moment: a lease extended twice at once may have
// its first end uncounted before it was counted.
type leaseRing [leaseSlots]atomic.Uint64

// leaseShiftFor returns the slot width, log2 ms, for leases of at most
// span ms: the narrowest that fits a whole lease in half the ring.
func leaseShiftFor(span uint32) uint8 {
	s := uint8(0)
	for span>>s+2 > leaseSlots/2 {
		s++
	}
	return s
}

// move adds d to the count of window w. A slot holding another window
// holds an older one, whose leases have all ended (no lease runs further
// than half the ring): it is taken over.
func (l *leaseRing) move(w uint32, d int32) {
	slot := &l[w&(leaseSlots-1)]
	for {
		v := slot.Load()
		c := d
		if uint32(v>>32) == w {
			c += int32(uint32(v))
		}
		if slot.CompareAndSwap(v, uint64(w)<<32|uint64(uint32(c))) {
			return
		}
	}
}

// count returns the leases counted in window w.
func (l *leaseRing) count(w uint32) int64 {
	v := l[w&(leaseSlots-1)].Load()
	if uint32(v>>32) != w {
		return 0
	}
	return int64(int32(uint32(v)))
}

// retire clears the slots of windows behind window cur: a slot nobody
// writes keeps its window and count, and 49.7 days on, when the clock
// comes round to that window again, would be read as current. mask is
// Master.windowMask.
func (l *leaseRing) retire(cur, mask uint32) {
	for i := range l {
		v := l[i].Load()
		if v != 0 && (uint32(v>>32)-cur)&mask >= leaseSlots/2 {
			l[i].CompareAndSwap(v, 0)
		}
	}
}

// leaseWindows returns the windows that hold leases running at nowMs:
// from the one holding nowMs+1 to the one holding nowMs+leaseSpan, in
// order (they wrap round with the clock).
func (m *Master) leaseWindows(nowMs uint32) (first uint32, n int) {
	first = (nowMs + 1) >> m.leaseShift
	last := (nowMs + m.leaseSpan) >> m.leaseShift
	return first, int((last-first)&m.windowMask()) + 1
}

// windowMask masks a window number: the clock's 32 bits less leaseShift.
func (m *Master) windowMask() uint32 { return 1<<(32-uint(m.leaseShift)) - 1 }

// leasesRunning returns how many of s's replicas hold a lease at nowMs,
// give or take the leases that ended in the window of nowMs itself (under
// 2^leaseShift ms ago), which are still counted. It retires the ring's
// ended windows.
func (m *Master) leasesRunning(s *shard, nowMs uint32) int64 {
	s.leases.retire(nowMs>>m.leaseShift, m.windowMask())
	first, n := m.leaseWindows(nowMs)
	var sum int64
	for i := range n {
		sum += s.leases.count((first + uint32(i)) & m.windowMask())
	}
	return max(sum, 0)
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

// stillCounted reports whether a lease ending at l is still in its
// shard's ring at nowMs: it runs, or it ended in the window of nowMs.
func (m *Master) stillCounted(l, nowMs uint32) bool {
	return m.leaseRuns(l, nowMs) || (l != 0 && l>>m.leaseShift == nowMs>>m.leaseShift)
}

// extendLease makes r, a replica of s, hold a lease until at least
// untilMs (never shortens a running one) and reports whether it changed
// the lease. The shard's lock is held (for reading is enough).
func (m *Master) extendLease(s *shard, r *replica, untilMs, nowMs uint32) bool {
	if untilMs == 0 {
		untilMs = 1 // 0 is no lease: a millisecond longer
	}
	for {
		cur := atomic.LoadUint32(&r.lease)
		running := m.leaseRuns(cur, nowMs)
		if running && cur-nowMs >= untilMs-nowMs {
			return false
		}
		if !atomic.CompareAndSwapUint32(&r.lease, cur, untilMs) {
			continue
		}
		if w := untilMs >> m.leaseShift; !m.stillCounted(cur, nowMs) || cur>>m.leaseShift != w {
			if m.stillCounted(cur, nowMs) {
				s.leases.move(cur>>m.leaseShift, -1)
			}
			s.leases.move(w, 1)
		}
		return true
	}
}

// dropLease uncounts r's lease, r being about to leave s. The shard's
// write lock is held.
func (m *Master) dropLease(s *shard, r *replica, nowMs uint32) {
	if l := r.lease; m.stillCounted(l, nowMs) {
		s.leases.move(l>>m.leaseShift, -1)
	}
}
