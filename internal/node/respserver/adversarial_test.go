package respserver_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/node/respserver"
	"github.com/kvpool/kvpool/internal/resp"
)

// waitFor polls cond until it holds; the bound is only there so that a
// broken server fails the test instead of hanging it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Minute); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectClose reads from nc until the server closes it, discarding what
// it sends; it fails if the server keeps it open for a minute.
func expectClose(nc net.Conn) error {
	nc.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after a minute")
	}
	return nil // EOF or a reset: closed
}

// TestPipelineOutlivesReadTimeout: a client streaming commands without
// pause, every write ending mid-command so the server never finds its
// buffer empty between commands, is served for many ReadTimeouts:
// ReadTimeout bounds one command's arrival, not the connection's life.
func TestPipelineOutlivesReadTimeout(t *testing.T) {
	// The stream lasts 8 ReadTimeouts; one command's two halves come in
	// writes one after the other, far within one, even on a busy machine.
	const readTimeout = 300 * time.Millisecond
	f := startFront(t, respserver.Options{ReadTimeout: readTimeout})
	c := f.dial(t)
	ping := encode("PING")
	var sent, answered atomic.Int64
	werr := make(chan error, 1)
	go func() {
		// Each write holds the tail of one PING, 20 whole ones and the
		// head of the next.
		split := len(ping) / 2
		first := true
		for start := time.Now(); time.Since(start) < 8*readTimeout; {
			var b bytes.Buffer
			if !first {
				b.Write(ping[split:])
			}
			first = false
			for range 20 {
				b.Write(ping)
			}
			b.Write(ping[:split])
			// Flow control: a few batches ahead of the replies, so the
			// replies left at the end are few.
			for sent.Load()-answered.Load() > 2000 {
				runtime.Gosched()
			}
			sent.Add(21)
			if _, err := c.nc.Write(b.Bytes()); err != nil {
				werr <- err
				return
			}
		}
		_, err := c.nc.Write(ping[split:])
		werr <- err
	}()
	c.nc.SetReadDeadline(time.Now().Add(2 * time.Minute))
	pong := func(i int) {
		if line, err := c.r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("reply %d: %q, %v (the server cut the stream off)", i, line, err)
		}
	}
	// Every command counted in sent but the last is whole once its write
	// is done (the last one's tail comes with the next write, or the
	// final one): only those replies are waited for until the writer has
	// finished, so a reply is never awaited for a command not sent whole.
	got := 0
	for {
		select {
		case err := <-werr:
			if err != nil {
				t.Fatalf("the server stopped taking commands after %d replies: %v", got, err)
			}
			for ; int64(got) < sent.Load(); got++ {
				pong(got)
			}
			if r := c.do("PING"); r != "+PONG\r\n" {
				t.Fatalf("after the stream: %q", r)
			}
			if n := f.srv.Stats().Timeouts; n != 0 {
				t.Fatalf("Timeouts = %d, want 0", n)
			}
			return
		default:
		}
		if int64(got) >= sent.Load()-1 {
			time.Sleep(100 * time.Microsecond) // for the writer's next batch
			continue
		}
		pong(got)
		got++
		answered.Store(int64(got))
	}
}

// TestIdleForever: with IdleTimeout 0 an idle connection is never closed:
// its idle deadline expires and is re-armed (here every 10 ms) and it is
// still served after many.
func TestIdleForever(t *testing.T) {
	f := startFront(t, respserver.Options{}, func(s *respserver.Server) { respserver.SetIdleRecheck(s, 10*time.Millisecond) })
	c := f.dial(t)
	c.do("PING")
	waitFor(t, "five re-armed idle deadlines", func() bool { return respserver.IdleRearms(f.srv) >= 5 })
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after idling: %q", got)
	}
	if n := f.srv.Stats().Timeouts; n != 0 {
		t.Errorf("Timeouts = %d, want 0", n)
	}
}

// TestIdleTimeout: with IdleTimeout set, an idle connection is closed,
// one that keeps sending is not.
func TestIdleTimeout(t *testing.T) {
	f := startFront(t, respserver.Options{IdleTimeout: 300 * time.Millisecond})
	idle := f.dial(t)
	idle.do("PING")
	if err := expectClose(idle.nc); err != nil {
		t.Fatalf("idle connection: %v", err)
	}
	if n := f.srv.Stats().Timeouts; n != 1 {
		t.Errorf("Timeouts = %d, want 1", n)
	}
	c := f.dial(t)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("a new connection: %q", got)
	}
}

