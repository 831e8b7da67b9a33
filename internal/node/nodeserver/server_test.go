package nodeserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/nodeserver/nodeservertest"
	"github.com/kvpool/kvpool/internal/node/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every socket wait of a test: a server that hangs fails
// the test instead of hanging it.
const testTimeout = 20 * time.Second

func newBackend(t testing.TB) *nodeservertest.Backend {
	b := nodeservertest.NewBackend(t.TempDir())
	t.Cleanup(func() { b.Close() }) // after the server stops: cleanups run last-in first-out
	return b
}

// start runs a server over b (a new backend when nil) with opts.
func start(t testing.TB, b nodeserver.Backend, opts nodeserver.Options) (*nodeserver.Server, string) {
	t.Helper()
	if b == nil {
		b = newBackend(t)
	}
	opts.Backend = b
	return nodeservertest.Start(t, opts)
}

// raw is a test client speaking raw frames.
type raw struct {
	t  testing.TB
	nc net.Conn
	r  *wire.Reader
}

func dialRaw(t testing.TB, addr string) *raw {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	r, err := wire.NewReader(nc, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return &raw{t: t, nc: nc, r: r}
}

// handshake sends a hello and returns the ack.
func (c *raw) handshake(tenant string, token []byte) wire.HelloAck {
	c.t.Helper()
	h, err := wire.AppendHello(nil, &wire.Hello{Tenant: tenant, Token: token})
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(h)
	return c.ack()
}

func (c *raw) ack() wire.HelloAck {
	c.t.Helper()
	var a wire.HelloAck
	if err := c.r.ReadHelloAck(&a); err != nil {
		c.t.Fatalf("read hello-ack: %v", err)
	}
	return a
}

// open dials and completes the handshake as tenant.
func open(t testing.TB, addr, tenant string) *raw {
	t.Helper()
	c := dialRaw(t, addr)
	if a := c.handshake(tenant, nil); a.Code != wire.CodeOK {
		t.Fatalf("hello refused: %v %s", a.Code, a.Message)
	}
	return c
}

func (c *raw) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *raw) frame() *wire.Frame {
	c.t.Helper()
	f := &wire.Frame{}
	if err := c.r.ReadFrame(f); err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return f
}

// closed reports whether the server closed the connection (EOF or reset)
// before sending another frame; it fails the test on a timeout.
func (c *raw) closed() bool {
	c.t.Helper()
	var f wire.Frame
	err := c.r.ReadFrame(&f)
	if err == nil {
		c.t.Logf("frame %v (request %d) instead of a close", f.Header.Op, f.Header.ReqID)
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("server neither answered nor closed within %v", testTimeout)
	}
	return true
}

func mustAppend(t testing.TB, b []byte, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// must returns an encoder's frame; the test encoders cannot fail on the
// fixed inputs they are given.
func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func payload(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7) + byte(i>>11)
	}
	return p
}

func putFrame(t testing.TB, reqID uint64, tenant string, id uint64, p []byte) []byte {
	b, err := wire.AppendPut(nil, reqID, wire.Block{ID: id, Checksum: block.Checksum(block.Key{Tenant: tenant, ID: id}, p), Payload: p})
	return mustAppend(t, b, err)
}

// waitFor waits until cond holds, failing the test after testTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func TestOptionsValidate(t *testing.T) {
	b := nodeservertest.NewBackend("")
	cases := []struct {
		name  string
		opts  nodeserver.Options
		field string // "" for valid
	}{
		{"defaults", nodeserver.Options{Backend: b}, ""},
		{"no backend", nodeserver.Options{}, "Backend"},
		{"bad limits", nodeserver.Options{Backend: b, Limits: wire.Limits{MaxFrame: -1}}, "Limits.MaxFrame"},
		{"payload beyond frame", nodeserver.Options{Backend: b, Limits: wire.Limits{MaxFrame: 100, MaxPayload: 100}}, "Limits.MaxPayload"},
		{"negative idle", nodeserver.Options{Backend: b, IdleTimeout: -1}, "IdleTimeout"},
		{"negative read", nodeserver.Options{Backend: b, ReadTimeout: -1}, "ReadTimeout"},
		{"negative write", nodeserver.Options{Backend: b, WriteTimeout: -1}, "WriteTimeout"},
		{"negative sync", nodeserver.Options{Backend: b, SyncTimeout: -1}, "SyncTimeout"},
		{"negative handshake", nodeserver.Options{Backend: b, HandshakeTimeout: -1}, "HandshakeTimeout"},
		{"negative max conns", nodeserver.Options{Backend: b, MaxConns: -1}, "MaxConns"},
		{"put bytes under a payload", nodeserver.Options{Backend: b, MaxPutBytes: 1 << 20, Limits: wire.LimitsFor(2 << 20)}, "MaxPutBytes"},
		{"put bytes of one payload", nodeserver.Options{Backend: b, MaxPutBytes: 2 << 20, Limits: wire.LimitsFor(2 << 20)}, ""},
		{"token over limit", nodeserver.Options{Backend: b, Token: make([]byte, 9), Limits: wire.Limits{MaxToken: 8}}, "Token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.opts.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("Validate() = %v; want an error naming %s", err, c.field)
			}
			if _, nerr := nodeserver.New(c.opts); nerr == nil {
				t.Fatal("New accepted invalid options")
			}
		})
	}
}

