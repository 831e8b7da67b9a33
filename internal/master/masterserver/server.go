package masterserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
)

// ErrServerClosed is returned by Serve and ServeAdmin called after Close.
var ErrServerClosed = errors.New("masterserver: server closed")

// Server is the master's network front end: the control-plane protocol
// (masterproto) over TCP, and the admin HTTP endpoints, over one in-process
// master.Master. It adds no logic of its own beyond keeping each node's
// data-plane address (learnt at REGISTER) so LOOKUP and PLACE responses can
// carry it.
//
// Concurrency: every method is safe for concurrent use. Each connection is
// served by one goroutine, which answers its pipelined requests in order.
// Serve owns its accept loop, its connections' goroutines and the
// maintenance loop and returns only after they have stopped; Close stops
// every Serve and ServeAdmin and waits for them.
type Server struct {
	m        *master.Master
	opts     Options
	log      *slog.Logger
	auth     *auth.Table
	interval time.Duration // maintenance
	// tenantTokens is how many tenant tokens the table holds (for the
	// startup line; the tokens themselves are not kept).
	tenantTokens int

	addrMu  sync.RWMutex
	addrs   map[meta.NodeID]string
	addrGen atomic.Uint64 // bumped when an address changes

	mu      sync.Mutex
	closed  bool
	done    chan struct{} // closed by Close
	serving map[*serveState]struct{}
	nconns  int
	wg      sync.WaitGroup // Serve and ServeAdmin calls

	reg     *prometheus.Registry
	metrics serverMetrics
	started time.Time
}

// serveState is one Serve call: its listener and connections.
type serveState struct {
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// New returns a server over m. It starts nothing: call Serve (and
// ServeAdmin) to serve.
func New(m *master.Master, opts Options) (*Server, error) {
	if m == nil {
		return nil, errors.New("masterserver: New: nil master")
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	s := &Server{
		m:       m,
		opts:    o,
		log:     o.Logger,
		addrs:   make(map[meta.NodeID]string),
		done:    make(chan struct{}),
		serving: make(map[*serveState]struct{}),
		reg:     prometheus.NewRegistry(),
		started: time.Now(),
	}
	s.interval = o.MaintenanceInterval
	if s.interval == 0 {
		s.interval = m.Options().HeartbeatInterval / 4
	}
	if s.auth, err = auth.New(auth.Options{ClusterToken: o.Token, TenantTokens: o.TenantTokens, Shared: o.Shared}); err != nil {
		return nil, fmt.Errorf("masterserver: %w", err) // cannot happen: resolve validated the same options
	}
	s.tenantTokens = len(o.TenantTokens)
	s.opts.TenantTokens = nil // the table holds their digests; drop the secrets
	s.metrics = newServerMetrics()
	s.reg.MustRegister(NewCollector(m), collectors.NewGoCollector(), &s.metrics)
	return s, nil
}

// Registry returns the server's own Prometheus registry (served at
// /metrics): the master's collector, the Go runtime collector and the
// server's request counters.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Master returns the master the server fronts.
func (s *Server) Master() *master.Master { return s.m }

// MaintenanceInterval returns how often Serve calls Expire and Evict.
func (s *Server) MaintenanceInterval() time.Duration { return s.interval }

// Serve accepts connections on ln and serves them until ctx is done or
// Close is called, then closes ln and every connection it accepted and
// returns nil once they have all stopped. While it runs, a background loop
// calls the master's Expire and Evict every MaintenanceInterval. Any other
// accept failure is returned (after the same cleanup).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	st := &serveState{ln: ln, conns: make(map[net.Conn]struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.serving[st] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // closes the listener when told to stop
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-s.done:
		case <-stop:
		}
		ln.Close()
	}()
	go func() {
		defer wg.Done()
		s.maintain(ctx, stop)
	}()

	err := s.accept(ctx, st, &wg)
	close(stop)
	s.mu.Lock()
	delete(s.serving, st)
	for c := range st.conns {
		c.Close()
	}
	s.mu.Unlock()
	wg.Wait()
	return err
}

// accept runs the accept loop; it returns nil when stopped.
func (s *Server) accept(ctx context.Context, st *serveState, wg *sync.WaitGroup) error {
	var backoff time.Duration
	for {
		c, err := st.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || s.isClosed() {
				return nil
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				// Out of file descriptors and the like: back off as
				// net/http does (5 ms doubling to 1 s).
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("masterserver: accept", "err", err, "retry_in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-ctx.Done():
				case <-s.done:
				}
				t.Stop()
				continue
			}
			return fmt.Errorf("masterserver: accept on %v: %w", st.ln.Addr(), err)
		}
		backoff = 0
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			c.Close()
			continue
		case s.nconns >= s.opts.MaxConns:
			s.mu.Unlock()
			s.metrics.refused.Inc()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.refuse(c)
			}()
			continue
		}
		s.nconns++
		st.conns[c] = struct{}{}
		s.mu.Unlock()
		s.metrics.conns.Inc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(c)
			c.Close()
			s.mu.Lock()
			delete(st.conns, c)
			s.nconns--
			s.mu.Unlock()
			s.metrics.conns.Dec()
		}()
	}
}

// refuse answers a connection over MaxConns with CodeUnavailable.
func (s *Server) refuse(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	r, err := masterproto.NewReader(c, masterproto.HelloLimits(s.opts.Limits))
	if err != nil {
		return
	}
	h, _, err := r.ReadFrame()
	if err != nil {
		return
	}
	reply := masterproto.HelloReplyFor(fmt.Errorf("masterserver: %d connections open, the limit: %w", s.opts.MaxConns, kvpool.ErrUnavailable), s.opts.Limits)
	b, _ := masterproto.AppendHelloReply(nil, h.ReqID, &reply)
	c.Write(b)
}

// maintain calls Expire and Evict every interval until stop or ctx.
func (s *Server) maintain(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if n := s.m.Expire(); n > 0 {
				s.log.Info("masterserver: dropped silent nodes", "count", n)
			}
			s.m.Evict()
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-s.done:
			return
		}
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops every Serve and ServeAdmin (closing their listeners and
// connections) and waits for them to return. Later Serve calls return
// ErrServerClosed. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
		for st := range s.serving {
			st.ln.Close()
			for c := range st.conns {
				c.Close()
			}
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// setAddr records a node's data-plane address.
func (s *Server) setAddr(id meta.NodeID, addr string) {
	s.addrMu.RLock()
	cur, ok := s.addrs[id]
	s.addrMu.RUnlock()
	if ok && cur == addr {
		return
	}
	s.addrMu.Lock()
	s.addrs[id] = addr
	s.addrMu.Unlock()
	s.addrGen.Add(1)
}

// addrOf returns a node's data-plane address: the one it registered
// through this server, else the master's record (a node registered
// in-process), else "".
func (s *Server) addrOf(id meta.NodeID) string {
	s.addrMu.RLock()
	a, ok := s.addrs[id]
	s.addrMu.RUnlock()
	if ok {
		return a
	}
	for _, ns := range s.m.Nodes() {
		if ns.Info.ID == id {
			s.setAddr(id, ns.Info.Addr)
			return ns.Info.Addr
		}
	}
	return ""
}
