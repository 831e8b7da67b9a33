package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvpool/kvpool/client"
)

// Store a block, wait until the index lists it, say where it lives, and
// read every node's tier counters: what an operator's tool does.
func ExampleClient_NodeStats() {
	cl0, err := startCluster(2) // an in-process master and two nodes
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl0.close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Index: masterIndex{cl0.m}, LocalNode: "n1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.Put(ctx, []uint64{42}, [][]byte{[]byte("kv of tokens 0-511")}, client.PutOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	indexed, err := c.WaitIndexed(ctx, []uint64{42}, 5*time.Second)
	fmt.Println("indexed:", indexed, err)
	locs, err := c.Locate(ctx, 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range locs {
		fmt.Printf("block 42: node %s, %s, %d bytes\n", l.Node, l.Tier, l.Size)
	}
	stats, err := c.NodeStats(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range stats {
		fmt.Printf("%s: %s holds %d blocks\n", n.Node.ID, n.Tiers[0].Name, n.Tiers[0].Blocks)
	}
	// Output:
	// indexed: true <nil>
	// block 42: node n1, ram, 18 bytes
	// n0: ram holds 0 blocks
	// n1: ram holds 1 blocks
}