// helloBytes builds a hello with arbitrary fields.
func helloBytes(version uint16, tenant string, token []byte) []byte {
	b := append([]byte(wire.Magic), byte(version), byte(version>>8), byte(len(tenant)), 0, byte(len(token)), byte(len(token)>>8), 0, 0)
	b = append(b, tenant...)
	return append(b, token...)
}

func TestHandshake(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const token = "tok-s3cret"
	srv, addr := start(t, nil, nodeserver.Options{
		Token:  []byte(token),
		Logger: logger,
		TenantPolicy: func(tenant string) error {
			if tenant == "banned" {
				return errors.New("banned by policy")
			}
			return nil
		},
	})
	cases := []struct {
		name  string
		hello []byte
		want  wire.Code
	}{
		{"good", helloBytes(wire.Version, "t", []byte(token)), wire.CodeOK},
		{"good, empty tenant", helloBytes(wire.Version, "", []byte(token)), wire.CodeOK},
		{"version 1 (before named ops)", helloBytes(1, "t", []byte(token)), wire.CodeVersionMismatch},
		{"version 3", helloBytes(3, "t", []byte(token)), wire.CodeVersionMismatch},
		{"version 0", helloBytes(0, "t", []byte(token)), wire.CodeVersionMismatch},
		{"missing token", helloBytes(wire.Version, "t", nil), wire.CodeUnauthorized},
		{"wrong token", helloBytes(wire.Version, "t", []byte("tok-guess!")), wire.CodeUnauthorized},
		{"token prefix", helloBytes(wire.Version, "t", []byte(token[:4])), wire.CodeUnauthorized},
		{"bad tenant", helloBytes(wire.Version, "a/b", []byte(token)), wire.CodeBadRequest},
		{"tenant too long", helloBytes(wire.Version, strings.Repeat("x", 65), []byte(token)), wire.CodeBadRequest},
		{"banned tenant", helloBytes(wire.Version, "banned", []byte(token)), wire.CodeUnauthorized},
		{"bad magic", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), wire.CodeBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := dialRaw(t, addr)
			rc.send(c.hello)
			a := rc.ack()
			if a.Code != c.want {
				t.Fatalf("ack %v (%s), want %v", a.Code, a.Message, c.want)
			}
			if strings.Contains(a.Message, token) {
				t.Fatalf("ack message reveals the token: %s", a.Message)
			}
			if c.want != wire.CodeOK {
				if !rc.closed() {
					t.Fatal("refused connection left open")
				}
				return
			}
			if a.MaxFrame != wire.DefaultMaxFrame || a.MaxBatch != wire.DefaultMaxBatch || a.MaxPayload != wire.DefaultMaxPayload {
				t.Fatalf("ack advertises %d/%d/%d, want the default limits", a.MaxFrame, a.MaxBatch, a.MaxPayload)
			}
			rc.send(wire.AppendStats(nil, 5))
			if f := rc.frame(); f.Header.Op != wire.OpStatsResponse || f.Header.ReqID != 5 {
				t.Fatalf("after the handshake: %v (request %d)", f.Header.Op, f.Header.ReqID)
			}
		})
	}
	if got := srv.Stats().HandshakesRefused; got != uint64(len(cases)-2) {
		t.Errorf("%d handshakes refused, want %d", got, len(cases)-2)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), token) {
		t.Fatal("the log contains the token")
	}
	if !strings.Contains(logs.String(), "hello refused") {
		t.Fatal("refusals were not logged (the token check above proves nothing)")
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTimeouts: a peer that stalls is disconnected, whatever it stalls in.
// The handshake timeout is a second, not less: the cases that say hello
// must finish it before the timeout, and a test process on a busy machine
// can wait that long for a CPU between its dial and its hello.
func TestTimeouts(t *testing.T) {
	srv, addr := start(t, nil, nodeserver.Options{
		HandshakeTimeout: time.Second,
		IdleTimeout:      50 * time.Millisecond,
		ReadTimeout:      50 * time.Millisecond,
	})
	cases := []struct {
		name  string
		hello bool
		send  []byte
	}{
		{"no hello", false, nil},
		{"half a hello", false, helloBytes(wire.Version, "t", nil)[:7]},
		{"idle after hello", true, nil},
		{"half a header", true, wire.AppendGet(nil, 1, 2)[:9]},
		{"header without body", true, wire.AppendGet(nil, 1, 2)[:16]},
		{"put payload stalls", true, putFrame(t, 1, "", 1, payload(1000, 1))[:500]},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rc *raw
			if c.hello {
				rc = open(t, addr, "")
			} else {
				rc = dialRaw(t, addr)
			}
			if c.send != nil {
				rc.send(c.send)
			}
			if !rc.closed() {
				t.Fatal("stalled connection left open")
			}
			if got := srv.Stats().Timeouts; got != uint64(i+1) {
				t.Errorf("%d timeouts counted, want %d", got, i+1)
			}
		})
	}
}

