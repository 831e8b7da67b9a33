package masterserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/server"
)

// serverMetrics are the front end's own counters, exported next to the
// master's. The per-op counters are resolved once, so counting a request
// is one atomic add.
type serverMetrics struct {
	requests, errors  *prometheus.CounterVec
	forbiddenVec      *prometheus.CounterVec
	byOp, errByOp     [256]prometheus.Counter
	forbiddenByOp     [256]prometheus.Counter
	conns             prometheus.GaugeFunc
	refused           prometheus.CounterFunc
	handshakeFailures prometheus.Counter

	// Leadership (an election; leader.go).
	leading, epoch, rebuild, failover prometheus.Gauge
	terms, lostNodes, notLeader       prometheus.Counter
}

var _ prometheus.Collector = (*serverMetrics)(nil)

// newServerMetrics returns the counters, the connection ones read from the
// server skeleton's.
func newServerMetrics(srv *server.Server) serverMetrics {
	m := serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvpool_masterserver_requests_total", Help: "Control-plane requests served, by op.",
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvpool_masterserver_request_errors_total", Help: "Control-plane requests answered with ERROR, by op.",
		}, []string{"op"}),
		forbiddenVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvpool_masterserver_requests_forbidden_total",
			Help: "Control-plane requests refused with unauthorized because the connection's token does not allow them (another tenant's namespace, a node request without the cluster token), by op.",
		}, []string{"op"}),
		conns: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kvpool_masterserver_connections", Help: "Control-plane connections open.",
		}, func() float64 { return float64(srv.Stats().Open) }),
		refused: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "kvpool_masterserver_connections_refused_total", Help: "Connections refused because MaxConns were open.",
		}, func() float64 { return float64(srv.Stats().Refused) }),
		handshakeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvpool_masterserver_handshake_failures_total", Help: "HELLOs refused (bad token, version, malformed).",
		}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvpool_master_leader", Help: "1 while this master leads its cluster (always, without an election), 0 while it stands by.",
		}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvpool_master_term_epoch", Help: "Epoch of the last term this master led (its etcd election key's creation revision; 0 without an election).",
		}),
		rebuild: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvpool_master_index_rebuild_seconds", Help: "Time from the start of this master's last term to its index being complete (every node of the previous leader registered, or the rebuild deadline).",
		}),
		failover: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvpool_master_failover_seconds", Help: "Time from when this master, standing by, last saw another leader to its index being complete in the term it then won.",
		}),
		terms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvpool_master_terms_total", Help: "Terms this master has won (leadership changes to it).",
		}),
		lostNodes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvpool_master_failover_lost_nodes_total", Help: "Nodes the previous leader listed that did not register within the rebuild deadline of a term of this master.",
		}),
		notLeader: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvpool_master_not_leader_total", Help: "HELLOs and requests refused because this master did not lead the current term.",
		}),
	}
	for op := range 256 {
		o := masterproto.Op(op)
		name := "other"
		if o.IsRequest() {
			name = o.String()
		}
		m.byOp[op] = m.requests.WithLabelValues(name)
		m.errByOp[op] = m.errors.WithLabelValues(name)
		m.forbiddenByOp[op] = m.forbiddenVec.WithLabelValues(name)
	}
	return m
}

// request counts one request and whether it failed.
func (m *serverMetrics) request(op masterproto.Op, err error) {
	m.byOp[op].Inc()
	if err != nil {
		m.errByOp[op].Inc()
	}
}

// forbidden counts one request refused by the connection's grant (it is
// counted by request too, as an error).
func (m *serverMetrics) forbidden(op masterproto.Op) { m.forbiddenByOp[op].Inc() }

// Describe implements prometheus.Collector.
func (m *serverMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.errors.Describe(ch)
	m.forbiddenVec.Describe(ch)
	m.conns.Describe(ch)
	m.refused.Describe(ch)
	m.handshakeFailures.Describe(ch)
	for _, c := range m.leadership() {
		c.Describe(ch)
	}
}

// leadership returns the leadership metrics.
func (m *serverMetrics) leadership() []prometheus.Collector {
	return []prometheus.Collector{m.leading, m.epoch, m.rebuild, m.failover, m.terms, m.lostNodes, m.notLeader}
}

// Collect implements prometheus.Collector.
func (m *serverMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.errors.Collect(ch)
	m.forbiddenVec.Collect(ch)
	m.conns.Collect(ch)
	m.refused.Collect(ch)
	m.handshakeFailures.Collect(ch)
	for _, c := range m.leadership() {
		c.Collect(ch)
	}
}
