package master

import (
	"slices"
	"sync/atomic"
)

// The LRU order as an access log.
//
// With the lru policy, the RAM replicas not under an eviction order are
// ordered by their last recorded access, and that order is kept as a log
// of records, each one replica's LRU link (lruLink), appended at every
// access: a replica joining the order, a leased lookup's touch, a leased
// victim's re-touch. Records have positions, consecutive as they are
// appended; a replica in the order holds the position of its latest
// record (replica.seq), so its earlier records are stale, and so are all
// of a replica's records once it leaves the order (seq 0). The oldest
// live record names the least recently used replica: the victim. The
// order is exact LRU, the one a doubly linked list would keep.
//
// A touch so writes one word at the log's end and one in the replica,
// which the lookup has just read. Moving a replica to the front of a
// doubly linked list instead reads and writes its two neighbours, which
// sit anywhere in the index: two cache misses a touch at tens of
// millions of keys, taken one after the other under the lock every
// lookup shares (BENCHMARKS.md, "The master index at scale").
//
// Stale records are dropped when they reach the front (victim) and by a
// sweep, which starts when the log holds three stale records for four
// live ones (plus lruSlack) and walks the log from the front, a chunk at
// a time, keeping the live records in order and packing them into fewer
// chunks. Its work is paid for as it goes: every record appended or gone
// stale meanwhile earns lruSweepWork records of sweeping, so a sweep
// never holds the lock for more than a chunk's walk, and the log stays
// under about twice the live records (4 to 8 bytes a key).
//
// Positions are 31 bits (the replica's top bit says it is in the order)
// and wrap. Only equality is asked of them, and a stale record is swept
// before 2^31 more positions are given out while the index holds under
// about 750 million replicas (a sweep starts after 3/4 of the live
// records plus lruSlack have gone stale, ends within about as many again
// appended, and gives new ranges to at most the chunks it keeps, about
// live positions), so a position names one record. Past that, a stale
// record taken for live would only move its replica's place in the
// order. The log's chunks cover disjoint ranges of positions: a chunk
// gets the next lruChunkLen positions when it is made, and a sweep gives
// the records it keeps positions inside their chunk's range, or inside
// the range of the chunk before, which it fills first. A chunk can stay
// in the log indefinitely (a replica nobody touches or evicts keeps its
// record), so a sweep gives a chunk older than lruRenumberAge a new
// range, the next one not yet given out (lruLog.ahead): otherwise, 2^31
// positions on, a new chunk would cover the old one's range again, and
// a touch of the old record's replica landing on its position would make
// both records live.
const (
	// lruChunkLen is the records of a log chunk: 4096 (16 KiB), so that
	// a sweep's step, one chunk's walk, is tens of microseconds, and the
	// chunk table stays short (25,000 chunks at 100M keys).
	lruChunkLen = 4096
	// lruOn marks a replica in the order; the bits below it are the
	// position of its latest record.
	lruOn      = 1 << 31
	lruPosMask = lruOn - 1
	// lruSweepWork is the records a sweep walks for each record appended
	// or gone stale while it runs. A sweep that starts with the log at
	// 1.75 times the live records walks 7 records for every 3 stale ones
	// it drops; at 3 a record, it drops stale ones faster than they come
	// and ends after about half a live record's worth of appends.
	lruSweepWork = 3
	// lruSlack is the stale records a log holds before a sweep is worth
	// starting however few the live ones: four chunks.
	lruSlack = 4 * lruChunkLen
	// lruWarm is how many records a sweep reads ahead (see sweepChunk).
	lruWarm = 32
	// lruRenumberAge is the age in positions past which a sweep gives a
	// chunk a new range: a quarter of the positions, so that a chunk is
	// renumbered long before the positions come round to its range.
	lruRenumberAge = 1 << 29
)

// lruSink keeps what sweepChunk's read-ahead loads, so that the compiler
// keeps the loads.
var lruSink atomic.Uint32