// TestPipelined sends a burst of requests before reading: the responses
// come back in request order.
func TestPipelined(t *testing.T) {
	_, addr := start(t, nil, nodeserver.Options{})
	rc := open(t, addr, "p")
	p1, p2 := payload(300<<10, 1), payload(10, 2)
	var burst []byte
	burst = append(burst, putFrame(t, 1, "p", 11, p1)...)
	burst = append(burst, putFrame(t, 2, "p", 12, p2)...)
	burst = append(burst, wire.AppendGet(nil, 3, 11)...)
	burst = append(burst, must(wire.AppendExists(nil, 4, []uint64{11, 13, 12}))...)
	burst = append(burst, must(wire.AppendMGet(nil, 5, []uint64{12, 13, 11}))...)
	burst = append(burst, wire.AppendDelete(nil, 6, 11)...)
	burst = append(burst, wire.AppendGet(nil, 7, 11)...)
	burst = append(burst, 0xff, 0, 0, 0) // the start of a frame whose length is bad
	burst = append(burst, wire.AppendStats(nil, 8)...)
	// Write from another goroutine: the responses may fill the socket
	// buffers before the burst is all sent.
	wrote := make(chan error, 1)
	go func() {
		_, err := rc.nc.Write(burst)
		wrote <- err
	}()
	want := []struct {
		op   wire.Op
		code wire.Code // first entry's
	}{
		{wire.OpPutResponse, wire.CodeOK}, {wire.OpPutResponse, wire.CodeOK}, {wire.OpGetResponse, wire.CodeOK},
		{wire.OpExistsResponse, wire.CodeOK}, {wire.OpMGetResponse, wire.CodeOK}, {wire.OpDeleteResponse, wire.CodeOK},
		{wire.OpGetResponse, wire.CodeNotFound},
	}
	for i, w := range want {
		f := rc.frame()
		if f.Header.Op != w.op || f.Header.ReqID != uint64(i+1) {
			t.Fatalf("response %d: %v (request %d), want %v (request %d)", i, f.Header.Op, f.Header.ReqID, w.op, i+1)
		}
		switch w.op {
		case wire.OpGetResponse:
			if f.Blocks[0].Code != w.code || (w.code == wire.CodeOK && !bytes.Equal(f.Blocks[0].Payload, p1)) {
				t.Fatalf("GET %d: %v, %d bytes", i+1, f.Blocks[0].Code, len(f.Blocks[0].Payload))
			}
		case wire.OpExistsResponse:
			if got := fmt.Sprint(f.Statuses); got != fmt.Sprint([]wire.Status{{ID: 11}, {ID: 13, Code: wire.CodeNotFound}, {ID: 12}}) {
				t.Fatalf("EXISTS: %s", got)
			}
		case wire.OpMGetResponse:
			if len(f.Blocks) != 3 || !bytes.Equal(f.Blocks[0].Payload, p2) || f.Blocks[1].Code != wire.CodeNotFound || !bytes.Equal(f.Blocks[2].Payload, p1) {
				t.Fatalf("MGET: %d blocks", len(f.Blocks))
			}
		}
	}
	// The malformed frame's length, 255, swallows the STATS request; the
	// server waits for the rest of it until we close our side.
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	rc.nc.(*net.TCPConn).CloseWrite()
	if !rc.closed() {
		t.Fatal("connection open after a truncated frame")
	}
}

// corpusLimits are the wire package's fuzz limits, under which its seed
// corpus was generated; corpusTenant is its tenant (PUT checksums use it).
var corpusLimits = wire.Limits{MaxFrame: 1 << 12, MaxBatch: 4, MaxPayload: 64, MaxTenant: 16, MaxToken: 8}

const corpusTenant = "acme-1"

// sentinel is the request appended after every corpus input: a server still
// in step answers it.
const sentinel = 0xfeedface

