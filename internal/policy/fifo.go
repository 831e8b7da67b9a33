package policy

// FIFO evicts the block that became resident first; hits do not reorder.
// Every operation is O(1) and allocates nothing once the cache has been
// full.
type FIFO struct {
	l lists
}

var _ Eviction = (*FIFO)(nil)

const fifoList uint8 = 0

// NewFIFO returns an empty FIFO for a cache of capacity blocks.
func NewFIFO(capacity int) *FIFO {
	p := &FIFO{}
	p.l.init(1, capacity+1)
	return p
}

// Name returns "fifo".
func (p *FIFO) Name() string { return "fifo" }

// Insert appends a.Key to the queue.
func (p *FIFO) Insert(a Access) { p.l.pushFront(fifoList, a.Key) }

// Hit does nothing: FIFO ignores reuse.
func (p *FIFO) Hit(Access) {}

// Victim returns the oldest resident block.
func (p *FIFO) Victim() (Key, bool) {
	id := p.l.back(fifoList)
	if id == nilNode {
		return 0, false
	}
	return p.l.nodes[id].key, true
}

// Remove forgets k.
func (p *FIFO) Remove(k Key) {
	if id, ok := p.l.lookup(k); ok {
		p.l.del(id)
	}
}

// Contains reports whether k is resident.
func (p *FIFO) Contains(k Key) bool {
	_, ok := p.l.lookup(k)
	return ok
}

// Len returns the number of resident blocks.
func (p *FIFO) Len() int { return p.l.len(fifoList) }

// Footprint returns the number of keys the policy tracks.
func (p *FIFO) Footprint() int { return p.l.index.len() }

// CheckInvariants verifies the policy's internal structure.
func (p *FIFO) CheckInvariants() error { return p.l.check() }
