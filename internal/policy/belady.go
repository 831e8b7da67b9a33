package policy

// Belady is the offline optimal policy (Belady, "A study of replacement
// algorithms for a virtual-storage computer", IBM Systems Journal 1966): the
// victim is the resident block whose next use is farthest in the future.
// It needs Access.NextUse on every Insert and Hit (it implements Oracle).
//
// By default the block just inserted is a candidate too, so a block whose
// next use is farther than every resident block's (in particular one never
// used again) is evicted at once: this is optimal for a cache that may
// bypass, which the Cache does by evicting right after inserting. With
// BeladyOptions.NoBypass it is the classic demand-paging OPT, which must
// keep the block it just loaded.
//
// Ties (most often between blocks never used again) go to the block least
// recently accessed, so the result is deterministic.
//
// Insert, Hit and Remove are O(log n), Victim O(1).
type Belady struct {
	h        prioHeap
	noBypass bool
	last     Key  // key of the latest Insert
	fresh    bool // last is resident and has not been touched since
}

var (
	_ Eviction = (*Belady)(nil)
	_ Oracle   = (*Belady)(nil)
)

// BeladyOptions configures a Belady policy. The zero value is the default.
type BeladyOptions struct {
	// NoBypass keeps the block just inserted out of the victim choice
	// (classic OPT). The default lets it be the victim (OPT with bypass).
	NoBypass bool
}

// NewBelady returns an empty Belady policy for a cache of capacity blocks.
func NewBelady(capacity int, opts BeladyOptions) *Belady {
	p := &Belady{noBypass: opts.NoBypass}
	p.h.init(capacity + 1)
	return p
}

// Name returns "belady".
func (p *Belady) Name() string { return "belady" }

// NeedsFuture marks Belady as an Oracle.
func (p *Belady) NeedsFuture() {}

// Insert makes a.Key resident, due next at a.NextUse.
func (p *Belady) Insert(a Access) {
	p.h.push(a.Key, -a.NextUse, a.Time, 0)
	p.last, p.fresh = a.Key, true
}

// Hit records that a.Key is next due at a.NextUse.
func (p *Belady) Hit(a Access) {
	id, ok := p.h.lookup(a.Key)
	if !ok {
		return
	}
	p.h.update(id, -a.NextUse, a.Time)
	if a.Key == p.last {
		p.fresh = false
	}
}

// Victim returns the resident block used farthest in the future.
func (p *Belady) Victim() (Key, bool) {
	id := p.h.top()
	if id == nilNode {
		return 0, false
	}
	if p.noBypass && p.fresh && p.h.nodes[id].key == p.last && p.h.len() > 1 {
		// The best other candidate is one of the root's children.
		id = p.h.heap[1]
		if p.h.len() > 2 && p.h.less(2, 1) {
			id = p.h.heap[2]
		}
	}
	return p.h.nodes[id].key, true
}

// Remove forgets k.
func (p *Belady) Remove(k Key) {
	id, ok := p.h.lookup(k)
	if !ok {
		return
	}
	if k == p.last {
		p.fresh = false
	}
	p.h.del(id)
}

// Contains reports whether k is resident.
func (p *Belady) Contains(k Key) bool {
	_, ok := p.h.lookup(k)
	return ok
}

// Len returns the number of resident blocks.
func (p *Belady) Len() int { return p.h.len() }

// Footprint returns the number of keys the policy tracks.
func (p *Belady) Footprint() int { return p.h.index.len() }

// CheckInvariants verifies the policy's internal structure.
func (p *Belady) CheckInvariants() error { return p.h.check() }
