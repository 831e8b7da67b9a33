package sim

import (
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// redundantAgeFactor is how much longer a last copy may go unused than a
// redundant replica before EvictRedundantFirst prefers to evict the last
// copy: a redundant replica goes first when its age (time since its last
// local use) is at least 1/4 of the policy victim's age. 4 is the cost
// ratio of losing each: a lost replica costs a fetch (a 160 MiB block
// crosses a 100 Gbps NIC in 13 ms), a lost last copy a recompute (an 8k
// prefill takes 1.0 s for 16 blocks, 63 ms a block; docs/design.md,
// "Cost model"), about 4.7 times more.
const redundantAgeFactor = 4

// redundantCompactSlack bounds the stale entries a redundant queue may
// hold beyond 4 × the RAM capacity before it is compacted (amortised O(1)
// per push; the constant only keeps tiny caches from compacting often).
const redundantCompactSlack = 1024

// stamp is one entry of a redundant queue: a key and the local access
// time it had when pushed.
type stamp struct {
	key policy.Key
	t   int64
}

// redundantQueue holds an instance's candidate redundant replicas in the
// order they were pushed (on a local access, or when another instance
// gained a replica), oldest first. Entries are invalidated lazily: one is
// live while its key is still in the instance's RAM with the same last
// access time and still held by another instance.
type redundantQueue struct {
	q    []stamp
	head int
}

func (r *redundantQueue) push(k policy.Key, t int64) { r.q = append(r.q, stamp{k, t}) }

// initJoint turns on the state the joint options need.
func (s *simulator) initJoint() {
	o := s.opts
	s.joint = o.Routing == RoutingJoint
	s.hotRepl = o.Replication == ReplicateHot && o.Mode == ModeGlobal
	s.redFirst = o.EvictRedundantFirst && o.Mode == ModeGlobal
	if s.hotRepl {
		s.asks = make(map[policy.Key]int32)
	}
	for i := range s.inst {
		in := &s.inst[i]
		if s.joint || s.hotRepl {
			in.pending = make(map[policy.Key]int32)
		}
		if s.redFirst {
			in.last = make(map[policy.Key]int64)
		}
	}
}

// asked counts a lookup of req's keys (ReplicateHot's access counts).
func (s *simulator) asked(req *trace.Request) {
	if s.asks == nil {
		return
	}
	for _, k := range req.HashIDs {
		s.asks[k]++
	}
}

// routed records that req will run on instance i: its keys become pending
// there until it stores them.
func (s *simulator) routed(i int, req *trace.Request) {
	if !s.cached {
		return
	}
	if p := s.inst[i].pending; p != nil {
		for _, k := range req.HashIDs {
			p[k]++
		}
	}
}

// stored ends sorted request r's pending keys on instance i.
func (s *simulator) stored(i, r int) {
	p := s.inst[i].pending
	if p == nil {
		return
	}
	for _, k := range s.reqs[s.order[r]].HashIDs {
		if p[k] <= 1 {
			delete(p, k)
		} else {
			p[k]--
		}
	}
}

// lateBind extends sorted request r's reuse, now at the head of instance
// i's queue, by the leading blocks past its planned prefix that are in i's
// RAM now; they count as local RAM hits.
func (s *simulator) lateBind(i, r int) {
	in := &s.inst[i]
	rs := &s.rs[r]
	rec := &s.records[r]
	req := &s.reqs[s.order[r]]
	j := rs.reusedBlocks
	for ; j < len(req.HashIDs) && in.ram.Contains(req.HashIDs[j]); j++ {
		tok := min(trace.BlockTokens, req.InputLength-j*trace.BlockTokens)
		rec.HitTokens[LocalRAM] += tok
		rec.HitBlocks[LocalRAM]++
		rs.reusedTokens += tok
	}
	s.lateBlocks += int64(j - rs.reusedBlocks)
	rs.reusedBlocks = j
}

// heldElsewhere reports whether an instance other than i holds k.
func (s *simulator) heldElsewhere(k policy.Key, i int) bool {
	for _, h := range s.idx[k] {
		if h.Inst != int32(i) {
			return true
		}
	}
	return false
}

// fetched reports whether instance i, not holding k in RAM, would have
// fetched k from another instance: k is not in i's SSD and another
// instance holds it.
func (s *simulator) fetched(i int, k policy.Key) bool {
	other := false
	for _, h := range s.idx[k] {
		if h.Inst == int32(i) {
			return false
		}
		other = true
	}
	return other
}

// hot reports whether instance i should keep a fetched k as a replica: at
// least HotAccesses requests asked for it, or another request routed to i
// needs it (pending counts the storing request itself).
func (s *simulator) hot(i int, k policy.Key) bool {
	return int(s.asks[k]) >= s.opts.HotAccesses || s.inst[i].pending[k] > 1
}

// touchSource renews the recency of block j of keys (trace position p)
// at one instance other than i holding it in RAM, as a remote read renews
// its lease in the store, when i uses the block without keeping a replica.
func (s *simulator) touchSource(i int, keys []policy.Key, j int, p int64) {
	for _, h := range s.idx[keys[j]] {
		if h.Inst == int32(i) || h.Tier != tierRAM {
			continue
		}
		a := s.access(keys, j, p)
		a.Time = s.ramTime(int(h.Inst), a.Time)
		s.inst[h.Inst].ram.Access(a)
		if s.redFirst {
			s.localAccess(int(h.Inst), keys[j], a.Time)
		}
		return
	}
}

// holderAdded notes that instance i now holds k in RAM: the other
// instances holding k in RAM now hold a redundant replica.
func (s *simulator) holderAdded(k policy.Key, i int) {
	if !s.redFirst {
		return
	}
	for _, h := range s.idx[k] {
		if h.Inst == int32(i) || h.Tier != tierRAM {
			continue
		}
		in := &s.inst[h.Inst]
		if t, ok := in.last[k]; ok {
			in.red.push(k, t)
		}
	}
}

// localAccess records an access at t to k, resident in instance i's RAM.
func (s *simulator) localAccess(i int, k policy.Key, t int64) {
	in := &s.inst[i]
	in.last[k] = t
	if s.heldElsewhere(k, i) {
		in.red.push(k, t)
		if len(in.red.q)-in.red.head > 4*in.ram.Capacity()+redundantCompactSlack {
			s.compactRedundant(i)
		}
	}
}

// live reports whether entry e of instance i's redundant queue is live.
func (s *simulator) live(i int, e stamp) bool {
	t, ok := s.inst[i].last[e.key]
	return ok && t == e.t && s.heldElsewhere(e.key, i)
}

// compactRedundant drops the stale entries of instance i's redundant
// queue, keeping the order of the rest.
func (s *simulator) compactRedundant(i int) {
	r := &s.inst[i].red
	out := r.q[:0]
	for _, e := range r.q[r.head:] {
		if s.live(i, e) {
			out = append(out, e)
		}
	}
	r.q, r.head = out, 0
}

// makeRoom evicts from instance i's RAM, before a new block is inserted,
// the blocks the insert would make its policy evict, but puts a redundant
// replica in place of each last copy the policy names when the replica's
// age is at least 1/redundantAgeFactor of the last copy's. Each eviction
// costs the policy's Victim plus amortised O(1) queue work. With an
// admission policy the freed slot may go unused (the block may not be
// admitted).
func (s *simulator) makeRoom(i int) {
	in := &s.inst[i]
	c := in.ram
	ev := c.Eviction()
	n := c.Len() + 1
	target := c.Capacity()
	if b, ok := ev.(policy.Batcher); ok {
		target = min(b.EvictTo(n, target), target)
	}
	for ; n > target; n-- {
		v, ok := ev.Victim()
		if !ok {
			return
		}
		if !s.heldElsewhere(v, i) {
			if r, ok := s.oldRedundant(i, v); ok {
				v = r
				s.redundantEvictions++
			}
		}
		c.Remove(v)
		s.ramEvicted(i, v)
	}
}

// oldRedundant pops and returns the oldest live redundant replica of
// instance i when it is old enough to go before last copy v.
func (s *simulator) oldRedundant(i int, v policy.Key) (policy.Key, bool) {
	in := &s.inst[i]
	r := &in.red
	for r.head < len(r.q) && !s.live(i, r.q[r.head]) {
		r.head++
	}
	if r.head == len(r.q) {
		r.q, r.head = r.q[:0], 0
		return 0, false
	}
	e := r.q[r.head]
	vt, ok := in.last[v]
	if ok && redundantAgeFactor*(s.curTime-e.t) < s.curTime-vt {
		return 0, false
	}
	r.head++
	if r.head > redundantCompactSlack && 2*r.head > len(r.q) {
		r.q, r.head = append(r.q[:0], r.q[r.head:]...), 0
	}
	return e.key, true
}
