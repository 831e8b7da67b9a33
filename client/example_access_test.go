package client_test

import (
	"context"
	"fmt"

	"github.com/kvpool/kvpool/client"
)

// Tell the local node what a prefill used, so its eviction policy sees
// the request's chain: the blocks it computed are put, the ones it reused
// from the node's memory are touched.
func ExampleClient_Access() {
	cl0, err := startCluster(1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl0.close()
	c, err := client.New(context.Background(), client.Options{Index: masterIndex{cl0.m}, Tenant: "demo", LocalNode: "n0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	// The first request computed all three blocks: put them.
	ids := []uint64{11, 12, 13}
	first := client.Chain(ids, [][]byte{[]byte("kv 0"), []byte("kv 1"), []byte("kv 2")})
	res, err := c.Access(ctx, first, client.AccessOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first:", res.Status)

	// The next one reused the first two from the node's memory and
	// computed a different third block; a touch of a block the node no
	// longer holds (here 14, never stored) changes nothing.
	next := client.Chain([]uint64{11, 12, 21, 14}, [][]byte{nil, nil, []byte("kv 2'")})
	res, err = c.Access(ctx, next, client.AccessOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next:", res.Status)
	// Output:
	// first: [stored stored stored]
	// next: [touched touched stored not-held]
}

// Fetch blocks from the replica a planner chose, here by hand from a
// Lookup: one call to that node, no lease, no fallback.
func ExampleClient_Fetch() {
	cl0, err := startCluster(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl0.close()
	c, err := client.New(context.Background(), client.Options{Index: masterIndex{cl0.m}, Tenant: "demo"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Put(ctx, []uint64{11, 12}, [][]byte{[]byte("kv 0"), []byte("kv 1")}, client.PutOptions{Hint: "n1"}); err != nil {
		fmt.Println(err)
		return
	}
	pre, err := c.Lookup(ctx, []uint64{11, 12})
	if err != nil {
		fmt.Println(err)
		return
	}
	from := pre.Replicas[0][0] // the planner's choice
	res, err := c.Fetch(ctx, from, []uint64{11, 12, 99}, client.FetchOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("from", from.Node, from.Tier)
	for i, s := range res.Status {
		fmt.Printf("%v %q\n", s, res.Blocks[i])
	}
	// Output:
	// from n1 ram
	// loaded "kv 0"
	// loaded "kv 1"
	// missing ""
}
