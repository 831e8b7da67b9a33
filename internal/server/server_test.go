package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/auth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lineEcho is a protocol that is not kvpool's: the client sends a line,
// the server echoes it, until the client sends "quit". A refused
// connection reads "BUSY <reason>".
type lineEcho struct {
	idle    time.Duration
	mu      sync.Mutex
	ended   []error       // why each ServeConn returned
	started chan struct{} // a ServeConn began (buffered)
}

func newLineEcho() *lineEcho {
	return &lineEcho{idle: time.Hour, started: make(chan struct{}, 16)}
}

func (h *lineEcho) ServeConn(ctx context.Context, c *Conn) {
	h.started <- struct{}{}
	br := bufio.NewReader(c)
	var err error
	for first := true; ; first = false {
		if !first {
			if err = c.SetReadTimeout(h.idle); err != nil {
				break
			}
		}
		var line string
		if line, err = br.ReadString('\n'); err != nil {
			break
		}
		if line == "quit\n" {
			break
		}
		if _, err = io.WriteString(c, line); err != nil {
			break
		}
	}
	h.mu.Lock()
	h.ended = append(h.ended, err)
	h.mu.Unlock()
}

func (h *lineEcho) Refuse(nc net.Conn, reason error) {
	io.WriteString(nc, "BUSY "+reason.Error()+"\n")
}

func (h *lineEcho) endings() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.ended...)
}

// start serves h on a loopback listener; it returns the server, its
// address and a function that waits for Serve's result.
func start(t *testing.T, h Handler, opts Options) (*Server, string, func() error) {
	t.Helper()
	s, err := New(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background(), ln) }()
	var once sync.Once
	var serr error
	wait := func() error {
		once.Do(func() { serr = <-errc })
		return serr
	}
	t.Cleanup(func() {
		s.Close()
		wait()
	})
	return s, ln.Addr().String(), wait
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func echo(t *testing.T, c net.Conn, br *bufio.Reader, line string) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := br.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo of %q: %q, %v", line, got, err)
	}
}

func TestServeAndClose(t *testing.T) {
	h := newLineEcho()
	s, addr, wait := start(t, h, Options{Name: "echo"})
	c1, r1 := dial(t, addr)
	c2, r2 := dial(t, addr)
	echo(t, c1, r1, "hello")
	echo(t, c2, r2, "world")
	if st := s.Stats(); st.Open != 2 || st.Accepted != 2 || st.Refused != 0 {
		t.Fatalf("stats %+v, want 2 open, 2 accepted", st)
	}
	// Close interrupts the two idle connections and waits for them.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	ends := h.endings()
	if len(ends) != 2 {
		t.Fatalf("%d connections ended, want 2", len(ends))
	}
	for _, err := range ends {
		if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, ErrShuttingDown) {
			t.Errorf("connection ended with %v, want an interrupted read", err)
		}
	}
	if st := s.Stats(); st.Open != 0 {
		t.Fatalf("%d connections open after Close", st.Open)
	}
	// The connections were closed: the clients read EOF.
	if _, err := r1.ReadString('\n'); err != io.EOF {
		t.Errorf("client read after Close: %v, want EOF", err)
	}
	// A closed server serves no more.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background(), ln); !errors.Is(err, ErrClosed) || !errors.Is(err, kvpool.ErrClosed) {
		t.Fatalf("Serve after Close: %v, want ErrClosed", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("Serve on a closed server left the listener open")
	}
	if err := s.Close(); err != nil { // twice is a no-op
		t.Fatal(err)
	}
}

