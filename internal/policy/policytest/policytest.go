// Package policytest is the conformance suite for the policy package's
// interfaces: Run checks an Eviction implementation against its contract,
// RunAdmission an Admission. Every implementation runs the same suite, so a
// new policy is tested the moment it is registered.
//
// The eviction suite drives the policy with seeded random sequences of
// inserts, hits, victim choices and removals against a trivial model (a
// set), checking after every step that Len and Contains are exact, that a
// victim is resident and exists whenever the policy is non-empty, that any
// resident key (the victim included) can be removed, and that the same
// sequence gives the same victims. It then drives the policy through a
// policy.Cache and checks that the cache never exceeds its capacity, with
// an invariant check registered in t.Cleanup.
package policytest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
)

// Checker is implemented by policies that can verify their own internal
// structure (lists, heaps, indexes). The suite calls it after every step
// and in t.Cleanup.
type Checker interface {
	CheckInvariants() error
}

// Footprinter is implemented by policies that can say how many keys they
// remember, resident or not (ghost lists, admission windows). The suite
// checks it stays within a small multiple of the capacity.
type Footprinter interface {
	Footprint() int
}

// footprintBound is the most keys a policy may remember: the contract says
// "a small multiple of the capacity"; ARC's directory (2c) and S3-FIFO's
// resident + ghost keys (1.9c) are the largest in the package.
func footprintBound(capacity int) int { return 4*max(capacity, 1) + 8 }

// capacities returns the cache sizes each randomized check runs at: the
// degenerate 1 and 2, a size below S3-FIFO's 10-block small-queue rounding,
// and sizes where every queue has several blocks.
func capacities() []int { return []int{1, 2, 5, 16, 64} }

// seeds returns the random sequences each randomized check runs.
func seeds() []uint64 { return []uint64{1, 2, 3} }

// Run runs the eviction conformance suite against policies built by
// newEviction, which must return a fresh, empty policy for a cache of the
// given capacity each time it is called.
func Run(t *testing.T, newEviction func(capacity int) policy.Eviction) {
	t.Helper()
	t.Run("Empty", func(t *testing.T) { testEmpty(t, newEviction) })
	t.Run("Random", func(t *testing.T) {
		for _, c := range capacities() {
			for _, seed := range seeds() {
				t.Run(fmt.Sprintf("cap=%d/seed=%d", c, seed), func(t *testing.T) {
					testRandom(t, newEviction, c, seed)
				})
			}
		}
	})
	t.Run("Deterministic", func(t *testing.T) {
		for _, c := range capacities() {
			a := drive(t, newEviction(c), c, 7, 3000)
			b := drive(t, newEviction(c), c, 7, 3000)
			if !slices.Equal(a, b) {
				t.Fatalf("cap=%d: two runs of the same sequence chose different victims:\n%v\n%v", c, head(a), head(b))
			}
		}
	})
	t.Run("Drain", func(t *testing.T) {
		for _, c := range capacities() {
			testDrain(t, newEviction, c)
		}
	})
	t.Run("RemoveAny", func(t *testing.T) {
		for _, c := range capacities() {
			testRemoveAny(t, newEviction, c)
		}
	})
	t.Run("Cache", func(t *testing.T) {
		for _, c := range []int{0, 1, 3, 10, 50} {
			for _, seed := range seeds() {
				t.Run(fmt.Sprintf("cap=%d/seed=%d", c, seed), func(t *testing.T) {
					testCache(t, newEviction, c, seed)
				})
			}
		}
	})
}

func head(v []policy.Key) []policy.Key {
	if len(v) > 20 {
		return v[:20]
	}
	return v
}

// key spreads small indices over the key space, so policies see keys that
// are neither dense nor small (0 included).
func key(i int) policy.Key { return policy.Key(i) * block.Golden64 }

func testEmpty(t *testing.T, newEviction func(int) policy.Eviction) {
	for _, c := range append([]int{0}, capacities()...) {
		p := newEviction(c)
		if p.Name() == "" {
			t.Fatalf("cap=%d: empty Name", c)
		}
		if p.Len() != 0 {
			t.Fatalf("cap=%d: new policy has Len %d", c, p.Len())
		}
		if k, ok := p.Victim(); ok {
			t.Fatalf("cap=%d: new policy names victim %d", c, k)
		}
		for i := range 8 {
			if p.Contains(key(i)) {
				t.Fatalf("cap=%d: new policy contains %d", c, key(i))
			}
		}
		checkInvariants(t, p, "new")
	}
}

// model mirrors the resident set of a policy under test.
type model struct {
	t        *testing.T
	p        policy.Eviction
	capacity int
	keys     int // key space: key(0) .. key(keys-1)
	set      map[policy.Key]bool
	list     []policy.Key // resident keys, for uniform picks
	rng      rng
	now      int64
	victims  []policy.Key
	step     int
}

