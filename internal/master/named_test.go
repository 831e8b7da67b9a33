package master

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// Colliding keys: two names sharing id 7 and the chain key 7, all of
// tenant t. Every index operation must keep them apart.
var (
	nameA = block.Key{Tenant: "t", ID: 7, Name: "a"}
	nameB = block.Key{Tenant: "t", ID: 7, Name: "b"}
	chain = block.Key{Tenant: "t", ID: 7}
)

func item(k block.Key, tier meta.Tier, size int64) meta.Item {
	return meta.Item{Key: k, Tier: tier, Size: size, Sum: block.KeySum(k) ^ uint32(size)}
}

func locate(t testing.TB, m *Master, lease bool, ks ...block.Key) *meta.LookupResult {
	t.Helper()
	var r meta.LookupResult
	if err := m.Locate(ks, lease, &r); err != nil {
		t.Fatalf("Locate: %v", err)
	}
	return &r
}

// sizes renders a Locate result as the replica sizes per key ("28|-|4096",
// - for an absent key).
func sizes(r *meta.LookupResult) string {
	var parts []string
	for i := range r.Hit {
		var s []string
		for _, rep := range r.Block(i) {
			s = append(s, fmt.Sprintf("%d", rep.Size))
		}
		if len(s) == 0 {
			s = []string{"-"}
		}
		parts = append(parts, strings.Join(s, ","))
	}
	return strings.Join(parts, "|")
}

// TestNamedKeysKeptApart: a chain key and two names sharing its id are
// three objects in the index, in Locate, Lookup, Exists, Query, deltas
// and eviction.
func TestNamedKeysKeptApart(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	in := meta.Inventory{item(nameA, meta.TierRAM, 28), item(nameB, meta.TierRAM, 300), item(chain, meta.TierRAM, 100)}
	s := register(t, m, info("a", 10000, 10000), in)
	checkDump(t, m, sortedRows(rowsOf("a", in)))

	absent := block.Key{Tenant: "t", ID: 7, Name: "c"}
	other := block.Key{Tenant: "u", ID: 7, Name: "a"}
	if got := sizes(locate(t, m, false, nameA, nameB, chain, absent, other)); got != "28|300|100|-|-" {
		t.Fatalf("Locate sizes %q, want 28|300|100|-|-", got)
	}
	r := locate(t, m, false, nameB)
	if rep := r.Block(0)[0]; rep.Sum != in[1].Sum {
		t.Errorf("Locate(b) sum %x, want b's %x", rep.Sum, in[1].Sum)
	}
	// The prefix lookup of chain ids sees only the chain key.
	if r := lookup(t, m, "t", false, 7); r.Hit != 1 || r.Block(0)[0].Size != 100 {
		t.Errorf("Lookup(7) = %q (size %d), want the chain key's replica", layout(r), r.Block(0)[0].Size)
	}
	got, err := m.ExistsKeys([]block.Key{nameA, absent, chain, nameB}, nil)
	if err != nil || fmt.Sprint(got) != "[true false true true]" {
		t.Fatalf("ExistsKeys = %v, %v", got, err)
	}
	for _, k := range []block.Key{nameA, nameB, chain} {
		if q := m.Query(k); len(q) != 1 || q[0].Size != map[string]int64{"a": 28, "b": 300, "": 100}[k.Name] {
			t.Errorf("Query(%v) = %+v", k, q)
		}
	}
	if q := m.Query(absent); len(q) != 0 {
		t.Errorf("Query(%v) = %+v, want none", absent, q)
	}

	// Removing a leaves b and the chain key; moving b to SSD moves only b.
	heartbeat(t, m, "a", s, meta.Delta{
		Removed: []meta.ItemKey{{Key: nameA, Tier: meta.TierRAM}},
		Moved:   []meta.Move{{Key: nameB, From: meta.TierRAM, To: meta.TierSSD}},
	}, nil, nil)
	want := []row{{"a", chain, meta.TierRAM, 100, in[2].Sum}, {"a", nameB, meta.TierSSD, 300, in[1].Sum}}
	checkDump(t, m, sortedRows(want))
	if got := layout(locate(t, m, false, nameA, nameB, chain)); got != "|a:ssd|a:ram" {
		t.Errorf("after the delta: %q", got)
	}
	// Re-adding a with another size updates a alone.
	heartbeat(t, m, "a", s, meta.Delta{Added: []meta.Item{item(nameA, meta.TierRAM, 5)}}, nil, nil)
	if got := sizes(locate(t, m, false, nameA, nameB, chain)); got != "5|300|100" {
		t.Errorf("after re-adding a: %q", got)
	}
}

