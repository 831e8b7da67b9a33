package policy

import (
	"fmt"
	"math"

	"github.com/kvpool/kvpool/block"
)

// Chain ("kvchain") is an eviction policy for prefix-chained KV blocks. A
// request's hit length stops at its first missing block, so a block is only
// worth keeping while every block before it in its chain is resident; and
// most blocks of a chat trace are used once, with reuse distances several
// times the cache size. docs/policy.md has the design note, the tuning
// protocol and the measurements behind every rule:
//
//   - Chain order: a block accessed right after its parent (Access.Parent
//     is the previous access's key and Depth > 0) is placed just behind its
//     parent in its queue rather than at the head, so a chain is cut from
//     its tail, never from its root. Plain LRU does the opposite: it
//     touches a request's blocks first to last, so the root is the least
//     recent block of the chain and goes first, orphaning the rest.
//   - Tail demotion: when a request ends (the next access has Depth 0),
//     its deepest block moves to the eviction end of its queue. That block
//     usually holds the partial last 512 tokens of the prompt, whose hash
//     changes when the next turn appends to it: 0.8% of last blocks of the
//     conversation trace are ever reused, against 26% of first-seen
//     blocks.
//   - Probation (after S3-FIFO, SOSP'23): a missed key enters a small
//     probation queue, evicted first; a hit there promotes it to the
//     protected queue. A missed key enters the protected queue directly if
//     it is a ghost (recently evicted from probation) or a count-min
//     sketch of misses over the last ten capacities of misses (TinyLFU's
//     window) has seen it before: the sketch remembers far longer than a
//     ghost list of bounded keys can, and the conversation trace's median
//     reuse distance is 12,000 block accesses. Both queues are recency
//     ordered with chain order.
//   - Set dueling (Qureshi et al., ISCA 2007, with SHARDS-style spatial
//     sampling, Waldspurger et al., FAST 2015): one key in DuelSample
//     feeds two shadow caches of capacity/DuelSample blocks, one with
//     probation and one without; new keys go to probation only while the
//     shadow with probation misses less. Probation wins on the published
//     traces, where one-hit blocks dominate, and loses on traces whose
//     reuse fits in the cache (tracegen's chat preset), where LRU is
//     nearly optimal.
//
// It uses no future information (Access.NextUse), so it runs in the store
// as well as the simulator.
//
// Controlled prediction error (ChainOptions.PredictionError = p, for the
// robustness experiment of docs/policy.md, "Prediction error"): kvchain
// makes three kinds of reuse
// prediction, and with probability p each one is replaced by its opposite,
// drawn from a generator seeded with ChainOptions.Seed (deterministic for a
// given seed and access sequence):
//
//   - Admission (every Insert while probation exists, i.e. unless
//     DisableProbation): "unproven, goes to probation" becomes "will be
//     reused, goes to the protected queue", and "will be reused" (a ghost,
//     a key the sketch has seen, or any key while the duel has switched
//     probation off) becomes "unproven, goes to probation".
//   - Tail demotion (every request end, unless DisableTailDemotion): "the
//     deepest block will not be reused, move it to the eviction end" becomes
//     "it will be reused": it moves to the head of the protected queue, as a
//     hit would move it.
//
// Hits are observations, not predictions, and are never flipped; the
// dueling shadows run without injected error (they measure the workload).
// With p = 0 no random number is drawn and the policy is exactly kvchain.
//
// Insert, Hit, Victim and Remove are O(1) (the
// sketch costs a fixed number of counter updates, amortised with its
// halving); all memory is bounded by a fixed multiple of the capacity.
type Chain struct {
	nodes    []cnode
	index    map[Key]int32
	free     int32
	lens     [chainLists]int
	smallCap int
	ghostCap int
	opts     ChainOptions

	sketch *CMS // nil when disabled

	shadow [2]*Cache // with probation, without; nil when not dueling
	misses [2]int    // recent sampled misses of each shadow

	last      int32 // node of the latest Insert or Hit, or nilNode
	lastKey   Key
	lastDepth int

	rng   uint64 // PredictionError's generator state (splitmix64)
	stats ChainStats
}

