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
	"github.com/kvpool/kvpool/internal/meta"
)

// modelNode is what a node holds, as a trivial map.
type modelNode map[meta.ItemKey]meta.Item

func (mn modelNode) inventory() meta.Inventory {
	out := make(meta.Inventory, 0, len(mn))
	for _, it := range mn {
		out = append(out, it)
	}
	slices.SortFunc(out, func(a, b meta.Item) int {
		return rowCmp(row{Key: a.Key, Tier: a.Tier}, row{Key: b.Key, Tier: b.Tier})
	})
	return out
}

// apply applies d with the master's documented semantics.
func (mn modelNode) apply(d meta.Delta) {
	for _, it := range d.Added {
		mn[meta.ItemKey{Key: it.Key, Tier: it.Tier}] = it
	}
	for _, ik := range d.Removed {
		delete(mn, ik)
	}
	for _, mv := range d.Moved {
		from, to := meta.ItemKey{Key: mv.Key, Tier: mv.From}, meta.ItemKey{Key: mv.Key, Tier: mv.To}
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
	modelTiers   = []meta.Tier{meta.TierRAM, meta.TierSSD}
)

// modelNames are the names of named keys; their ids are drawn like chain
// keys', so names share ids with each other and with chain keys.
var modelNames = []string{"", "", "a", "b"}

func randKey(rng *rand.Rand, nIDs int) block.Key {
	return block.Key{Tenant: modelTenants[rng.IntN(len(modelTenants))], ID: uint64(rng.IntN(nIDs)), Name: modelNames[rng.IntN(len(modelNames))]}
}

func randItem(rng *rand.Rand, nIDs int) meta.Item {
	k := randKey(rng, nIDs)
	return meta.Item{Key: k, Tier: modelTiers[rng.IntN(2)], Size: int64(1 + rng.IntN(300)), Sum: rng.Uint32()}
}

func randItemKey(rng *rand.Rand, nIDs int) meta.ItemKey {
	it := randItem(rng, nIDs)
	return meta.ItemKey{Key: it.Key, Tier: it.Tier}
}

func randDelta(rng *rand.Rand, nIDs int) meta.Delta {
	var d meta.Delta
	for range rng.IntN(5) {
		d.Added = append(d.Added, randItem(rng, nIDs))
	}
	for range rng.IntN(4) {
		d.Removed = append(d.Removed, randItemKey(rng, nIDs))
	}
	for range rng.IntN(3) {
		ik := randItemKey(rng, nIDs)
		d.Moved = append(d.Moved, meta.Move{Key: ik.Key, From: ik.Tier, To: otherTier(ik.Tier)})
	}
	return d
}

// randInventory returns a random inventory without duplicates.
func randInventory(rng *rand.Rand, nIDs int) meta.Inventory {
	mn := modelNode{}
	for range rng.IntN(12) {
		it := randItem(rng, nIDs)
		mn[meta.ItemKey{Key: it.Key, Tier: it.Tier}] = it
	}
	return mn.inventory()
}

// expectLayout is the lookup layout the model predicts for ids of tenant.
func expectLayout(models map[meta.NodeID]modelNode, tenant string, ids []uint64) string {
	var blocks []string
	for _, id := range ids {
		l := expectKey(models, block.Key{Tenant: tenant, ID: id})
		if l == "" {
			break
		}
		blocks = append(blocks, l)
	}
	return strings.Join(blocks, "|")
}

// expectLocate is the Locate layout the model predicts for keys.
func expectLocate(models map[meta.NodeID]modelNode, keys []block.Key) string {
	var blocks []string
	for _, k := range keys {
		blocks = append(blocks, expectKey(models, k))
	}
	return strings.Join(blocks, "|")
}

// expectKey is the model's replicas of k, as layout renders them.
func expectKey(models map[meta.NodeID]modelNode, k block.Key) string {
	var reps []meta.Replica
	for nid, mn := range models {
		for _, tier := range modelTiers {
			if _, ok := mn[meta.ItemKey{Key: k, Tier: tier}]; ok {
				reps = append(reps, meta.Replica{Node: nid, Tier: tier})
			}
		}
	}
	sortReplicas(reps)
	var parts []string
	for _, r := range reps {
		parts = append(parts, fmt.Sprintf("%s:%v", r.Node, r.Tier))
	}
	return strings.Join(parts, ",")
}

// TestModel runs random registrations, heartbeats, silences, lookups and
// point lookups against the master and a trivial model, comparing the
// whole index after every step. Keys are chain keys and named keys whose
// ids collide with each other and with chain keys. Eviction is out of the
// picture (the pool never fills).
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
	nodeIDs := []meta.NodeID{"n0", "n1", "n2", "n3"}
	models := map[meta.NodeID]modelNode{} // registered nodes only
	sessions := map[meta.NodeID]meta.Session{}
	last := map[meta.NodeID]time.Time{}
	var res meta.LookupResult
	for step := range steps {
		id := nodeIDs[rng.IntN(len(nodeIDs))]
		var op string
		switch r := rng.IntN(11); {
		case r < 2:
			op = "register"
			inv := randInventory(rng, nIDs)
			sessions[id] = register(t, m, info(id, 1<<40, 1<<40), inv)
			mn := modelNode{}
			mn.apply(meta.Delta{Added: inv})
			models[id] = mn
			last[id] = clk.Now()
		case r < 7:
			op = "heartbeat"
			d := randDelta(rng, nIDs)
			_, err := m.Heartbeat(id, sessions[id], d, meta.NodeUsage{}, nil, nil)
			_, registered := models[id]
			switch {
			case registered && err == nil:
				models[id].apply(d)
				last[id] = clk.Now()
			case !registered && errors.Is(err, meta.ErrUnknownNode):
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
		case r < 9:
			op = "locate"
			var keys []block.Key
			for range rng.IntN(5) {
				keys = append(keys, randKey(rng, nIDs))
			}
			if err := m.Locate(keys, rng.IntN(2) == 0, &res); err != nil {
				t.Fatal(err)
			}
			if got, want := layout(&res), expectLocate(models, keys); got != want {
				t.Fatalf("step %d: locate %v = %q, model says %q", step, keys, got, want)
			}
			present, err := m.ExistsKeys(keys, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				if want := expectKey(models, k) != ""; present[i] != want {
					t.Fatalf("step %d: ExistsKeys(%v) = %v, model says %v", step, k, present[i], want)
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
