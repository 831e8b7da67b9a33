package master

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// placeNodes registers a (50% RAM used), b and c (20% each) and d (no RAM).
func placeNodes(t *testing.T, m *Master) map[meta.NodeID]meta.Session {
	t.Helper()
	return map[meta.NodeID]meta.Session{
		"a": register(t, m, info("a", 1000, 0), inv(ram("x", ids(1, 5)...))),
		"b": register(t, m, info("b", 1000, 0), inv(ram("x", ids(11, 12)...))),
		"c": register(t, m, info("c", 1000, 0), inv(ram("x", ids(21, 22)...))),
		"d": register(t, m, info("d", 0, 5000), nil),
	}
}

func placeString(p *meta.Placement, blocks int) string {
	var parts []string
	for i := range blocks {
		var ns []string
		for _, n := range p.Block(i) {
			ns = append(ns, string(n))
		}
		parts = append(parts, strings.Join(ns, ","))
	}
	return strings.Join(parts, "|")
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name     string
		ids      []uint64
		replicas int
		hint     meta.NodeID
		strategy meta.Strategy
		want     string
		degraded bool
	}{
		{"least-used, ties by id", []uint64{1}, 1, "", meta.LeastUsed, "b", false},
		{"least-used spreads a batch", []uint64{1, 2, 3, 4}, 1, "", meta.LeastUsed, "b|c|b|c", false},
		{"least-used two replicas", []uint64{1, 2}, 2, "", meta.LeastUsed, "b,c|b,c", false},
		{"least-used prefers nodes with RAM", []uint64{1}, 4, "", meta.LeastUsed, "b,c,a,d", false},
		{"local-first uses the hint", []uint64{1, 2}, 2, "a", meta.LocalFirst, "a,b|a,c", false},
		{"local-first without hint", []uint64{1}, 1, "", meta.LocalFirst, "b", false},
		{"local-first unknown hint", []uint64{1}, 1, "zz", meta.LocalFirst, "b", false},
		{"local-first hint without RAM", []uint64{1}, 1, "d", meta.LocalFirst, "b", false},
		{"default is local-first", []uint64{1}, 1, "c", meta.StrategyDefault, "c", false},
		{"degraded", []uint64{1}, 6, "", meta.LeastUsed, "b,c,a,d", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTest(t, Options{})
			placeNodes(t, m)
			var p meta.Placement
			if err := m.Place("x", tc.ids, tc.replicas, tc.hint, tc.strategy, &p); err != nil {
				t.Fatal(err)
			}
			if got := placeString(&p, len(tc.ids)); got != tc.want || p.Degraded != tc.degraded {
				t.Errorf("placed %q degraded=%v, want %q degraded=%v", got, p.Degraded, tc.want, tc.degraded)
			}
		})
	}
}

func TestPlaceLocalFirstFullHint(t *testing.T) {
	m, _ := newTest(t, Options{})
	register(t, m, info("a", 1000, 0), inv(ram("x", ids(1, 9)...)))   // 90%: one more is 100% > 95%
	register(t, m, info("b", 1000, 0), inv(ram("x", ids(11, 19)...))) // 90% too
	register(t, m, info("c", 1000, 0), inv(ram("x", ids(21, 22)...)))
	var p meta.Placement
	if err := m.Place("x", []uint64{1}, 1, "a", meta.LocalFirst, &p); err != nil {
		t.Fatal(err)
	}
	if got := placeString(&p, 1); got != "c" {
		t.Errorf("full hint: placed %q, want the least used (c)", got)
	}
	// 85% has room for one more block (90% <= 95%).
	m2, _ := newTest(t, Options{})
	register(t, m2, info("a", 2000, 0), inv(ram("x", ids(1, 17)...)))
	register(t, m2, info("c", 1000, 0), nil)
	if err := m2.Place("x", []uint64{1, 2}, 1, "a", meta.LocalFirst, &p); err != nil {
		t.Fatal(err)
	}
	if got := placeString(&p, 2); got != "a|a" {
		t.Errorf("hint with room: placed %q, want a|a (90%%, then 95%%)", got)
	}
}

