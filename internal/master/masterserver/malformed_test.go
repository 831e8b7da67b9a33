package masterserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
)

// rawConn is a hand-driven protocol connection with a deadline on every
// read, so a server that hangs fails the test instead of blocking it.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *masterproto.Reader
}

func rawDial(t *testing.T, addr string, hello bool, token string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r, err := masterproto.NewReader(nc, masterproto.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawConn{t: t, nc: nc, r: r}
	if hello {
		b, err := masterproto.AppendHello(nil, 0, &masterproto.Hello{Token: []byte(token)})
		if err != nil {
			t.Fatal(err)
		}
		rc.send(b)
		h, body, err := rc.read()
		var reply masterproto.HelloReply
		if err != nil || masterproto.DecodeHelloReply(h, body, masterproto.Limits{}, &reply) != nil || reply.Err() != nil {
			t.Fatalf("handshake: %v %+v", err, reply)
		}
	}
	return rc
}

func (rc *rawConn) send(b []byte) {
	rc.t.Helper()
	rc.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) read() (masterproto.Header, []byte, error) {
	rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, body, err := rc.r.ReadFrame()
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		rc.t.Fatalf("server did not answer within 5 s (hang)")
	}
	return h, body, err
}

// expectError reads an ERROR answering reqID with code.
func (rc *rawConn) expectError(reqID uint64, code masterproto.Code) {
	rc.t.Helper()
	h, body, err := rc.read()
	if err != nil {
		rc.t.Fatalf("want ERROR %v, got %v", code, err)
	}
	re, derr := masterproto.DecodeError(h, body)
	if derr != nil || re.Code != code || h.ReqID != reqID {
		rc.t.Fatalf("want ERROR %v for request %d, got %v frame %d: %v %v", code, reqID, h.Op, h.ReqID, re, derr)
	}
}

// expectClosed reads until the server closes the connection (an ERROR
// explaining why may come first).
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	for range 2 {
		h, _, err := rc.read()
		if err != nil {
			return
		}
		if h.Op != masterproto.OpError && h.Op != masterproto.OpHelloResponse {
			rc.t.Fatalf("want the connection closed, got a %v frame", h.Op)
		}
	}
	rc.t.Fatal("connection still open")
}

func (rc *rawConn) expectNodesWorks(reqID uint64) {
	rc.t.Helper()
	rc.send(masterproto.AppendNodes(nil, reqID))
	h, _, err := rc.read()
	if err != nil || h.Op != masterproto.OpNodesResponse || h.ReqID != reqID {
		rc.t.Fatalf("after the bad frame: %v frame %d, %v", h.Op, h.ReqID, err)
	}
}

func rawFrame(op masterproto.Op, reqID uint64, body []byte) []byte {
	b := make([]byte, masterproto.HeaderLen, masterproto.HeaderLen+len(body))
	b = append(b, body...)
	le := func(p []byte, v uint64, n int) {
		for i := range n {
			p[i] = byte(v >> (8 * i))
		}
	}
	le(b[0:], uint64(len(b)), 4)
	b[4] = byte(op)
	le(b[8:], reqID, 8)
	return b
}