func TestContextEndsServe(t *testing.T) {
	h := newLineEcho()
	s, err := New(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	c, r := dial(t, ln.Addr().String())
	echo(t, c, r, "ping")
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Serve after its context ended: %v", err)
	}
	if n := len(h.endings()); n != 1 {
		t.Fatalf("%d connections ended, want 1 (Serve waits for them)", n)
	}
	// Only that Serve stopped: the server still serves another listener.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { errc <- s.Serve(context.Background(), ln2) }()
	c2, r2 := dial(t, ln2.Addr().String())
	echo(t, c2, r2, "pong")
	s.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestMaxConnsRefused(t *testing.T) {
	h := newLineEcho()
	s, addr, _ := start(t, h, Options{Name: "echo", MaxConns: 1})
	c1, r1 := dial(t, addr)
	echo(t, c1, r1, "first") // served
	_, r2 := dial(t, addr)
	line, err := r2.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "BUSY echo serves 1 connections, its limit") || !strings.Contains(line, kvpool.ErrUnavailable.Error()) {
		t.Fatalf("second connection read %q, %v; want a refusal", line, err)
	}
	if _, err := r2.ReadString('\n'); err != io.EOF {
		t.Fatalf("refused connection: %v after the refusal, want EOF (closed)", err)
	}
	if st := s.Stats(); st.Refused != 1 || st.Accepted != 2 || st.Open != 1 {
		t.Fatalf("stats %+v, want 1 refused of 2 accepted, 1 open", st)
	}
	// Once the first has left (the server closed it), a new connection
	// is served.
	io.WriteString(c1, "quit\n")
	if _, err := r1.ReadString('\n'); err != io.EOF {
		t.Fatalf("after quit: %v, want EOF", err)
	}
	c3, r3 := dial(t, addr)
	echo(t, c3, r3, "third")
}

// TestHandshakeDeadline: a peer that connects and sends nothing is cut
// off by the handshake deadline the skeleton sets.
func TestHandshakeDeadline(t *testing.T) {
	h := newLineEcho()
	_, addr, _ := start(t, h, Options{HandshakeTimeout: time.Millisecond})
	_, r := dial(t, addr)
	if _, err := r.ReadString('\n'); err != io.EOF {
		t.Fatalf("silent client: %v, want EOF (the server gave up)", err)
	}
	ends := h.endings()
	if len(ends) != 1 || !errors.Is(ends[0], os.ErrDeadlineExceeded) {
		t.Fatalf("ServeConn ended with %v, want the handshake deadline", ends)
	}
}

// flakyListener fails its first Accepts with a temporary error.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
}

type tempErr struct{}

func (tempErr) Error() string   { return "accept: too many open files" }
func (tempErr) Timeout() bool   { return true }
func (tempErr) Temporary() bool { return true }

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.fails > 0 {
		l.fails--
		l.mu.Unlock()
		return nil, tempErr{}
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

func TestAcceptBackoff(t *testing.T) {
	h := newLineEcho()
	s, err := New(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	ln := &flakyListener{Listener: inner, fails: 3}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background(), ln) }()
	c, r := dial(t, inner.Addr().String())
	echo(t, c, r, "after backoff") // served despite the failed accepts
	s.Close()
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v, want nil (temporary errors are retried)", err)
	}
}

// closedListener fails Accept for good.
type closedListener struct{ net.Listener }

func (closedListener) Accept() (net.Conn, error) { return nil, errors.New("listener broke") }

func TestAcceptFailure(t *testing.T) {
	s, err := New(newLineEcho(), Options{Name: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer inner.Close()
	if err := s.Serve(context.Background(), closedListener{inner}); err == nil || !strings.Contains(err.Error(), "echo: accept on") {
		t.Fatalf("Serve: %v, want the accept error", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		want string // "" means valid
	}{
		{"zero", Options{}, ""},
		{"negative conns", Options{MaxConns: -1}, "MaxConns"},
		{"negative refusing", Options{MaxRefusing: -1}, "MaxRefusing"},
		{"negative handshake", Options{HandshakeTimeout: -time.Second}, "HandshakeTimeout"},
		{"token too long", Options{MaxToken: 4, Auth: auth.Options{ClusterToken: []byte("12345")}}, "Options.Token"},
		{"tenant token too long", Options{MaxToken: 4, Auth: auth.Options{ClusterToken: []byte("1"), TenantTokens: map[string][]byte{"a": []byte("12345")}}}, "TenantTokens"},
		{"tenant token without cluster token", Options{Auth: auth.Options{TenantTokens: map[string][]byte{"a": []byte("x")}}}, "Options"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.o.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate: %v, want an error naming %s", err, c.want)
			}
		})
	}
}
