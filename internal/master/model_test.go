package master

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
)

// modelNode is what a node holds, as a trivial map.
type modelNode map[ItemKey]Item

func (mn modelNode) inventory() Inventory {
	out := make(Inventory, 0, len(mn))
	for _, it := range mn {
		out = append(out, it)
	}
	slices.SortFunc(out, func(a, b Item) int {
		return rowCmp(row{Key: a.Key, Tier: a.Tier}, row{Key: b.Key, Tier: b.Tier})
	})
	return out
}

// apply applies d with the master's documented semantics.
func (mn modelNode) apply(d Delta) {
	for _, it := range d.Added {
		mn[ItemKey{it.Key, it.Tier}] = it
	}
	for _, ik := range d.Removed {
		delete(mn, ik)
	}
	for _, mv := range d.Moved {
		from, to := ItemKey{mv.Key, mv.From}, ItemKey{mv.Key, mv.To}
		it, ok := mn[from]
		if !ok {
			continue
		}
		delete(mn, from)
		if _, exists := mn[to]; !exists {
			it.Tier = mv.To
			mn[to] = it
		}
	}
}

var (
	modelTenants = []string{"t", "u"}
	modelTiers   = []Tier{TierRAM, TierSSD}
)

func randItem(rng *rand.Rand, nIDs int) Item {
	k := block.Key{Tenant: modelTenants[rng.IntN(len(modelTenants))], ID: uint64(rng.IntN(nIDs))}
	return Item{Key: k, Tier: modelTiers[rng.IntN(2)], Size: int64(1 + rng.IntN(300)), Sum: rng.Uint32()}
}

func randItemKey(rng *rand.Rand, nIDs int) ItemKey {
	it := randItem(rng, nIDs)
	return ItemKey{it.Key, it.Tier}
}

func randDelta(rng *rand.Rand, nIDs int) Delta {
	var d Delta
	for range rng.IntN(5) {
		d.Added = append(d.Added, randItem(rng, nIDs))
	}
	for range rng.IntN(4) {
		d.Removed = append(d.Removed, randItemKey(rng, nIDs))
	}
	for range rng.IntN(3) {
		ik := randItemKey(rng, nIDs)
		to := TierSSD
		if ik.Tier == TierSSD {
			to = TierRAM
		}
		d.Moved = append(d.Moved, Move{Key: ik.Key, From: ik.Tier, To: to})
	}
	return d
}

// randInventory returns a random inventory without duplicates.
func randInventory(rng *rand.Rand, nIDs int) Inventory {
	mn := modelNode{}
	for range rng.IntN(12) {
		it := randItem(rng, nIDs)
		mn[ItemKey{it.Key, it.Tier}] = it
	}
	return mn.inventory()
}

// expectLayout is the lookup layout the model predicts for ids of tenant.
func expectLayout(models map[NodeID]modelNode, tenant string, ids []uint64) string {
	var blocks []string
	for _, id := range ids {
		var reps []Replica
		for nid, mn := range models {
			for _, tier := range modelTiers {
				if _, ok := mn[ItemKey{block.Key{Tenant: tenant, ID: id}, tier}]; ok {
					reps = append(reps, Replica{Node: nid, Tier: tier})
				}
			}
		}
		if len(reps) == 0 {
			break
		}
		sortReplicas(reps)
		var parts []string
		for _, r := range reps {
			parts = append(parts, fmt.Sprintf("%s:%v", r.Node, r.Tier))
		}
		blocks = append(blocks, strings.Join(parts, ","))
	}
	return strings.Join(blocks, "|")
}

// TestModel runs random registrations, heartbeats, silences and lookups
// against the master and a trivial model, comparing the whole index after
// every step. Eviction is out of the picture (the pool never fills).
func TestModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runModel(t, seed, 400)
		})
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	m, clk := newTest(t, Options{})
	ttl := m.Options().NodeTTL
	const nIDs = 12
	nodeIDs := []NodeID{"n0", "n1", "n2", "n3"}
	models := map[NodeID]modelNode{} // registered nodes only
	sessions := map[NodeID]Session{}
	last := map[NodeID]time.Time{}
	var res LookupResult
	for step := range steps {
		id := nodeIDs[rng.IntN(len(nodeIDs))]
		var op string
		switch r := rng.IntN(10); {
		case r < 2:
			op = "register"
			inv := randInventory(rng, nIDs)
			sessions[id] = register(t, m, info(id, 1<<40, 1<<40), inv)
			mn := modelNode{}
			mn.apply(Delta{Added: inv})
			models[id] = mn
			last[id] = clk.Now()
		case r < 7:
			op = "heartbeat"
			d := randDelta(rng, nIDs)
			_, err := m.Heartbeat(id, sessions[id], d, NodeUsage{}, nil, nil)
			_, registered := models[id]
			switch {
			case registered && err == nil:
				models[id].apply(d)
				last[id] = clk.Now()
			case !registered && errors.Is(err, ErrUnknownNode):
			default:
				t.Fatalf("step %d: heartbeat of %s (registered %v): %v", step, id, registered, err)
			}
		case r < 8:
			op = "advance"
			clk.Advance(time.Duration(rng.IntN(int(ttl))))
			for nid, at := range last {
				if clk.Now().Sub(at) > ttl {
					delete(models, nid)
					delete(last, nid)
				}
			}
		default:
			op = "lookup"
			tenant := modelTenants[rng.IntN(2)]
			var ids []uint64
			for range rng.IntN(5) {
				ids = append(ids, uint64(rng.IntN(nIDs)))
			}
			if err := m.Lookup(tenant, ids, rng.IntN(2) == 0, &res); err != nil {
				t.Fatal(err)
			}
			if got, want := layout(&res), expectLayout(models, tenant, ids); got != want {
				t.Fatalf("step %d: lookup %s %v = %q, model says %q", step, tenant, ids, got, want)
			}
		}
		m.Expire()
		var want []row
		for nid, mn := range models {
			want = append(want, rowsOf(nid, mn.inventory())...)
		}
		slices.SortFunc(want, rowCmp)
		if d := diffRows(dump(m), want); d != "" {
			t.Fatalf("step %d (%s %s): index differs from the model:\n%s", step, op, id, d)
		}
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("step %d (%s %s): %v", step, op, id, err)
		}
	}
}
