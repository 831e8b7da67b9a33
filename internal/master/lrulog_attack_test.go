package master

import (
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
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

// TestLRUVictimWalkIsBounded: the stale records in front of the oldest
// live one can number as many as the live ones (keys read once each in
// the order they were stored leave every first record stale, short of a
// sweep), and the victim's search drops them under lruMu, which every
// leased lookup takes: at tens of millions of keys, a stall of seconds.
// One hold of the lock drops at most a chunk's worth (as a sweep's step
// walks at most a chunk); the eviction pass's victim still is the least
// recently used key.
func TestLRUVictimWalkIsBounded(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour, LeaseTTL: time.Millisecond, RecencyResolution: time.Nanosecond})
	const nKeys = 6 * lruChunkLen
	s := register(t, m, info("a", 1<<40, 0), nil)
	for i := uint64(0); i < nKeys; i += 4096 {
		heartbeat(t, m, "a", s, meta.Delta{Added: ram("t", ids(i+1, i+4096)...)}, nil, nil)
	}
	var res meta.LookupResult
	keys := make([]block.Key, 0, 256)
	for i := uint64(0); i < nKeys; i += 256 { // every key read once, in order
		keys = keys[:0]
		for id := i + 1; id <= i+256; id++ {
			keys = append(keys, key("t", id))
		}
		clk.Advance(time.Millisecond)
		if err := m.Locate(keys, true, &res); err != nil {
			t.Fatal(err)
		}
	}
	m.lruMu.Lock()
	g := &m.lruLog
	if g.sweeping || g.recs-g.live < nKeys {
		t.Fatalf("set-up: %d records for %d live, sweeping %v", g.recs, g.live, g.sweeping)
	}
	before := g.recs
	m.lruVictim()
	dropped := before - g.recs
	m.lruMu.Unlock()
	if dropped > lruChunkLen {
		t.Errorf("one search for the victim dropped %d stale records under lruMu, over %d", dropped, lruChunkLen)
	}
	clk.Advance(time.Second) // the leases have ended
	h, ok := m.victim()
	if !ok {
		t.Fatal("no victim")
	}
	if _, k, _ := m.victimAt(h); k.ID != 1 {
		t.Errorf("victim %v, want t/1, read first", k)
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
