package master

import (
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/meta"
)

// TestLRULogOldRecordAfterWrap: a replica that nobody touches or evicts
// keeps its record in the log indefinitely, and a sweep keeps a record
// inside its chunk's range or the one before, so unless the old chunk is
// given a new range, the positions come round to its range after 2^31
// more records: a touch of that replica landing on its old position
// makes both its records live, and the replica just touched is the LRU
// victim. The test appends for real between white-box jumps of the
// position (each stands for that many records appended and swept away
// while the other keys were read): the sweeps see the whole history.
func TestLRULogOldRecordAfterWrap(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: 1000 * time.Hour, LeaseTTL: time.Hour, RecencyResolution: time.Nanosecond})
	s := register(t, m, info("a", 100*100, 0), nil) // the pool stays far from full
	heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", 1, 2, 3)}, nil, nil)
	var l1, l2, l3 uint32
	for _, l := range lruOrderLinks(m) {
		switch {
		case l1 == 0:
			l1 = l
		case l2 == 0:
			l2 = l
		default:
			l3 = l
		}
	}
	const (
		skip = 1 << 20        // positions a jump passes over first
		jump = 1<<27 - 2*skip // and the most it covers after that
		span = 1<<31 + 1<<29  // the history, in positions
		real = 3 * lruSlack   // records appended for real between jumps: a whole sweep
	)
	m.lruMu.Lock()
	g := &m.lruLog
	covered, collided := 0, false
	sweeps := g.sweeps
	for covered < span && !collided {
		// t/2 and t/3 are read in turn, until a sweep has run and the
		// last chunk is full.
		for i := 0; i < real || g.chunks[len(g.chunks)-1].n < lruChunkLen; i++ {
			m.lruTouch([2]uint32{l2, l3}[i%2])
			if i%32 == 31 {
				m.lruSweep()
			}
			covered++
		}
		// A jump: from skip positions on, it stops at t/1's position if
		// it comes to it, and t/1 is read there.
		p := m.lruRep(l1).seq & lruPosMask
		from := (g.next + skip) & lruPosMask
		if d := (p - from) & lruPosMask; d < jump {
			g.next = p
			covered += skip + int(d)
			m.lruTouch(l1)
			collided = true
			break
		}
		g.next = (from + jump) & lruPosMask
		covered += skip + jump
	}
	if !collided { // t/1 is read last
		m.lruTouch(l1)
	}
	v := lruVictimAll(m)
	sweeps = g.sweeps - sweeps
	m.lruMu.Unlock()
	t.Logf("%d positions, %d sweeps; t/1 read when the log came to its position: %v", covered, sweeps, collided)
	if v != l2 && v != l3 {
		t.Errorf("the LRU victim is %#x, not t/2 (%#x) or t/3 (%#x); t/1 (%#x) was read last", v, l2, l3, l1)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Errorf("invariants: %v", err)
	}
}

// lruOrderLinks returns the links of the log's live records, least
// recent first.
func lruOrderLinks(m *Master) []uint32 {
	m.lruMu.Lock()
	defer m.lruMu.Unlock()
	return lruOrderLinksLocked(m)
}

func lruOrderLinksLocked(m *Master) []uint32 {
	var out []uint32
	for _, c := range m.lruLog.chunks {
		for j := c.lo; j < c.n; j++ {
			if l := c.recs[j]; m.lruLive(l, c.base+uint32(j)) {
				out = append(out, l)
			}
		}
	}
	return out
}

// lruVictimAll is lruVictim asked until it answers (lruMu held).
func lruVictimAll(m *Master) uint32 {
	for {
		if l := m.lruVictim(); l != 0 || m.lruLog.live == 0 {
			return l
		}
	}
}