// lruChunk is one chunk of the log: recs[lo:n] are its records, the
// record at recs[i] at position base+i.
type lruChunk struct {
	base  uint32
	lo, n int32
	recs  [lruChunkLen]uint32
}

// lruLog is the LRU order of a master with the lru policy, under lruMu.
type lruLog struct {
	chunks []*lruChunk // oldest first; the last is the one appended to
	live   int         // replicas in the order
	recs   int         // records in the log, live and stale
	next   uint32      // position of the next record
	// ahead is the ranges after the last chunk's given to chunks a sweep
	// renumbered: the next chunk made starts after them.
	ahead uint32
	// The sweep, while one runs (sweeping): chunks[at] is the next chunk
	// it walks, chunks[out] (out >= 0) the chunk it fills before writing
	// into the one it walks; credit is the records it may walk now.
	sweeping bool
	at, out  int
	credit   int
	spare    *lruChunk // a chunk the sweep emptied, for the next one made
	sweeps   int       // sweeps started, for tests
}

// lruRep returns the replica of link l; lruMu is held (or the replica's
// shard lock, for its own seq).
func (m *Master) lruRep(l uint32) *replica {
	s := &m.shards[l>>lruShardShift]
	idx := l&lruIdxMask - 1
	if l&lruOvf != 0 {
		return &s.ovf(idx).rep
	}
	return &s.ent(idx).rep
}

// lruLive reports whether the record of link l at position pos is live:
// the latest of a replica in the order.
func (m *Master) lruLive(l, pos uint32) bool {
	return m.lruRep(l).seq == lruOn|pos&lruPosMask
}

// lruPush puts replica r (link l) in the order as its most recent member.
// lruMu and r's shard lock are held.
func (m *Master) lruPush(l uint32, r *replica) {
	m.lruLog.live++
	m.lruAppend(l, r)
	m.lruSweep()
}

// lruUnlink takes replica r out of the order: its records go stale.
// lruMu and r's shard lock are held.
func (m *Master) lruUnlink(r *replica) {
	r.seq = 0
	g := &m.lruLog
	g.live--
	if g.sweeping {
		g.credit += lruSweepWork
	}
	m.lruSweep()
}

// lruTouch records an access to the replica of link l, if it is in the
// order and its latest record is not the log's last already. lruMu is
// held; the caller runs lruSweep.
func (m *Master) lruTouch(l uint32) {
	r := m.lruRep(l)
	if r.seq&lruOn != 0 && r.seq != lruOn|(m.lruLog.next-1)&lruPosMask {
		m.lruAppend(l, r)
	}
}

// lruAppend appends a record of link l, the latest of replica r.
func (m *Master) lruAppend(l uint32, r *replica) {
	g := &m.lruLog
	var t *lruChunk
	if k := len(g.chunks); k > 0 {
		t = g.chunks[k-1]
	}
	if t == nil || t.n == lruChunkLen {
		t = g.spare
		g.spare = nil
		if t == nil {
			t = new(lruChunk)
		}
		g.next = (g.next + g.ahead*lruChunkLen) & lruPosMask
		g.ahead = 0
		t.base, t.lo, t.n = g.next, 0, 0
		g.chunks = append(g.chunks, t)
	}
	t.recs[t.n] = l
	t.n++
	r.seq = lruOn | g.next
	g.next = (g.next + 1) & lruPosMask
	g.recs++
	if g.sweeping {
		g.credit += lruSweepWork
	}
}

