package policy

// LRU evicts the least recently used block. Insert, Hit, Victim and Remove
// are O(1) and allocate nothing once the cache has been full.
type LRU struct {
	l lists
}

var _ Eviction = (*LRU)(nil)

const lruList uint8 = 0

// NewLRU returns an empty LRU for a cache of capacity blocks.
func NewLRU(capacity int) *LRU {
	p := &LRU{}
	p.l.init(1, capacity+1)
	return p
}

// Name returns "lru".
func (p *LRU) Name() string { return "lru" }

// Insert makes a.Key the most recently used block.
func (p *LRU) Insert(a Access) { p.l.pushFront(lruList, a.Key) }

// Hit makes a.Key the most recently used block.
func (p *LRU) Hit(a Access) {
	if id, ok := p.l.lookup(a.Key); ok {
		p.l.moveToFront(id, lruList)
	}
}

// Victim returns the least recently used block.
func (p *LRU) Victim() (Key, bool) {
	id := p.l.back(lruList)
	if id == nilNode {
		return 0, false
	}
	return p.l.nodes[id].key, true
}

// Remove forgets k.
func (p *LRU) Remove(k Key) {
	if id, ok := p.l.lookup(k); ok {
		p.l.del(id)
	}
}

// Contains reports whether k is resident.
func (p *LRU) Contains(k Key) bool {
	_, ok := p.l.lookup(k)
	return ok
}

// Len returns the number of resident blocks.
func (p *LRU) Len() int { return p.l.len(lruList) }

// Footprint returns the number of keys the policy tracks.
func (p *LRU) Footprint() int { return p.l.index.len() }

// CheckInvariants verifies the policy's internal structure.
func (p *LRU) CheckInvariants() error { return p.l.check() }
