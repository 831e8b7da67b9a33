package policylab

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// Merged is several tenants' traces merged into one request stream that
// one shared cache replays.
//
// Time alignment: each tenant's timestamps are shifted so that its first
// request arrives at 0, and each tenant keeps only the requests that
// arrive within the shortest tenant's span (WindowMs), so every tenant is
// active for the whole merged trace at its own arrival rate: the shared
// pool sees both tenants' pressure all the time rather than one tenant
// alone after the other has finished. The merged stream is ordered by
// aligned timestamp, ties by tenant index, then by each tenant's own order.
//
// Key spaces: the traces' hash ids are per-file numbers, so the same id
// in two tenants names different blocks. Merge renumbers them: every
// distinct (tenant, id) pair gets its own key, numbered from 1 in order of
// first appearance, so no key is shared between tenants while each
// tenant's own reuse (and its prefix chains) is kept exactly.
type Merged struct {
	// Requests is the merged stream in replay order, with renumbered keys.
	Requests []trace.Request `json:"-"`
	// Tenant[i] is the index of Requests[i]'s tenant in the list given to
	// Merge.
	Tenant []int `json:"-"`
	// Solo[t] is tenant t's part of Requests, in order (sharing its
	// HashIDs): the trace tenant t replays alone.
	Solo [][]trace.Request `json:"-"`
	// WindowMs is the common window: a tenant's request is kept when its
	// timestamp minus the tenant's first timestamp is at most WindowMs.
	WindowMs int64 `json:"window_ms"`
	// Keys[t] is the number of distinct keys of tenant t.
	Keys []int `json:"keys"`
}

// Merge merges the tenants' traces (at least two, each non-empty and in
// trace order) as Merged describes.
func Merge(tenants []Trace) (*Merged, error) {
	if len(tenants) < 2 {
		return nil, fmt.Errorf("policylab: merge tenants: %d tenant(s), want at least 2", len(tenants))
	}
	window := int64(-1)
	for i, t := range tenants {
		if len(t.Requests) == 0 {
			return nil, fmt.Errorf("policylab: merge tenants: tenant %d %q has no requests", i, t.Name)
		}
		first, last := t.Requests[0].Timestamp, t.Requests[0].Timestamp
		for j, r := range t.Requests {
			if r.Timestamp < last {
				return nil, fmt.Errorf("policylab: merge tenants: tenant %d %q: request %d (timestamp %d) is before request %d (timestamp %d); want trace order",
					i, t.Name, j, r.Timestamp, j-1, last)
			}
			last = r.Timestamp
		}
		if span := last - first; window < 0 || span < window {
			window = span
		}
	}
	type item struct {
		ts      int64
		tenant  int
		r       trace.Request
		ordinal int
	}
	var items []item
	m := &Merged{WindowMs: window, Solo: make([][]trace.Request, len(tenants)), Keys: make([]int, len(tenants))}
	next := uint64(1)
	for i, t := range tenants {
		ids := map[uint64]uint64{}
		first := t.Requests[0].Timestamp
		for j, r := range t.Requests {
			ts := r.Timestamp - first
			if ts > window {
				break
			}
			keys := make([]uint64, len(r.HashIDs))
			for k, id := range r.HashIDs {
				key, ok := ids[id]
				if !ok {
					key = next
					next++
					ids[id] = key
				}
				keys[k] = key
			}
			r.Timestamp, r.HashIDs = ts, keys
			items = append(items, item{ts, i, r, j})
		}
		m.Keys[i] = len(ids)
	}
	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.ordinal, b.ordinal))
	})
	m.Requests = make([]trace.Request, len(items))
	m.Tenant = make([]int, len(items))
	for i, it := range items {
		m.Requests[i], m.Tenant[i] = it.r, it.tenant
		m.Solo[it.tenant] = append(m.Solo[it.tenant], it.r)
	}
	return m, nil
}

// Counts are hit totals over some requests, in package hitrate's units.
type Counts struct {
	// Requests is the number of requests counted.
	Requests int `json:"requests"`
	// InputTokens and HitTokens are Σ input_length and Σ hit tokens.
	InputTokens int64 `json:"input_tokens"`
	HitTokens   int64 `json:"hit_tokens"`
	// Blocks and HitBlocks are Σ len(hash_ids) and Σ hit length.
	Blocks    int64 `json:"blocks"`
	HitBlocks int64 `json:"hit_blocks"`
}

// TokenHitRatio is HitTokens / InputTokens (0 when there are none).
func (c Counts) TokenHitRatio() float64 {
	if c.InputTokens == 0 {
		return 0
	}
	return float64(c.HitTokens) / float64(c.InputTokens)
}

// ReplayShared replays m's merged stream through one cache of capacity
// blocks driven by spec (an online policy), with package hitrate's
// semantics: a request's hit length is the number of its leading keys
// resident before it changes anything, then its blocks are accessed first
// to last with Depth, Parent and a global Time. It returns each tenant's
// totals; their sums equal hitrate.Run on m.Requests.
func ReplayShared(m *Merged, spec policy.Spec, capacity int) ([]Counts, error) {
	if spec.NeedsFuture() {
		return nil, fmt.Errorf("policylab: replay shared pool with %s: the policy needs the future, which a shared replay does not compute", spec)
	}
	if len(m.Tenant) != len(m.Requests) {
		return nil, fmt.Errorf("policylab: replay shared pool: %d requests but %d tenant labels", len(m.Requests), len(m.Tenant))
	}
	c, err := spec.NewCache(capacity)
	if err != nil {
		return nil, fmt.Errorf("policylab: replay shared pool: %w", err)
	}
	out := make([]Counts, len(m.Solo))
	var seq int64
	for i := range m.Requests {
		r := &m.Requests[i]
		t := m.Tenant[i]
		if t < 0 || t >= len(out) {
			return nil, fmt.Errorf("policylab: replay shared pool: request %d has tenant %d of %d", i, t, len(out))
		}
		hit := 0
		for hit < len(r.HashIDs) && c.Contains(r.HashIDs[hit]) {
			hit++
		}
		var parent uint64
		for j, k := range r.HashIDs {
			c.Access(policy.Access{Key: k, Hint: block.Hint{Depth: j, Parent: parent}, Time: seq, NextUse: policy.NoNextUse})
			parent = k
			seq++
		}
		o := &out[t]
		o.Requests++
		o.InputTokens += int64(r.InputLength)
		o.HitTokens += int64(r.HitTokens(hit))
		o.Blocks += int64(len(r.HashIDs))
		o.HitBlocks += int64(hit)
	}
	return out, nil
}

// Jain returns Jain's fairness index of x, (Σx)² / (n·Σx²): 1 when every
// value is equal, 1/n when one value holds everything. It is undefined
// (false) for an empty x or when every value is 0; negative values are
// undefined too.
func Jain(x []float64) (float64, bool) {
	var s, s2 float64
	for _, v := range x {
		if v < 0 {
			return 0, false
		}
		s += v
		s2 += v * v
	}
	if len(x) == 0 || s2 == 0 {
		return 0, false
	}
	return s * s / (float64(len(x)) * s2), true
}