// TestWireCorpus sends every input of the wire package's fuzz corpus raw on
// a socket. Whatever it is, the server answers (ERROR for what is not a
// valid request) or closes the connection, never hangs or crashes, and a
// fresh connection works afterwards.
func TestWireCorpus(t *testing.T) {
	dir := filepath.Join("..", "wire", "testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 { // the corpus is checked in: its absence is a bug
		t.Fatalf("wire fuzz corpus: %d entries, %v", len(entries), err)
	}
	b := newBackend(t)
	srv, addr := start(t, b, nodeserver.Options{Limits: corpusLimits, ReadTimeout: 200 * time.Millisecond, HandshakeTimeout: 2 * time.Second})
	fatal := map[string]bool{"bad_length_short": true, "bad_frame_too_large": true}
	for _, e := range entries {
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			in := readCorpusFile(t, filepath.Join(dir, name))
			var rc *raw
			isHandshake := strings.Contains(name, "hello") || strings.Contains(name, "ack")
			if isHandshake {
				rc = dialRaw(t, addr)
			} else {
				rc = open(t, addr, corpusTenant)
			}
			rc.send(append(in, wire.AppendStats(nil, sentinel)...))
			if isHandshake {
				var a wire.HelloAck
				if err := rc.r.ReadHelloAck(&a); err != nil {
					return // closed without an ack: a stalled or truncated hello
				}
				switch {
				case (name == "hello" || name == "hello_then_get") && a.Code != wire.CodeOK,
					strings.HasPrefix(name, "bad_hello") && a.Code == wire.CodeOK:
					t.Fatalf("ack %v (%s)", a.Code, a.Message)
				}
				if a.Code != wire.CodeOK {
					if !rc.closed() {
						t.Fatal("refused connection left open")
					}
					return
				}
			}
			errorsSeen, reached, closed := 0, false, false
			for !reached && !closed {
				var f wire.Frame
				err := rc.r.ReadFrame(&f)
				switch {
				case errors.Is(err, os.ErrDeadlineExceeded):
					t.Fatalf("server neither answered nor closed within %v", testTimeout)
				case err != nil:
					closed = true
				case f.Header.Op == wire.OpError:
					errorsSeen++
				case f.Header.ReqID == sentinel:
					reached = true
				}
			}
			switch {
			case fatal[name]:
				if reached {
					t.Fatal("server carried on after a frame that loses the stream")
				}
			case strings.HasPrefix(name, "valid_"):
				notRequest := strings.Contains(name, "response") || strings.Contains(name, "error") || name == "valid_stream_of_every_op"
				if !reached {
					t.Fatal("connection closed after a well-formed frame")
				}
				if notRequest != (errorsSeen > 0) {
					t.Fatalf("%d ERROR frames", errorsSeen)
				}
			case strings.HasPrefix(name, "bad_") && !isHandshake && name != "bad_truncated_mget_response":
				if !reached || errorsSeen == 0 {
					t.Fatalf("recoverable error: sentinel answered %v, %d ERROR frames; want ERROR and carry on", reached, errorsSeen)
				}
			}
			fresh := open(t, addr, "")
			fresh.send(wire.AppendStats(nil, 1))
			if f := fresh.frame(); f.Header.Op != wire.OpStatsResponse {
				t.Fatalf("fresh connection: %v", f.Header.Op)
			}
		})
	}
	if st := srv.Stats(); st.Panics != 0 || st.DecodeErrors == 0 {
		t.Fatalf("panics %d, decode errors %d", st.Panics, st.DecodeErrors)
	}
}

// readCorpusFile decodes a "go test fuzz v1" file holding one []byte.
func readCorpusFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
		t.Fatalf("%s: not a one-[]byte corpus file", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// frameBytes builds a frame header with arbitrary fields and a body.
func frameBytes(op wire.Op, flags byte, body []byte, length int64) []byte {
	n := uint32(wire.HeaderLen + len(body))
	if length >= 0 {
		n = uint32(length)
	}
	b := []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24), byte(op), flags, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0}
	return append(b, body...)
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
func le64(v uint64) []byte { return append(le32(uint32(v)), le32(uint32(v>>32))...) }

// blockEntry builds a request block entry header.
func blockEntry(id uint64, sum, n uint32) []byte {
	return bytes.Join([][]byte{le64(id), {0, 0, 0, 0}, le32(sum), le32(n)}, nil)
}