// TestBusyOutlivesIdleDeadlines: a connection sending a command every few
// milliseconds for three IdleTimeouts is never closed. Its idle waits keep
// the deadline an earlier one set (armIdle), which passes during a later
// wait many times over the run (every idleRelease): each must be re-armed
// from that wait's start, not taken for an idle connection.
func TestBusyOutlivesIdleDeadlines(t *testing.T) {
	const idle = time.Second // gaps here are ~10 ms; a busy machine stays far within
	f := startFront(t, respserver.Options{IdleTimeout: idle})
	c := f.dial(t)
	n := 0
	for start := time.Now(); time.Since(start) < 3*idle; n++ {
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("command %d, %v into the run: %q", n, time.Since(start), got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.srv.Stats().Timeouts; got != 0 {
		t.Errorf("Timeouts = %d after %d commands; want 0", got, n)
	}
}

// TestHandshakeTimeout: on a node with tokens a connection that does not
// AUTH within HandshakeTimeout is closed, and an authenticated one is
// not; an open node has no handshake, and a connection may wait before
// its first command (client pools open connections ahead of use).
func TestHandshakeTimeout(t *testing.T) {
	const token = "cluster-token-0123456789"
	f := startFront(t, respserver.Options{Token: []byte(token), HandshakeTimeout: time.Second})
	authed := f.dial(t)
	if got := authed.do("AUTH", token); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	silent := f.dial(t)
	noauth := f.dial(t)
	if got := noauth.do("GET", "k"); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("GET before AUTH: %q", got)
	}
	for name, c := range map[string]*client{"silent": silent, "not authenticated": noauth} {
		if err := expectClose(c.nc); err != nil {
			t.Errorf("%s connection: %v", name, err)
		}
	}
	if got := authed.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("the authenticated connection after the handshake timeout: %q", got)
	}

	open := startFront(t, respserver.Options{HandshakeTimeout: 50 * time.Millisecond},
		func(s *respserver.Server) { respserver.SetIdleRecheck(s, 50*time.Millisecond) })
	late := open.dial(t)
	waitFor(t, "re-armed idle deadlines past the handshake timeout", func() bool { return respserver.IdleRearms(open.srv) >= 3 })
	if got := late.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("first command after a wait on an open node: %q", got)
	}
}

