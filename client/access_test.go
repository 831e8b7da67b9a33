package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/client"
)

// TestAccessHints checks that Access sends each entry's chain position
// and kind to the named node, in order, and reports each outcome.
func TestAccessHints(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{LocalNode: "n0"})
	ctx := context.Background()
	ids := []uint64{5, 6, 7}
	if _, err := cl.Access(ctx, client.Chain(ids, [][]byte{payload(5, 64), payload(6, 64), payload(7, 64)}), client.AccessOptions{Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Access(ctx, []client.Access{{ID: 6, Hint: block.Hint{Depth: 1, Parent: 5}}, {ID: 9, Hint: block.Hint{Depth: 2, Parent: 6}}}, client.AccessOptions{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []client.AccessStatus{client.AccessTouched, client.AccessNotHeld}; len(res.Status) != 2 || res.Status[0] != want[0] || res.Status[1] != want[1] {
		t.Fatalf("statuses %v, want %v", res.Status, want)
	}
	if len(c.nodes[0].backend.Accesses()) != 0 {
		t.Fatal("node n0 saw accesses meant for n1")
	}
	got := c.nodes[1].backend.Accesses()
	type entry struct {
		id           uint64
		depth        int
		parent       uint64
		touch, found bool
	}
	want := []entry{{5, 0, 0, false, true}, {6, 1, 5, false, true}, {7, 2, 6, false, true}, {6, 1, 5, true, true}, {9, 2, 6, true, false}}
	if len(got) != len(want) {
		t.Fatalf("node saw %d accesses, want %d", len(got), len(want))
	}
	for i, a := range got {
		e := entry{a.Key.ID, a.Hint.Depth, a.Hint.Parent, a.Hint.Touch, a.Found}
		if e != want[i] || a.Key.Tenant != cl.Tenant() {
			t.Errorf("access %d: %+v (tenant %q), want %+v", i, e, a.Key.Tenant, want[i])
		}
	}
	if s := cl.Stats(); s.BlocksStored != 3 {
		t.Errorf("BlocksStored %d, want 3", s.BlocksStored)
	}
}

// TestAccessFetchBadInput checks the argument errors of Access and Fetch.
func TestAccessFetchBadInput(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c, client.Options{})
	ctx := context.Background()
	if _, err := cl.Access(ctx, client.Chain([]uint64{1}, nil), client.AccessOptions{}); err == nil {
		t.Error("Access with no node and no LocalNode succeeded")
	}
	if _, err := cl.Access(ctx, []client.Access{{ID: 1, Hint: block.Hint{Depth: -1}}}, client.AccessOptions{Node: "n0"}); err == nil {
		t.Error("Access with a negative depth succeeded")
	}
	if _, err := cl.Fetch(ctx, client.Location{}, []uint64{1}, client.FetchOptions{}); err == nil {
		t.Error("Fetch from a location without a node succeeded")
	}
	cl.Close()
	if _, err := cl.Fetch(ctx, client.Location{Node: "n0"}, []uint64{1}, client.FetchOptions{}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Fetch after Close: %v, want ErrClosed", err)
	}
	if _, err := cl.Access(ctx, client.Chain([]uint64{1}, nil), client.AccessOptions{Node: "n0"}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Access after Close: %v, want ErrClosed", err)
	}
}

// TestFetchCorrupt checks that Fetch reports a copy failing verification
// as Corrupt (and counts it) and tries no other replica.
func TestFetchCorrupt(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{})
	ids := []uint64{7, 8}
	put(t, cl, ids, client.PutOptions{Replicas: 2, Hint: "n0"})
	if err := c.nodes[0].backend.FlipBit(block.Key{ID: 7}, 100); err != nil {
		t.Fatal(err)
	}
	dst := [][]byte{make([]byte, 0, 4096), make([]byte, 0, 4096)}
	res, err := cl.Fetch(context.Background(), client.Location{Node: "n0", Tier: client.TierRAM}, ids, client.FetchOptions{Dst: dst})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status[0] != client.Corrupt || res.Status[1] != client.Loaded || res.Corruptions != 1 || cl.Stats().Corruptions != 1 {
		t.Fatalf("statuses %v, corruptions %d (stats %d); want [corrupt loaded], 1", res.Status, res.Corruptions, cl.Stats().Corruptions)
	}
	if res.From[1].Node != "n0" || res.From[1].Size != int64(len(res.Blocks[1])) || &res.Blocks[1][0] != &dst[1][:1][0] {
		t.Errorf("block 8 from %+v, %d bytes, in dst: %v", res.From[1], len(res.Blocks[1]), &res.Blocks[1][0] == &dst[1][:1][0])
	}
}
