package nodeserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/server"
)

// ErrClosed is returned by Serve on a server that has been closed or is
// already serving (server.ErrClosed).
var ErrClosed = server.ErrClosed

// Server serves a Backend over TCP. Create it with New, run it with Serve,
// stop it by ending Serve's context or with Close. Its methods are safe for
// concurrent use. The accept loop, the connection limit and the graceful
// stop are package server's; this package is the per-connection handler.
type Server struct {
	opts Options
	lim  wire.Limits
	log  *slog.Logger
	bufs *bufPool
	puts *putBudget // PUT payload bytes held at once (Options.MaxPutBytes)
	ctr  counters
	srv  *server.Server

	mu     sync.Mutex
	served bool // Serve was called
}

// New returns a server configured by opts, or the error opts.Validate
// reports.
func New(opts Options) (*Server, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts: o,
		lim:  o.Limits,
		log:  o.Logger,
		bufs: newBufPool(o.Limits.MaxPayload),
		puts: newPutBudget(o.MaxPutBytes),
	}
	s.srv, err = server.New(handler{s}, o.skeleton())
	if err != nil { // cannot happen: resolve validated the same options
		return nil, fmt.Errorf("nodeserver: %w", err)
	}
	s.opts.Token, s.opts.TenantTokens = nil, nil // the table holds their digests; drop the secrets
	return s, nil
}

// skeleton returns the options of the server skeleton.
func (o Options) skeleton() server.Options {
	return server.Options{
		Name:             "nodeserver",
		MaxConns:         o.MaxConns,
		HandshakeTimeout: o.HandshakeTimeout,
		Auth:             auth.Options{ClusterToken: o.Token, TenantTokens: o.TenantTokens, Shared: o.Shared},
		MaxToken:         o.Limits.MaxToken,
		Logger:           o.Logger,
	}
}

// Limits returns the limits the server enforces and advertises, defaults
// filled in.
func (s *Server) Limits() wire.Limits { return s.lim }

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats { return s.ctr.snapshot(s.srv.Stats()) }

// Serve accepts connections on ln and serves them until ctx ends or Close is
// called, then closes ln, stops every connection (see the package comment)
// and returns nil once all connection goroutines have finished. It returns
// an error if accepting fails for a reason other than shutdown (after
// shutting down the same way), and ErrClosed, having closed ln, when the
// server is closed or already serving. Serve may be called once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	again := s.served
	s.served = true
	s.mu.Unlock()
	if again {
		ln.Close()
		return ErrClosed
	}
	defer s.srv.Shutdown() // one Serve: its end is the server's
	s.log.Info("nodeserver: serving", "addr", ln.Addr().String(),
		"max_frame", s.lim.MaxFrame, "max_batch", s.lim.MaxBatch, "max_payload", s.lim.MaxPayload, "max_put_bytes", s.opts.MaxPutBytes,
		"max_conns", s.opts.MaxConns, "auth", !s.srv.Auth().Open(),
		"egress_paced", s.opts.Egress != nil, "ingress_paced", s.opts.Ingress != nil)
	err := s.srv.Serve(ctx, ln)
	s.log.Info("nodeserver: stopped", "addr", ln.Addr().String())
	return err
}

// Close shuts the server down (see Serve) and waits for every connection
// goroutine to finish. Closing twice is a no-op.
func (s *Server) Close() error { return s.srv.Close() }

// handler plugs the node protocol into the server skeleton.
type handler struct{ s *Server }

// ServeConn serves one client connection: the hello, then requests.
func (h handler) ServeConn(ctx context.Context, sc *server.Conn) {
	newConn(h.s, sc).serve(ctx)
}

// Refuse answers a connection over MaxConns with a CodeUnavailable
// hello-ack.
func (h handler) Refuse(nc net.Conn, _ error) {
	s := h.s
	ack := wire.HelloAck{Version: wire.Version, Code: wire.CodeUnavailable,
		Message: fmt.Sprintf("node serves %d connections, its limit; try again later or another replica", s.opts.MaxConns)}
	s.ctr.bytesOut.Add(uint64(linger(nc, wire.AppendHelloAck(nil, &ack), s.opts.HandshakeTimeout)))
	s.log.Debug("nodeserver: connection refused", "remote", nc.RemoteAddr().String(), "reason", "max connections")
}
