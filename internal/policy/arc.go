package policy

// ARC is the Adaptive Replacement Cache (Megiddo and Modha, "ARC: A
// Self-Tuning, Low Overhead Replacement Cache", FAST 2003). Resident keys
// are split between T1 (seen once recently) and T2 (seen at least twice);
// the ghost lists B1 and B2 remember keys recently evicted from each. A hit
// in B1 grows the target size p of T1, a hit in B2 shrinks it, and the
// victim comes from T1 or T2 depending on how T1 compares with p.
//
// The cache in this package inserts before it evicts, while the paper's
// ARC(x) runs REPLACE before moving x into T1 or T2. The translation: Insert
// does the paper's directory upkeep (adapt p, drop the LRU ghost of B1 or
// B2 when L1 or L1+L2 is full) and remembers x; Victim is REPLACE computed
// as if x were not yet resident; removing the key Victim returned moves it
// to the head of B1 or B2; any other removal forgets it. When T1 alone
// fills the cache (|T1| = c, case IV.A's second branch) the paper drops
// T1's LRU without a ghost: here it goes to B1 and is trimmed at once, since
// |T1|+|B1| may not exceed c — the same outcome.
//
// p and the adaptation steps are integers (the step is the integer ratio of
// the ghost list sizes, at least 1), as in most implementations.
// All operations are O(1).
type ARC struct {
	l      lists
	c      int
	p      int
	last   Key   // x: the key of the latest Insert
	lastID int32 // its node
	fresh  bool  // x is resident and untouched since its Insert
	fromB2 bool  // x came from B2 (REPLACE's tie rule)
	victim Key
	picked bool // victim holds the key Victim last returned
}

var _ Eviction = (*ARC)(nil)

const (
	arcT1 uint8 = 0
	arcT2 uint8 = 1
	arcB1 uint8 = 2
	arcB2 uint8 = 3
)

// NewARC returns an empty ARC for a cache of capacity blocks.
func NewARC(capacity int) *ARC {
	capacity = max(capacity, 0)
	p := &ARC{c: capacity}
	p.l.init(4, 2*capacity+1)
	return p
}

// Name returns "arc".
func (p *ARC) Name() string { return "arc" }

// Target returns p, the adaptive target size of T1 in blocks.
func (p *ARC) Target() int { return p.p }

// Insert makes a.Key resident (cases II, III and IV of ARC(x)).
func (p *ARC) Insert(a Access) {
	t1, t2, b1, b2 := p.l.len(arcT1), p.l.len(arcT2), p.l.len(arcB1), p.l.len(arcB2)
	id, ok := p.l.lookup(a.Key)
	p.fromB2 = false
	switch {
	case ok && p.l.nodes[id].list == arcB1: // case II
		p.p = min(p.c, p.p+max(1, b2/max(b1, 1)))
		p.l.moveToFront(id, arcT2)
	case ok && p.l.nodes[id].list == arcB2: // case III
		p.p = max(0, p.p-max(1, b1/max(b2, 1)))
		p.l.moveToFront(id, arcT2)
		p.fromB2 = true
	default: // case IV
		if l1 := t1 + b1; l1 >= p.c {
			if t1 < p.c && b1 > 0 {
				p.l.del(p.l.back(arcB1))
			}
		} else if l1+t2+b2 >= 2*p.c && b2 > 0 {
			p.l.del(p.l.back(arcB2))
		}
		id = p.l.pushFront(arcT1, a.Key)
	}
	p.last, p.lastID, p.fresh = a.Key, id, true
	p.picked = false
}

// Hit moves a.Key to the MRU end of T2 (case I).
func (p *ARC) Hit(a Access) {
	id, ok := p.l.lookup(a.Key)
	if !ok || p.l.nodes[id].list >= arcB1 {
		return
	}
	p.l.moveToFront(id, arcT2)
	if id == p.lastID {
		p.fresh = false
	}
	p.picked = false
}

// Victim returns the key REPLACE would evict.
func (p *ARC) Victim() (Key, bool) {
	if p.Len() == 0 {
		return 0, false
	}
	t1, t2 := p.l.len(arcT1), p.l.len(arcT2)
	fromB2 := false
	if p.fresh {
		if p.l.nodes[p.lastID].list == arcT1 {
			t1--
		} else {
			t2--
		}
		fromB2 = p.fromB2
	}
	first, second := arcT2, arcT1
	if t1 >= 1 && ((fromB2 && t1 == p.p) || t1 > p.p) {
		first, second = arcT1, arcT2
	}
	for _, li := range [2]uint8{first, second} {
		if id := p.l.back(li); id != nilNode && !(p.fresh && id == p.lastID) {
			return p.pick(p.l.nodes[id].key)
		}
	}
	// Only the fresh key is resident.
	return p.pick(p.last)
}

func (p *ARC) pick(k Key) (Key, bool) {
	p.victim, p.picked = k, true
	return k, true
}

// Remove forgets k; removing the key Victim returned turns it into a ghost.
func (p *ARC) Remove(k Key) {
	id, ok := p.l.lookup(k)
	if !ok || p.l.nodes[id].list >= arcB1 {
		return
	}
	evicted := p.picked && k == p.victim
	p.picked = false
	if id == p.lastID {
		p.fresh = false
	}
	if !evicted {
		p.l.del(id)
		return
	}
	if p.l.nodes[id].list == arcT1 {
		p.l.moveToFront(id, arcB1)
	} else {
		p.l.moveToFront(id, arcB2)
	}
	for p.l.len(arcT1)+p.l.len(arcB1) > p.c && p.l.len(arcB1) > 0 {
		p.l.del(p.l.back(arcB1))
	}
	for p.l.len(arcB1)+p.l.len(arcB2)+p.Len() > 2*p.c {
		if p.l.len(arcB2) > 0 {
			p.l.del(p.l.back(arcB2))
		} else if p.l.len(arcB1) > 0 {
			p.l.del(p.l.back(arcB1))
		} else {
			break
		}
	}
}

// Contains reports whether k is resident (in T1 or T2).
func (p *ARC) Contains(k Key) bool {
	id, ok := p.l.lookup(k)
	return ok && p.l.nodes[id].list < arcB1
}

// Len returns the number of resident blocks.
func (p *ARC) Len() int { return p.l.len(arcT1) + p.l.len(arcT2) }

// Footprint returns the number of keys the policy tracks, ghosts included.
func (p *ARC) Footprint() int { return p.l.index.len() }

// CheckInvariants verifies the policy's internal structure and ARC's
// directory bounds (ghosts: |T1|+|B1| <= c and the directory <= 2c, once
// the cache is within capacity).
func (p *ARC) CheckInvariants() error {
	if err := p.l.check(); err != nil {
		return err
	}
	if p.p < 0 || p.p > p.c {
		return invariantError("arc: p = %d outside [0, %d]", p.p, p.c)
	}
	if p.Len() <= p.c {
		if n := p.l.len(arcT1) + p.l.len(arcB1); n > p.c && p.l.len(arcB1) > 0 {
			return invariantError("arc: |T1|+|B1| = %d > c = %d", n, p.c)
		}
		if n := p.l.index.len(); n > 2*p.c && p.l.len(arcB1)+p.l.len(arcB2) > 0 {
			return invariantError("arc: directory holds %d keys > 2c = %d", n, 2*p.c)
		}
	}
	return nil
}