// TestMalformedFrames checks the server's answer to each kind of bad frame:
// an ERROR with the right code and request id, then the connection still
// serves; or, when the frame boundary is lost, a closed connection.
func TestMalformedFrames(t *testing.T) {
	lim := wire.Limits{MaxFrame: 4096, MaxBatch: 4, MaxPayload: 64}
	srv, addr := start(t, nil, nodeserver.Options{Limits: lim, ReadTimeout: 200 * time.Millisecond})
	const closes = wire.Code(0xffff)
	cases := []struct {
		name string
		in   []byte
		want wire.Code
	}{
		{"unknown op", frameBytes(0x0f, 0, []byte("xyz"), -1), wire.CodeUnsupportedOp},
		{"response op", frameBytes(wire.OpPutResponse, 0, make([]byte, 12), -1), wire.CodeUnsupportedOp},
		{"error op", frameBytes(wire.OpError, 0, []byte{8, 0, 0, 0}, -1), wire.CodeUnsupportedOp},
		{"flags set", frameBytes(wire.OpGet, 1, le64(1), -1), wire.CodeBadRequest},
		{"GET body short", frameBytes(wire.OpGet, 0, []byte{1, 2, 3}, -1), wire.CodeBadRequest},
		{"STATS with body", frameBytes(wire.OpStats, 0, []byte{1}, -1), wire.CodeBadRequest},
		{"SYNC with body", frameBytes(wire.OpSync, 0, []byte{1}, -1), wire.CodeBadRequest},
		{"SYNC response op", frameBytes(wire.OpSyncResponse, 0, make([]byte, 12), -1), wire.CodeUnsupportedOp},
		{"MGET over batch limit", frameBytes(wire.OpMGet, 0, append(le32(5), make([]byte, 40)...), -1), wire.CodeBadRequest},
		{"MGET count mismatch", frameBytes(wire.OpMGet, 0, append(le32(3), make([]byte, 16)...), -1), wire.CodeBadRequest},
		{"EXISTS over batch limit", frameBytes(wire.OpExists, 0, append(le32(5), make([]byte, 40)...), -1), wire.CodeBadRequest},
		{"PUT payload over limit", frameBytes(wire.OpPut, 0, append(blockEntry(1, 0, 65), make([]byte, 65)...), -1), wire.CodeTooLarge},
		{"PUT payload beyond frame", frameBytes(wire.OpPut, 0, append(blockEntry(1, 0, 10), make([]byte, 5)...), -1), wire.CodeBadRequest},
		{"PUT trailing bytes", frameBytes(wire.OpPut, 0, append(blockEntry(1, 0, 5), make([]byte, 7)...), -1), wire.CodeBadRequest},
		{"MPUT over batch limit", frameBytes(wire.OpMPut, 0, append(le32(5), bytes.Repeat(blockEntry(1, 0, 0), 5)...), -1), wire.CodeBadRequest},
		{"MPUT second entry bad", frameBytes(wire.OpMPut, 0, bytes.Join([][]byte{le32(2), blockEntry(1, block.Checksum(block.Key{ID: 1}, []byte("abc")), 3), []byte("abc"), blockEntry(2, 0, 9)}, nil), -1), wire.CodeBadRequest},
		{"length zero", frameBytes(wire.OpStats, 0, nil, 0), closes},
		{"length below header", frameBytes(wire.OpStats, 0, nil, 15), closes},
		{"frame too large", frameBytes(wire.OpGet, 0, le64(1), 4097), closes},
		{"frame too large, max u32", frameBytes(wire.OpGet, 0, le64(1), 1<<32-1), closes},
		{"truncated body", frameBytes(wire.OpMGet, 0, append(le32(2), make([]byte, 8)...), 16+4+16), closes},
		{"truncated header", frameBytes(wire.OpGet, 0, nil, 24)[:10], closes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := open(t, addr, "")
			if strings.HasPrefix(c.name, "truncated") {
				rc.send(c.in)
				rc.nc.(*net.TCPConn).CloseWrite()
			} else {
				rc.send(append(append([]byte(nil), c.in...), wire.AppendStats(nil, 777)...))
			}
			if c.want == closes {
				// The server may say why before closing.
				var f wire.Frame
				err := rc.r.ReadFrame(&f)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("server hung")
				}
				if err == nil {
					if f.Header.Op != wire.OpError || f.Header.ReqID == 777 {
						t.Fatalf("got %v (request %d), want an ERROR or a close", f.Header.Op, f.Header.ReqID)
					}
					if !rc.closed() {
						t.Fatal("connection left open after a frame that loses the stream")
					}
				}
				return
			}
			f := rc.frame()
			if f.Header.Op != wire.OpError || f.Code != c.want || f.Header.ReqID != 99 {
				t.Fatalf("got %v code %v (request %d) %q, want ERROR %v for request 99", f.Header.Op, f.Code, f.Header.ReqID, f.Message, c.want)
			}
			if f = rc.frame(); f.Header.Op != wire.OpStatsResponse || f.Header.ReqID != 777 {
				t.Fatalf("next request: %v (request %d)", f.Header.Op, f.Header.ReqID)
			}
		})
	}
	if st := srv.Stats(); st.Panics != 0 || st.DecodeErrors < uint64(len(cases)) {
		t.Fatalf("panics %d, decode errors %d (want >= %d)", st.Panics, st.DecodeErrors, len(cases))
	}
}

// TestMGetFrameBudget: blocks that do not fit one response frame are
// answered CodeTooLarge, as a suffix of the batch.
func TestMGetFrameBudget(t *testing.T) {
	b := newBackend(t)
	for id := uint64(1); id <= 4; id++ {
		b.Store(block.Key{ID: id}, payload(1000, byte(id)))
	}
	b.Store(block.Key{ID: 5}, payload(10, 5))
	b.Store(block.Key{ID: 6}, payload(2000, 6)) // larger than MaxPayload
	_, addr := start(t, b, nodeserver.Options{Limits: wire.Limits{MaxFrame: 2200, MaxPayload: 1500}})
	rc := open(t, addr, "")
	rc.send(must(wire.AppendMGet(nil, 1, []uint64{1, 404, 2, 3, 5})))
	f := rc.frame()
	got := []wire.Code{}
	for _, bl := range f.Blocks {
		got = append(got, bl.Code)
	}
	want := []wire.Code{wire.CodeOK, wire.CodeNotFound, wire.CodeOK, wire.CodeTooLarge, wire.CodeTooLarge}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	rc.send(wire.AppendGet(nil, 2, 6))
	if f := rc.frame(); f.Blocks[0].Code != wire.CodeTooLarge {
		t.Fatalf("block over MaxPayload: %v", f.Blocks[0].Code)
	}
	rc.send(must(wire.AppendMGet(nil, 3, make([]uint64, 200)))) // headers alone exceed the frame
	if f := rc.frame(); f.Header.Op != wire.OpError || f.Code != wire.CodeTooLarge {
		t.Fatalf("MGET whose headers do not fit: %v %v", f.Header.Op, f.Code)
	}
}

// recordPacer records the bytes it let through.
type recordPacer struct {
	mu    sync.Mutex
	sizes []int
}

func (p *recordPacer) Wait(ctx context.Context, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sizes = append(p.sizes, n)
	return nil
}

