package masterserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/meta"
)

// adminReadHeaderTimeout bounds reading an admin request's headers: 10 s,
// against slowloris clients (the admin port is for operators and
// scrapers).
const adminReadHeaderTimeout = 10 * time.Second

// Handler returns the admin HTTP handler, on its own mux:
//
//	/metrics    the server's Prometheus registry (master, Go runtime, front end)
//	/health     200 {"status":"ok",...} while the server is open, 503 after Close
//	/nodes      JSON list of the nodes (master.Nodes) with their addresses
//	/query_key  ?tenant=&key= (decimal or 0x-hex id): JSON replicas of the key
//
// With a cluster ID (Options.ClusterID) every response carries it in the
// ClusterIDHeader header, so a reader of /nodes knows whose nodes it sees
// in the same response.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /nodes", s.handleNodes)
	mux.HandleFunc("GET /query_key", s.handleQueryKey)
	if s.opts.ClusterID == "" {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ClusterIDHeader, s.opts.ClusterID)
		mux.ServeHTTP(w, r)
	})
}

// ClusterIDHeader is the admin responses' header naming the master's
// cluster ID (absent when it has none).
const ClusterIDHeader = "Kvpool-Cluster-Id"

// ServeAdmin serves the admin handler on ln until ctx is done or Close is
// called, then shuts the HTTP server down (waiting up to
// DefaultAdminShutdownTimeout for requests in flight) and returns nil.
// When ln is not bound to loopback, every request must carry the cluster
// token (Options.Token) as "Authorization: Bearer <token>"; without a
// cluster token ServeAdmin refuses to serve such a listener (an error
// wrapping listen.ErrNoAuth; ln is closed).
func (s *Server) ServeAdmin(ctx context.Context, ln net.Listener) error {
	h, err := auth.AdminHandler(ln.Addr().String(), s.opts.Token, s.Handler())
	if err != nil {
		ln.Close()
		return fmt.Errorf("masterserver: admin HTTP on %v: %w", ln.Addr(), err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	hs := &http.Server{Handler: h, ReadHeaderTimeout: adminReadHeaderTimeout}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("masterserver: admin HTTP on %v: %w", ln.Addr(), err)
	case <-ctx.Done():
	case <-s.done:
	}
	sctx, cancel := context.WithTimeout(context.Background(), DefaultAdminShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("masterserver: admin HTTP on %v: %w", ln.Addr(), err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

type errorJSON struct {
	Error string `json:"error"`
}

type healthJSON struct {
	Status        string  `json:"status"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	ClusterID     string  `json:"cluster_id,omitempty"`
	// Role is "leader" (also a master without an election) or "standby";
	// with an election, Epoch is the term led or last seen and Leader
	// the leading master's control address ("" when none leads), and
	// IndexComplete whether the leader's index has been rebuilt.
	Role          string `json:"role,omitempty"`
	Epoch         uint64 `json:"epoch,omitempty"`
	Leader        string `json:"leader,omitempty"`
	IndexComplete bool   `json:"index_complete,omitempty"`
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if s.isClosed() {
		writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "closing", ClusterID: s.opts.ClusterID})
		return
	}
	h := healthJSON{Status: "ok", UptimeSeconds: time.Since(s.started).Seconds(), ClusterID: s.opts.ClusterID, Role: "standby"}
	if r := s.current(); r != nil && r.valid() {
		h.Role, h.IndexComplete = "leader", r.complete.Load()
	}
	if s.opts.Election != nil {
		l := s.leaderSeen()
		h.Epoch, h.Leader = uint64(l.Epoch), l.Value
	}
	writeJSON(w, http.StatusOK, h)
}

// NodeJSON is a node as /nodes shows it.
type NodeJSON struct {
	ID               string    `json:"id"`
	Addr             string    `json:"addr"`
	Alive            bool      `json:"alive"`
	Session          uint64    `json:"session"`
	RAMBytes         int64     `json:"ram_bytes"`
	SSDBytes         int64     `json:"ssd_bytes"`
	BlockSize        int64     `json:"block_size"`
	LastHeartbeat    time.Time `json:"last_heartbeat"`
	HeartbeatAgeMS   float64   `json:"heartbeat_age_ms"`
	ReportedRAMUsed  int64     `json:"reported_ram_used"`
	ReportedSSDUsed  int64     `json:"reported_ssd_used"`
	IndexedRAMUsed   int64     `json:"indexed_ram_used"`
	IndexedSSDUsed   int64     `json:"indexed_ssd_used"`
	RAMReplicas      int       `json:"ram_replicas"`
	SSDReplicas      int       `json:"ssd_replicas"`
	Evicting         int       `json:"evicting"`
	PromotionsQueued int       `json:"promotions_queued"`
	TasksInFlight    int       `json:"tasks_in_flight"`
}

func (s *Server) handleNodes(w http.ResponseWriter, _ *http.Request) {
	var nodes []meta.NodeStatus
	if m := s.currentMaster(); m != nil {
		nodes = m.Nodes()
	}
	out := make([]NodeJSON, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, NodeJSON{
			ID: string(n.Info.ID), Addr: n.Info.Addr, Alive: n.Alive, Session: uint64(n.Session),
			RAMBytes: n.Info.RAMBytes, SSDBytes: n.Info.SSDBytes, BlockSize: n.Info.BlockSize,
			LastHeartbeat: n.LastHeartbeat, HeartbeatAgeMS: float64(n.HeartbeatAge) / float64(time.Millisecond),
			ReportedRAMUsed: n.Reported.RAMUsed, ReportedSSDUsed: n.Reported.SSDUsed,
			IndexedRAMUsed: n.Indexed.RAMUsed, IndexedSSDUsed: n.Indexed.SSDUsed,
			RAMReplicas: n.RAMReplicas, SSDReplicas: n.SSDReplicas, Evicting: n.Evicting,
			PromotionsQueued: n.PromotionsQueued, TasksInFlight: n.TasksInFlight,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// ReplicaJSON is a replica as /query_key shows it.
type ReplicaJSON struct {
	Node       string     `json:"node"`
	Addr       string     `json:"addr"`
	Tier       string     `json:"tier"`
	Size       int64      `json:"size"`
	Checksum   uint32     `json:"checksum"`
	NodeAlive  bool       `json:"node_alive"`
	Evicting   bool       `json:"evicting"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
}

// QueryJSON is the /query_key response.
type QueryJSON struct {
	Tenant   string        `json:"tenant"`
	Key      uint64        `json:"key"`
	KeyHex   string        `json:"key_hex"`
	Replicas []ReplicaJSON `json:"replicas"`
}

// ParseKeyID reads a block key ID as decimal or 0x-prefixed hex.
func ParseKeyID(s string) (uint64, error) {
	var (
		v   uint64
		err error
	)
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		v, err = strconv.ParseUint(rest, 16, 64)
	} else {
		v, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		return 0, fmt.Errorf("key %q: want a decimal or 0x-hex 64-bit id: %w", s, meta.ErrBadRequest)
	}
	return v, nil
}

func (s *Server) handleQueryKey(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tenant := q.Get("tenant")
	if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
		writeJSON(w, http.StatusBadRequest, errorJSON{fmt.Sprintf("query_key: tenant %q: %v", tenant, err)})
		return
	}
	if !q.Has("key") {
		writeJSON(w, http.StatusBadRequest, errorJSON{"query_key: missing parameter key (decimal or 0x-hex id)"})
		return
	}
	id, err := ParseKeyID(q.Get("key"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorJSON{"query_key: " + err.Error()})
		return
	}
	rg := s.current()
	switch {
	case rg == nil || !rg.valid():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": s.notLeader().Error()})
		return
	case !rg.complete.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": rg.errRebuilding().Error()})
		return
	}
	reps := rg.m.Query(block.Key{Tenant: tenant, ID: id})
	out := QueryJSON{Tenant: tenant, Key: id, KeyHex: fmt.Sprintf("0x%016x", id), Replicas: make([]ReplicaJSON, 0, len(reps))}
	for _, rp := range reps {
		rj := ReplicaJSON{
			Node: string(rp.Node), Addr: s.addrOf(rp.Node), Tier: rp.Tier.String(), Size: rp.Size, Checksum: rp.Sum,
			NodeAlive: rp.NodeAlive, Evicting: rp.Evicting,
		}
		if !rp.LeaseUntil.IsZero() {
			t := rp.LeaseUntil
			rj.LeaseUntil = &t
		}
		out.Replicas = append(out.Replicas, rj)
	}
	writeJSON(w, http.StatusOK, out)
}