// ChainStats counts kvchain's reuse predictions and how they turned out,
// so the predictor's own error can be measured (docs/policy.md). "Hit"
// means hit while still resident after the prediction; a block evicted
// and later missed again does not count as hit. Counts are of decisions
// actually taken, flipped ones included; Flipped says how many were
// flipped by ChainOptions.PredictionError.
type ChainStats struct {
	// Demotions counts tail demotions ("this block will not be reused").
	Demotions int64
	// DemotedHits counts demoted blocks hit before eviction: the
	// prediction was wrong.
	DemotedHits int64
	// SketchPromotions counts missed keys sent straight to the protected
	// queue because the sketch had seen them ("will be reused").
	SketchPromotions int64
	// SketchPromotedHits counts those hit at least once before eviction;
	// the rest were wrong predictions (or are still resident, unhit).
	SketchPromotedHits int64
	// GhostPromotions and GhostPromotedHits are the same for keys
	// promoted because they were ghosts (recently evicted from probation).
	GhostPromotions   int64
	GhostPromotedHits int64
	// ProbationInserts counts keys admitted to probation ("unproven");
	// ProbationHits counts probation keys promoted by a hit.
	ProbationInserts int64
	ProbationHits    int64
	// Decisions counts every prediction made (admissions while probation
	// exists, request-end tail decisions), flipped or not; Flipped counts
	// those replaced by their opposite, about PredictionError × Decisions.
	Decisions int64
	Flipped   int64
}

// Node flags: which prediction placed the node, cleared by its next hit.
const (
	flagDemoted uint8 = 1 << iota
	flagSketch
	flagGhost
)

var _ Eviction = (*Chain)(nil)

// Queue indexes: nodes 0..2 are the sentinels of the three rings.
const (
	chainSmall uint8 = 0
	chainMain  uint8 = 1
	chainGhost uint8 = 2
	chainLists       = 3
)

// duelSalt decorrelates the dueling sample from the sketch's hashes.
const duelSalt = 0x5bd1e995

type cnode struct {
	key        Key
	prev, next int32 // nilNode when not on a ring
	list       uint8
	flags      uint8 // flagDemoted, flagSketch, flagGhost
}

// ChainOptions configures a Chain. The zero value is the default; the
// Disable fields exist for the ablations in docs/policy.md. The defaults
// were chosen on the first half (by time) of the conversation and
// synthetic traces and of two tracegen traces, maximising the smallest
// margin over the best of LRU, LFU, S3-FIFO and ARC (docs/policy.md).
type ChainOptions struct {
	// SmallPercent is the probation queue's share of the capacity in
	// percent (default 5: best of 2/5/10/20/40 in the tuning sweep;
	// S3-FIFO uses 10, SOSP'23 §4.2).
	SmallPercent int
	// GhostPercent bounds the keys remembered after eviction from
	// probation, in percent of the capacity (default 200: more is better
	// in the tuning sweep, 50 to 300, and 200 keeps the footprint, shadows
	// included, under the conformance suite's 4×capacity bound).
	GhostPercent int
	// SketchPercent is the sketch's aging window in percent of the
	// capacity: its counters halve after that many misses (default 1000,
	// TinyLFU's W = 10·C; 500 lost 0.5 points on the conversation tuning
	// half, 2000 lost 1.5 on synthetic at 2,000 blocks).
	SketchPercent int
	// DuelSample is the dueling sample rate: one key in DuelSample feeds
	// the shadow caches of capacity/DuelSample blocks (default 16; 8
	// measured no better).
	DuelSample int
	// DuelWindow is how many shadow capacities of sampled misses the
	// duel remembers before halving its counts (default 32; 2 and 8
	// switched too often on the conversation trace at 10,000 blocks).
	DuelWindow int
	// PredictionError is the probability, 0..1, that each reuse prediction
	// (admission to probation or to the protected queue, tail demotion) is
	// replaced by its opposite; see the type comment of Chain for exactly
	// which decisions flip. 0 (the default) injects no error. It exists
	// for the robustness experiment that injects a controlled fraction of
	// wrong predictions (docs/policy.md, "Prediction error").
	PredictionError float64
	// Seed seeds the generator that draws the flips; the same seed and
	// access sequence give the same decisions.
	Seed uint64
	// DisableChainOrder places every key at the head of its queue (LRU
	// order), for ablation.
	DisableChainOrder bool
	// DisableTailDemotion keeps a request's deepest block where it is,
	// for ablation.
	DisableTailDemotion bool
	// DisableProbation puts every key in the protected queue (no
	// probation, ghosts, sketch or duel), for ablation.
	DisableProbation bool
	// DisableSketch promotes only ghosts, for ablation.
	DisableSketch bool
	// DisableDuel always uses probation, for ablation.
	DisableDuel bool
}

