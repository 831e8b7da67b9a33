package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvpool/kvpool/client"
)

// TestNodeStats: every listed node answers with its tiers, and the blocks
// stored show up in them; a node that is gone is reported, not fatal.
func TestNodeStats(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{LocalNode: "n0"})
	ids := seq(1, 5)
	put(t, cl, ids, client.PutOptions{})
	stats, err := cl.NodeStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 2 {
		t.Fatalf("%d nodes answered, want 2", len(stats))
	}
	blocks := 0
	for _, s := range stats {
		if s.Err != nil || !s.Reached {
			t.Fatalf("node %s: reached %v, err %v", s.Node.ID, s.Reached, s.Err)
		}
		if len(s.Tiers) == 0 || s.Tiers[0].Name != "ram" {
			t.Fatalf("node %s: tiers %+v, want ram first", s.Node.ID, s.Tiers)
		}
		for _, tr := range s.Tiers {
			blocks += tr.Blocks
		}
	}
	if blocks != len(ids) {
		t.Errorf("the nodes hold %d blocks, want %d", blocks, len(ids))
	}

	if err := c.nodes[1].stop(); err != nil {
		t.Fatal(err)
	}
	stats, err = cl.NodeStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if down := s.Node.ID == "n1"; down != (s.Err != nil) || down == s.Reached {
			t.Errorf("node %s (stopped: %v): reached %v, err %v", s.Node.ID, down, s.Reached, s.Err)
		}
	}
}

// TestLocateAndWaitIndexed: a stored block is indexed and located; one
// never stored is not, and the wait for it gives up when told to.
func TestLocateAndWaitIndexed(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{LocalNode: "n1"})
	ctx := context.Background()
	put(t, cl, []uint64{7}, client.PutOptions{})
	ok, err := cl.WaitIndexed(ctx, []uint64{7}, time.Minute)
	if err != nil || !ok {
		t.Fatalf("WaitIndexed of a stored block: %v, %v", ok, err)
	}
	locs, err := cl.Locate(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(locs) != 1 || locs[0].Node != "n1" || locs[0].Tier != client.TierRAM || locs[0].Size != blockSize {
		t.Fatalf("Locate(7) = %+v, want one RAM replica of %d bytes on n1", locs, blockSize)
	}

	ok, err = cl.WaitIndexed(ctx, []uint64{7, 8}, 0)
	if err != nil || ok {
		t.Fatalf("WaitIndexed of a block never stored: %v, %v; want false, nil", ok, err)
	}
	if locs, err := cl.Locate(ctx, 8); err != nil || len(locs) != 0 {
		t.Fatalf("Locate(8) = %+v, %v; want none", locs, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cl.WaitIndexed(cctx, []uint64{8}, time.Minute); err == nil {
		t.Fatal("WaitIndexed with a cancelled context: no error")
	}
}
