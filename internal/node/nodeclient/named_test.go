package nodeclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// namedMax is the max object size of the nodes in the named tests: large
// enough to cross every buffer boundary, small enough for a -race run on a
// busy machine.
const namedMax = 16 << 20

// TestNamedRoundTrip stores and reads back named objects of the sizes the
// issue names (1 B, an LMCache metadata record of 28 B, 32 KiB, 4 MiB and
// the node's max object size) over real TCP, from RAM and from the file
// tier (sendfile), under names of any bytes, and checks EXISTS and
// DELETE.
func TestNamedRoundTrip(t *testing.T) {
	n := startNode(t, nodeserver.Options{Limits: wire.LimitsFor(namedMax)})
	c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t1"})
	ctx := ctxT(t)
	sizes := []int{0, 1, 28, 32 << 10, 4 << 20, namedMax}
	for i, size := range sizes {
		for _, spill := range []bool{false, true} {
			name := fmt.Sprintf("meta-llama/Llama-3.1-8B@1@0@%d@bfloat16kv_bytes\x00\xff%v", size, spill)
			t.Run(fmt.Sprintf("%d_bytes_spilled_%v", size, spill), func(t *testing.T) {
				want := payload(size, byte(i))
				if err := c.PutNamed(ctx, name, want); err != nil {
					t.Fatal(err)
				}
				if spill {
					if err := n.b.Spill(block.Named("t1", name)); err != nil {
						t.Fatal(err)
					}
				}
				got, sum, err := c.GetNamed(ctx, name, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) || sum != block.Checksum(block.Named("t1", name), want) {
					t.Fatalf("got %d bytes (sum %08x), want %d", len(got), sum, len(want))
				}
				ok, err := c.ExistsNamed(ctx, []string{name, name + "?"})
				if err != nil || !ok[0] || ok[1] {
					t.Fatalf("ExistsNamed = %v, %v; want [true false]", ok, err)
				}
				if err := c.DeleteNamed(ctx, name); err != nil {
					t.Fatal(err)
				}
				if _, _, err := c.GetNamed(ctx, name, nil); !errors.Is(err, kvpool.ErrNotFound) {
					t.Fatalf("GetNamed after delete: %v, want not found", err)
				}
				if err := c.DeleteNamed(ctx, name); !errors.Is(err, kvpool.ErrNotFound) {
					t.Fatalf("second DeleteNamed: %v, want not found", err)
				}
			})
		}
	}
	// A name and a chain key with the same ID are different objects.
	id := block.NameID("x")
	if err := c.Put(ctx, id, []byte("chain")); err != nil {
		t.Fatal(err)
	}
	if err := c.PutNamed(ctx, "x", []byte("named")); err != nil {
		t.Fatal(err)
	}
	if got, _, err := c.Get(ctx, id, nil); err != nil || string(got) != "chain" {
		t.Fatalf("Get(NameID(x)) = %q, %v; want the chain block", got, err)
	}
	if got, _, err := c.GetNamed(ctx, "x", nil); err != nil || string(got) != "named" {
		t.Fatalf("GetNamed(x) = %q, %v; want the named object", got, err)
	}
}

// TestNamedBatches runs MPutNamed, MGetNamed and ExistsNamed over batches
// the client must split by the node's batch and frame limits (long names
// fill frames), with a bad name and a too-large object among them.
func TestNamedBatches(t *testing.T) {
	lim := wire.Limits{MaxFrame: 8192, MaxBatch: 3, MaxPayload: 2000}
	n := startNode(t, nodeserver.Options{Limits: lim})
	c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t2"})
	ctx := ctxT(t)
	var names []string
	var payloads [][]byte
	for i := range 10 {
		names = append(names, strings.Repeat(string(rune('a'+i)), block.MaxNameLen-i))
		payloads = append(payloads, payload(100*i, byte(i)))
	}
	names = append(names, strings.Repeat("z", block.MaxNameLen+1), "big")
	payloads = append(payloads, []byte("x"), make([]byte, 2001))
	errs, err := c.MPutNamed(ctx, names, payloads)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if errs[i] != nil {
			t.Fatalf("object %d: %v", i, errs[i])
		}
	}
	if !errors.Is(errs[10], block.ErrBadName) || !errors.Is(errs[10], frame.ErrBadRequest) {
		t.Errorf("over-long name: %v, want bad name", errs[10])
	}
	if !errors.Is(errs[11], kvpool.ErrTooLarge) {
		t.Errorf("too large: %v, want too large", errs[11])
	}
	res, err := c.MGetNamed(ctx, append(names[:10:10], "absent"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if res[i].Err != nil || !bytes.Equal(res[i].Payload, payloads[i]) {
			t.Fatalf("object %d: %d bytes, %v", i, len(res[i].Payload), res[i].Err)
		}
	}
	if !errors.Is(res[10].Err, kvpool.ErrNotFound) {
		t.Errorf("absent name: %v", res[10].Err)
	}
	ok, err := c.ExistsNamed(ctx, append(names[:10:10], "absent"))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range ok {
		if v != (i < 10) {
			t.Fatalf("ExistsNamed[%d] = %v", i, v)
		}
	}
	// Four names of ~1 KiB fill an 8 KiB frame: the batches were split by
	// bytes as well as by MaxBatch.
	if got := n.srv.Stats().RequestCount(wire.OpMGetNamed, wire.CodeOK); got < 4 {
		t.Errorf("%d MGET named requests for 11 names, want at least 4", got)
	}
}