// Validate reports the first invalid field.
func (o ChainOptions) Validate() error {
	switch {
	case o.SmallPercent < 0 || o.SmallPercent > 100:
		return optionError("ChainOptions.SmallPercent", o.SmallPercent, "want 0..100 (0 means 5)")
	case o.GhostPercent < 0 || o.GhostPercent > 200:
		return optionError("ChainOptions.GhostPercent", o.GhostPercent, "want 0..200 (0 means 200)")
	case o.SketchPercent < 0 || o.SketchPercent > 100000:
		return optionError("ChainOptions.SketchPercent", o.SketchPercent, "want 0..100000 (0 means 1000)")
	case o.DuelSample < 0 || o.DuelSample == 1:
		return optionError("ChainOptions.DuelSample", o.DuelSample, "want >= 2 (0 means 16)")
	case o.DuelWindow < 0:
		return optionError("ChainOptions.DuelWindow", o.DuelWindow, "want >= 1 (0 means 32)")
	case math.IsNaN(o.PredictionError) || o.PredictionError < 0 || o.PredictionError > 1:
		return optionError("ChainOptions.PredictionError", o.PredictionError, "want a probability in 0..1")
	}
	return nil
}

func (o ChainOptions) withDefaults() ChainOptions {
	if o.SmallPercent == 0 {
		o.SmallPercent = 5
	}
	if o.GhostPercent == 0 {
		o.GhostPercent = 200
	}
	if o.SketchPercent == 0 {
		o.SketchPercent = 1000
	}
	if o.DuelSample == 0 {
		o.DuelSample = 16
	}
	if o.DuelWindow == 0 {
		o.DuelWindow = 32
	}
	return o
}

// NewChain returns an empty Chain with default options for a cache of
// capacity blocks.
func NewChain(capacity int) *Chain {
	p, _ := NewChainWith(capacity, ChainOptions{}) // the zero options are valid
	return p
}

// NewChainWith returns an empty Chain for a cache of capacity blocks, or
// an error naming the bad option.
func NewChainWith(capacity int, opts ChainOptions) (*Chain, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("policy: new kvchain for %d blocks: %w", capacity, err)
	}
	opts = opts.withDefaults()
	capacity = max(capacity, 0)
	p := &Chain{opts: opts, free: nilNode, last: nilNode, rng: opts.Seed}
	p.smallCap = max(capacity*opts.SmallPercent/100, 1)
	if !opts.DisableProbation {
		p.ghostCap = capacity * opts.GhostPercent / 100
	}
	hint := capacity + p.ghostCap + 1
	p.nodes = make([]cnode, chainLists, chainLists+hint)
	for i := range chainLists {
		p.nodes[i] = cnode{prev: int32(i), next: int32(i), list: uint8(i)}
	}
	p.index = make(map[Key]int32, hint)
	if opts.DisableProbation {
		return p, nil
	}
	if !opts.DisableSketch {
		sk, err := NewCMSWith(capacity, CMSOptions{SampleSize: max(64, capacity*opts.SketchPercent/100)})
		if err != nil {
			return nil, fmt.Errorf("policy: new kvchain for %d blocks: sketch: %w", capacity, err)
		}
		p.sketch = sk
	}
	if !opts.DisableDuel {
		mini := max(capacity/opts.DuelSample, 1)
		with := opts
		with.DisableDuel = true
		with.PredictionError = 0 // the shadows measure the workload
		without := with
		without.DisableProbation = true
		a, err := NewChainWith(mini, with)
		if err != nil {
			return nil, fmt.Errorf("policy: new kvchain for %d blocks: shadow: %w", capacity, err)
		}
		b, err := NewChainWith(mini, without)
		if err != nil {
			return nil, fmt.Errorf("policy: new kvchain for %d blocks: shadow: %w", capacity, err)
		}
		p.shadow = [2]*Cache{NewCache(mini, a, nil), NewCache(mini, b, nil)}
	}
	return p, nil
}

// Name returns "kvchain".
func (p *Chain) Name() string { return "kvchain" }

// Insert makes a.Key resident: in the protected queue if it is a ghost,
// the sketch has seen it before, or probation is off (disabled, or losing
// the duel); else in probation. With PredictionError the choice is
// flipped with that probability (not when probation is disabled).
func (p *Chain) Insert(a Access) {
	p.endRequest(a)
	p.duel(a)
	id, ghost := p.index[a.Key]
	seen := p.sketch != nil && p.sketch.Admit(a) // counts every miss
	if ghost {
		p.unlink(id)
	} else {
		id = p.alloc(a.Key)
	}
	main := ghost || seen || p.opts.DisableProbation || (p.shadow[0] != nil && p.misses[1] < p.misses[0])
	if !p.opts.DisableProbation && p.flip() {
		main = !main
	}
	li, flags := chainSmall, uint8(0)
	switch {
	case !main:
		p.stats.ProbationInserts++
	case ghost:
		li, flags = chainMain, flagGhost
		p.stats.GhostPromotions++
	case seen:
		li, flags = chainMain, flagSketch
		p.stats.SketchPromotions++
	default:
		li = chainMain
	}
	p.nodes[id].flags = flags
	p.place(id, li, a)
	p.touch(id, a)
}

