package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// TestNamedObjectsMultiProcess stores an LMCache-like mix of named objects
// — per chunk a 28-byte "<key>metadata" record and a "<key>kv_bytes"
// payload of 32 KiB, 4 MiB or the nodes' maximum object size — with two
// replicas on a two-node cluster of real processes whose RAM tiers hold
// less than half of it, so most of it is demoted to SSD. It reads every
// object back byte-identical, restarts a node (its RAM is lost, its SSD
// scanned back), reads everything again — through the client and straight
// from the restarted node's SSD copies — and checks `ctl stat --json`:
// every tier's held bytes within 1.10 of its payload bytes.
func TestNamedObjectsMultiProcess(t *testing.T) {
	multiProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const (
		maxObject = 16 << 20
		ramBytes  = 40 << 20 // per node: two maximum-size objects and change
		ssdBytes  = 256 << 20
	)
	cl, _ := startCluster(ctx, t, cluster.Options{
		Nodes: 2, SSD: true, RAMBytes: ramBytes, SSDBytes: ssdBytes,
		BlockSize: 4 << 20, Heartbeat: itHeartbeat, NodeTTL: itTTL,
		ExtraNodeArgs: []string{"--max-object-bytes", "16MiB"},
	})
	if err := cl.WaitLive(ctx, 2); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Master: cl.Master.Addr, Tenant: "t", Replicas: 2,
		RequestTimeout: 30 * time.Second, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	// The mix: 8 chunks of 32 KiB, 6 of 4 MiB, 3 of the maximum size,
	// each with its 28-byte metadata record: 72.3 MiB per replica.
	var names []string
	var payloads [][]byte
	add := func(name string, p []byte) {
		names = append(names, name)
		payloads = append(payloads, p)
	}
	for i, size := range []int{32 << 10, 32 << 10, 32 << 10, 32 << 10, 32 << 10, 32 << 10, 32 << 10, 32 << 10,
		4 << 20, 4 << 20, 4 << 20, 4 << 20, 4 << 20, 4 << 20, maxObject, maxObject, maxObject} {
		key := fmt.Sprintf("meta-llama/Llama-3.1-8B@2@%d@%016x@bfloat16", i%2, uint64(i)*0x9e3779b97f4a7c15)
		add(key+"kv_bytes", testPayload(uint64(1000+i), size))
		add(key+"metadata", testPayload(uint64(2000+i), 28))
	}
	// LMCache's order: the payload, then its metadata record.
	for at := 0; at < len(names); at += 2 {
		errs, err := c.PutNamed(ctx, names[at:at+2], payloads[at:at+2], client.PutOptions{})
		if err != nil {
			t.Fatalf("put %q: %v", names[at], err)
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("put %q: %v", names[at], err)
		}
	}
	if ok, err := c.WaitIndexedNamed(ctx, names, 30*time.Second); err != nil || !ok {
		t.Fatalf("objects indexed: %v %v", ok, err)
	}

	readAll := func(when string) {
		t.Helper()
		for at := 0; at < len(names); at += 4 {
			end := min(at+4, len(names))
			res, err := c.GetNamed(ctx, names[at:end], nil)
			if err != nil {
				t.Fatalf("%s: get %q..: %v", when, names[at], err)
			}
			for i, st := range res.Status {
				if st != client.Loaded || !slices.Equal(res.Blocks[i], payloads[at+i]) {
					t.Fatalf("%s: %q: status %v, %d bytes (want %d, byte-identical)", when, names[at+i], st, len(res.Blocks[i]), len(payloads[at+i]))
				}
			}
			if res.Corruptions != 0 {
				t.Fatalf("%s: %d corrupt copies", when, res.Corruptions)
			}
		}
	}
	// ssdCopies returns the names node holds on SSD, per the index.
	ssdCopies := func(node string) []int {
		t.Helper()
		var on []int
		for i, n := range names {
			locs, err := c.LocateNamed(ctx, n)
			if err != nil {
				t.Fatalf("locate %q: %v", n, err)
			}
			for _, l := range locs {
				if l.Node == node && l.Tier == client.TierSSD {
					on = append(on, i)
				}
			}
		}
		return on
	}
	readAll("after the puts")
	before := ssdCopies("node-1")
	if len(before) == 0 {
		t.Fatal("node-1 holds nothing on SSD: the RAM tier did not demote")
	}
	checkStat(ctx, t, cl.Master.Addr)

	// Restart node-1: its RAM copies are gone, its SSD copies come back
	// from the scan and are read straight from it.
	if err := cl.RestartNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitLive(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var after []int
	eventually(t, "node-1's SSD copies back in the index", 30*time.Second, func() (bool, string) {
		after = ssdCopies("node-1")
		return len(after) >= len(before), fmt.Sprintf("%d of %d SSD copies", len(after), len(before))
	})
	conn, err := nodeclient.Dial(ctx, cl.Nodes[1].Addr, nodeclient.DialOptions{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, i := range after {
		got, _, err := conn.GetNamed(ctx, names[i], nil) // verified against the name
		if err != nil || !slices.Equal(got, payloads[i]) {
			t.Fatalf("%q from node-1 after its restart: %d bytes, %v (want %d, byte-identical)", names[i], len(got), err, len(payloads[i]))
		}
	}
	readAll("after node-1's restart")
	checkStat(ctx, t, cl.Master.Addr)
}

// checkStat runs `ctl stat --json` and checks every tier holding objects
// against the space target: held bytes at most 1.10 × payload.
func checkStat(ctx context.Context, t *testing.T, master string) {
	t.Helper()
	st, _ := statOf(ctx, t, master)
	var lines []string
	for _, n := range st.Nodes {
		for _, tr := range n.Tiers {
			if tr.Objects == 0 {
				continue
			}
			ratio := float64(tr.HeldBytes) / float64(tr.PayloadBytes)
			lines = append(lines, fmt.Sprintf("%s %s: %d objects, payload %d, held %d (%.3f)", n.Node, tr.Tier, tr.Objects, tr.PayloadBytes, tr.HeldBytes, ratio))
			if tr.HeldBytes < tr.PayloadBytes || ratio > 1.10 {
				t.Errorf("%s %s: held %d bytes for %d of payload (%.3f), want within [1, 1.10]", n.Node, tr.Tier, tr.HeldBytes, tr.PayloadBytes, ratio)
			}
		}
	}
	t.Logf("ctl stat --json:\n%s", strings.Join(lines, "\n"))
}