// TestMalformedFrames: a bad request gets an ERROR and the connection
// carries on; a lost stream closes it; nothing hangs or crashes.
func TestMalformedFrames(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{Limits: masterproto.Limits{MaxFrame: 1 << 16, MaxBatch: 8}, HandshakeTimeout: 2 * time.Second}, nil)

	t.Run("recoverable", func(t *testing.T) {
		rc := rawDial(t, ts.addr, true, "")
		okLookup, err := masterproto.AppendLookup(nil, 0, &masterproto.Lookup{Tenant: "t", IDs: []uint64{1}})
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			b    []byte
			code masterproto.Code
		}{
			{"unknown op", rawFrame(0x42, 1, nil), masterproto.CodeUnsupportedOp},
			{"response op", rawFrame(masterproto.OpLookupResponse, 2, nil), masterproto.CodeUnsupportedOp},
			{"error op", rawFrame(masterproto.OpError, 3, nil), masterproto.CodeUnsupportedOp},
			{"second hello", rawFrame(masterproto.OpHello, 4, nil), masterproto.CodeBadRequest},
			{"empty lookup body", rawFrame(masterproto.OpLookup, 5, nil), masterproto.CodeBadRequest},
			{"lookup with trailing byte", rawFrame(masterproto.OpLookup, 6, append(bytes.Clone(okLookup[masterproto.HeaderLen:]), 0)), masterproto.CodeBadRequest},
			{"batch over limit", rawFrame(masterproto.OpLookup, 7, append([]byte{0, 1, 't', 9, 0, 0, 0}, make([]byte, 72)...)), masterproto.CodeBadRequest},
			{"bad tenant", rawFrame(masterproto.OpExists, 8, []byte{1, '/', 0, 0, 0, 0}), masterproto.CodeBadRequest},
			{"empty keyinfo body", rawFrame(masterproto.OpKeyInfo, 20, nil), masterproto.CodeBadRequest},
			{"chain keyinfo", rawFrame(masterproto.OpKeyInfo, 21, []byte{1, 't', 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0}), masterproto.CodeBadRequest},
			{"expire without times", rawFrame(masterproto.OpExpire, 22, []byte{0, 1, 't', 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0}), masterproto.CodeBadRequest},
			{"short scan", rawFrame(masterproto.OpScan, 23, []byte{1, 't', 0}), masterproto.CodeBadRequest},
			{"count trailing byte", rawFrame(masterproto.OpCount, 24, []byte{1, 't', 0}), masterproto.CodeBadRequest},
			{"scan response op", rawFrame(masterproto.OpScanResponse, 25, nil), masterproto.CodeUnsupportedOp},
			{"register with bad addr", mustEncode(masterproto.AppendRegister(nil, 9, &masterproto.Register{Info: meta.NodeInfo{ID: "n", Addr: "nohostport"}})), masterproto.CodeBadRequest},
			{"heartbeat of an unknown node", mustEncode(masterproto.AppendHeartbeat(nil, 10, &masterproto.Heartbeat{Node: "ghost"})), masterproto.CodeUnknownNode},
			{"place without nodes", mustEncode(masterproto.AppendPlace(nil, 11, &masterproto.Place{Replicas: 1, IDs: []uint64{1}})), masterproto.CodeNoNodes},
		}
		for i, c := range cases {
			rc.send(c.b)
			rc.expectError(masterproto.ParseHeader(c.b).ReqID, c.code)
			rc.expectNodesWorks(uint64(100 + i))
		}
	})

	fatal := []struct {
		name  string
		hello bool
		b     []byte
	}{
		{"length below header", true, func() []byte { b := rawFrame(masterproto.OpNodes, 1, nil); b[0] = 3; return b }()},
		{"length over limit", true, func() []byte { b := rawFrame(masterproto.OpNodes, 1, nil); b[2] = 0x10; return b }()},
		{"no hello", false, masterproto.AppendNodes(nil, 1)},
		{"garbage instead of hello", false, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"hello with bad magic", false, rawFrame(masterproto.OpHello, 1, []byte("XXXX\x01\x00\x00\x00\x00\x00\x00\x00"))},
		{"hello with wrong version", false, rawFrame(masterproto.OpHello, 1, []byte("KVPM\x09\x00\x00\x00\x00\x00\x00\x00"))},
		{"truncated then silence", false, []byte{0x20, 0, 0, 0, 1}},
		{"oversized hello", false, rawFrame(masterproto.OpHello, 1, make([]byte, 8<<10))},
	}
	for _, c := range fatal {
		t.Run(c.name, func(t *testing.T) {
			rc := rawDial(t, ts.addr, c.hello, "")
			rc.send(c.b)
			rc.expectClosed()
		})
	}

	// The server still serves after all that.
	rawDial(t, ts.addr, true, "").expectNodesWorks(1)
}

// TestHelloRefusals: the HELLO response says why before the server
// closes.
func TestHelloRefusals(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{Token: []byte("tok")}, nil)
	bigHello := rawFrame(masterproto.OpHello, 1, nil)
	bigHello[2] = 0x10 // length 1 MiB; only the header is sent
	cases := []struct {
		name string
		b    []byte
		code masterproto.Code
	}{
		{"wrong token", mustEncode(masterproto.AppendHello(nil, 1, &masterproto.Hello{Token: []byte("nope")})), masterproto.CodeUnauthorized},
		{"missing token", mustEncode(masterproto.AppendHello(nil, 1, &masterproto.Hello{})), masterproto.CodeUnauthorized},
		{"version", mustEncode(masterproto.AppendHello(nil, 1, &masterproto.Hello{Version: 7, Token: []byte("tok")})), masterproto.CodeVersionMismatch},
		// Announcing a frame larger than any HELLO is refused at once,
		// before its bytes arrive: nothing is buffered for it.
		{"oversized hello", bigHello, masterproto.CodeTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := rawDial(t, ts.addr, false, "")
			rc.send(c.b)
			h, body, err := rc.read()
			var reply masterproto.HelloReply
			if err != nil || masterproto.DecodeHelloReply(h, body, masterproto.Limits{}, &reply) != nil || reply.Code != c.code {
				t.Fatalf("reply %+v, %v; want code %v", reply, err, c.code)
			}
			if _, _, err := rc.read(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && err == nil {
				t.Fatalf("connection not closed after a refusal: %v", err)
			}
		})
	}
}

// mustEncode returns an encoding of a message the test knows is valid.
func mustEncode(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestMaxConns: a connection over the limit is refused with
// CodeUnavailable, and served again once one closes.
func TestMaxConns(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{MaxConns: 1}, nil)
	first := rawDial(t, ts.addr, true, "")
	rc := rawDial(t, ts.addr, false, "")
	rc.send(mustEncode(masterproto.AppendHello(nil, 1, &masterproto.Hello{})))
	h, body, err := rc.read()
	var reply masterproto.HelloReply
	if err != nil || masterproto.DecodeHelloReply(h, body, masterproto.Limits{}, &reply) != nil || reply.Code != masterproto.CodeUnavailable {
		t.Fatalf("over the limit: %+v %v", reply, err)
	}
	first.nc.Close()
	waitFor(t, "a connection slot", 5*time.Second, func() bool {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		r, _ := masterproto.NewReader(nc, masterproto.Limits{})
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		nc.Write(mustEncode(masterproto.AppendHello(nil, 1, &masterproto.Hello{})))
		h, body, err := r.ReadFrame()
		var reply masterproto.HelloReply
		return err == nil && masterproto.DecodeHelloReply(h, body, masterproto.Limits{}, &reply) == nil && reply.Code == masterproto.CodeOK
	})
}
