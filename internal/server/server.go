package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/auth"
)

// ErrClosed is returned by Serve on a server that has been closed. It
// wraps kvpool.ErrClosed.
var ErrClosed = fmt.Errorf("server: %w", kvpool.ErrClosed)

// ErrShuttingDown is returned by Conn's deadline methods once the server
// has begun stopping the connection.
var ErrShuttingDown = errors.New("server: shutting down")

// Defaults for zero Options fields.
const (
	// DefaultHandshakeTimeout bounds the wait for a connection's
	// handshake: 10 s, as Go's net/http bounds a TLS handshake; a kvpool
	// hello is at most ~4 KiB.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxConns is the most connections served at once: 1024. Each
	// holds a goroutine and a 64 KiB read buffer, so the buffers stay
	// under 64 MiB.
	DefaultMaxConns = 1024
	// DefaultMaxRefusing bounds the connections being refused politely at
	// once (answered by Handler.Refuse): 64 goroutines at most, so a
	// connection flood cannot make refusing itself expensive. Beyond it a
	// connection is closed without an answer.
	DefaultMaxRefusing = 64
)

// acceptBackoff is the first pause after a temporary accept error; it
// doubles up to maxAcceptBackoff. The values are Go's net/http ones.
const (
	acceptBackoff    = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Handler is a protocol front: it serves the connections a Server accepts.
// Its methods are called concurrently, one call per connection.
type Handler interface {
	// ServeConn serves c until the connection ends. When it is called,
	// c's read and write deadlines are the handshake timeout from now:
	// the handler reads and answers its protocol's handshake (checking
	// credentials with Server.Auth) within it. Afterwards it sets read
	// deadlines only through c.SetReadTimeout, which fails once the server
	// is stopping, so a connection waiting for a request ends promptly.
	// ctx is cancelled when the server stops. The skeleton closes c when
	// ServeConn returns.
	ServeConn(ctx context.Context, c *Conn)
	// Refuse answers a connection the server will not serve because
	// MaxConns are open, as its protocol refuses one (an "unavailable"
	// hello reply); reason says why, wrapping kvpool.ErrUnavailable. The
	// deadlines are the handshake timeout from now; the skeleton closes nc
	// when Refuse returns.
	Refuse(nc net.Conn, reason error)
}

// Options configure a Server. The zero value of each field means its
// default.
type Options struct {
	// Name names the server in logs and errors ("nodeserver").
	Name string
	// MaxConns is the most connections served at once; more are refused
	// (DefaultMaxConns).
	MaxConns int
	// MaxRefusing is the most connections being refused at once
	// (DefaultMaxRefusing).
	MaxRefusing int
	// HandshakeTimeout bounds the handshake (DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// Auth are the credentials connections authenticate against (see
	// package auth); the zero value is an open server.
	Auth auth.Options
	// MaxToken, when positive, is the longest token the protocol's
	// handshake accepts: a configured token longer than it is an error,
	// since no connection could present it.
	MaxToken int
	// Logger receives accept errors; nil discards them.
	Logger *slog.Logger
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	_, err := o.Resolve()
	return err
}

// Resolve returns o with defaults filled in, or the error Validate
// reports.
func (o Options) Resolve() (Options, error) {
	if o.Name == "" {
		o.Name = "server"
	}
	ints := [...]struct {
		name string
		v    *int
		def  int
	}{{"MaxConns", &o.MaxConns, DefaultMaxConns}, {"MaxRefusing", &o.MaxRefusing, DefaultMaxRefusing}}
	for _, f := range ints {
		switch {
		case *f.v < 0:
			return o, fmt.Errorf("%s: Options.%s is %d; want >= 0 (0 means the default)", o.Name, f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if err := Durations(o.Name, Duration{"HandshakeTimeout", &o.HandshakeTimeout, DefaultHandshakeTimeout}); err != nil {
		return o, err
	}
	if o.MaxToken > 0 {
		if len(o.Auth.ClusterToken) > o.MaxToken {
			return o, fmt.Errorf("%s: Options.Token is %d bytes, longer than Limits.MaxToken (%d): no hello could carry it",
				o.Name, len(o.Auth.ClusterToken), o.MaxToken)
		}
		for name, tok := range o.Auth.TenantTokens {
			if len(tok) > o.MaxToken {
				return o, fmt.Errorf("%s: Options.TenantTokens: the token of tenant %q is %d bytes, longer than Limits.MaxToken (%d): no hello could carry it",
					o.Name, name, len(tok), o.MaxToken)
			}
		}
	}
	if err := o.Auth.Validate(); err != nil {
		return o, fmt.Errorf("%s: Options: %w", o.Name, err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Duration is one duration option, for Durations.
type Duration struct {
	// Name is the field's name ("IdleTimeout").
	Name string
	// V points at the field.
	V *time.Duration
	// Default replaces a zero value.
	Default time.Duration
}

// Durations fills zero duration options with their defaults, or reports the
// first negative one; name names the server in the error.
func Durations(name string, ds ...Duration) error {
	for _, d := range ds {
		switch {
		case *d.V < 0:
			return fmt.Errorf("%s: Options.%s is %v; want >= 0 (0 means the default, %v)", name, d.Name, *d.V, d.Default)
		case *d.V == 0:
			*d.V = d.Default
		}
	}
	return nil
}

// Stats are a server's connection counters.
type Stats struct {
	// Open is the number of connections being served now.
	Open int64
	// Accepted counts accepted connections, refused ones included.
	Accepted uint64
	// Refused counts connections refused because MaxConns were open.
	Refused uint64
}

// Server accepts connections and hands them to its Handler. Create it with
// New, run it with Serve (once per listener; calls may overlap), stop a
// Serve by ending its context, stop everything with Close. Its methods are
// safe for concurrent use.
type Server struct {
	h    Handler
	opts Options
	auth *auth.Table

	accepted, refused atomic.Uint64
	open              atomic.Int64

	mu       sync.Mutex
	closed   bool
	serving  map[*listener]struct{}
	nconns   int // connections served, over every listener
	refusing int
	serves   sync.WaitGroup // Serve calls
}

// listener is one Serve call: its listener and connections.
type listener struct {
	ln      net.Listener
	cancel  context.CancelFunc    // cancels the connections' context
	done    chan struct{}         // closed by stop
	stopped bool                  // guarded by Server.mu
	conns   map[*Conn]struct{}    // guarded by Server.mu
	refused map[net.Conn]struct{} // being refused; guarded by Server.mu
	wg      sync.WaitGroup        // connection and refusal goroutines
}

// New returns a server handing connections to h, or the error
// opts.Validate reports.
func New(h Handler, opts Options) (*Server, error) {
	o, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	table, err := auth.New(o.Auth)
	if err != nil { // cannot happen: resolve validated the same options
		return nil, fmt.Errorf("%s: %w", o.Name, err)
	}
	o.Auth = auth.Options{} // the table holds the tokens' digests; drop the secrets
	return &Server{h: h, opts: o, auth: table, serving: map[*listener]struct{}{}}, nil
}

// Auth returns the table connections authenticate against.
func (s *Server) Auth() *auth.Table { return s.auth }

// MaxConns returns the most connections served at once.
func (s *Server) MaxConns() int { return s.opts.MaxConns }

// Stats returns a snapshot of the connection counters.
func (s *Server) Stats() Stats {
	return Stats{Open: s.open.Load(), Accepted: s.accepted.Load(), Refused: s.refused.Load()}
}

// Serve accepts connections on ln and serves them until ctx ends or Close
// is called, then closes ln, stops the connections it accepted (see the
// package comment) and returns once all their goroutines have finished:
// nil after a stop, the error if accepting failed for a reason other than
// a temporary one (after stopping the same way). On a closed server it
// closes ln and returns ErrClosed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := &listener{ln: ln, cancel: cancel, done: make(chan struct{}), conns: map[*Conn]struct{}{}, refused: map[net.Conn]struct{}{}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.serving[l] = struct{}{}
	s.serves.Add(1)
	s.mu.Unlock()
	defer s.serves.Done()

	stop := context.AfterFunc(ctx, func() { s.stop(l) })
	defer stop()
	err := s.accept(cctx, l)
	s.stop(l)
	l.wg.Wait()
	s.mu.Lock()
	delete(s.serving, l)
	s.mu.Unlock()
	return err
}

// accept runs l's accept loop until l is stopped or accepting fails.
func (s *Server) accept(ctx context.Context, l *listener) error {
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if s.isStopped(l) {
				return nil
			}
			if temporary(err) {
				backoff = min(max(2*backoff, acceptBackoff), maxAcceptBackoff)
				s.opts.Logger.Warn(s.opts.Name+": accept failed; retrying", "addr", l.ln.Addr().String(), "err", err, "backoff", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-l.done:
					t.Stop()
				}
				continue
			}
			return fmt.Errorf("%s: accept on %s: %w", s.opts.Name, l.ln.Addr(), err)
		}
		backoff = 0
		s.admit(ctx, l, nc)
	}
}

// temporary reports whether accepting may succeed if retried.
func temporary(err error) bool {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// admit starts serving nc, or refuses it when MaxConns are open.
func (s *Server) admit(ctx context.Context, l *listener, nc net.Conn) {
	s.accepted.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case l.stopped:
		nc.Close()
	case s.nconns >= s.opts.MaxConns:
		s.refused.Add(1)
		if s.refusing >= s.opts.MaxRefusing {
			nc.Close()
			return
		}
		s.refusing++
		l.refused[nc] = struct{}{}
		l.wg.Add(1)
		go s.refuse(l, nc)
	default:
		c := &Conn{Conn: nc}
		l.conns[c] = struct{}{}
		s.nconns++
		s.open.Add(1)
		l.wg.Add(1)
		go s.serve(ctx, l, c)
	}
}

// serve runs the handler on c, then unregisters and closes it.
func (s *Server) serve(ctx context.Context, l *listener, c *Conn) {
	defer l.wg.Done()
	defer func() {
		// Free the slot first: a peer that sees the connection closed can
		// connect again without being refused.
		s.mu.Lock()
		delete(l.conns, c)
		s.nconns--
		s.mu.Unlock()
		s.open.Add(-1)
		c.Close()
	}()
	if err := c.setDeadline(s.opts.HandshakeTimeout); err != nil {
		return // stopped before it began
	}
	s.h.ServeConn(ctx, c)
}

// refuse has the handler answer nc with a refusal, then closes it.
func (s *Server) refuse(l *listener, nc net.Conn) {
	defer l.wg.Done()
	defer func() {
		nc.Close()
		s.mu.Lock()
		s.refusing--
		delete(l.refused, nc)
		s.mu.Unlock()
	}()
	nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	s.h.Refuse(nc, fmt.Errorf("%s serves %d connections, its limit; try again later: %w", s.opts.Name, s.opts.MaxConns, kvpool.ErrUnavailable))
}

func (s *Server) isStopped(l *listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return l.stopped
}

// stop stops l: no more accepts, idle connections interrupted, refusals
// closed, requests cancelled. It does not wait.
func (s *Server) stop(l *listener) {
	s.mu.Lock()
	if l.stopped {
		s.mu.Unlock()
		return
	}
	l.stopped = true
	close(l.done)
	l.ln.Close()
	for c := range l.conns {
		c.interrupt()
	}
	// A refusal has nothing in flight: closing it ends a handler waiting
	// for a silent peer (it may set its own deadlines) at once.
	for nc := range l.refused {
		nc.Close()
	}
	s.mu.Unlock()
	l.cancel()
}

// Shutdown stops every Serve (see Serve) without waiting; later Serve
// calls return ErrClosed.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.closed = true
	ls := make([]*listener, 0, len(s.serving))
	for l := range s.serving {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		s.stop(l)
	}
}

// Close shuts the server down (Shutdown) and waits for every Serve to
// return, and so for every goroutine the server started. Closing twice is
// a no-op.
func (s *Server) Close() error {
	s.Shutdown()
	s.serves.Wait()
	return nil
}
