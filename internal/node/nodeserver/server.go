package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// ErrClosed is returned by Serve on a server that has been closed or is
// already serving.
var ErrClosed = errors.New("nodeserver: server closed")

// maxRefusing bounds the connections being refused politely at once (sent
// a CodeUnavailable hello-ack, then drained): 64 goroutines at most, so a
// connection flood cannot make refusing itself expensive. Beyond it a
// connection is closed without an ack.
const maxRefusing = 64

// acceptBackoff is the first pause after a temporary accept error (EMFILE
// and friends); it doubles up to maxAcceptBackoff. The values are Go's
// net/http ones.
const (
	acceptBackoff    = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Server serves a Backend over TCP. Create it with New, run it with Serve,
// stop it by ending Serve's context or with Close. Its methods are safe for
// concurrent use.
type Server struct {
	opts Options
	lim  wire.Limits
	auth *auth.Table
	log  *slog.Logger
	bufs *bufPool
	ctr  counters

	mu       sync.Mutex
	serving  bool
	closed   bool
	ln       net.Listener
	conns    map[*conn]struct{}
	cancel   context.CancelFunc // cancels the connections' context
	done     chan struct{}      // closed by shutdown
	refusing int

	wg sync.WaitGroup // connection goroutines
}

// New returns a server configured by opts, or the error opts.Validate
// reports.
func New(opts Options) (*Server, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	o.Token = append([]byte(nil), o.Token...) // the caller may reuse its slice
	table, err := auth.New(auth.Options{ClusterToken: o.Token, TenantTokens: o.TenantTokens, Shared: o.Shared})
	if err != nil { // cannot happen: resolve validated the same options
		return nil, fmt.Errorf("nodeserver: %w", err)
	}
	o.TenantTokens = nil // the table holds their digests; drop the secrets
	s := &Server{
		opts:  o,
		lim:   o.Limits,
		log:   o.Logger,
		bufs:  newBufPool(o.Limits.MaxPayload),
		conns: map[*conn]struct{}{},
		done:  make(chan struct{}),
	}
	s.auth = table
	return s, nil
}

// Limits returns the limits the server enforces and advertises, defaults
// filled in.
func (s *Server) Limits() wire.Limits { return s.lim }

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats { return s.ctr.snapshot() }

// Serve accepts connections on ln and serves them until ctx ends or Close is
// called, then closes ln, stops every connection (see the package comment)
// and returns nil once all connection goroutines have finished. It returns
// an error if accepting fails for a reason other than shutdown (after
// shutting down the same way), and ErrClosed, having closed ln, when the
// server is closed or already serving. Serve may be called once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed || s.serving {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.serving = true
	s.ln = ln
	cctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.mu.Unlock()
	defer cancel()

	stop := context.AfterFunc(ctx, s.shutdown)
	defer stop()
	s.log.Info("nodeserver: serving", "addr", ln.Addr().String(),
		"max_frame", s.lim.MaxFrame, "max_batch", s.lim.MaxBatch, "max_payload", s.lim.MaxPayload,
		"max_conns", s.opts.MaxConns, "auth", !s.auth.Open(),
		"egress_paced", s.opts.Egress != nil, "ingress_paced", s.opts.Ingress != nil)

	var err error
	backoff := time.Duration(0)
	for {
		nc, aerr := ln.Accept()
		if aerr != nil {
			if s.isClosed() {
				break
			}
			if temporaryAcceptError(aerr) {
				backoff = min(max(2*backoff, acceptBackoff), maxAcceptBackoff)
				s.log.Warn("nodeserver: accept failed; retrying", "addr", ln.Addr().String(), "err", aerr, "backoff", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-s.done:
					t.Stop()
				}
				continue
			}
			err = fmt.Errorf("nodeserver: accept on %s: %w", ln.Addr(), aerr)
			s.shutdown()
			break
		}
		backoff = 0
		s.admit(cctx, nc)
	}
	s.wg.Wait()
	s.log.Info("nodeserver: stopped", "addr", ln.Addr().String())
	return err
}

// temporaryAcceptError reports whether accepting may succeed if retried.
func temporaryAcceptError(err error) bool {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// admit starts serving nc, or refuses it when MaxConns are open.
func (s *Server) admit(ctx context.Context, nc net.Conn) {
	s.ctr.connsTotal.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		nc.Close()
	case len(s.conns) >= s.opts.MaxConns:
		s.ctr.connsRefused.Add(1)
		if s.refusing >= maxRefusing {
			nc.Close()
			return
		}
		s.refusing++
		s.wg.Add(1)
		go s.refuse(nc)
	default:
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.ctr.connsOpen.Add(1)
		s.wg.Add(1)
		go c.serve(ctx)
	}
}

// refuse answers a connection over MaxConns with CodeUnavailable.
func (s *Server) refuse(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.refusing--
		s.mu.Unlock()
	}()
	ack := wire.HelloAck{Version: wire.Version, Code: wire.CodeUnavailable,
		Message: fmt.Sprintf("node serves %d connections, its limit; try again later or another replica", s.opts.MaxConns)}
	s.ctr.bytesOut.Add(uint64(linger(nc, wire.AppendHelloAck(nil, &ack), s.opts.HandshakeTimeout)))
	s.log.Debug("nodeserver: connection refused", "remote", nc.RemoteAddr().String(), "reason", "max connections")
}

// connDone unregisters c after its goroutine has finished with it.
func (s *Server) connDone(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.ctr.connsOpen.Add(-1)
	s.wg.Done()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// shutdown stops accepting, interrupts idle connections and cancels the
// requests in flight. It does not wait.
func (s *Server) shutdown() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.interrupt()
	}
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Close shuts the server down (see Serve) and waits for every connection
// goroutine to finish. Closing twice is a no-op.
func (s *Server) Close() error {
	s.shutdown()
	s.wg.Wait()
	return nil
}
