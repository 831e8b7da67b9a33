package policy

import (
	"math/bits"

	"github.com/kvpool/kvpool/block"
)

// AdmitAll admits every block: the same as a nil Admission.
type AdmitAll struct{}

var _ Admission = AdmitAll{}

// Name returns "all".
func (AdmitAll) Name() string { return "all" }

// Admit returns true.
func (AdmitAll) Admit(Access) bool { return true }

// SecondHit admits a block on its second miss within a window: the first
// miss only records the key in a bounded FIFO ghost list, and a miss on a
// key still in that list admits it (and forgets it). Blocks used once —
// about 76% of the conversation trace's unique blocks (docs/design.md,
// "Principles") — never
// displace anything. This is the "cache on second hit" rule CDNs use
// against one-hit wonders (Maggs and Sitaraman, "Algorithmic nuggets in
// content delivery", SIGCOMM CCR 2015).
//
// The window holds as many keys as the cache holds blocks (at least one),
// so its memory is bounded by the capacity. Admit is O(1).
type SecondHit struct {
	l      lists
	window int
}

var _ Admission = (*SecondHit)(nil)

// NewSecondHit returns a second-hit admitter for a cache of capacity blocks.
func NewSecondHit(capacity int) *SecondHit {
	p := &SecondHit{window: max(1, capacity)}
	p.l.init(1, p.window+1)
	return p
}

// Name returns "second-hit".
func (p *SecondHit) Name() string { return "second-hit" }

// Admit reports whether a.Key missed before within the window.
func (p *SecondHit) Admit(a Access) bool {
	if id, ok := p.l.lookup(a.Key); ok {
		p.l.del(id)
		return true
	}
	p.l.pushFront(0, a.Key)
	if p.l.len(0) > p.window {
		p.l.del(p.l.back(0))
	}
	return false
}

// Footprint returns the number of keys in the window.
func (p *SecondHit) Footprint() int { return p.l.index.len() }

// CheckInvariants verifies the window's structure and bound.
func (p *SecondHit) CheckInvariants() error {
	if err := p.l.check(); err != nil {
		return err
	}
	if n := p.l.len(0); n > p.window {
		return invariantError("second-hit: window holds %d keys > %d", n, p.window)
	}
	return nil
}

// CMS admits a block once a count-min sketch (Cormode and Muthukrishnan,
// 2005) estimates that it has missed at least Threshold times recently. The
// sketch counts misses with conservative update (only the counters equal to
// the current minimum grow, which cuts over-estimation) and ages like
// TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache
// Admission Policy", ACM ToS 2017): after SampleSize increments every
// counter is halved. Its memory is fixed at construction (Depth × Width
// bytes); Admit is O(Depth), plus an amortised O(1) share of the halving.
type CMS struct {
	counts    []uint8 // Depth rows of Width counters
	width     int
	mask      uint64
	depth     int
	seeds     [cmsMaxDepth]uint64
	threshold uint8
	sample    int
	added     int
}

var _ Admission = (*CMS)(nil)

const cmsMaxDepth = 8

// CMSOptions configures a CMS admitter. The zero value is the default.
type CMSOptions struct {
	// Threshold is the estimated miss count (this miss included) at which
	// a block is admitted (default 2: admit on the second miss, like
	// SecondHit but without a per-key list).
	Threshold int
	// Depth is the number of hash rows (default 4, as in Caffeine's
	// TinyLFU sketch; more rows, fewer over-estimates).
	Depth int
	// Width is the number of counters per row, a power of two (default:
	// 2 × SampleSize rounded up to a power of two, at least 64). With an
	// absolute threshold, a key never seen before is admitted when all its
	// counters were raised by other keys; a window of SampleSize distinct
	// keys fills at most 1-e^(-1/2) ≈ 39% of such a row, so a new key
	// passes with probability ≤ 0.39^4 ≈ 2.4% at depth 4, and less just
	// after a halving (which zeroes every count of 1).
	Width int
	// SampleSize is how many increments pass between two halvings
	// (default 10 × capacity, at least 64: TinyLFU's sample of W = 10·C).
	SampleSize int
	// Seed selects the hash functions.
	Seed uint64
}

// Validate reports the first out-of-range field.
func (o CMSOptions) Validate() error {
	switch {
	case o.Threshold < 0 || o.Threshold > 255:
		return optionError("CMSOptions.Threshold", o.Threshold, "want 0 (default 2) to 255")
	case o.Depth < 0 || o.Depth > cmsMaxDepth:
		return optionError("CMSOptions.Depth", o.Depth, "want 0 (default 4) to 8")
	case o.Width < 0 || o.Width > 1<<26 || o.Width&(o.Width-1) != 0:
		return optionError("CMSOptions.Width", o.Width, "want 0 (default) or a power of two up to 2^26")
	case o.SampleSize < 0:
		return optionError("CMSOptions.SampleSize", o.SampleSize, "want >= 0 (0 = default 10 x capacity)")
	}
	return nil
}

// NewCMS returns a count-min-sketch admitter with the default options for
// a cache of capacity blocks.
func NewCMS(capacity int) *CMS {
	p, _ := NewCMSWith(capacity, CMSOptions{})
	return p
}

// NewCMSWith returns a count-min-sketch admitter for a cache of capacity
// blocks, or an error naming the bad option.
func NewCMSWith(capacity int, opts CMSOptions) (*CMS, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	capacity = min(max(capacity, 0), 1<<26)
	if opts.Threshold == 0 {
		opts.Threshold = 2
	}
	if opts.Depth == 0 {
		opts.Depth = 4
	}
	if opts.SampleSize == 0 {
		opts.SampleSize = max(64, 10*capacity)
	}
	if opts.Width == 0 {
		opts.Width = 1 << bits.Len(uint(min(2*opts.SampleSize, 1<<26)-1))
	}
	p := &CMS{
		counts:    make([]uint8, opts.Depth*opts.Width),
		width:     opts.Width,
		mask:      uint64(opts.Width - 1),
		depth:     opts.Depth,
		threshold: uint8(opts.Threshold),
		sample:    opts.SampleSize,
	}
	rng := splitmix(opts.Seed)
	for i := range p.depth {
		p.seeds[i] = rng.next()
	}
	return p, nil
}

// Name returns "cms".
func (p *CMS) Name() string { return "cms" }

// Admit counts a miss of a.Key and reports whether its estimated count has
// reached the threshold.
func (p *CMS) Admit(a Access) bool {
	var slots [cmsMaxDepth]int
	least := uint8(255)
	for i := range p.depth {
		s := i*p.width + int(block.Mix64(a.Key^p.seeds[i])&p.mask)
		slots[i] = s
		least = min(least, p.counts[s])
	}
	est := least
	if least < 255 {
		est++
		for i := range p.depth {
			if p.counts[slots[i]] == least {
				p.counts[slots[i]] = est
			}
		}
	}
	if p.added++; p.added >= p.sample {
		p.halve()
	}
	return est >= p.threshold
}

// Estimate returns the sketch's current estimate of k's recent misses.
func (p *CMS) Estimate(k Key) int {
	least := uint8(255)
	for i := range p.depth {
		least = min(least, p.counts[i*p.width+int(block.Mix64(k^p.seeds[i])&p.mask)])
	}
	return int(least)
}

func (p *CMS) halve() {
	for i, c := range p.counts {
		p.counts[i] = c >> 1
	}
	p.added /= 2
}

// Footprint returns 0: the sketch remembers no keys, and its size is fixed
// at construction.
func (p *CMS) Footprint() int { return 0 }