// Hit records an access to the resident a.Key: a probation key is
// promoted to the protected queue, a protected one moves up.
func (p *Chain) Hit(a Access) {
	id, ok := p.index[a.Key]
	if !ok || p.nodes[id].list == chainGhost {
		return
	}
	p.endRequest(a)
	p.duel(a)
	n := &p.nodes[id]
	if n.list == chainSmall {
		p.stats.ProbationHits++
	}
	if n.flags&flagDemoted != 0 {
		p.stats.DemotedHits++
	}
	if n.flags&flagSketch != 0 {
		p.stats.SketchPromotedHits++
	}
	if n.flags&flagGhost != 0 {
		p.stats.GhostPromotedHits++
	}
	n.flags = 0
	p.unlink(id)
	p.place(id, chainMain, a)
	p.touch(id, a)
}

// Stats returns the prediction counts so far (shadows excluded).
func (p *Chain) Stats() ChainStats { return p.stats }

// flip reports whether the next prediction is to be replaced by its
// opposite: true with probability PredictionError. It draws nothing when
// PredictionError is 0.
func (p *Chain) flip() bool {
	p.stats.Decisions++
	if p.opts.PredictionError == 0 {
		return false
	}
	p.rng += block.Golden64 // splitmix64 (Steele et al., OOPSLA 2014)
	u := float64(block.Mix64(p.rng)>>11) / (1 << 53)
	if u < p.opts.PredictionError {
		p.stats.Flipped++
		return true
	}
	return false
}

// Victim returns the tail of probation when probation holds more than its
// share (or the protected queue is empty), else the tail of the protected
// queue. It changes nothing.
func (p *Chain) Victim() (Key, bool) {
	li := chainMain
	if p.lens[chainSmall] > 0 && (p.lens[chainSmall] > p.smallCap || p.lens[chainMain] == 0) {
		li = chainSmall
	}
	if p.lens[li] == 0 {
		return 0, false
	}
	return p.nodes[p.nodes[li].prev].key, true
}

// Remove takes k out; a key removed from probation becomes a ghost, the
// oldest ghost being forgotten beyond the bound.
func (p *Chain) Remove(k Key) {
	id, ok := p.index[k]
	if !ok || p.nodes[id].list == chainGhost {
		return
	}
	if id == p.last {
		p.last = nilNode
	}
	li := p.nodes[id].list
	p.unlink(id)
	if li == chainSmall && p.ghostCap > 0 {
		p.link(id, chainGhost)
		for p.lens[chainGhost] > p.ghostCap {
			p.drop(p.nodes[chainGhost].prev)
		}
		return
	}
	p.drop(id)
}

// Contains reports whether k is resident (ghosts are not).
func (p *Chain) Contains(k Key) bool {
	id, ok := p.index[k]
	return ok && p.nodes[id].list != chainGhost
}

// Len returns the number of resident blocks.
func (p *Chain) Len() int { return p.lens[chainSmall] + p.lens[chainMain] }

// Footprint returns the number of keys the policy tracks: residents,
// ghosts and the shadow caches' keys.
func (p *Chain) Footprint() int {
	n := len(p.index)
	for _, c := range p.shadow {
		if c != nil {
			n += c.Eviction().(*Chain).Footprint()
		}
	}
	return n
}

// duel feeds a sampled access to both shadow caches and counts their
// misses, halving the counts every DuelWindow shadow capacities of misses
// so the choice follows the workload's phases.
func (p *Chain) duel(a Access) {
	if p.shadow[0] == nil || block.Mix64(a.Key^duelSalt)%uint64(p.opts.DuelSample) != 0 {
		return
	}
	s := Access{Key: a.Key, Time: a.Time} // sampled keys form no chains
	for i, c := range p.shadow {
		if !c.Access(s) {
			p.misses[i]++
		}
	}
	// The +64 keeps tiny shadows (capacity 1) from halving every access.
	if p.misses[0]+p.misses[1] > p.opts.DuelWindow*p.shadow[0].Capacity()+64 {
		p.misses[0] /= 2
		p.misses[1] /= 2
	}
}