// TestFootprint: a RAM replica is charged its name and payload in whole
// chunks of the node's BlockSize.
func TestFootprint(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	long := block.Named("t", strings.Repeat("n", 150))
	in := meta.Inventory{
		item(block.Named("t", "x"), meta.TierRAM, 99),  // 100: one chunk
		item(block.Named("t", "xy"), meta.TierRAM, 99), // 101: two
		item(long, meta.TierRAM, 1),                    // 151: two
		item(chain, meta.TierRAM, 0),                   // one chunk at least
		item(block.Named("t", "s"), meta.TierSSD, 1000),
	}
	register(t, m, info("a", 100000, 100000), in)
	if st := m.Stats(); st.PoolRAMUsed != 600 {
		t.Fatalf("pool RAM used %d, want 600 (1+2+2+1 chunks of 100)", st.PoolRAMUsed)
	}
	if got := meta.Footprint(long, 1, 0); got != 151 {
		t.Errorf("Footprint without chunks = %d, want 151", got)
	}
}

// TestPlaceObjectsByBytes: placement charges each choice the object's
// footprint, so one large object weighs what it takes, and local-first
// refuses a hint the object would take over the high watermark.
func TestPlaceObjectsByBytes(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	register(t, m, info("a", 1000, 0), nil)
	register(t, m, info("b", 1000, 0), nil)
	objs := []meta.Object{
		{Key: block.Named("t", "big"), Size: 497}, // 500 bytes: 5 chunks
		{Key: block.Named("t", "s1"), Size: 1},
		{Key: block.Named("t", "s2"), Size: 1},
		{Key: block.Named("t", "s3"), Size: 1},
	}
	var p meta.Placement
	if err := m.PlaceObjects(objs, 1, "", meta.LeastUsed, &p); err != nil {
		t.Fatal(err)
	}
	// By slots it would alternate a|b|a|b; by bytes the small ones go to b
	// until it catches up.
	if got := placeString(&p, len(objs)); got != "a|b|b|b" {
		t.Errorf("least-used by bytes: %q, want a|b|b|b", got)
	}
	// Local-first: a 960-byte object would take a (100 bytes used) past
	// the 0.95 watermark: the hint is skipped.
	huge := []meta.Object{{Key: block.Named("t", "huge"), Size: 955}}
	register(t, m, info("a", 1000, 0), inv(ram("x", 1)))
	if err := m.PlaceObjects(huge, 1, "a", meta.LocalFirst, &p); err != nil {
		t.Fatal(err)
	}
	if got := placeString(&p, 1); got != "b" {
		t.Errorf("local-first with a full hint: %q, want b", got)
	}
	fits := []meta.Object{{Key: block.Named("t", "fits"), Size: 700}}
	if err := m.PlaceObjects(fits, 1, "a", meta.LocalFirst, &p); err != nil {
		t.Fatal(err)
	}
	if got := placeString(&p, 1); got != "a" {
		t.Errorf("local-first with room on the hint: %q, want a", got)
	}

	// An object larger than a node's RAM goes to a node that can hold it,
	// however full.
	register(t, m, info("c", 400, 0), nil) // empty, but too small
	tooBig := []meta.Object{{Key: block.Named("t", "wide"), Size: 500}}
	if err := m.PlaceObjects(tooBig, 1, "", meta.LeastUsed, &p); err != nil {
		t.Fatal(err)
	}
	if got := placeString(&p, 1); got != "b" {
		t.Errorf("a 500-byte object with c (400 bytes of RAM) empty: %q, want b", got)
	}

	// Bad objects are refused before anything is chosen.
	for _, bad := range [][]meta.Object{
		{{Key: block.Key{Tenant: "t", ID: 1, Name: strings.Repeat("x", block.MaxNameLen+1)}}},
		{{Key: block.Named("t", "neg"), Size: -1}},
		{{Key: block.Named("bad/tenant", "x")}},
	} {
		if err := m.PlaceObjects(bad, 1, "", meta.LeastUsed, &p); !errorsIsBadRequest(err) {
			t.Errorf("PlaceObjects(%v): %v, want a bad request", bad[0].Key, err)
		}
	}
}

// TestPlaceHashNames: hash placement hashes the whole key: two names
// sharing an id, and the chain key of that id, are placed independently,
// each deterministically.
func TestPlaceHashNames(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	for _, id := range []meta.NodeID{"a", "b", "c", "d", "e", "f", "g", "h"} {
		register(t, m, info(id, 1000, 0), nil)
	}
	differ := 0
	for id := uint64(1); id <= 32; id++ {
		objs := []meta.Object{
			{Key: block.Key{Tenant: "t", ID: id}},
			{Key: block.Key{Tenant: "t", ID: id, Name: "a"}},
			{Key: block.Key{Tenant: "t", ID: id, Name: "b"}},
		}
		var p, again meta.Placement
		if err := m.PlaceObjects(objs, 1, "", meta.Hash, &p); err != nil {
			t.Fatal(err)
		}
		if err := m.PlaceObjects(objs, 1, "", meta.Hash, &again); err != nil {
			t.Fatal(err)
		}
		if placeString(&p, 3) != placeString(&again, 3) {
			t.Fatalf("hash placement not deterministic: %q then %q", placeString(&p, 3), placeString(&again, 3))
		}
		var chainOnly meta.Placement
		if err := m.Place("t", []uint64{id}, 1, "", meta.Hash, &chainOnly); err != nil {
			t.Fatal(err)
		}
		if chainOnly.Nodes[0] != p.Nodes[0] {
			t.Fatalf("id %d: Place put the chain key on %s, PlaceObjects on %s", id, chainOnly.Nodes[0], p.Nodes[0])
		}
		if p.Nodes[1] != p.Nodes[2] || p.Nodes[0] != p.Nodes[1] {
			differ++
		}
	}
	// With 8 nodes, three independent keys land on one node 1 time in 64.
	if differ < 16 {
		t.Errorf("the keys of one id were placed apart only %d times in 32: the name is not hashed", differ)
	}
}