func newModel(t *testing.T, p policy.Eviction, capacity int, seed uint64) *model {
	return &model{
		t: t, p: p, capacity: capacity,
		keys: 3*capacity + 4,
		set:  make(map[policy.Key]bool),
		rng:  rng(seed*0x2545f4914f6cdd1d + 1),
	}
}

func (m *model) access(k policy.Key) policy.Access {
	m.now++
	a := policy.Access{Key: k, Time: m.now, Hint: block.Hint{Depth: m.rng.intn(4)}, NextUse: policy.NoNextUse}
	if a.Depth > 0 {
		a.Parent = key(m.rng.intn(m.keys))
	}
	if m.rng.intn(4) != 0 {
		a.NextUse = m.now + 1 + int64(m.rng.intn(4*m.keys))
	}
	return a
}

func (m *model) add(k policy.Key) {
	m.set[k] = true
	m.list = append(m.list, k)
}

func (m *model) del(k policy.Key) {
	delete(m.set, k)
	i := slices.Index(m.list, k)
	m.list[i] = m.list[len(m.list)-1]
	m.list = m.list[:len(m.list)-1]
}

// victim asks for a victim and checks it.
func (m *model) victim(what string) (policy.Key, bool) {
	k, ok := m.p.Victim()
	if ok != (len(m.set) > 0) {
		m.t.Fatalf("step %d (%s): Victim ok=%v with %d resident keys", m.step, what, ok, len(m.set))
	}
	if ok && !m.set[k] {
		m.t.Fatalf("step %d (%s): Victim returned %d, which is not resident", m.step, what, k)
	}
	if ok {
		m.victims = append(m.victims, k)
	}
	return k, ok
}

// evict evicts like policy.Cache does: down to capacity, or to a Batcher's
// target.
func (m *model) evict() {
	target := m.capacity
	if b, ok := m.p.(policy.Batcher); ok {
		target = min(b.EvictTo(m.p.Len(), m.capacity), m.capacity)
	}
	for m.p.Len() > target {
		k, ok := m.victim("evict")
		if !ok {
			m.t.Fatalf("step %d: Len %d > %d but no victim", m.step, m.p.Len(), target)
		}
		m.p.Remove(k)
		m.del(k)
		m.verify("remove victim")
	}
}

// verify compares the policy with the model.
func (m *model) verify(what string) {
	m.t.Helper()
	if m.p.Len() != len(m.set) {
		m.t.Fatalf("step %d (%s): Len %d, want %d", m.step, what, m.p.Len(), len(m.set))
	}
	for i := range m.keys {
		k := key(i)
		if got := m.p.Contains(k); got != m.set[k] {
			m.t.Fatalf("step %d (%s): Contains(%d) = %v, want %v", m.step, what, k, got, m.set[k])
		}
	}
	if f, ok := m.p.(Footprinter); ok {
		if n := f.Footprint(); n > footprintBound(m.capacity) {
			m.t.Fatalf("step %d (%s): policy remembers %d keys, more than %d for capacity %d", m.step, what, n, footprintBound(m.capacity), m.capacity)
		}
	}
	checkInvariants(m.t, m.p, fmt.Sprintf("step %d (%s)", m.step, what))
}

// run performs n random steps.
func (m *model) run(n int) {
	hot := max(1, m.keys/4)
	for m.step = 0; m.step < n; m.step++ {
		switch r := m.rng.intn(100); {
		case r < 60: // access a key, skewed towards a hot quarter
			var k policy.Key
			if m.rng.intn(2) == 0 {
				k = key(m.rng.intn(hot))
			} else {
				k = key(m.rng.intn(m.keys))
			}
			if m.set[k] {
				m.p.Hit(m.access(k))
				m.verify("hit")
				continue
			}
			m.p.Insert(m.access(k))
			m.add(k)
			m.verify("insert")
			m.evict()
		case r < 75: // hit a random resident key
			if len(m.list) == 0 {
				continue
			}
			m.p.Hit(m.access(m.list[m.rng.intn(len(m.list))]))
			m.verify("hit resident")
		case r < 85: // remove any resident key
			if len(m.list) == 0 {
				continue
			}
			k := m.list[m.rng.intn(len(m.list))]
			m.p.Remove(k)
			m.del(k)
			m.verify("remove")
		default: // ask twice for a victim, sometimes evict it below capacity
			k, ok := m.victim("victim")
			if !ok {
				continue
			}
			m.verify("victim")
			if _, ok := m.victim("victim again"); !ok {
				m.t.Fatalf("step %d: second Victim found nothing", m.step)
			}
			if m.rng.intn(2) == 0 {
				m.p.Remove(k)
				m.del(k)
				m.verify("remove victim")
			}
		}
	}
}