// endRequest demotes the previous request's deepest block when a starts a
// new request (or, when the prediction is flipped, moves it to the head of
// the protected queue).
func (p *Chain) endRequest(a Access) {
	if p.opts.DisableTailDemotion || a.Depth != 0 || p.last == nilNode || p.lastDepth == 0 {
		return
	}
	id := p.last
	li := p.nodes[id].list
	p.unlink(id)
	p.last = nilNode
	if p.flip() {
		p.link(id, chainMain)
		return
	}
	p.stats.Demotions++
	p.nodes[id].flags |= flagDemoted
	p.linkAfter(id, li, p.nodes[li].prev)
}

// place links id into queue li: behind its parent when the parent is the
// previous access and sits in the same queue, else at the head.
func (p *Chain) place(id int32, li uint8, a Access) {
	if !p.opts.DisableChainOrder && a.Depth > 0 && p.last != nilNode && p.last != id &&
		p.lastKey == a.Parent && p.nodes[p.last].list == li {
		p.linkAfter(id, li, p.last)
		return
	}
	p.link(id, li)
}

func (p *Chain) touch(id int32, a Access) {
	p.last, p.lastKey, p.lastDepth = id, a.Key, a.Depth
}

func (p *Chain) alloc(k Key) int32 {
	var id int32
	if p.free != nilNode {
		id = p.free
		p.free = p.nodes[id].next
		p.nodes[id] = cnode{key: k}
	} else {
		id = int32(len(p.nodes))
		p.nodes = append(p.nodes, cnode{key: k})
	}
	p.index[k] = id
	return id
}

func (p *Chain) drop(id int32) {
	if p.isLinked(id) {
		p.unlink(id)
	}
	delete(p.index, p.nodes[id].key)
	p.nodes[id] = cnode{next: p.free, prev: nilNode}
	p.free = id
}

// isLinked reports whether id is on a ring (unlinked nodes have prev ==
// nilNode).
func (p *Chain) isLinked(id int32) bool { return p.nodes[id].prev != nilNode }

// link puts id at the head of queue li.
func (p *Chain) link(id int32, li uint8) { p.linkAfter(id, li, int32(li)) }

// linkAfter puts id right after node at (toward the tail) in queue li.
func (p *Chain) linkAfter(id int32, li uint8, at int32) {
	nx := p.nodes[at].next
	n := &p.nodes[id]
	n.prev, n.next, n.list = at, nx, li
	p.nodes[nx].prev = id
	p.nodes[at].next = id
	p.lens[li]++
}

func (p *Chain) unlink(id int32) {
	n := &p.nodes[id]
	p.nodes[n.prev].next = n.next
	p.nodes[n.next].prev = n.prev
	p.lens[n.list]--
	n.prev, n.next = nilNode, nilNode
}

// CheckInvariants verifies the rings, the index and the ghost bound.
func (p *Chain) CheckInvariants() error {
	seen := 0
	for li := range chainLists {
		n, prev := 0, int32(li)
		for id := p.nodes[li].next; id != int32(li); id = p.nodes[id].next {
			if id < chainLists || int(id) >= len(p.nodes) {
				return invariantError("kvchain: queue %d: node %d out of range", li, id)
			}
			nd := p.nodes[id]
			if nd.prev != prev {
				return invariantError("kvchain: queue %d: node %d has prev %d, want %d", li, id, nd.prev, prev)
			}
			if int(nd.list) != li {
				return invariantError("kvchain: queue %d: node %d tagged %d", li, id, nd.list)
			}
			if got, ok := p.index[nd.key]; !ok || got != id {
				return invariantError("kvchain: queue %d: key %d at node %d not indexed there", li, nd.key, id)
			}
			prev = id
			if n++; n > len(p.nodes) {
				return invariantError("kvchain: queue %d: cycle without sentinel", li)
			}
		}
		if n != p.lens[li] {
			return invariantError("kvchain: queue %d holds %d nodes, length says %d", li, n, p.lens[li])
		}
		seen += n
	}
	if seen != len(p.index) {
		return invariantError("kvchain: index holds %d keys, queues %d", len(p.index), seen)
	}
	if p.lens[chainGhost] > p.ghostCap {
		return invariantError("kvchain: %d ghosts, bound %d", p.lens[chainGhost], p.ghostCap)
	}
	if p.last != nilNode && (!p.isLinked(p.last) || p.nodes[p.last].list == chainGhost) {
		return invariantError("kvchain: latest access node %d is not resident", p.last)
	}
	for i, c := range p.shadow {
		if c == nil {
			continue
		}
		if err := c.Eviction().(*Chain).CheckInvariants(); err != nil {
			return fmt.Errorf("kvchain: shadow %d: %w", i, err)
		}
	}
	return nil
}