// lruVictim returns the link of the least recently used replica, dropping
// the stale records in front of it; 0 when the order is empty. It drops
// at most lruChunkLen stale records a call and then returns 0 and more
// true, for the caller to release lruMu and ask again: the stale records
// in front can number as many as the live ones, and every leased lookup
// waits on lruMu, so a search holds it for at most a chunk's walk, as a
// sweep's step does.
func (m *Master) lruVictim() (l uint32, more bool) {
	g := &m.lruLog
	walked := 0
	for len(g.chunks) > 0 {
		c := g.chunks[0]
		for ; c.lo < c.n; c.lo++ {
			if l := c.recs[c.lo]; m.lruLive(l, c.base+uint32(c.lo)) {
				return l, false
			}
			g.recs--
			if walked++; walked == lruChunkLen {
				c.lo++
				return 0, true
			}
		}
		if len(g.chunks) == 1 {
			break // the chunk appended to stays
		}
		g.dropChunk(0)
	}
	return 0, false
}

// dropChunk removes the empty chunk chunks[i], keeping the sweep's
// indices on their chunks.
func (g *lruLog) dropChunk(i int) {
	c := g.chunks[i]
	g.chunks = slices.Delete(g.chunks, i, i+1)
	if g.at > i {
		g.at--
	}
	switch {
	case g.out == i:
		g.out = -1
	case g.out > i:
		g.out--
	}
	if g.spare == nil {
		g.spare = c
	}
}

// lruSweep starts a sweep when the stale records are due one, and walks
// as many chunks as the sweep's credit pays for. lruMu is held.
func (m *Master) lruSweep() {
	g := &m.lruLog
	if !g.sweeping {
		if g.recs-g.live <= g.live/4*3+lruSlack {
			return
		}
		g.sweeping, g.at, g.out, g.credit = true, 0, -1, 0
		g.sweeps++
	}
	for g.sweeping {
		if g.at >= len(g.chunks)-1 { // the chunk appended to is not swept
			g.sweeping, g.out = false, -1
			return
		}
		c := g.chunks[g.at]
		w := int(c.n - c.lo)
		if g.credit < w {
			return
		}
		g.credit -= w
		m.sweepChunk()
	}
}

// sweepChunk walks chunks[at]: its live records go, in order, to the end
// of chunks[out] while that has room and then to the front of the chunk
// itself, their replicas' seq following; its stale records are dropped.
// An emptied chunk leaves the log. The replicas are read a group of
// lruWarm ahead, so that their cache misses overlap.
func (m *Master) sweepChunk() {
	g := &m.lruLog
	c := g.chunks[g.at]
	var o *lruChunk
	if g.out >= 0 {
		o = g.chunks[g.out]
	}
	// base is the chunk's range as its records were written, nb the one
	// the records it keeps get: when the chunk is old, a new range, the
	// next not given out (after the last chunk's and the ones given out
	// since), taken when the first record is kept in the chunk.
	frontier := (g.chunks[len(g.chunks)-1].base + (g.ahead+1)*lruChunkLen) & lruPosMask
	base, nb := c.base, c.base
	renumber := (frontier-base)&lruPosMask > lruRenumberAge
	var w int32
	var hint uint32
	var reps [lruWarm]*replica
	for i := c.lo; i < c.n; i++ {
		k := (i - c.lo) % lruWarm
		if k == 0 {
			for j, l := range c.recs[i:min(i+lruWarm, c.n)] {
				reps[j] = m.lruRep(l)
				hint ^= reps[j].seq
			}
		}
		l, r := c.recs[i], reps[k]
		if r.seq != lruOn|(base+uint32(i))&lruPosMask {
			g.recs--
			continue
		}
		if o != nil && o.n < lruChunkLen {
			o.recs[o.n] = l
			r.seq = lruOn | (o.base+uint32(o.n))&lruPosMask
			o.n++
			continue
		}
		o = nil
		if renumber {
			nb, renumber = frontier, false
			g.ahead++
		}
		c.recs[w] = l
		r.seq = lruOn | (nb+uint32(w))&lruPosMask
		w++
	}
	lruSink.Store(hint) // once a chunk: keeps the plain loads above
	c.base, c.lo, c.n = nb, 0, w
	if w == 0 {
		g.dropChunk(g.at)
		return
	}
	g.out = g.at
	g.at++
}