func testRandom(t *testing.T, newEviction func(int) policy.Eviction, capacity int, seed uint64) {
	m := newModel(t, newEviction(capacity), capacity, seed)
	m.run(2000)
	if len(m.victims) == 0 {
		t.Fatalf("no victim was ever chosen in %d steps", m.step)
	}
}

// drive runs a random sequence and returns the victims chosen.
func drive(t *testing.T, p policy.Eviction, capacity int, seed uint64, steps int) []policy.Key {
	m := newModel(t, p, capacity, seed)
	m.run(steps)
	return m.victims
}

// testDrain fills a policy, then evicts everything through Victim: every
// victim is resident and distinct and Len falls by one each time.
func testDrain(t *testing.T, newEviction func(int) policy.Eviction, capacity int) {
	p := newEviction(capacity)
	var now int64
	for i := range capacity {
		now++
		p.Insert(policy.Access{Key: key(i), Time: now, NextUse: now + int64(capacity-i)})
	}
	for i := 0; i < capacity; i += 2 { // some reuse, so queues differ
		now++
		p.Hit(policy.Access{Key: key(i), Time: now, NextUse: policy.NoNextUse})
	}
	seen := make(map[policy.Key]bool)
	for n := capacity; n > 0; n-- {
		k, ok := p.Victim()
		if !ok {
			t.Fatalf("cap=%d: no victim with Len %d", capacity, p.Len())
		}
		if !p.Contains(k) || seen[k] {
			t.Fatalf("cap=%d: victim %d not resident (already evicted: %v)", capacity, k, seen[k])
		}
		seen[k] = true
		p.Remove(k)
		if p.Len() != n-1 || p.Contains(k) {
			t.Fatalf("cap=%d: after removing victim %d: Len %d (want %d), Contains %v", capacity, k, p.Len(), n-1, p.Contains(k))
		}
		checkInvariants(t, p, "drain")
	}
	if k, ok := p.Victim(); ok {
		t.Fatalf("cap=%d: drained policy names victim %d", capacity, k)
	}
}

// testRemoveAny fills a policy and removes its keys in a shuffled order.
func testRemoveAny(t *testing.T, newEviction func(int) policy.Eviction, capacity int) {
	p := newEviction(capacity)
	r := rng(uint64(capacity) + 99)
	order := make([]int, capacity)
	for i := range order {
		order[i] = i
		p.Insert(policy.Access{Key: key(i), Time: int64(i + 1), NextUse: policy.NoNextUse})
	}
	for i := len(order) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	for n, i := range order {
		p.Remove(key(i))
		if p.Contains(key(i)) || p.Len() != capacity-n-1 {
			t.Fatalf("cap=%d: after removing %d: Contains %v, Len %d (want %d)", capacity, key(i), p.Contains(key(i)), p.Len(), capacity-n-1)
		}
		checkInvariants(t, p, "remove any")
	}
}

// testCache drives the policy through a policy.Cache on a skewed access
// sequence with true next-use times, checking the cache's promises.
func testCache(t *testing.T, newEviction func(int) policy.Eviction, capacity int, seed uint64) {
	ev := newEviction(capacity)
	c := policy.NewCache(capacity, ev, nil)
	keys := 4*capacity + 8
	r := rng(seed + 1000)
	seq := make([]policy.Key, 3000)
	for i := range seq {
		// Two-level skew: a hot tenth takes half the accesses.
		if r.intn(2) == 0 {
			seq[i] = key(r.intn(max(1, keys/10)))
		} else {
			seq[i] = key(r.intn(keys))
		}
	}
	next := nextUses(seq)
	evicted := 0
	c.OnEvict = func(k policy.Key) {
		evicted++
		if c.Contains(k) {
			t.Fatalf("OnEvict(%d) called for a key still resident", k)
		}
	}
	t.Cleanup(func() { checkCache(t, c, keys) })
	inserted := 0
	for i, k := range seq {
		was := c.Contains(k)
		hit := c.Access(policy.Access{Key: k, Time: int64(i), NextUse: next[i]})
		if hit != was {
			t.Fatalf("access %d of %d: hit=%v but resident before=%v", i, k, hit, was)
		}
		if !hit && capacity > 0 {
			inserted++
		}
		if c.Len() > capacity {
			t.Fatalf("access %d: Len %d exceeds capacity %d", i, c.Len(), capacity)
		}
		if inserted-evicted != c.Len() {
			t.Fatalf("access %d: %d inserted - %d evicted != Len %d", i, inserted, evicted, c.Len())
		}
		if i%97 == 0 && c.Len() > 0 { // an explicit delete now and then
			v, _ := c.Eviction().Victim()
			if !c.Remove(v) {
				t.Fatalf("access %d: Remove(%d) of a resident victim reported false", i, v)
			}
			inserted--
		}
		if c.Remove(key(keys + 1)) {
			t.Fatalf("Remove of a key never inserted reported true")
		}
	}
	if capacity > 0 && evicted == 0 {
		t.Fatalf("%d accesses over %d keys never evicted from a %d-block cache", len(seq), keys, capacity)
	}
}