func (p *recordPacer) get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprint(p.sizes)
}

func TestPacers(t *testing.T) {
	var in, out recordPacer
	b := newBackend(t)
	_, addr := start(t, b, nodeserver.Options{Ingress: &in, Egress: &out})
	c, err := nodeclient.Dial(context.Background(), addr, nodeclient.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if errs, err := c.MPut(ctx, []uint64{1, 2, 3}, [][]byte{payload(100, 1), payload(0, 2), payload(300, 3)}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if err := b.Spill(block.Key{ID: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MGet(ctx, []uint64{3, 2, 9, 1}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := in.get(), "[100 300]"; got != want {
		t.Errorf("ingress paced %s, want %s", got, want)
	}
	if got, want := out.get(), "[300 100]"; got != want {
		t.Errorf("egress paced %s, want %s", got, want)
	}
}

// faultBackend wraps a Backend with failures for particular keys.
type faultBackend struct {
	*nodeservertest.Backend
	panicID  uint64
	putErr   error
	noFd     bool // file blocks report Fd 0 (not a real file)
	shortLen int  // file blocks claim this many extra bytes
}

func (f *faultBackend) Acquire(ctx context.Context, k block.Key) (nodeserver.Ref, error) {
	if k.ID == f.panicID {
		panic("injected fault")
	}
	ref, err := f.Backend.Acquire(ctx, k)
	if err == nil && ref.File != nil {
		if f.noFd {
			ref.File = noFdFile{ref.File}
		}
		ref.Len += f.shortLen
	}
	return ref, err
}

func (f *faultBackend) Put(ctx context.Context, k block.Key, p []byte, sum uint32) error {
	if k.ID == f.panicID {
		panic("injected fault")
	}
	if f.putErr != nil {
		return f.putErr
	}
	return f.Backend.Put(ctx, k, p, sum)
}

type noFdFile struct{ nodeserver.File }

func (noFdFile) Fd() uintptr { return 0 }

func TestPanicRecovered(t *testing.T) {
	fb := &faultBackend{Backend: newBackend(t), panicID: 666}
	fb.Store(block.Key{ID: 1}, payload(10, 1))
	srv, addr := start(t, fb, nodeserver.Options{Logger: slog.New(slog.DiscardHandler)})
	rc := open(t, addr, "")
	rc.send(must(wire.AppendMGet(nil, 1, []uint64{1, 666})))
	if !rc.closed() {
		t.Fatal("connection open after a panic")
	}
	if got := srv.Stats().Panics; got != 1 {
		t.Fatalf("panics %d, want 1", got)
	}
	if fb.Pins() != 0 {
		t.Fatalf("%d blocks left pinned by the panicking request", fb.Pins())
	}
	rc = open(t, addr, "")
	rc.send(wire.AppendGet(nil, 2, 1))
	if f := rc.frame(); f.Blocks[0].Code != wire.CodeOK {
		t.Fatalf("after a panic: %v", f.Blocks[0].Code)
	}
}

func TestBackendErrorCodes(t *testing.T) {
	cases := []struct {
		err  error
		want wire.Code
	}{
		{fmt.Errorf("store: slot: %w", kvpool.ErrFull), wire.CodeFull},
		{kvpool.ErrTooLarge, wire.CodeTooLarge},
		{kvpool.ErrClosed, wire.CodeUnavailable},
		{context.Canceled, wire.CodeUnavailable},
		{errors.New("disk on fire"), wire.CodeInternal},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			fb := &faultBackend{Backend: newBackend(t), putErr: c.err}
			_, addr := start(t, fb, nodeserver.Options{})
			rc := open(t, addr, "")
			rc.send(putFrame(t, 1, "", 5, payload(10, 1)))
			if f := rc.frame(); f.Header.Op != wire.OpPutResponse || f.Statuses[0].Code != c.want {
				t.Fatalf("%v %v, want status %v", f.Header.Op, f.Statuses, c.want)
			}
		})
	}
}

// TestShutdown: ending Serve's context stops idle connections and requests
// in flight, and Serve returns once every connection goroutine is done.
func TestShutdown(t *testing.T) {
	b := newBackend(t)
	b.Store(block.Key{ID: 1}, payload(10, 1))
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	srv, err := nodeserver.New(nodeserver.Options{Backend: b, Egress: pacerFunc(func(ctx context.Context, n int) error {
		entered <- struct{}{}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	})})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	idle := open(t, ln.Addr().String(), "")
	busy := open(t, ln.Addr().String(), "")
	busy.send(wire.AppendGet(nil, 1, 1))
	<-entered // the GET is held by the pacer
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !idle.closed() || !busy.closed() {
		t.Fatal("connections open after Serve returned")
	}
	if st := srv.Stats(); st.ConnsOpen != 0 {
		t.Fatalf("%d connections open after Serve returned", st.ConnsOpen)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), ln2); !errors.Is(err, nodeserver.ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func TestCloseWithoutServe(t *testing.T) {
	srv, err := nodeserver.New(nodeserver.Options{Backend: nodeservertest.NewBackend("")})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}

type pacerFunc func(ctx context.Context, n int) error

func (f pacerFunc) Wait(ctx context.Context, n int) error { return f(ctx, n) }

// TestMaxConns: connections beyond the limit get CodeUnavailable.
func TestMaxConns(t *testing.T) {
	srv, addr := start(t, nil, nodeserver.Options{MaxConns: 2})
	open(t, addr, "")
	second := open(t, addr, "")
	third := dialRaw(t, addr)
	if a := third.handshake("", nil); a.Code != wire.CodeUnavailable {
		t.Fatalf("third connection: %v", a.Code)
	}
	if !third.closed() {
		t.Fatal("refused connection left open")
	}
	second.nc.Close()
	waitFor(t, "the server to notice a closed connection", func() bool { return srv.Stats().ConnsOpen == 1 })
	if a := dialRaw(t, addr).handshake("", nil); a.Code != wire.CodeOK {
		t.Fatalf("after a connection closed: %v", a.Code)
	}
	if st := srv.Stats(); st.ConnsRefused != 1 || st.ConnsTotal != 4 {
		t.Fatalf("refused %d of %d, want 1 of 4", st.ConnsRefused, st.ConnsTotal)
	}
}

// TestConcurrentClients runs raw clients in parallel against one server
// (meaningful under -race).
func TestConcurrentClients(t *testing.T) {
	srv, addr := start(t, nil, nodeserver.Options{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			c, err := nodeclient.Dial(context.Background(), addr, nodeclient.DialOptions{Tenant: fmt.Sprint("w", w)})
			if err != nil {
				failures.Add(1)
				return
			}
			defer c.Close()
			for i := range 30 {
				p := payload(1000*i, byte(w))
				if c.Put(context.Background(), uint64(i), p) != nil {
					failures.Add(1)
					return
				}
				got, _, err := c.Get(context.Background(), uint64(i), nil)
				if err != nil || !bytes.Equal(got, p) {
					failures.Add(1)
					return
				}
			}
		})
	}
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d clients failed", failures.Load())
	}
	if st := srv.Stats(); st.RequestCount(wire.OpGet, wire.CodeOK) != 240 || st.BlocksIn != 240 {
		t.Fatalf("GETs %d, blocks in %d; want 240 each", st.RequestCount(wire.OpGet, wire.CodeOK), st.BlocksIn)
	}
}

// TestPutChecksumPassedThrough: the server passes the client's checksum to
// the backend, which verifies it against the connection's tenant, so a
// block checksummed for another tenant or id is refused.
func TestPutChecksumPassedThrough(t *testing.T) {
	b := newBackend(t)
	_, addr := start(t, b, nodeserver.Options{})
	rc := open(t, addr, "mine")
	p := payload(100, 1)
	cases := []struct {
		name string
		in   []byte
		want wire.Code
	}{
		{"right tenant", putFrame(t, 1, "mine", 5, p), wire.CodeOK},
		{"other tenant's checksum", putFrame(t, 2, "theirs", 6, p), wire.CodeCorrupt},
		{"other id's checksum", must(wire.AppendPut(nil, 3, wire.Block{ID: 7, Checksum: block.Checksum(block.Key{Tenant: "mine", ID: 8}, p), Payload: p})), wire.CodeCorrupt},
	}
	for _, c := range cases {
		rc.send(c.in)
		if f := rc.frame(); f.Statuses[0].Code != c.want {
			t.Errorf("%s: status %v, want %v", c.name, f.Statuses[0].Code, c.want)
		}
	}
	if b.Len() != 1 {
		t.Fatalf("%d blocks stored, want 1", b.Len())
	}
}

// manyTiers reports more tiers than a STATS response can carry.
type manyTiers struct{ *nodeservertest.Backend }

func (manyTiers) Stats() []wire.TierStats { return make([]wire.TierStats, 256) }

func TestStatsEncodingFailure(t *testing.T) {
	_, addr := start(t, manyTiers{newBackend(t)}, nodeserver.Options{})
	rc := open(t, addr, "")
	rc.send(wire.AppendStats(nil, 1))
	if f := rc.frame(); f.Header.Op != wire.OpError || f.Code != wire.CodeInternal {
		t.Fatalf("got %v %v, want ERROR internal", f.Header.Op, f.Code)
	}
	rc.send(wire.AppendGet(nil, 2, 1))
	if f := rc.frame(); f.Header.Op != wire.OpGetResponse {
		t.Fatalf("after the failure: %v", f.Header.Op)
	}
}

// flakyListener fails Accept with errs in turn, then blocks until closed.
type flakyListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestAcceptErrors: Serve retries temporary accept errors and returns a
// permanent one, having shut down.
func TestAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fatal := errors.New("listener broke")
	fl := &flakyListener{Listener: ln, errs: []error{
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)},
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)},
		fatal,
	}}
	srv, err := nodeserver.New(nodeserver.Options{Backend: newBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), fl); !errors.Is(err, fatal) {
		t.Fatalf("Serve: %v, want %v", err, fatal)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("listener still open after Serve returned")
	}
}

