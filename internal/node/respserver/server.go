package respserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool/internal/server"
)

// ErrClosed is returned by Serve on a server that has been closed or is
// already serving (server.ErrClosed).
var ErrClosed = server.ErrClosed

// Server serves a Backend to Redis clients. Create it with New, run it with
// Serve, stop it by ending Serve's context or with Close. Its methods are
// safe for concurrent use. The accept loop, the connection limit and the
// graceful stop are package server's; this package is the per-connection
// handler.
type Server struct {
	opts  Options
	log   *slog.Logger
	srv   *server.Server
	start time.Time
	args  *budget
	ctr   counters
	keys  keyLocks
	sets  setGroups
	// cmds is the command table by lower-case name, sorted the same
	// commands by name (COMMAND lists them in that order).
	cmds   map[string]*command
	sorted []*command

	ids atomic.Int64 // CLIENT ID

	// idleRecheck is idleRecheck (conn.go); tests shorten it.
	idleRecheck time.Duration

	mu     sync.Mutex
	served bool
	port   int
}

// New returns a server configured by opts, or an error naming the bad
// option.
func New(opts Options) (*Server, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, log: o.Logger, start: o.Now(), args: newBudget(o.MaxArgBytes), idleRecheck: idleRecheck}
	s.cmds, s.sorted = newCommands()
	s.srv, err = server.New(handler{s}, o.skeleton())
	if err != nil {
		return nil, fmt.Errorf("respserver: %w", err)
	}
	s.opts.Token, s.opts.TenantTokens = nil, nil // the table holds their digests
	return s, nil
}

// Serve accepts connections on ln and serves them until ctx ends or Close
// is called, then stops every connection and returns nil once all have
// finished (an accept error is returned after the same shutdown). It
// returns ErrClosed, having closed ln, when called twice.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	again := s.served
	s.served = true
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port = a.Port
	}
	s.mu.Unlock()
	if again {
		ln.Close()
		return ErrClosed
	}
	defer s.srv.Shutdown()
	s.log.Info("respserver: serving Redis clients", "addr", ln.Addr().String(),
		"max_conns", s.opts.MaxConns, "max_bulk", s.opts.Limits.MaxBulk, "auth", !s.srv.Auth().Open())
	err := s.srv.Serve(ctx, ln)
	s.log.Info("respserver: stopped", "addr", ln.Addr().String())
	return err
}

// Close shuts the server down and waits for every connection.
func (s *Server) Close() error { return s.srv.Close() }

// Stats are the front's counters.
type Stats struct {
	server.Stats
	// Commands counts commands executed; Errors those answered with an
	// error reply; ProtocolErrors connections closed for malformed input.
	Commands, Errors, ProtocolErrors uint64
	// Timeouts counts connections closed by a deadline: stalling
	// mid-command, IdleTimeout, HandshakeTimeout, or a command whose
	// memory stayed unavailable until its read deadline.
	Timeouts uint64
	// CoalescedSets counts plain SETs answered by an overlapping SET of
	// the same key that stored a later value for both (setGroups).
	CoalescedSets uint64
	// ArgBytes is the memory connections hold for commands now, beyond
	// resp.FreeHeld each (what MaxArgBytes bounds); PeakArgBytes the most
	// they ever held at once.
	ArgBytes, PeakArgBytes int64
}

type counters struct {
	commands, errors, protocol, timeouts atomic.Uint64
	rearms                               atomic.Uint64 // idle deadlines re-armed (tests)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	used, peak := s.args.stats()
	return Stats{Stats: s.srv.Stats(), Commands: s.ctr.commands.Load(), Errors: s.ctr.errors.Load(),
		ProtocolErrors: s.ctr.protocol.Load(), Timeouts: s.ctr.timeouts.Load(), ArgBytes: used, PeakArgBytes: peak,
		CoalescedSets: s.sets.coalesced.Load()}
}

// handler plugs RESP into the server skeleton.
type handler struct{ s *Server }

func (h handler) ServeConn(ctx context.Context, sc *server.Conn) {
	newConn(h.s, sc, ctx.Done()).serve(ctx)
}

// Refuse answers a connection over MaxConns as Redis answers one over
// maxclients.
func (h handler) Refuse(nc net.Conn, _ error) {
	nc.Write([]byte("-ERR max number of clients reached\r\n"))
}
