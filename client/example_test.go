package client_test

import (
	"context"
	"fmt"

	"github.com/kvpool/kvpool/client"
)

// Store the blocks of a request, then fetch its cached prefix within the
// time recomputing it would take.
func Example() {
	cl0, err := startCluster(2) // an in-process master and two nodes
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

	ids := []uint64{11, 12, 13}
	blocks := [][]byte{[]byte("kv of tokens 0-511"), []byte("kv of tokens 512-1023"), []byte("kv of tokens 1024-1535")}
	if _, err := c.Put(context.Background(), ids, blocks, client.PutOptions{Replicas: 2}); err != nil {
		fmt.Println(err)
		return
	}

	// A later request shares the first two blocks, then diverges.
	req := []uint64{11, 12, 99}
	ctx, cancel := context.WithDeadline(context.Background(), client.DeadlineFor(2.0))
	defer cancel()
	res, err := c.Get(ctx, req, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("cached prefix:", res.Prefix(), "blocks")
	for i := range req {
		fmt.Printf("block %d: %v %q\n", req[i], res.Status[i], res.Blocks[i])
	}
	// Output:
	// cached prefix: 2 blocks
	// block 11: loaded "kv of tokens 0-511"
	// block 12: loaded "kv of tokens 512-1023"
	// block 99: missing ""
}

// Check which blocks are cached without touching leases or recency.
func ExampleClient_Exists() {
	cl0, err := startCluster(1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl0.close()
	c, err := client.New(context.Background(), client.Options{Index: masterIndex{cl0.m}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.Put(context.Background(), []uint64{1}, [][]byte{[]byte("x")}, client.PutOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	present, err := c.Exists(context.Background(), []uint64{1, 2})
	fmt.Println(present, err)
	// Output: [true false] <nil>
}

// Store objects under names of their own (an LMCache chunk is two: a
// small metadata record and the KV bytes), read them back, check and
// delete them.
func ExampleClient_PutNamed() {
	cl0, err := startCluster(1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl0.close()
	c, err := client.New(context.Background(), client.Options{Index: masterIndex{cl0.m}, Tenant: "llama"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	names := []string{"Llama-3.1-8B@1@0@5f3a@meta", "Llama-3.1-8B@1@0@5f3a@kv_bytes"}
	payloads := [][]byte{[]byte("28 bytes of chunk metadata.."), make([]byte, 1<<20)}
	if _, err := c.PutNamed(ctx, names, payloads, client.PutOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.GetNamed(ctx, []string{names[0], names[1], "never stored"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, s := range res.Status {
		fmt.Printf("%v, %d bytes\n", s, len(res.Blocks[i]))
	}
	errs, _ := c.DeleteNamed(ctx, []string{names[0]})
	fmt.Println("deleted:", errs[0] == nil)
	// Output:
	// loaded, 28 bytes
	// loaded, 1048576 bytes
	// missing, 0 bytes
	// deleted: true
}
