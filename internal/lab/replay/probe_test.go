package replay

import (
	"context"
	"testing"

	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/config"
)

// TestProbeBlockSize checks that Probe counts a node's capacity in the
// blocks it can really hold: a 64 KiB payload on a node of 256 KiB RAM
// chunks takes a whole chunk, so 8 MiB of RAM holds 32 of them, not 128
// (node-1, on the default 4 KiB chunks, holds 128).
func TestProbeBlockSize(t *testing.T) {
	c, err := cluster.StartInProcess(context.Background(), cluster.InProcessOptions{
		Nodes: 2,
		Node: func(i int, cfg *config.Node) {
			cfg.BlockSize = 256 << 10
			cfg.RAM.Bytes = 8 << 20
			if i == 0 {
				cfg.RAM.ChunkBytes = 256 << 10
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	info, err := Probe(context.Background(), Options{Master: c.Master, PayloadBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Nodes) != 2 {
		t.Fatalf("probed %d nodes, want 2: %+v", len(info.Nodes), info.Nodes)
	}
	want := map[string]int{"node-0": 32, "node-1": 128}
	for _, n := range info.Nodes {
		if n.RAMBlocks != want[n.ID] {
			t.Errorf("node %s: %d RAM blocks of 64 KiB in 8 MiB, want %d", n.ID, n.RAMBlocks, want[n.ID])
		}
	}
}

func TestBlockFootprint(t *testing.T) {
	for _, c := range []struct{ payload, blockSize, want int64 }{
		{64 << 10, 256 << 10, 256 << 10},
		{256 << 10, 256 << 10, 256 << 10},
		{300 << 10, 256 << 10, 512 << 10},
		{32 << 10, 0, 32 << 10},
	} {
		if got := blockFootprint(c.payload, c.blockSize); got != c.want {
			t.Errorf("blockFootprint(%d, %d) = %d, want %d", c.payload, c.blockSize, got, c.want)
		}
	}
}
