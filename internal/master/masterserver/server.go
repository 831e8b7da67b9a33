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

	"github.com/kvpool/kvpool/internal/election"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/server"
)

// ErrServerClosed is returned by Serve and ServeAdmin called after Close
// (server.ErrClosed).
var ErrServerClosed = server.ErrClosed

// Server is the master's network front end: the control-plane protocol
// (masterproto) over TCP, and the admin HTTP endpoints, over one in-process
// master.Master. It adds no logic of its own beyond keeping each node's
// data-plane address (learnt at REGISTER) so LOOKUP and PLACE responses can
// carry it.
//
// Concurrency: every method is safe for concurrent use. Each connection is
// served by one goroutine, which answers its pipelined requests in order.
// Serve owns its accept loop (package server's), its connections'
// goroutines and the maintenance loop and returns only after they have
// stopped; Close stops every Serve and ServeAdmin and waits for them.
type Server struct {
	m        *master.Master
	opts     Options
	log      *slog.Logger
	srv      *server.Server // accept loop, connection limit, auth table
	interval time.Duration  // maintenance
	// tenantTokens is how many tenant tokens the table holds (for the
	// startup line; the tokens themselves are not kept).
	tenantTokens int

	addrMu  sync.RWMutex
	addrs   map[meta.NodeID]string
	addrGen atomic.Uint64 // bumped when an address changes

	mu     sync.Mutex
	closed bool
	done   chan struct{}  // closed by Close
	wg     sync.WaitGroup // Serve and ServeAdmin calls

	reg     *prometheus.Registry
	metrics serverMetrics
	started time.Time

	// cur is the reign requests are served in: with no election the one
	// master for good, else the term this server leads (nil while it
	// stands by). See leader.go.
	cur atomic.Pointer[reign]
	// seen is the leader a standby last saw (etcd), seenAt when, as time
	// since started; failoverFrom is how long before this server's term
	// began it last saw another leader.
	seen         atomic.Pointer[election.Leader]
	seenAt       atomic.Int64
	failoverFrom atomic.Int64
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
		reg:     prometheus.NewRegistry(),
		started: time.Now(),
	}
	s.interval = o.MaintenanceInterval
	if s.interval == 0 {
		s.interval = m.Options().HeartbeatInterval / 4
	}
	if s.srv, err = server.New(handler{s}, o.skeleton()); err != nil {
		return nil, fmt.Errorf("masterserver: %w", err) // cannot happen: resolve validated the same options
	}
	s.tenantTokens = len(o.TenantTokens)
	s.opts.TenantTokens = nil // the table holds their digests; drop the secrets
	s.metrics = newServerMetrics(s.srv)
	s.reg.MustRegister(newCollectorOf(s.currentMaster), collectors.NewGoCollector(), &s.metrics)
	if o.Election == nil {
		r := &reign{m: m}
		r.complete.Store(true)
		s.cur.Store(r)
		s.metrics.leading.Set(1)
	}
	return s, nil
}

// Registry returns the server's own Prometheus registry (served at
// /metrics): the master's collector, the Go runtime collector and the
// server's request counters.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Master returns the master the server fronts: with an election, the one
// of the current term, or nil while it stands by.
func (s *Server) Master() *master.Master { return s.currentMaster() }

// currentMaster returns the current reign's master, nil while standing by.
func (s *Server) currentMaster() *master.Master {
	if r := s.current(); r != nil {
		return r.m
	}
	return nil
}

// MaintenanceInterval returns how often Serve calls Expire and Evict.
func (s *Server) MaintenanceInterval() time.Duration { return s.interval }

// Serve accepts connections on ln and serves them until ctx is done or
// Close is called, then closes ln and stops every connection it accepted
// (package server: a connection waiting for a request ends at once, one in
// flight after its answer) and returns nil once they have all stopped.
// While it runs, a background loop calls the master's Expire and Evict
// every MaintenanceInterval. Any other accept failure is returned (after
// the same cleanup).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.maintain(ctx, stop)
	}()
	if s.opts.Election != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.lead(ctx, stop)
		}()
	}
	err := s.srv.Serve(ctx, ln)
	close(stop)
	wg.Wait()
	return err
}

// handler plugs the master protocol into the server skeleton.
type handler struct{ s *Server }

// ServeConn serves one connection: the HELLO, then requests.
func (h handler) ServeConn(_ context.Context, c *server.Conn) { h.s.serveConn(c) }

// Refuse answers a connection over MaxConns: it reads the HELLO and
// replies CodeUnavailable.
func (h handler) Refuse(nc net.Conn, reason error) {
	s := h.s
	r, err := masterproto.NewReader(nc, masterproto.HelloLimits(s.opts.Limits))
	if err != nil {
		return
	}
	hdr, _, err := r.ReadFrame()
	if err != nil {
		return
	}
	reply := masterproto.HelloReplyFor(fmt.Errorf("masterserver: %w", reason), s.opts.Limits)
	b, _ := masterproto.AppendHelloReply(nil, hdr.ReqID, &reply)
	nc.Write(b)
}

// maintain calls Expire and Evict every interval until stop or ctx.
func (s *Server) maintain(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r := s.current()
			if r == nil || !r.valid() {
				continue // a standby, or a term that ended: give no orders
			}
			if n := r.m.Expire(); n > 0 {
				s.log.Info("masterserver: dropped silent nodes", "count", n)
			}
			r.m.Evict()
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-s.done:
			return
		}
	}
}

// ClusterID returns the cluster ID the server serves ("" for none).
func (s *Server) ClusterID() string { return s.opts.ClusterID }

// clusterText describes the server's cluster for an error: "this master
// is cluster ID" or "this master has no cluster ID".
func (s *Server) clusterText() string {
	if s.opts.ClusterID == "" {
		return "this master has no cluster ID"
	}
	return "this master is cluster " + s.opts.ClusterID
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops every Serve and ServeAdmin (closing their listeners and
// stopping their connections) and waits for them to return. Later Serve
// calls return ErrServerClosed. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	s.srv.Shutdown()
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
	m := s.currentMaster()
	if m == nil {
		return ""
	}
	for _, ns := range m.Nodes() {
		if ns.Info.ID == id {
			s.setAddr(id, ns.Info.Addr)
			return ns.Info.Addr
		}
	}
	return ""
}