func TestPlaceHash(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: 3 * time.Second})
	sess := placeNodes(t, m)
	keys := ids(1, 2000)
	var before, after meta.Placement
	if err := m.Place("x", keys, 2, "", meta.Hash, &before); err != nil {
		t.Fatal(err)
	}
	counts := map[meta.NodeID]int{}
	for i := range keys {
		b := before.Block(i)
		if b[0] == b[1] {
			t.Fatalf("block %d placed twice on %s", keys[i], b[0])
		}
		counts[b[0]]++
	}
	for _, id := range []meta.NodeID{"a", "b", "c", "d"} {
		// Rendezvous hashing ignores usage: each node is first for about
		// a quarter of the keys (500 ± 5 sigma).
		if n := counts[id]; n < 400 || n > 600 {
			t.Errorf("node %s first for %d of 2000 keys, want about 500", id, n)
		}
	}
	// d leaves (stops heartbeating); nothing that did not use d moves.
	clk.Advance(2 * time.Second)
	for _, id := range []meta.NodeID{"a", "b", "c"} {
		heartbeat(t, m, id, sess[id], meta.Delta{}, nil, nil)
	}
	clk.Advance(2 * time.Second)
	if err := m.Place("x", keys, 2, "", meta.Hash, &after); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range keys {
		b, a := before.Block(i), after.Block(i)
		if slices.Contains(a, "d") {
			t.Fatalf("block %d placed on departed node d", keys[i])
		}
		if !slices.Contains(b, "d") {
			if !slices.Equal(a, b) {
				t.Fatalf("block %d moved from %v to %v though d was not among its nodes", keys[i], b, a)
			}
			continue
		}
		moved++
		// The surviving choice keeps its rank order; d's slot is taken by
		// the next best node.
		kept := slices.DeleteFunc(slices.Clone(b), func(n meta.NodeID) bool { return n == "d" })
		if !slices.Contains(a, kept[0]) {
			t.Fatalf("block %d: %v → %v lost its surviving node %s", keys[i], b, a, kept[0])
		}
	}
	if moved == 0 {
		t.Fatal("no block used d: the test proves nothing")
	}
	// Deterministic: the same state gives the same answer.
	var again meta.Placement
	if err := m.Place("x", keys, 2, "", meta.Hash, &again); err != nil || !slices.Equal(again.Nodes, after.Nodes) {
		t.Fatalf("second identical Place differs (err %v)", err)
	}
}

func TestPlaceErrors(t *testing.T) {
	m, _ := newTest(t, Options{})
	var p meta.Placement
	if err := m.Place("x", []uint64{1}, 1, "", meta.LeastUsed, &p); !errors.Is(err, meta.ErrNoNodes) {
		t.Errorf("no nodes: %v, want ErrNoNodes", err)
	}
	placeNodes(t, m)
	tests := []struct {
		name     string
		tenant   string
		replicas int
		strategy meta.Strategy
		dst      *meta.Placement
	}{
		{"zero replicas", "x", 0, meta.LeastUsed, &p},
		{"too many replicas", "x", meta.MaxReplicas + 1, meta.LeastUsed, &p},
		{"bad tenant", "x/y", 1, meta.LeastUsed, &p},
		{"unknown strategy", "x", 1, meta.Strategy(42), &p},
		{"nil result", "x", 1, meta.LeastUsed, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.Place(tc.tenant, []uint64{1}, tc.replicas, "", tc.strategy, tc.dst); !errors.Is(err, meta.ErrBadRequest) {
				t.Errorf("err = %v, want ErrBadRequest", err)
			}
		})
	}
}

// TestPlaceObjectSizes: PlaceObjects takes sizes of 0 to meta.MaxItemSize
// (1 TiB; the nodes enforce their own max object size) and places even an
// object larger than every node's RAM, without overflow in the footprint
// or the usage sums; a negative size or one over MaxItemSize is a bad
// request naming the object and the bounds.
func TestPlaceObjectSizes(t *testing.T) {
	m, _ := newTest(t, Options{})
	placeNodes(t, m)
	var p meta.Placement
	for _, size := range []int64{0, 1, 600 << 20, 5 << 30, meta.MaxItemSize} {
		objs := []meta.Object{{Key: block.Named("x", "big"), Size: size}, {Key: block.Named("x", "small"), Size: 28}}
		if err := m.PlaceObjects(objs, 2, "", meta.LeastUsed, &p); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if p.PerBlock != 2 || len(p.Block(0)) != 2 || len(p.Block(1)) != 2 {
			t.Fatalf("size %d: placed %s, want 2 nodes each", size, placeString(&p, 2))
		}
	}
	for _, size := range []int64{-1, meta.MaxItemSize + 1, math.MaxInt64} {
		objs := []meta.Object{{Key: block.Named("x", "a\xffname"), Size: size}}
		err := m.PlaceObjects(objs, 1, "", meta.LeastUsed, &p)
		if !errors.Is(err, meta.ErrBadRequest) || !strings.Contains(err.Error(), fmt.Sprintf("size %d (want 0 to %d)", size, int64(meta.MaxItemSize))) ||
			!strings.Contains(err.Error(), `"a\xffname"`) {
			t.Errorf("size %d: %v; want ErrBadRequest with the size, the bounds and the name quoted", size, err)
		}
	}
}
