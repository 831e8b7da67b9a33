package master

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// candidate is a live node as Place sees it.
type candidate struct {
	n      *node
	used   int64 // indexed RAM usage plus admitted promotions plus this call's choices
	cap    int64
	slot   int64 // the node's BlockSize (RAM chunk size)
	chosen bool
}

// fraction is the candidate's RAM usage fraction (+Inf without RAM).
func (c *candidate) fraction() float64 {
	if c.cap <= 0 {
		return math.Inf(1)
	}
	return float64(c.used) / float64(c.cap)
}

// Place chooses the nodes for new chain blocks ids of tenant, each
// charged one RAM chunk (its size unknown): PlaceObjects of size-0
// objects.
func (m *Master) Place(tenant string, ids []uint64, replicas int, hint meta.NodeID, strategy meta.Strategy, dst *meta.Placement) error {
	return m.place(tenant, len(ids), func(i int) meta.Object { return meta.Object{Key: block.Key{Tenant: tenant, ID: ids[i]}} },
		replicas, hint, strategy, dst)
}

// PlaceObjects chooses the nodes for new objects (chain blocks or named
// objects, of any size): replicas distinct live nodes per object, by
// strategy (StrategyDefault means Options.Placement):
//
//   - LocalFirst: the hint node first if it is live and has room (the
//     object's footprint keeps its RAM usage at or under HighWatermark),
//     then the least used of the others; without a usable hint, LeastUsed.
//   - LeastUsed: the nodes with the lowest RAM usage fraction, ties by node
//     ID; a node whose RAM is smaller than the object's footprint comes
//     after every node that could hold it.
//   - Hash: rendezvous hashing of the object's key (tenant, id and name)
//     over the live nodes (the highest mix(key, node) scores); usage plays
//     no part, and a node leaving moves only the objects that had chosen
//     it.
//
// Usage is the index's, in bytes (see Evict), plus the promotions admitted
// for the node; within one call every choice adds the object's footprint
// on its node (meta.Footprint: name and payload in whole chunks of
// NodeInfo.BlockSize) to that node's usage, so a large batch spreads over
// the nodes by bytes, and one large object weighs what it takes. The
// master reserves nothing: a choice takes effect when the node reports
// the object in a delta. Given the same state the choice is the same
// (deterministic).
//
// When fewer nodes are live than replicas, PlaceObjects degrades: every
// object goes to all live nodes, dst.PerBlock says how many, and
// dst.Degraded is set. With no live node it returns ErrNoNodes. An invalid
// key (tenant, name over block.MaxNameLen), a size outside 0 to
// MaxItemSize, replicas outside 1..MaxReplicas, an unknown strategy or a
// nil dst is an error wrapping ErrBadRequest. The result goes into dst,
// whose slices are reused.
func (m *Master) PlaceObjects(objs []meta.Object, replicas int, hint meta.NodeID, strategy meta.Strategy, dst *meta.Placement) error {
	tenant := ""
	if len(objs) > 0 {
		tenant = objs[0].Key.Tenant
	}
	for i := range objs {
		o := &objs[i]
		if err := o.Key.Validate(); err != nil {
			return fmt.Errorf("%w: place: object %d (%v): %w", meta.ErrBadRequest, i, o.Key, err)
		}
		if o.Size < 0 || o.Size > meta.MaxItemSize {
			return badRequest("place: object %d (%v): size %d (want 0 to %d)", i, o.Key, o.Size, int64(meta.MaxItemSize))
		}
	}
	return m.place(tenant, len(objs), func(i int) meta.Object { return objs[i] }, replicas, hint, strategy, dst)
}

// place is Place and PlaceObjects: n objects, object i given by obj.
func (m *Master) place(tenant string, n int, obj func(int) meta.Object, replicas int, hint meta.NodeID, strategy meta.Strategy, dst *meta.Placement) error {
	if dst == nil {
		return badRequest("place %d blocks of tenant %q: nil result", n, tenant)
	}
	dst.PerBlock, dst.Degraded, dst.Nodes = 0, false, dst.Nodes[:0]
	strategy, err := m.checkPlace(tenant, n, replicas, strategy)
	if err != nil {
		return err
	}
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	cands := m.candidates(nowNs)
	if len(cands) == 0 {
		return fmt.Errorf("master: place %d blocks of tenant %q: %w", n, tenant, meta.ErrNoNodes)
	}
	k := min(replicas, len(cands))
	dst.PerBlock, dst.Degraded = k, k < replicas
	hintIdx := -1
	if strategy == meta.LocalFirst && hint != "" {
		hintIdx = slices.IndexFunc(cands, func(c candidate) bool { return c.n.id == hint })
	}
	th, thKey := block.FNV1a(tenant), tenant
	for i := range n {
		o := obj(i)
		if o.Key.Tenant != thKey {
			th, thKey = block.FNV1a(o.Key.Tenant), o.Key.Tenant
		}
		for j := range cands {
			cands[j].chosen = false
		}
		switch strategy {
		case meta.Hash:
			dst.Nodes = placeByHash(dst.Nodes, cands, o, objectHash(th, o.Key), k)
		default:
			dst.Nodes = m.placeByUsage(dst.Nodes, cands, o, hintIdx, k)
		}
	}
	m.c.placements.Add(1)
	return nil
}