// checkCache is the cache-level invariant check run in t.Cleanup: Len is
// within capacity and equals the number of keys Contains reports, and a
// victim exists exactly when the cache is not empty.
func checkCache(t *testing.T, c *policy.Cache, keys int) {
	t.Helper()
	if c.Len() > c.Capacity() {
		t.Errorf("cleanup: Len %d exceeds capacity %d", c.Len(), c.Capacity())
	}
	n := 0
	for i := range keys + 2 {
		if c.Contains(key(i)) {
			n++
		}
	}
	if n != c.Len() {
		t.Errorf("cleanup: Contains reports %d keys, Len %d", n, c.Len())
	}
	if _, ok := c.Eviction().Victim(); ok != (c.Len() > 0) {
		t.Errorf("cleanup: Victim ok=%v with Len %d", ok, c.Len())
	}
	if ch, ok := c.Eviction().(Checker); ok {
		if err := ch.CheckInvariants(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

func checkInvariants(t *testing.T, p any, where string) {
	t.Helper()
	if ch, ok := p.(Checker); ok {
		if err := ch.CheckInvariants(); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	}
}

// nextUses returns, for each position of seq, the position of the next
// access to the same key, or policy.NoNextUse.
func nextUses(seq []policy.Key) []int64 {
	out := make([]int64, len(seq))
	last := make(map[policy.Key]int64)
	for i := len(seq) - 1; i >= 0; i-- {
		if j, ok := last[seq[i]]; ok {
			out[i] = j
		} else {
			out[i] = policy.NoNextUse
		}
		last[seq[i]] = int64(i)
	}
	return out
}

// RunAdmission runs the admission conformance suite against policies built
// by newAdmission, which must return a fresh policy for a cache of the
// given capacity each time it is called.
func RunAdmission(t *testing.T, newAdmission func(capacity int) policy.Admission) {
	t.Helper()
	t.Run("Deterministic", func(t *testing.T) {
		for _, c := range []int{0, 1, 16, 256} {
			a, b := newAdmission(c), newAdmission(c)
			if a.Name() == "" {
				t.Fatalf("cap=%d: empty Name", c)
			}
			r := rng(uint64(c) + 5)
			for i := range 20000 {
				acc := policy.Access{Key: key(r.intn(4*c + 8)), Time: int64(i), NextUse: policy.NoNextUse}
				if x, y := a.Admit(acc), b.Admit(acc); x != y {
					t.Fatalf("cap=%d: access %d of %d: two instances decided %v and %v", c, i, acc.Key, x, y)
				}
			}
			checkInvariants(t, a, fmt.Sprintf("cap=%d", c))
		}
	})
	t.Run("Bounded", func(t *testing.T) {
		for _, c := range []int{0, 1, 16, 256} {
			p := newAdmission(c)
			f, ok := p.(Footprinter)
			for i := range 50*c + 100 { // every key new: the worst case for history
				p.Admit(policy.Access{Key: key(i), Time: int64(i), NextUse: policy.NoNextUse})
				if ok && f.Footprint() > footprintBound(c) {
					t.Fatalf("cap=%d: after %d distinct keys the policy remembers %d, more than %d", c, i+1, f.Footprint(), footprintBound(c))
				}
			}
			checkInvariants(t, p, fmt.Sprintf("cap=%d", c))
		}
	})
	t.Run("AdmitsRepeats", func(t *testing.T) {
		// A key that keeps missing must get in: an admitter that starves
		// a repeatedly requested block is broken, whatever its rule. One
		// new key between two misses must not hide the repeat from a
		// cache of 16 blocks or more.
		for _, c := range []int{16, 256} {
			p := newAdmission(c)
			now := int64(0)
			for k := range 20 {
				admitted := false
				for range 8 {
					now++
					if p.Admit(policy.Access{Key: key(1000 + k), Time: now, NextUse: policy.NoNextUse}) {
						admitted = true
					}
					now++
					p.Admit(policy.Access{Key: key(100000 + int(now)), Time: now, NextUse: policy.NoNextUse})
				}
				if !admitted {
					t.Fatalf("cap=%d: key %d missed 8 times and was never admitted", c, key(1000+k))
				}
			}
		}
	})
}

// rng is SplitMix64, a small deterministic generator for the sequences.
type rng uint64

func (r *rng) next() uint64 {
	*r += rng(block.Golden64)
	return block.Mix64(uint64(*r))
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }
