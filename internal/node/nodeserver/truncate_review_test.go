package nodeserver_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// sendAll dials addr, sends b, half-closes and reads frames until the
// server closes the connection; it fails on a hang and returns the ops
// of the frames after the hello-ack (nil when no ack came).
func sendAll(t *testing.T, addr string, b []byte) (acked bool, ops []wire.Op) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testTimeout))
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	nc.(*net.TCPConn).CloseWrite()
	r, err := wire.NewReader(nc, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var a wire.HelloAck
	if err := r.ReadHelloAck(&a); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no hello-ack nor close within %v", testTimeout)
		}
		return false, nil
	}
	for {
		var f wire.Frame
		err := r.ReadFrame(&f)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("server neither answered nor closed within %v; frames so far %v", testTimeout, ops)
		}
		if err != nil {
			return a.Code == wire.CodeOK, ops
		}
		ops = append(ops, f.Header.Op)
	}
}

// TestTruncatedStreamStoresNothing: a hello, PUT and GET stream cut at
// every byte offset over real TCP. A PUT is stored exactly when its whole
// frame arrived, and what a GET then returns is the block that was put;
// the server never hangs and serves afterwards.
func TestTruncatedStreamStoresNothing(t *testing.T) {
	_, addr := start(t, nil, nodeserver.Options{HandshakeTimeout: testTimeout})
	const tenant = "t"
	hello := must(wire.AppendHello(nil, &wire.Hello{Tenant: tenant}))
	p := payload(300, 5)
	for k := 0; ; k++ {
		id := uint64(1000 + k)
		put := putFrame(t, 1, tenant, id, p)
		stream := append(append(append([]byte(nil), hello...), put...), wire.AppendGet(nil, 2, id)...)
		if k > len(stream) {
			break
		}
		sendAll(t, addr, stream[:k])
		c := open(t, addr, tenant)
		c.send(wire.AppendGet(nil, 3, id))
		f := c.frame()
		stored := f.Header.Op == wire.OpGetResponse && len(f.Blocks) == 1 && f.Blocks[0].Code == wire.CodeOK
		if want := k >= len(hello)+len(put); stored != want {
			t.Fatalf("stream cut at byte %d (hello %d, put %d bytes): stored %v, want %v (%v frame)", k, len(hello), len(put), stored, want, f.Header.Op)
		}
		if stored && !bytes.Equal(f.Blocks[0].Payload, p) {
			t.Fatalf("cut at byte %d: GET returned %d bytes that are not the block put", k, len(f.Blocks[0].Payload))
		}
		c.nc.Close()
	}
}

// TestFlippedPutNeverServedAsTheBlock: a PUT with one byte flipped, at
// every offset, then GETs of the block's id and of the id the flip may
// have produced: whatever the node serves either is the block that was
// put or fails verification; the node never hangs.
func TestFlippedPutNeverServedAsTheBlock(t *testing.T) {
	_, addr := start(t, nil, nodeserver.Options{HandshakeTimeout: testTimeout})
	const tenant = "t"
	hello := must(wire.AppendHello(nil, &wire.Hello{Tenant: tenant}))
	p := payload(64, 9)
	for i := 0; ; i++ {
		id := uint64(5000 + i)
		put := putFrame(t, 1, tenant, id, p)
		if i >= len(put) {
			break
		}
		put[i] ^= 0x40
		sendAll(t, addr, append(append([]byte(nil), hello...), put...))
		c := open(t, addr, tenant)
		ids := []uint64{id, id ^ 0x40<<(8*(max(i, 1)%8))}
		for j, x := range ids {
			c.send(wire.AppendGet(nil, uint64(10+j), x))
			f := c.frame()
			if f.Header.Op != wire.OpGetResponse || len(f.Blocks) != 1 || f.Blocks[0].Code != wire.CodeOK {
				continue
			}
			// Every block any iteration put is p: a payload that
			// verifies under its key and is not p is a wrong object.
			b := f.Blocks[0]
			if block.Verify(block.Key{Tenant: tenant, ID: x}, b.Payload, b.Checksum) && !bytes.Equal(b.Payload, p) {
				t.Fatalf("flip at byte %d: id %016x served %d verifying bytes that are not the block put", i, x, len(b.Payload))
			}
		}
		c.nc.Close()
	}
}
