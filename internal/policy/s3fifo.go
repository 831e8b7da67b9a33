package policy

// S3FIFO is S3-FIFO (Yang, Zhang, Qiu, Yue and Vinayak, "FIFO queues are all
// you need for cache eviction", SOSP 2023): a small FIFO S that filters
// one-hit wonders, a main FIFO M run as a 2-bit CLOCK, and a ghost FIFO G of
// keys recently evicted from S.
//
//   - A missed key goes to M if it is in G, else to S, with frequency 0.
//   - A hit raises the key's frequency, capped at 3 (two bits).
//   - Evicting: if S holds at least its share of the cache, S's oldest key
//     either moves to M (frequency reset) when it was hit at least
//     S3FIFOOptions.MoveToMain times while in S, or is the victim (and
//     enters G when removed); otherwise M's oldest key is reinserted at
//     M's head with its frequency decremented while it is non-zero, and is
//     the victim once it reaches zero.
//
// The cache in this package inserts before it evicts, whereas the paper's
// pseudo-code evicts before inserting; so the key inserted last is kept out
// of the choice until it is touched again or another key is inserted,
// which reproduces the paper's order (a new key is never its own victim).
//
// Victim performs the queue moves above (S to M, M reinsertions): they
// reorder the policy's queues but never change which keys are resident, so
// the contract holds; until the next Insert, Hit or Remove, calling Victim
// again returns the same key without moving anything. Each
// operation is amortised O(1): every reinsertion consumes one unit of a
// key's frequency, which only hits create.
type S3FIFO struct {
	l          lists
	smallCap   int
	ghostCap   int
	moveToMain uint8
	last       Key   // key of the latest Insert
	lastID     int32 // its node
	fresh      bool  // last is resident and untouched since its Insert
	victim     Key
	picked     bool // victim holds the key Victim last returned
}

var _ Eviction = (*S3FIFO)(nil)

const (
	s3Small uint8 = 0
	s3Main  uint8 = 1
	s3Ghost uint8 = 2

	// s3MaxFreq caps a key's frequency: S-3FIFO keeps two bits per key
	// (SOSP'23 §4.2).
	s3MaxFreq = 3
)

// S3FIFOOptions configures an S3FIFO. The zero value is the default.
type S3FIFOOptions struct {
	// SmallPercent is S's share of the capacity in percent (default 10:
	// the paper's choice, found to generalise across its traces; §4.2).
	SmallPercent int
	// GhostPercent sizes G in keys as a percentage of the capacity
	// (default 90: G holds as many keys as M, per the paper).
	GhostPercent int
	// MoveToMain is how many hits a key needs while in S to move to M
	// rather than be evicted (default 2: libCacheSim's S3FIFO and
	// S3FIFOv0, the paper authors' reference implementation, use
	// move-to-main-threshold=2).
	MoveToMain int
}

// Validate reports the first out-of-range field.
func (o S3FIFOOptions) Validate() error {
	switch {
	case o.SmallPercent < 0 || o.SmallPercent > 100:
		return optionError("S3FIFOOptions.SmallPercent", o.SmallPercent, "want 0 (default) to 100")
	case o.GhostPercent < 0 || o.GhostPercent > 1000:
		return optionError("S3FIFOOptions.GhostPercent", o.GhostPercent, "want 0 (default) to 1000")
	case o.MoveToMain < 0 || o.MoveToMain > s3MaxFreq:
		return optionError("S3FIFOOptions.MoveToMain", o.MoveToMain, "want 0 (default) to 3")
	}
	return nil
}

func (o S3FIFOOptions) withDefaults() S3FIFOOptions {
	if o.SmallPercent == 0 {
		o.SmallPercent = 10
	}
	if o.GhostPercent == 0 {
		o.GhostPercent = 90
	}
	if o.MoveToMain == 0 {
		o.MoveToMain = 2
	}
	return o
}

// NewS3FIFO returns an empty S3-FIFO with the default options for a cache
// of capacity blocks.
func NewS3FIFO(capacity int) *S3FIFO {
	p, _ := NewS3FIFOWith(capacity, S3FIFOOptions{})
	return p
}

// NewS3FIFOWith returns an empty S3-FIFO for a cache of capacity blocks, or
// an error naming the bad option.
func NewS3FIFOWith(capacity int, opts S3FIFOOptions) (*S3FIFO, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	capacity = max(capacity, 0)
	p := &S3FIFO{
		smallCap:   max(1, capacity*opts.SmallPercent/100),
		ghostCap:   max(1, capacity*opts.GhostPercent/100),
		moveToMain: uint8(opts.MoveToMain),
	}
	p.l.init(3, capacity+1+p.ghostCap)
	return p, nil
}

// Name returns "s3fifo".
func (p *S3FIFO) Name() string { return "s3fifo" }

// Insert makes a.Key resident: in M if G remembers it, else in S.
func (p *S3FIFO) Insert(a Access) {
	id, ok := p.l.lookup(a.Key)
	if ok { // a ghost
		p.l.moveToFront(id, s3Main)
		p.l.nodes[id].aux = 0
	} else {
		id = p.l.pushFront(s3Small, a.Key)
	}
	p.last, p.lastID, p.fresh = a.Key, id, true
	p.picked = false
}

