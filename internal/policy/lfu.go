package policy

// LFU evicts the least frequently used block, aged by LFU-DA ("LFU with
// dynamic aging", Arlitt, Cherkasova, Dilley, Friedrich and Jin, "Evaluating
// content management techniques for Web proxy caches", 2000).
//
// Each resident block has priority L + count, where count is its number of
// accesses since it became resident and L is the cache's inflation value:
// the priority of the last evicted block. The victim is the block with the
// lowest priority, ties going to the least recently used. Because L rises
// with every eviction, a block that was popular long ago but is no longer
// accessed eventually falls below newcomers; this ages counts without the
// periodic O(n) halving pass of the "halve every N accesses" scheme, keeps
// every operation O(log n), and with equal block sizes and costs is exactly
// GreedyDual-Size-Frequency, the best-studied aged LFU.
//
// Insert, Hit, Remove are O(log n), Victim O(1); nothing allocates once the
// cache has been full.
type LFU struct {
	h      prioHeap
	age    int64 // L, the inflation value
	victim Key
	picked bool // victim holds the key Victim last returned
}

var _ Eviction = (*LFU)(nil)

// NewLFU returns an empty LFU-DA for a cache of capacity blocks.
func NewLFU(capacity int) *LFU {
	p := &LFU{}
	p.h.init(capacity + 1)
	return p
}

// Name returns "lfu".
func (p *LFU) Name() string { return "lfu" }

// Insert makes a.Key resident with count 1.
func (p *LFU) Insert(a Access) {
	p.h.push(a.Key, p.age+1, a.Time, 1)
	p.picked = false
}

// Hit counts an access to a.Key.
func (p *LFU) Hit(a Access) {
	id, ok := p.h.lookup(a.Key)
	if !ok {
		return
	}
	n := &p.h.nodes[id]
	n.aux++
	p.h.update(id, p.age+n.aux, a.Time)
	p.picked = false
}

// Victim returns the block with the lowest priority.
func (p *LFU) Victim() (Key, bool) {
	id := p.h.top()
	if id == nilNode {
		return 0, false
	}
	p.victim, p.picked = p.h.nodes[id].key, true
	return p.victim, true
}

// Remove forgets k. Removing the key Victim returned is an eviction and
// raises the inflation value to its priority; other removals (explicit
// deletes) do not age the cache.
func (p *LFU) Remove(k Key) {
	id, ok := p.h.lookup(k)
	if !ok {
		return
	}
	if p.picked && k == p.victim {
		p.age = max(p.age, p.h.nodes[id].prio)
	}
	p.picked = false
	p.h.del(id)
}

// Contains reports whether k is resident.
func (p *LFU) Contains(k Key) bool {
	_, ok := p.h.lookup(k)
	return ok
}

// Len returns the number of resident blocks.
func (p *LFU) Len() int { return p.h.len() }

// Footprint returns the number of keys the policy tracks.
func (p *LFU) Footprint() int { return p.h.index.len() }

// CheckInvariants verifies the policy's internal structure.
func (p *LFU) CheckInvariants() error { return p.h.check() }