// TestNamedRefusedUpFront: a payload over the node's max object size and a
// name over 1 KiB are refused before anything is sent, with errors that
// give the size, the limit and (for the size) the setting that raises it.
func TestNamedRefusedUpFront(t *testing.T) {
	n := startNode(t, nodeserver.Options{Limits: wire.LimitsFor(1 << 20)})
	c := dial(t, n.addr, nodeclient.DialOptions{})
	ctx := ctxT(t)
	err := c.PutNamed(ctx, "obj", make([]byte, 1<<20+1))
	if !errors.Is(err, kvpool.ErrTooLarge) {
		t.Fatalf("PutNamed too large: %v", err)
	}
	for _, want := range []string{"1048577 bytes", "max object size of 1048576 bytes", "--max-object-bytes", "max_object_bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	long := strings.Repeat("n", block.MaxNameLen+1)
	for what, err := range map[string]error{
		"PutNamed":    c.PutNamed(ctx, long, []byte("x")),
		"DeleteNamed": c.DeleteNamed(ctx, long),
		"GetNamed":    func() error { _, _, err := c.GetNamed(ctx, long, nil); return err }(),
		"ExistsNamed": func() error { _, err := c.ExistsNamed(ctx, []string{"ok", long}); return err }(),
		"empty name":  c.PutNamed(ctx, "", []byte("x")),
	} {
		if !errors.Is(err, block.ErrBadName) || !errors.Is(err, frame.ErrBadRequest) {
			t.Errorf("%s: %v, want bad name", what, err)
			continue
		}
		if what != "empty name" && (!strings.Contains(err.Error(), "1025 bytes") || !strings.Contains(err.Error(), "1024-byte limit")) {
			t.Errorf("%s: error %q does not give the size and the limit", what, err)
		}
	}
	st := n.srv.Stats()
	for _, op := range []wire.Op{wire.OpPutNamed, wire.OpGetNamed, wire.OpDeleteNamed, wire.OpExistsNamed} {
		for code := range nodeserver.CodeSlots {
			if got := st.Requests[op][code]; got != 0 {
				t.Errorf("%d %v requests reached the node", got, op)
			}
		}
	}
	// A name of exactly the limit is fine.
	maxName := strings.Repeat("m", block.MaxNameLen)
	if err := c.PutNamed(ctx, maxName, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if got, _, err := c.GetNamed(ctx, maxName, nil); err != nil || string(got) != "ok" {
		t.Fatalf("GetNamed(1 KiB name) = %q, %v", got, err)
	}
}

// swapName is a backend that answers reads of one name with another
// name's object, as a tier that compared IDs but not names would.
type swapName struct {
	nodeserver.Backend
	from, to string
}

func (s swapName) Acquire(ctx context.Context, k block.Key) (nodeserver.Ref, error) {
	if k.Name == s.from {
		k = block.Named(k.Tenant, s.to)
	}
	return s.Backend.Acquire(ctx, k)
}

// TestNamedWrongObjectRejected: an object of another name, sent under the
// ID the client asked for, fails verification (the checksum covers the
// name) and is never returned.
func TestNamedWrongObjectRejected(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	srv := startNode(t, nodeserver.Options{Backend: swapName{Backend: n.b, from: "a", to: "b"}})
	n.b.Store(block.Named("t", "a"), []byte("object a"))
	n.b.Store(block.Named("t", "b"), []byte("object b"))
	c := dial(t, srv.addr, nodeclient.DialOptions{Tenant: "t"})
	ctx := ctxT(t)
	if p, _, err := c.GetNamed(ctx, "a", nil); !errors.Is(err, kvpool.ErrCorrupt) {
		t.Fatalf("GetNamed(a) = %q, %v; want corrupt", p, err)
	}
	res, err := c.MGetNamed(ctx, []string{"a", "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, kvpool.ErrCorrupt) || res[0].Payload != nil {
		t.Errorf("MGetNamed a: %q, %v; want corrupt", res[0].Payload, res[0].Err)
	}
	if string(res[1].Payload) != "object b" {
		t.Errorf("MGetNamed b: %q, %v", res[1].Payload, res[1].Err)
	}
	if c.Counters().Corruptions != 2 {
		t.Errorf("%d corruptions counted, want 2", c.Counters().Corruptions)
	}
}

// TestNamedTooLargeFromServer: a node that gets a payload over its max
// object size (a client that did not check) answers with an error that
// says the size, the limit and the setting, and the connection stays
// usable.
func TestNamedTooLargeFromServer(t *testing.T) {
	n := startNode(t, nodeserver.Options{Limits: wire.Limits{MaxPayload: 1000, MaxFrame: 1 << 16}})
	c := dial(t, n.addr, nodeclient.DialOptions{})
	ctx := ctxT(t)
	// Ask the server directly, bypassing the client's check: a raw frame.
	frameBytes, err := wire.AppendPutNamed(nil, 1, "obj", wire.Block{ID: block.NameID("obj"), Payload: make([]byte, 1001)})
	if err != nil {
		t.Fatal(err)
	}
	msg := rawRequest(t, n.addr, frameBytes)
	for _, want := range []string{"1001 bytes", "max object size, 1000 bytes", "--max-object-bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("server error %q does not say %q", msg, want)
		}
	}
	// A name over 1 KiB, likewise.
	long := make([]byte, 0, 2048)
	long = wire.AppendHeader(long, wire.Header{Len: uint32(wire.HeaderLen + 2 + block.MaxNameLen + 1), Op: wire.OpGetNamed, ReqID: 2})
	long = append(long, byte((block.MaxNameLen+1)&0xff), byte((block.MaxNameLen+1)>>8))
	long = append(long, strings.Repeat("n", block.MaxNameLen+1)...)
	msg = rawRequest(t, n.addr, long)
	for _, want := range []string{"1025 bytes", "1024-byte limit", "at most 1024 bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("server error %q does not say %q", msg, want)
		}
	}
	if err := c.PutNamed(ctx, "obj", make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
}

// rawRequest sends one raw request frame to the node at addr after a
// hello, and returns the message of the ERROR frame that must answer it.
func rawRequest(t *testing.T, addr string, req []byte) string {
	t.Helper()
	var d net.Dialer
	nc, err := d.DialContext(ctxT(t), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testTimeout))
	hello, err := wire.AppendHello(nil, &wire.Hello{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(append(hello, req...)); err != nil {
		t.Fatal(err)
	}
	r, err := wire.NewReader(nc, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var ack wire.HelloAck
	if err := r.ReadHelloAck(&ack); err != nil || ack.Err() != nil {
		t.Fatalf("hello-ack: %v, %v", err, ack.Err())
	}
	h, err := r.ReadHeader()
	if err != nil || h.Op != wire.OpError {
		t.Fatalf("answer %v, %v; want ERROR", h.Op, err)
	}
	var re wire.RemoteError
	if err := r.ReadError(&re); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(&re, kvpool.ErrTooLarge) && !errors.Is(&re, frame.ErrBadRequest) {
		t.Errorf("ERROR code %v, want too large or bad request", re.Code)
	}
	return re.Message
}