// objectHash is the key hash rendezvous placement scores: the chain key's
// keyHash, mixed with the name's hash for a named key (so two names
// sharing an id are placed independently).
func objectHash(tenantHash uint64, k block.Key) uint64 {
	h := keyHash(tenantHash, k.ID)
	if k.Name != "" {
		h = block.Mix64(h ^ block.FNV1a(k.Name)*block.Golden64)
	}
	return h
}

// checkPlace validates the arguments of a Place of n blocks and returns
// the strategy to use (StrategyDefault resolved to Options.Placement).
func (m *Master) checkPlace(tenant string, n, replicas int, strategy meta.Strategy) (meta.Strategy, error) {
	if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
		return 0, fmt.Errorf("%w: place: tenant: %w", meta.ErrBadRequest, err)
	}
	if replicas < 1 || replicas > meta.MaxReplicas {
		return 0, badRequest("place %d blocks of tenant %q: %d replicas (want 1 to %d)", n, tenant, replicas, meta.MaxReplicas)
	}
	if strategy == meta.StrategyDefault {
		strategy = m.opts.Placement
	}
	if strategy > meta.Hash {
		return 0, badRequest("place %d blocks of tenant %q: unknown strategy %v", n, tenant, strategy)
	}
	return strategy, nil
}

// placeByHash appends to nodes the k unchosen candidates with the highest
// rendezvous scores for object o whose key hash is kh, and charges them.
func placeByHash(nodes []meta.NodeID, cands []candidate, o meta.Object, kh uint64, k int) []meta.NodeID {
	for range k {
		best := -1
		var bestScore uint64
		for i := range cands {
			c := &cands[i]
			if c.chosen {
				continue
			}
			// Ties (astronomically rare) go to the lower ID: cands is
			// sorted by ID and only a strictly higher score wins.
			if sc := block.Mix64(kh ^ c.n.idHash); best < 0 || sc > bestScore {
				best, bestScore = i, sc
			}
		}
		nodes = append(nodes, choose(&cands[best], o))
	}
	return nodes
}

// placeByUsage appends to nodes k candidates for object o: the hint
// candidate first (hintIdx, -1 for none) if o's footprint keeps it at or
// under HighWatermark, then the least used others, ties by node ID; it
// charges each.
func (m *Master) placeByUsage(nodes []meta.NodeID, cands []candidate, o meta.Object, hintIdx, k int) []meta.NodeID {
	start := 0
	if hintIdx >= 0 {
		h := &cands[hintIdx]
		if h.cap > 0 && float64(h.used+h.footprint(o)) <= m.opts.HighWatermark*float64(h.cap) {
			nodes = append(nodes, choose(h, o))
			start = 1
		}
	}
	for j := start; j < k; j++ {
		best := -1
		for i := range cands {
			c := &cands[i]
			if c.chosen {
				continue
			}
			if best < 0 || c.before(&cands[best], o) {
				best = i
			}
		}
		nodes = append(nodes, choose(&cands[best], o))
	}
	return nodes
}

// before reports whether c is a better choice than b for o by usage: a
// node whose RAM can hold o at all (its footprint within the capacity)
// before one that cannot, then the lower usage fraction.
func (c *candidate) before(b *candidate, o meta.Object) bool {
	cf, bf := c.footprint(o) <= c.cap, b.footprint(o) <= b.cap
	if cf != bf {
		return cf
	}
	return c.fraction() < b.fraction()
}

// footprint is the RAM o takes on c's node.
func (c *candidate) footprint(o meta.Object) int64 { return meta.Footprint(o.Key, o.Size, c.slot) }

// choose marks c chosen for the current object and charges it o's
// footprint.
func choose(c *candidate, o meta.Object) meta.NodeID {
	c.chosen = true
	c.used += c.footprint(o)
	return c.n.id
}

// candidates returns the live nodes sorted by ID.
func (m *Master) candidates(nowNs int64) []candidate {
	m.nodesMu.RLock()
	out := make([]candidate, 0, len(m.nodes))
	for _, n := range m.nodes {
		if n.deadline.Load() < nowNs {
			continue
		}
		out = append(out, candidate{
			n:    n,
			used: n.ramUsed.Load() + n.promoWant.Load(),
			cap:  n.ramBytes.Load(),
			slot: n.slot.Load(),
		})
	}
	m.nodesMu.RUnlock()
	slices.SortFunc(out, func(a, b candidate) int { return cmp.Compare(a.n.id, b.n.id) })
	return out
}
