package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// TestRESPIntegrity flips bits in the SSD record of a value that lives
// only on node-0's SSD: a GET through either node's Redis front never
// answers the corrupt bytes (it answers a miss, there being no other
// copy), and node-0 counts the corrupt copy in /metrics and in INFO.
func TestRESPIntegrity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := respCluster(ctx, t, cluster.Options{SSD: true, RAMBytes: 1 << 20, BlockSize: 64 << 10})
	a, b := dialRESP(t, cl.Nodes[0].RESPAddr), dialRESP(t, cl.Nodes[1].RESPAddr)
	value := testPayload(11, 512<<10)
	if got := string(a.do([]byte("SET"), []byte("on-ssd"), value)); got != "+OK\r\n" {
		t.Fatalf("SET on-ssd: %q", got)
	}
	if got := a.do(args("GET", "on-ssd")...); !bytes.Equal(got, []byte(bulk(value))) {
		t.Fatalf("GET on-ssd before the flip: %d bytes, not the value", len(got))
	}
	// Newer values push it out of node-0's 1 MiB of RAM onto its SSD.
	for i := range 8 {
		if got := string(a.do([]byte("SET"), []byte{'f', byte('0' + i)}, testPayload(uint64(20+i), 256<<10))); got != "+OK\r\n" {
			t.Fatalf("SET filler %d: %q", i, got)
		}
	}

	// Find the value in node-0's SSD files (once demoted) and flip bits
	// in its middle.
	mark := value[200<<10 : 200<<10+4096]
	deadline := time.Now().Add(time.Minute)
	flipped := false
	for !flipped {
		files, _ := filepath.Glob(filepath.Join(cl.Nodes[0].DataDir, "ssd", "*.dat"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(data, mark)
			if i < 0 {
				continue
			}
			fh, err := os.OpenFile(f, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteAt([]byte{data[i+100] ^ 0x5a, data[i+101] ^ 0x01}, int64(i+100)); err != nil {
				t.Fatal(err)
			}
			if err := fh.Sync(); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			flipped = true
			break
		}
		if !flipped {
			if time.Now().After(deadline) {
				t.Fatalf("the value's bytes are in none of node-0's SSD files %q a minute after it was pushed out of RAM (INFO ssd: %s)", files, infoTier(t, a, "ssd"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, x := range []struct {
		name string
		c    *rawRESP
	}{{"node-0 (holder)", a}, {"node-1", b}} {
		got := x.c.do(args("GET", "on-ssd")...)
		if !bytes.Equal(got, []byte("$-1\r\n")) && !bytes.Equal(got, []byte(bulk(value))) {
			t.Fatalf("GET on-ssd through %s after the flip answered %d bytes that are neither a miss nor the value", x.name, len(got))
		}
	}
	if n := nodeMetric(ctx, t, cl.Nodes[0].AdminAddr, "kvpool_node_resp_corrupt_copies_total", ""); n < 1 {
		t.Errorf("node-0 /metrics kvpool_node_resp_corrupt_copies_total = %v; want >= 1", n)
	}
	if n := infoField(t, a, "kvpool_corrupt_copies"); n < 1 {
		t.Errorf("node-0 INFO kvpool_corrupt_copies = %d; want >= 1", n)
	}
}

// infoTier returns the INFO kvpool section's kvpool_tier_NAME line's value.
func infoTier(t *testing.T, c *rawRESP, name string) string {
	t.Helper()
	reply := string(c.do(args("INFO", "kvpool")...))
	for _, line := range bytes.Split([]byte(reply), []byte("\r\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("kvpool_tier_"+name+":")); ok {
			return string(v)
		}
	}
	t.Fatalf("INFO kvpool has no kvpool_tier_%s:\n%s", name, reply)
	return ""
}

// TestRESPIntegrityRemoteRAM: node-1 serves its RAM copies of "bad-"
// objects with a bit flipped under their good checksum (corruptServedEnv),
// as a node whose memory went bad would. A GET through node-0's Redis
// front, which holds neither, answers the other replica's bytes for a
// value node-2 holds too and a miss for one only node-1 holds, never the
// corrupt bytes; node-0 counts what it met in /metrics and in INFO.
func TestRESPIntegrityRemoteRAM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := respCluster(ctx, t, cluster.Options{
		Nodes:   3,
		NodeEnv: map[int][]string{1: {corruptServedEnv + "=bad-"}},
	})
	// Store the values on the chosen nodes through the node protocol and
	// wait until the master's index lists them (SYNC).
	put := func(node int, name string, value []byte) {
		t.Helper()
		c, err := nodeclient.Dial(ctx, cl.Nodes[node].Addr, nodeclient.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.PutNamed(ctx, name, value); err != nil {
			t.Fatalf("put %q on node-%d: %v", name, node, err)
		}
		if err := c.Sync(ctx); err != nil {
			t.Fatalf("sync node-%d: %v", node, err)
		}
	}
	two, one, good := testPayload(31, 256<<10), testPayload(32, 64<<10), testPayload(33, 4096)
	put(1, "bad-two", two)
	put(2, "bad-two", two)
	put(1, "bad-one", one)
	put(1, "good", good) // not corrupted by node-1: the hook's control

	a := dialRESP(t, cl.Nodes[0].RESPAddr)
	// Every GET of bad-two meets node-1's corrupt copy or node-2's good
	// one first, in the master's order; both orders must end in the value.
	for i := range 4 {
		if got := a.do(args("GET", "bad-two")...); !bytes.Equal(got, []byte(bulk(two))) {
			t.Fatalf("GET bad-two (try %d) through node-0: %d bytes, not the value node-2 holds", i, len(got))
		}
	}
	if got := a.do(args("GET", "bad-one")...); !bytes.Equal(got, []byte("$-1\r\n")) {
		t.Fatalf("GET bad-one through node-0: %d bytes, the value: %v; want a miss, node-1's only copy being corrupt", len(got), bytes.Equal(got, []byte(bulk(one))))
	}
	if got := a.do(args("GET", "good")...); !bytes.Equal(got, []byte(bulk(good))) {
		t.Fatalf("GET good through node-0: %d bytes, not the value", len(got))
	}
	if n := nodeMetric(ctx, t, cl.Nodes[0].AdminAddr, "kvpool_node_resp_corrupt_copies_total", ""); n < 1 {
		t.Errorf("node-0 /metrics kvpool_node_resp_corrupt_copies_total = %v; want >= 1", n)
	}
	if n := infoField(t, a, "kvpool_corrupt_copies"); n < 1 {
		t.Errorf("node-0 INFO kvpool_corrupt_copies = %d; want >= 1", n)
	}
}