// bigHeader starts a SET of a value of n bytes.
func bigHeader(n int) string { return "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + strconv.Itoa(n) + "\r\n" }

// TestManyTricklers: 1,000 connections send a frame one byte at a time
// and stop mid-frame; another client is served all along, and each
// trickler is closed after ReadTimeout.
func TestManyTricklers(t *testing.T) {
	f := startFront(t, respserver.Options{ReadTimeout: time.Second})
	const n = 1000
	frame := []byte(bigHeader(100<<20) + "some of the value")
	conns := make([]net.Conn, n)
	for i := range conns {
		nc, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { nc.Close() })
		conns[i] = nc
	}
	c := f.dial(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, nc := range conns {
		wg.Go(func() {
			for j := range frame {
				if _, err := nc.Write(frame[j : j+1]); err != nil {
					break // closed already: a trickler slower than ReadTimeout
				}
			}
			if err := expectClose(nc); err != nil {
				errs <- fmt.Errorf("trickler %d: %v", i, err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	pings := 0
	for waiting := true; waiting; pings++ {
		select {
		case <-done:
			waiting = false
		default:
		}
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING %d while others trickle: %q", pings, got)
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := f.srv.Stats().Timeouts; got != n {
		t.Errorf("Timeouts = %d, want %d", got, n)
	}
	waitFor(t, "the tricklers' memory released", func() bool { return f.srv.Stats().ArgBytes == 0 })
}

// TestBinaryGarbage: random bytes get error replies and a close, or
// replies to whatever commands they happen to spell; never a hang or a
// crash, and other clients are served.
func TestBinaryGarbage(t *testing.T) {
	f := startFront(t, respserver.Options{ReadTimeout: 2 * time.Second})
	rng := rand.New(rand.NewPCG(16, 1))
	for i := range 50 {
		garbage := make([]byte, 1+rng.IntN(4096))
		for j := range garbage {
			garbage[j] = byte(rng.Uint32())
		}
		switch i % 5 { // make the parser go deeper than random bytes do
		case 1:
			garbage[0] = '*'
		case 2:
			garbage = append([]byte("*2\r\n$3\r\nGET\r\n"), garbage...)
		case 3:
			garbage = append([]byte("*1\r\n$"), garbage...)
		}
		c := f.dial(t)
		if _, err := c.nc.Write(garbage); err != nil {
			t.Fatalf("garbage %d: %v", i, err)
		}
		c.nc.(*net.TCPConn).CloseWrite()
		c.nc.SetReadDeadline(time.Now().Add(time.Minute))
		for {
			var b strings.Builder
			err := readReply(c.r, &b)
			if err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
				break // closed
			}
			if err != nil {
				t.Fatalf("garbage %d: %v after %q", i, err, b.String())
			}
		}
	}
	if got := f.dial(t).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after the garbage: %q", got)
	}
}

// TestNonReader: a client that sends commands and never reads the replies
// is closed after WriteTimeout; another is served meanwhile.
func TestNonReader(t *testing.T) {
	f := startFront(t, respserver.Options{WriteTimeout: 300 * time.Millisecond})
	other := f.dial(t)
	if got := other.do("SET", "big", strings.Repeat("x", 1<<20)); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	nr := f.dial(t)
	// The dial returns once the kernel has the connection, maybe before
	// the server admitted it: wait for both, or "one open" proves nothing.
	waitFor(t, "both connections admitted", func() bool { return f.srv.Stats().Open == 2 })
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		get := encode("GET", "big")
		for {
			if _, err := nr.nc.Write(get); err != nil {
				return // the server closed it
			}
		}
	}()
	waitFor(t, "the non-reader closed", func() bool {
		if got := other.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING beside the non-reader: %q", got)
		}
		return f.srv.Stats().Open == 1
	})
	nr.nc.Close()
	<-wdone
	if n := f.srv.Stats().Timeouts; n != 1 {
		t.Errorf("Timeouts = %d, want 1", n)
	}
}

// TestSameKeyConcurrently: many clients SET, GET and DEL one key at once;
// every GET returns nothing or exactly one of the values written, never a
// mix, and the race detector sees no race.
func TestSameKeyConcurrently(t *testing.T) {
	f := startFront(t, respserver.Options{})
	const clients, ops = 12, 150
	value := func(c, i int) string {
		head := fmt.Sprintf("%d:%d:", c, i)
		return head + strings.Repeat(string(rune('a'+c)), (c*997+i*131)%(96<<10))
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			nc, err := net.Dial("tcp", f.addr)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			r := bufio.NewReader(nc)
			nc.SetDeadline(time.Now().Add(2 * time.Minute))
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := range ops {
				var cmd []byte
				op := rng.IntN(3)
				switch op {
				case 0:
					cmd = encode("SET", "k", value(c, i))
				case 1:
					cmd = encode("GET", "k")
				default:
					cmd = encode("DEL", "k")
				}
				if _, err := nc.Write(cmd); err != nil {
					errs <- err
					return
				}
				var b strings.Builder
				if err := readReply(r, &b); err != nil {
					errs <- err
					return
				}
				got := b.String()
				switch op {
				case 0:
					if got != "+OK\r\n" {
						errs <- fmt.Errorf("SET: %.80q", got)
						return
					}
				case 1:
					if got == "$-1\r\n" {
						continue
					}
					_, rest, _ := strings.Cut(got, "\r\n")
					v := strings.TrimSuffix(rest, "\r\n")
					var wc, wi int
					if _, err := fmt.Sscanf(v, "%d:%d:", &wc, &wi); err != nil || v != value(wc, wi) || got != fmt.Sprintf("$%d\r\n%s\r\n", len(v), v) {
						errs <- fmt.Errorf("GET returned a value nobody wrote (%d bytes, starting %.40q)", len(v), v)
						return
					}
				default:
					if got != ":0\r\n" && got != ":1\r\n" {
						errs <- fmt.Errorf("DEL: %q", got)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMemoryBounded: many connections declare 100 MiB values and send
// 1 MiB of each; what the server holds for them is charged before it is
// allocated and never passes MaxArgBytes plus one command's worth (the
// senior holder's, budget.go), a small command is served meanwhile, and
// everything is given back when they go.
func TestMemoryBounded(t *testing.T) {
	const limit = 4 << 20
	f := startFront(t, respserver.Options{MaxArgBytes: limit})
	const n, sent = 40, 1 << 20
	payload := []byte(bigHeader(100<<20) + strings.Repeat("v", sent))
	var wg sync.WaitGroup
	conns := make([]net.Conn, n)
	for i := range conns {
		nc, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = nc
		t.Cleanup(func() { nc.Close() })
		wg.Go(func() { nc.Write(payload) }) // blocks once the server stops reading it
	}
	waitFor(t, "the budget nearly full", func() bool { return f.srv.Stats().ArgBytes >= limit-sent })
	c := f.dial(t)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING with the budget full: %q", got)
	}
	for _, nc := range conns {
		nc.Close()
	}
	wg.Wait()
	waitFor(t, "the memory released", func() bool { return f.srv.Stats().ArgBytes == 0 })
	// The senior holds at most about twice what it was sent plus a
	// growth step.
	if st := f.srv.Stats(); st.PeakArgBytes > limit+2*sent+256<<10 {
		t.Fatalf("held %d bytes at most, want at most %d + one command", st.PeakArgBytes, limit)
	}
}

// TestManyEmptyArgsCharged: a command of 2^20 empty arguments is charged
// for its argument slots (resp.ArgOverhead each), and the charge goes
// back once the connection idles.
func TestManyEmptyArgsCharged(t *testing.T) {
	f := startFront(t, respserver.Options{})
	c := f.dial(t)
	const n = 1 << 20
	var b bytes.Buffer
	b.WriteString("*" + strconv.Itoa(n) + "\r\n$4\r\nPING\r\n")
	b.WriteString(strings.Repeat("$0\r\n\r\n", n-1))
	go c.nc.Write(b.Bytes())
	if got := c.reply(); got != "-ERR wrong number of arguments for 'ping' command\r\n" {
		t.Fatalf("PING with 2^20 arguments: %q", got)
	}
	if got, want := f.srv.Stats().PeakArgBytes, int64(n*resp.ArgOverhead-resp.FreeHeld); got < want {
		t.Fatalf("charged %d bytes for 2^20 arguments, want at least %d", got, want)
	}
	waitFor(t, "the idle connection's memory released", func() bool { return f.srv.Stats().ArgBytes == 0 })
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after: %q", got)
	}
}

// TestBudgetNoDeadlock: connections each half-way through a command
// larger than what the budget has left do not wait on each other: all
// are served.
func TestBudgetNoDeadlock(t *testing.T) {
	f := startFront(t, respserver.Options{MaxArgBytes: 4 << 20})
	const clients, size = 6, 3 << 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			nc, err := net.Dial("tcp", f.addr)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(2 * time.Minute))
			k, v := "k"+strconv.Itoa(i), strings.Repeat(strconv.Itoa(i), size)
			go nc.Write(encode("SET", k, v))
			r := bufio.NewReader(nc)
			var b strings.Builder
			if err := readReply(r, &b); err != nil || b.String() != "+OK\r\n" {
				errs <- fmt.Errorf("client %d SET: %q, %v", i, b.String(), err)
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := f.srv.Stats().Timeouts; n != 0 {
		t.Errorf("Timeouts = %d, want 0", n)
	}
}

// TestReplyBeforeWaiting: the replies to the commands received go out
// before the server waits for the rest of a partial one: a client that
// sent a command and the start of the next gets the first reply.
func TestReplyBeforeWaiting(t *testing.T) {
	f := startFront(t, respserver.Options{})
	c := f.dial(t)
	if _, err := c.nc.Write([]byte("PING\r\n*1\r\n$4\r\nPI")); err != nil {
		t.Fatal(err)
	}
	if got := c.reply(); got != "+PONG\r\n" {
		t.Fatalf("first reply: %q", got)
	}
	if _, err := c.nc.Write([]byte("NG\r\n")); err != nil {
		t.Fatal(err)
	}
	if got := c.reply(); got != "+PONG\r\n" {
		t.Fatalf("second reply: %q", got)
	}
}
