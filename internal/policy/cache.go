package policy

// Cache is a fixed-capacity set of blocks driven by an Eviction and an
// Admission policy: the unit the hit-ratio engine, the simulator and the
// store's tiers share. It is not safe for concurrent use.
type Cache struct {
	capacity int
	ev       Eviction
	adm      Admission
	batch    Batcher
	// OnEvict, when set, is called for every key the cache evicts, in
	// eviction order (a demotion hook for tiered caches).
	OnEvict func(k Key)
}

// NewCache returns a cache of capacity blocks. adm may be nil (admit all).
func NewCache(capacity int, ev Eviction, adm Admission) *Cache {
	c := &Cache{capacity: capacity, ev: ev, adm: adm}
	c.batch, _ = ev.(Batcher)
	return c
}

// Capacity returns the capacity in blocks.
func (c *Cache) Capacity() int { return c.capacity }

// Len returns the number of resident blocks.
func (c *Cache) Len() int { return c.ev.Len() }

// Contains reports whether k is resident. It changes no policy state.
func (c *Cache) Contains(k Key) bool { return c.ev.Contains(k) }

// Eviction returns the eviction policy.
func (c *Cache) Eviction() Eviction { return c.ev }

// Access records an access to a.Key: a hit if resident (returns true), else
// the key is offered to admission and, if admitted, inserted, after which
// the cache evicts until it is within capacity. An admitted key may be
// evicted again at once (an oracle bypassing it); OnEvict sees that too.
func (c *Cache) Access(a Access) (hit bool) {
	if c.ev.Contains(a.Key) {
		c.ev.Hit(a)
		return true
	}
	if c.adm != nil && !c.adm.Admit(a) {
		return false
	}
	c.insert(a)
	return false
}

// Insert makes a.Key resident without consulting admission (a block the
// caller decided to store, such as a demotion into a lower tier). It is a
// hit access if the key is already resident.
func (c *Cache) Insert(a Access) {
	if c.ev.Contains(a.Key) {
		c.ev.Hit(a)
		return
	}
	c.insert(a)
}

func (c *Cache) insert(a Access) {
	if c.capacity <= 0 {
		return
	}
	c.ev.Insert(a)
	target := c.capacity
	if c.batch != nil {
		target = min(c.batch.EvictTo(c.ev.Len(), c.capacity), c.capacity)
	}
	for c.ev.Len() > target {
		k, ok := c.ev.Victim()
		if !ok {
			return
		}
		c.ev.Remove(k)
		if c.OnEvict != nil {
			c.OnEvict(k)
		}
	}
}

// Remove deletes k if resident and reports whether it was.
func (c *Cache) Remove(k Key) bool {
	if !c.ev.Contains(k) {
		return false
	}
	c.ev.Remove(k)
	return true
}