// Hit raises a.Key's frequency.
func (p *S3FIFO) Hit(a Access) {
	id, ok := p.l.lookup(a.Key)
	if !ok || p.l.nodes[id].list == s3Ghost {
		return
	}
	if n := &p.l.nodes[id]; n.aux < s3MaxFreq {
		n.aux++
	}
	if a.Key == p.last {
		p.fresh = false
	}
	p.picked = false
}

// isFresh reports whether node id holds the key inserted last and not yet
// touched, which the victim choice skips.
func (p *S3FIFO) isFresh(id int32) bool {
	return p.fresh && id == p.lastID
}

// Victim returns the key S3-FIFO evicts next, moving keys between its
// queues as the algorithm prescribes on the way.
func (p *S3FIFO) Victim() (Key, bool) {
	if p.Len() == 0 {
		return 0, false
	}
	if p.picked {
		return p.victim, true
	}
	small, main := p.l.len(s3Small), p.l.len(s3Main)
	if p.fresh {
		if p.l.nodes[p.lastID].list == s3Small {
			small--
		} else {
			main--
		}
	}
	if small > 0 && (small >= p.smallCap || main == 0) {
		if k, ok := p.evictSmall(); ok {
			return p.pick(k)
		}
	}
	if k, ok := p.evictMain(); ok {
		return p.pick(k)
	}
	if k, ok := p.evictSmall(); ok {
		return p.pick(k)
	}
	// Only the fresh key is resident.
	return p.pick(p.last)
}

func (p *S3FIFO) pick(k Key) (Key, bool) {
	p.victim, p.picked = k, true
	return k, true
}

// evictSmall walks S from its oldest key, promoting keys hit often enough,
// and returns the first key that is not.
func (p *S3FIFO) evictSmall() (Key, bool) {
	for {
		id := p.l.back(s3Small)
		if id == nilNode || p.isFresh(id) {
			return 0, false
		}
		n := &p.l.nodes[id]
		if n.aux < p.moveToMain {
			return n.key, true
		}
		n.aux = 0
		p.l.moveToFront(id, s3Main)
	}
}

// evictMain runs M's CLOCK hand: keys with a non-zero frequency go back to
// M's head one unit poorer; the first key at zero is returned.
func (p *S3FIFO) evictMain() (Key, bool) {
	// Every pass but the fresh key's consumes a frequency unit, so the loop
	// ends within (s3MaxFreq+1) turns of M.
	for range (s3MaxFreq + 1) * (p.l.len(s3Main) + 1) {
		id := p.l.back(s3Main)
		if id == nilNode {
			return 0, false
		}
		n := &p.l.nodes[id]
		if p.isFresh(id) {
			if p.l.len(s3Main) == 1 {
				return 0, false
			}
			p.l.moveToFront(id, s3Main)
			continue
		}
		if n.aux == 0 {
			return n.key, true
		}
		n.aux--
		p.l.moveToFront(id, s3Main)
	}
	return 0, false
}

// Remove forgets k. Removing the S key Victim returned is an eviction from
// S and leaves k in G; any other removal forgets k entirely.
func (p *S3FIFO) Remove(k Key) {
	id, ok := p.l.lookup(k)
	if !ok || p.l.nodes[id].list == s3Ghost {
		return
	}
	evicted := p.picked && k == p.victim
	p.picked = false
	if k == p.last {
		p.fresh = false
	}
	if !evicted || p.l.nodes[id].list != s3Small {
		p.l.del(id)
		return
	}
	p.l.moveToFront(id, s3Ghost)
	p.l.nodes[id].aux = 0
	for p.l.len(s3Ghost) > p.ghostCap {
		p.l.del(p.l.back(s3Ghost))
	}
}

// Contains reports whether k is resident (in S or M; G holds no data).
func (p *S3FIFO) Contains(k Key) bool {
	id, ok := p.l.lookup(k)
	return ok && p.l.nodes[id].list != s3Ghost
}

// Len returns the number of resident blocks.
func (p *S3FIFO) Len() int { return p.l.len(s3Small) + p.l.len(s3Main) }

// Footprint returns the number of keys the policy tracks, ghosts included.
func (p *S3FIFO) Footprint() int { return p.l.index.len() }

// CheckInvariants verifies the policy's internal structure.
func (p *S3FIFO) CheckInvariants() error {
	if err := p.l.check(); err != nil {
		return err
	}
	if g := p.l.len(s3Ghost); g > p.ghostCap {
		return invariantError("s3fifo: ghost holds %d keys, cap %d", g, p.ghostCap)
	}
	var err error
	p.l.index.each(func(k Key, id int32) bool {
		if f := p.l.nodes[id].aux; f > s3MaxFreq {
			err = invariantError("s3fifo: key %d has frequency %d > %d", k, f, s3MaxFreq)
		}
		return err == nil
	})
	return err
}