// gatedBackend holds every Put until gate is closed, after telling held.
type gatedBackend struct {
	nodeserver.Backend
	held chan struct{}
	gate chan struct{}
}

func (b *gatedBackend) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	b.held <- struct{}{}
	<-b.gate
	return b.Backend.Put(ctx, k, payload, sum)
}

// TestPutBytesBounded: with MaxPutBytes of one maximum payload, a second
// connection's PUT waits while the first one's payload is held (its
// backend Put blocked), and goes through once the first is stored; no
// byte stays held after.
func TestPutBytesBounded(t *testing.T) {
	const max = 64 << 10
	gb := &gatedBackend{Backend: newBackend(t), held: make(chan struct{}, 2), gate: make(chan struct{})}
	srv, addr := start(t, gb, nodeserver.Options{Limits: wire.LimitsFor(max), MaxPutBytes: max})
	a, b := open(t, addr, "t"), open(t, addr, "t")
	a.send(putFrame(t, 1, "t", 1, payload(max, 1)))
	<-gb.held
	b.send(putFrame(t, 2, "t", 2, payload(max, 2)))
	waitFor(t, "the second PUT to wait", func() bool { _, w := srv.PutBudgetState(); return w == 1 })
	close(gb.gate)
	for _, c := range []*raw{a, b} {
		if f := c.frame(); f.Header.Op != wire.OpPutResponse || f.Statuses[0].Code != wire.CodeOK {
			t.Fatalf("PUT answered %v %+v", f.Header.Op, f.Statuses)
		}
	}
	if used, w := srv.PutBudgetState(); used != 0 || w != 0 {
		t.Fatalf("after both PUTs: %d bytes held, %d waiting", used, w)
	}
}

// TestPutTooLargeRaw: over the wire, a PUT and an MPUT of a payload one
// byte over the node's max object size are answered with an ERROR giving
// the size, the limit and the node setting, and the connection stays
// usable; a PUT frame over the frame limit (claimed 5 GiB would not even
// fit the u32, so 1 MiB against 64 KiB) is answered in the same terms
// before the connection closes. Nothing is stored.
func TestPutTooLargeRaw(t *testing.T) {
	const max = 64 << 10
	b := newBackend(t)
	srv, addr := start(t, b, nodeserver.Options{Limits: wire.LimitsFor(max)})
	c := open(t, addr, "t")
	check := func(what string, f *wire.Frame, size int) {
		t.Helper()
		if f.Header.Op != wire.OpError || f.Code != wire.CodeTooLarge {
			t.Fatalf("%s: %v %v, want an ERROR too large", what, f.Header.Op, f.Code)
		}
		for _, s := range []string{fmt.Sprint(size), fmt.Sprint(max), "--max-object-bytes", "max_object_bytes"} {
			if !strings.Contains(f.Message, s) {
				t.Errorf("%s: message %q lacks %q", what, f.Message, s)
			}
		}
	}
	c.send(putFrame(t, 1, "t", 1, payload(max+1, 1)))
	check("PUT", c.frame(), max+1)
	p := payload(max+1, 2)
	mput, err := wire.AppendMPut(nil, 2, []wire.Block{{ID: 2, Checksum: block.Checksum(block.Key{Tenant: "t", ID: 2}, p), Payload: p}})
	c.send(mustAppend(t, mput, err))
	check("MPUT", c.frame(), max+1)
	c.send(putFrame(t, 3, "t", 3, payload(10, 3)))
	if f := c.frame(); f.Header.Op != wire.OpPutResponse || f.Statuses[0].Code != wire.CodeOK {
		t.Fatalf("PUT after the refusals: %v %+v", f.Header.Op, f.Statuses)
	}
	c.send(putFrame(t, 4, "t", 4, payload(1<<20, 4)))
	check("PUT frame over the frame limit", c.frame(), 1<<20+36)
	if !c.closed() {
		t.Error("the connection stays open after a frame over the limit (the stream is lost)")
	}
	if st := srv.Stats(); st.BlocksIn != 1 {
		t.Errorf("%d blocks stored, want 1", st.BlocksIn)
	}
}

// TestPutPanicReleasesBudget: a backend Put that panics closes its
// connection and gives back the PUT budget bytes it held, so that later
// PUTs are not left waiting for bytes nobody holds.
func TestPutPanicReleasesBudget(t *testing.T) {
	const max = 64 << 10
	fb := &faultBackend{Backend: newBackend(t), panicID: 666}
	srv, addr := start(t, fb, nodeserver.Options{Limits: wire.LimitsFor(max), MaxPutBytes: max, Logger: slog.New(slog.DiscardHandler)})
	rc := open(t, addr, "t")
	rc.send(putFrame(t, 1, "t", 666, payload(max, 1)))
	if !rc.closed() {
		t.Fatal("connection open after a panic")
	}
	waitFor(t, "the budget to be given back", func() bool { used, _ := srv.PutBudgetState(); return used == 0 })
	rc = open(t, addr, "t")
	rc.send(putFrame(t, 2, "t", 2, payload(max, 2)))
	if f := rc.frame(); f.Header.Op != wire.OpPutResponse || f.Statuses[0].Code != wire.CodeOK {
		t.Fatalf("PUT after the panic: %v %+v", f.Header.Op, f.Statuses)
	}
}
