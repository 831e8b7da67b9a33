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
}

// Collect implements prometheus.Collector.
func (m *serverMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.errors.Collect(ch)
	m.forbiddenVec.Collect(ch)
	m.conns.Collect(ch)
	m.refused.Collect(ch)
	m.handshakeFailures.Collect(ch)
}