// TestEvictNamedByBytes: eviction frees bytes, not objects: one large
// named object frees as much as many small ones, victims are named keys in
// policy order, a leased named replica is skipped, and the demotion order
// names the key in full.
func TestEvictNamedByBytes(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour})
	lease := m.Options().LeaseTTL
	big := block.Named("t", "big")
	small := block.Key{Tenant: "t", ID: big.ID, Name: "small"} // shares big's id
	in := meta.Inventory{item(big, meta.TierRAM, 397), item(small, meta.TierRAM, 95)}
	s := register(t, m, info("a", 1000, 100000), in) // 400 + 100
	locate(t, m, true, small)                        // small is newer than big
	clk.Advance(lease)

	// 500 bytes more in one object: 1000/1000 > 0.95; evict to 900.
	more := block.Named("t", "more")
	r := heartbeat(t, m, "a", s, meta.Delta{Added: []meta.Item{item(more, meta.TierRAM, 496)}}, nil, nil)
	if len(r.Tasks) != 1 || r.Tasks[0].Kind != meta.TaskDemote || r.Tasks[0].Key != big {
		t.Fatalf("tasks %+v, want one demotion of %v", r.Tasks, big)
	}
	if st := m.Stats(); st.PoolRAMUsed != 600 || st.EvictFreedBytes != 400 {
		t.Fatalf("after the pass: used %d, freed %d bytes; want 600 and 400", st.PoolRAMUsed, st.EvictFreedBytes)
	}
	if got := sizes(locate(t, m, false, big, small, more)); got != "-|95|496" {
		t.Errorf("visible after the order: %q, want -|95|496", got)
	}
	heartbeat(t, m, "a", s, meta.Delta{Moved: []meta.Move{{Key: big, From: meta.TierRAM, To: meta.TierSSD}}}, nil,
		[]meta.TaskResult{{ID: r.Tasks[0].ID, OK: true}})
	if got := layout(locate(t, m, false, big, small)); got != "a:ssd|a:ram" {
		t.Errorf("after the demotion: %q", got)
	}

	// A leased named replica is not a victim: lease small and more, fill
	// up again; the pass can free nothing.
	locate(t, m, true, small, more)
	r = heartbeat(t, m, "a", s, meta.Delta{Added: []meta.Item{item(block.Named("t", "x"), meta.TierRAM, 399)}}, nil, nil)
	for _, tk := range r.Tasks {
		if tk.Key == small || tk.Key == more {
			t.Errorf("leased %v ordered out", tk.Key)
		}
	}
}

// TestPromoteNamed: SSD hits of a named key promote that key, not another
// name of its id; the promotion is charged the name and payload.
func TestPromoteNamed(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	s := register(t, m, info("a", 10000, 100000), meta.Inventory{item(nameA, meta.TierSSD, 250), item(nameB, meta.TierSSD, 250)})
	heartbeat(t, m, "a", s, meta.Delta{}, []block.Key{nameA}, nil)
	r := heartbeat(t, m, "a", s, meta.Delta{}, []block.Key{nameA}, nil)
	p := promotions(r.Tasks)
	if len(p) != 1 || p[0].Key != nameA {
		t.Fatalf("promotions %+v, want one of %v", p, nameA)
	}
	if ns := m.Nodes(); len(ns) != 1 || ns[0].PromotionsQueued != 0 || ns[0].TasksInFlight != 1 {
		t.Fatalf("node status %+v", ns)
	}
	if got := m.nodeByID("a").promoWant.Load(); got != 300 {
		t.Errorf("promotion charged %d bytes, want 300 (1+250 in chunks of 100)", got)
	}
}

func errorsIsBadRequest(err error) bool { return errors.Is(err, meta.ErrBadRequest) }

// nodeByID returns the registered node id.
func (m *Master) nodeByID(id meta.NodeID) *node {
	m.nodesMu.RLock()
	defer m.nodesMu.RUnlock()
	return m.nodes[id]
}
