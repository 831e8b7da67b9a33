package client_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/client"
)

func namedCluster(t *testing.T, nodes int) (*cluster, *client.Client) {
	t.Helper()
	cl, err := startCluster(nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.close(); err != nil {
			t.Error(err)
		}
	})
	c, err := cl.client(client.Options{Tenant: "t", LocalNode: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return cl, c
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestNamedRoundTrip: objects of many sizes under names of any bytes
// (LMCache's two objects per chunk among them) are stored and read back
// byte for byte beside chain blocks, with replicas on both nodes.
func TestNamedRoundTrip(t *testing.T) {
	_, c := namedCluster(t, 2)
	ctx := ctxFor(t)
	names := []string{
		"meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16meta",
		"meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16kv_bytes",
		"\x00\xff binary name",
		strings.Repeat("n", block.MaxNameLen),
		"1",
	}
	sizes := []int{28, 4 << 20, 0, 32 << 10, 1}
	payloads := make([][]byte, len(names))
	for i := range names {
		payloads[i] = payload(uint64(i)+100, sizes[i])
	}
	errs, err := c.PutNamed(ctx, names, payloads, client.PutOptions{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("put %d: %v", i, e)
		}
	}
	// A chain block whose id is the first name's id stays its own block.
	chainID := block.NameID(names[0])
	if _, err := c.Put(ctx, []uint64{chainID}, [][]byte{[]byte("chain block")}, client.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	ask := append([]string{"absent"}, names...)
	res, err := c.GetNamed(ctx, ask, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cached != len(names) || res.Status[0] != client.Missing {
		t.Fatalf("cached %d (want %d), absent name %v", res.Cached, len(names), res.Status[0])
	}
	for i := range names {
		if res.Status[i+1] != client.Loaded || !bytes.Equal(res.Blocks[i+1], payloads[i]) {
			t.Errorf("name %d: %v, %d bytes (want %d)", i, res.Status[i+1], len(res.Blocks[i+1]), len(payloads[i]))
		}
	}
	got, err := c.Get(ctx, []uint64{chainID}, nil)
	if err != nil || got.Status[0] != client.Loaded || string(got.Blocks[0]) != "chain block" {
		t.Fatalf("chain block of the name's id: %v %q %v", got.Status, got.Blocks, err)
	}
	present, err := c.ExistsNamed(ctx, []string{names[1], "absent", names[3]})
	if err != nil || !present[0] || present[1] || !present[2] {
		t.Fatalf("ExistsNamed = %v, %v", present, err)
	}
	// Into the caller's buffers.
	dst := [][]byte{make([]byte, 0, 64)}
	res, err = c.GetNamed(ctx, names[:1], dst)
	if err != nil || res.Status[0] != client.Loaded || &res.Blocks[0][0] != &dst[0][:1][0] {
		t.Fatalf("GetNamed into dst: %v %v", res.Status, err)
	}
}

// TestNamedNeverAnotherName: a node holding an object under another name
// of the same internal id never hands it out for the name asked, even
// when the index points there; a bit flipped at rest is Corrupt.
func TestNamedNeverAnotherName(t *testing.T) {
	cl, c := namedCluster(t, 1)
	ctx := ctxFor(t)
	a := block.Named("t", "a")
	impostor := block.Key{Tenant: "t", ID: a.ID, Name: "b"} // shares a's id
	cl.nodes[0].backend.Store(impostor, []byte("b's bytes"))
	if err := cl.announce("n0", cl.nodes[0].backend.session, a, []byte("b's bytes")); err != nil {
		t.Fatal(err)
	}
	res, err := c.GetNamed(ctx, []string{"a"}, nil)
	if err != nil || res.Status[0] == client.Loaded {
		t.Fatalf("GetNamed(a) = %v %q, %v: another name's object was returned", res.Status, res.Blocks, err)
	}

	if _, err := c.PutNamed(ctx, []string{"c"}, [][]byte{[]byte("c's bytes")}, client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.nodes[0].backend.FlipBit(block.Named("t", "c"), 3); err != nil {
		t.Fatal(err)
	}
	res, err = c.GetNamed(ctx, []string{"c"}, nil)
	if err != nil || res.Status[0] != client.Corrupt || res.Corruptions != 1 {
		t.Fatalf("GetNamed of a flipped copy: %v (corruptions %d), %v", res.Status, res.Corruptions, err)
	}
}

// TestDelete: DeleteNamed and Delete remove every copy the index lists; a
// key the index does not know is ErrNotFound.
func TestDelete(t *testing.T) {
	cl, c := namedCluster(t, 2)
	ctx := ctxFor(t)
	if _, err := c.PutNamed(ctx, []string{"x", "y"}, [][]byte{[]byte("x"), []byte("y")}, client.PutOptions{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, []uint64{5}, [][]byte{[]byte("five")}, client.PutOptions{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	errs, err := c.DeleteNamed(ctx, []string{"x", "nope"})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], kvpool.ErrNotFound) {
		t.Fatalf("DeleteNamed = %v, %v", errs, err)
	}
	for _, n := range cl.nodes {
		if n.backend.Exists(block.Named("t", "x")) || !n.backend.Exists(block.Named("t", "y")) {
			t.Errorf("node %s: x deleted %v, y kept %v", n.id, !n.backend.Exists(block.Named("t", "x")), n.backend.Exists(block.Named("t", "y")))
		}
	}
	res, err := c.GetNamed(ctx, []string{"x", "y"}, nil)
	if err != nil || res.Status[0] == client.Loaded || res.Status[1] != client.Loaded {
		t.Fatalf("after delete: %v, %v", res.Status, err)
	}
	errs, err = c.Delete(ctx, []uint64{5, 6})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], kvpool.ErrNotFound) {
		t.Fatalf("Delete = %v, %v", errs, err)
	}
	for _, n := range cl.nodes {
		if n.backend.Exists(block.Key{Tenant: "t", ID: 5}) {
			t.Errorf("node %s still holds block 5", n.id)
		}
	}
}

// TestNamedBadNames: an empty name and one over 1 KiB are refused before
// anything is sent, saying which and the limit.
func TestNamedBadNames(t *testing.T) {
	_, c := namedCluster(t, 1)
	ctx := ctxFor(t)
	long := strings.Repeat("x", block.MaxNameLen+1)
	for _, names := range [][]string{{""}, {"ok", long}} {
		if _, err := c.PutNamed(ctx, names, make([][]byte, len(names)), client.PutOptions{}); err == nil {
			t.Errorf("PutNamed(%d-byte name) accepted", len(names[len(names)-1]))
		}
		if _, err := c.GetNamed(ctx, names, nil); err == nil {
			t.Errorf("GetNamed accepted a bad name")
		}
		if _, err := c.ExistsNamed(ctx, names); err == nil {
			t.Errorf("ExistsNamed accepted a bad name")
		}
		if _, err := c.DeleteNamed(ctx, names); err == nil {
			t.Errorf("DeleteNamed accepted a bad name")
		}
	}
	_, err := c.PutNamed(ctx, []string{long}, [][]byte{nil}, client.PutOptions{})
	if err == nil || !strings.Contains(err.Error(), "1025 bytes") || !strings.Contains(err.Error(), "1024") || !errors.Is(err, block.ErrBadName) {
		t.Errorf("too-long name: %v", err)
	}
}

// TestPutLimits: a name of exactly 1024 bytes and one of binary bytes (not
// UTF-8) round-trip; an empty name is refused saying names are 1 to 1024
// bytes; an object over the node's max object size (64 MiB here) is
// refused with its size, the limit and the node setting, without marking
// the node down (the next put to it succeeds); one over 512 MiB, which no
// node can be set to take, before any placement.
func TestPutLimits(t *testing.T) {
	_, c := namedCluster(t, 1)
	ctx := ctxFor(t)
	for _, name := range []string{strings.Repeat("n", block.MaxNameLen), "\xff\xfe\x00bin", "x"} {
		p := []byte("v:" + name[:1])
		if errs, err := c.PutNamed(ctx, []string{name}, [][]byte{p}, client.PutOptions{}); err != nil || errs[0] != nil {
			t.Fatalf("put %q: %v %v", name, err, errs)
		}
		res, err := c.GetNamed(ctx, []string{name}, nil)
		if err != nil || len(res.Blocks) != 1 || !bytes.Equal(res.Blocks[0], p) {
			t.Fatalf("get %q: %v %+v", name, err, res)
		}
	}
	if _, err := c.PutNamed(ctx, []string{""}, [][]byte{nil}, client.PutOptions{}); err == nil || !strings.Contains(err.Error(), "1 to 1024 bytes") {
		t.Errorf("empty name: %v; want it to say names are 1 to 1024 bytes", err)
	}
	big := make([][]byte, 2)
	big[0] = make([]byte, 64<<20+1)
	big[1] = []byte("small")
	errs, err := c.PutNamed(ctx, []string{"big", "small"}, big, client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := errs[0]; !errors.Is(e, kvpool.ErrTooLarge) || !strings.Contains(e.Error(), `object t/"big": 67108865 bytes`) ||
		!strings.Contains(e.Error(), "67108864") || !strings.Contains(e.Error(), "--max-object-bytes") {
		t.Errorf("64 MiB + 1: %v; want ErrTooLarge with the size, the limit and --max-object-bytes", e)
	}
	if errs, err := c.PutNamed(ctx, []string{"after"}, [][]byte{[]byte("ok")}, client.PutOptions{}); err != nil || errs[0] != nil {
		t.Errorf("put after a too-large object: %v %v (the node must not be marked down)", err, errs)
	}
	huge := make([]byte, 512<<20+1) // untouched: costs address space, not memory
	_, err = c.PutNamed(ctx, []string{"huge"}, [][]byte{huge}, client.PutOptions{})
	if !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), "536870913 bytes") || !strings.Contains(err.Error(), "--max-object-bytes") {
		t.Errorf("512 MiB + 1: %v; want ErrTooLarge with the size, the limit and --max-object-bytes", err)
	}
}
