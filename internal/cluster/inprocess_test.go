package cluster

import (
	"context"
	"testing"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/config"
)

// TestInProcess starts a two-node in-process cluster, stores and reads a
// block through the public client, and stops it (goleak checks that every
// goroutine ended).
func TestInProcess(t *testing.T) {
	ctx := context.Background()
	var names []string
	c, err := StartInProcess(ctx, InProcessOptions{Nodes: 2, Node: func(i int, cfg *config.Node) {
		cfg.HeartbeatInterval = inProcessPoll
		names = append(names, cfg.NodeName)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}()
	if len(names) != 2 || names[0] != "node-0" || names[1] != "node-1" {
		t.Fatalf("node names %v, want [node-0 node-1]", names)
	}
	cl, err := client.New(ctx, client.Options{Master: c.Master})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	nodes, err := cl.Nodes(ctx)
	if err != nil || len(nodes) != 2 || !nodes[0].Live || !nodes[1].Live {
		t.Fatalf("nodes %+v, %v; want two live", nodes, err)
	}
	errs, err := cl.Put(ctx, []uint64{1}, [][]byte{[]byte("block one")}, client.PutOptions{})
	if err != nil || errs[0] != nil {
		t.Fatalf("Put: %v %v", err, errs)
	}
	res, err := cl.Fetch(ctx, client.Location{Node: nodes[0].ID}, []uint64{1}, client.FetchOptions{})
	res1, err1 := cl.Fetch(ctx, client.Location{Node: nodes[1].ID}, []uint64{1}, client.FetchOptions{})
	if err != nil || err1 != nil || res.Count(client.Loaded)+res1.Count(client.Loaded) != 1 {
		t.Fatalf("block loaded from %v and %v (%v, %v); want from exactly one node", res.Status, res1.Status, err, err1)
	}
}

// TestInProcessBadOptions checks that bad options fail before anything
// starts.
func TestInProcessBadOptions(t *testing.T) {
	for _, o := range []InProcessOptions{{Nodes: -1}, {Nodes: maxNodes + 1}, {StartTimeout: -1}} {
		if c, err := StartInProcess(context.Background(), o); err == nil {
			c.Close()
			t.Errorf("StartInProcess(%+v) succeeded", o)
		}
	}
}
