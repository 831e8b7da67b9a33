// Package nodemetrics exposes a kvpool node's Prometheus metrics on the
// node's own registry.
//
// The node's hot paths do not touch Prometheus: they keep the plain
// counters they already have (tier.Stats, the store's counters, the
// pacers' wait totals), and a Collector reads them all at scrape time
// through one func() Snapshot. Nothing is registered globally: New takes
// the registry, so two nodes run side by side in one process (no global
// state).
//
// Every metric name starts with kvpool_node_. Per-tier series carry the
// label tier="ram" or tier="ssd" (SSD series only while SSD offload is on;
// kvpool_node_tier_enabled says which tiers are), pacer waits the label
// path (net_egress, net_ingress, ssd_read, ssd_write), and requests the
// labels op and status, and per-tenant quota series the label tenant (one
// series per tenant the node has seen: the cardinality grows with the
// number of tenants, fine for tens of tenants, to be bucketed or made
// opt-in before a deployment with thousands). To tell nodes apart in one registry, wrap it with
// prometheus.WrapRegistererWith(prometheus.Labels{"node": name}, reg).
package nodemetrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvpool/kvpool/internal/node/pacer"
	"github.com/kvpool/kvpool/internal/tier"
)

// Snapshot is a node's counters at one instant, filled by the node when
// the registry is scraped. Counters are cumulative since the node started
// and must never decrease; gauges (resident blocks and bytes, capacity)
// are current values.
type Snapshot struct {
	// RAM is the RAM tier's Stats.
	RAM tier.Stats
	// SSD is the SSD tier's Stats; ignored unless SSDEnabled.
	SSD tier.Stats
	// SSDEnabled says whether SSD offload is on.
	SSDEnabled bool
	// Store holds the counters of the store above the tiers.
	Store StoreStats
	// PacerWait is the cumulative time spent waiting in each path's pacer
	// (pacer.Set.Waited), indexed by pacer.Path.
	PacerWait [pacer.NumPaths]time.Duration
	// Requests counts data-plane requests by operation and outcome. Rows
	// with the same Op and Status are added together.
	Requests []RequestCount
	// Tenants is each tenant's quota accounting, one row per tenant.
	Tenants []TenantQuota
	// RESP holds the Redis front's counters; ignored unless RESPEnabled.
	RESP        RESPStats
	RESPEnabled bool
	// Master holds the node's view of its master; ignored unless
	// MasterEnabled (a node with a master).
	Master        MasterStats
	MasterEnabled bool
}

// MasterStats are a node's counters of its master.
type MasterStats struct {
	// Registered says whether the node holds a live session.
	Registered bool
	// Registers counts registrations, Reregisters those the master asked
	// for (it did not know the node: restarted, or a new leader),
	// Failures failed calls.
	Registers, Reregisters, Failures uint64
	// Epoch is the highest leader epoch the node has seen (0: none, or a
	// master without an election); Fenced counts the orders it dropped
	// because their answer came later than the leader's margin.
	Epoch, Fenced uint64
	// TasksDropped counts tasks dropped at a re-registration (a failover
	// or a master restart loses the promotions in flight).
	TasksDropped uint64
}

// RESPStats are the Redis front's counters.
type RESPStats struct {
	// Connections open now; Commands executed; Errors answered with an
	// error reply; ProtocolErrors connections closed for malformed input.
	Connections                      int64
	Commands, Errors, ProtocolErrors uint64
	// Reads of values by where they came from: this node's RAM or SSD,
	// another node, or nowhere (a miss).
	HitsLocalRAM, HitsLocalSSD, HitsRemote, Misses uint64
	// CorruptCopies counts copies that failed verification on the way to
	// a Redis client (none of their bytes was sent).
	CorruptCopies uint64
	// OwnReads: GETs served from this node's copy without asking the
	// master; InPlaceSets: SETs that overwrote this node's only copy
	// without a placement; CoalescedSets: SETs answered by an overlapping
	// SET of the same key.
	OwnReads, InPlaceSets, CoalescedSets uint64
}

// TenantQuota is one tenant's resident bytes (RAM and SSD, each block
// once), its quota (0: unlimited) and the Puts refused as over quota.
type TenantQuota struct {
	Tenant     string
	Bytes      int64
	Limit      int64
	Rejections uint64
}

// StoreStats are the node store's counters for moving blocks between
// tiers.
type StoreStats struct {
	// Demotions counts blocks moved RAM→SSD when the RAM tier evicted
	// them; DemotionFailures the ones that could not be written (dropped).
	Demotions, DemotionFailures uint64
	// PromotionsCompleted counts blocks copied SSD→RAM on hit;
	// PromotionsFailed the promotions that were started but failed.
	PromotionsCompleted, PromotionsFailed uint64
}

// RequestCount is the number of requests of one operation ("get", "put",
// "exists", "delete", "batch_get" …) that ended with one status ("ok",
// "not_found", "corrupt", "error" …).
type RequestCount struct {
	Op, Status string
	Count      uint64
}

// The tier label values.
const (
	TierRAM = "ram"
	TierSSD = "ssd"
)

const namespace = "kvpool_node"

// tierMetric is one per-tier series and how to read it from tier.Stats.
type tierMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(tier.Stats) float64
}

// Collector is a prometheus.Collector reading a node's Snapshot at every
// scrape. It is safe for concurrent use as long as the snapshot function
// is (concurrent scrapes call it concurrently).
type Collector struct {
	snapshot func() Snapshot

	tierEnabled                           *prometheus.Desc
	tiers                                 []tierMetric
	demotions, demotionFailures           *prometheus.Desc
	promotionsCompleted, promotionsFailed *prometheus.Desc
	pacerWait                             *prometheus.Desc
	requests                              *prometheus.Desc
	tenantBytes, tenantLimit              *prometheus.Desc
	tenantRejections                      *prometheus.Desc
	respConns, respCommands, respErrors   *prometheus.Desc
	respProtocol, respReads, respCorrupt  *prometheus.Desc
	respShortcuts                         *prometheus.Desc
	masterRegistered, masterRegisters     *prometheus.Desc
	masterFailures, masterEpoch           *prometheus.Desc
	masterReregisters, masterDropped      *prometheus.Desc
	masterFenced                          *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector reading snapshot and registers it with reg,
// which must be the node's own registry (never nil; never the global
// default one, by convention of the caller).
func New(reg prometheus.Registerer, snapshot func() Snapshot) (*Collector, error) {
	switch {
	case reg == nil:
		return nil, errors.New("nodemetrics: new collector: nil registerer (give the node's own registry)")
	case snapshot == nil:
		return nil, errors.New("nodemetrics: new collector: nil snapshot function")
	}
	c := newCollector(snapshot)
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("nodemetrics: register node collector: %w", err)
	}
	return c, nil
}

func newCollector(snapshot func() Snapshot) *Collector {
	tierDesc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_tier_"+name, help, []string{"tier"}, nil)
	}
	counter := func(name, help string, v func(tier.Stats) float64) tierMetric {
		return tierMetric{tierDesc(name, help), prometheus.CounterValue, v}
	}
	gauge := func(name, help string, v func(tier.Stats) float64) tierMetric {
		return tierMetric{tierDesc(name, help), prometheus.GaugeValue, v}
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	}
	return &Collector{
		snapshot:    snapshot,
		tierEnabled: tierDesc("enabled", "Whether the tier is on (1) or off (0)."),
		tiers: []tierMetric{
			counter("hits_total", "Gets the tier served.", func(s tier.Stats) float64 { return float64(s.Hits) }),
			counter("misses_total", "Gets the tier could not serve (absent, corrupt or failed).", func(s tier.Stats) float64 { return float64(s.Misses) }),
			counter("bytes_in_total", "Payload bytes written to the tier.", func(s tier.Stats) float64 { return float64(s.BytesIn) }),
			counter("bytes_out_total", "Payload bytes read from the tier.", func(s tier.Stats) float64 { return float64(s.BytesOut) }),
			counter("evictions_attempted_total", "Eviction victims chosen.", func(s tier.Stats) float64 { return float64(s.EvictAttempts) }),
			counter("evictions_freed_total", "Blocks actually freed by eviction.", func(s tier.Stats) float64 { return float64(s.Evicted) }),
			counter("corruptions_total", "Stored copies that failed their checksum or header check (dropped, served as misses).", func(s tier.Stats) float64 { return float64(s.Corruptions) }),
			counter("io_errors_total", "Read and write errors from the device.", func(s tier.Stats) float64 { return float64(s.IOErrors) }),
			gauge("resident_blocks", "Blocks resident in the tier.", func(s tier.Stats) float64 { return float64(s.Blocks) }),
			gauge("resident_bytes", "Payload bytes resident in the tier.", func(s tier.Stats) float64 { return float64(s.Bytes) }),
			gauge("held_bytes", "Bytes of the tier's memory or disk the resident objects occupy (chunks or pages, names and metadata included); held_bytes / resident_bytes is the tier's space overhead.", func(s tier.Stats) float64 { return float64(s.HeldBytes) }),
			gauge("capacity_bytes", "The tier's configured capacity in bytes.", func(s tier.Stats) float64 { return float64(s.CapacityBytes) }),
		},
		demotions:           desc("demotions_total", "Blocks demoted RAM→SSD when the RAM tier evicted them."),
		demotionFailures:    desc("demotion_failures_total", "Demotions that failed (the block was dropped)."),
		promotionsCompleted: desc("promotions_completed_total", "Blocks promoted SSD→RAM on hit."),
		promotionsFailed:    desc("promotions_failed_total", "Promotions started that failed."),
		pacerWait:           desc("pacer_wait_seconds_total", "Time spent waiting in a path's pacer, summed over callers.", "path"),
		requests:            desc("requests_total", "Data-plane requests by operation and outcome.", "op", "status"),
		tenantBytes:         desc("tenant_resident_bytes", "Payload bytes of the tenant's blocks resident on the node (RAM and SSD, each block once).", "tenant"),
		tenantLimit:         desc("tenant_quota_bytes", "The tenant's byte quota (0: unlimited).", "tenant"),
		tenantRejections:    desc("tenant_quota_rejections_total", "Puts refused because they would take the tenant over its quota.", "tenant"),
		respConns:           desc("resp_connections", "Redis front connections open."),
		respCommands:        desc("resp_commands_total", "Commands the Redis front executed."),
		respErrors:          desc("resp_error_replies_total", "Commands the Redis front answered with an error reply."),
		respProtocol:        desc("resp_protocol_errors_total", "Redis front connections closed for malformed input."),
		respReads:           desc("resp_reads_total", "Values the Redis front read, by where they came from (local_ram, local_ssd, remote) or miss.", "source"),
		respCorrupt:         desc("resp_corrupt_copies_total", "Copies that failed verification on the way to a Redis client (none of their bytes was sent)."),
		masterRegistered:    desc("master_registered", "Whether the node holds a live session with its master (1) or not (0)."),
		masterRegisters:     desc("master_registrations_total", "Registrations with the master that succeeded."),
		masterReregisters:   desc("master_reregistrations_total", "Times the master did not know the node's session (it restarted, a new leader leads, or the node was silent past its TTL) and the node registered again."),
		masterFailures:      desc("master_call_failures_total", "Registrations and heartbeats that failed."),
		masterEpoch:         desc("master_epoch", "Highest leader epoch the node has seen (0: a master without an election)."),
		masterDropped:       desc("master_tasks_dropped_total", "The master's tasks (promotions in flight, results not yet reported) the node dropped when it registered again: a failover or a master restart loses them."),
		masterFenced:        desc("master_orders_fenced_total", "Orders of the master the node dropped because their answer came later than the leader's margin (a leader that may have been replaced meanwhile)."),
		respShortcuts:       desc("resp_shortcuts_total", "Redis front commands that took a shortcut: read_without_master (a GET of this node's copy the master listed less than 1 s ago), set_in_place (a SET over this node's only copy), set_coalesced (a SET answered by an overlapping SET of the key).", "kind"),
	}
}

// Describe sends every metric's descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tierEnabled
	for _, m := range c.tiers {
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{c.demotions, c.demotionFailures, c.promotionsCompleted, c.promotionsFailed, c.pacerWait, c.requests, c.tenantBytes, c.tenantLimit, c.tenantRejections,
		c.respConns, c.respCommands, c.respErrors, c.respProtocol, c.respReads, c.respCorrupt, c.respShortcuts,
		c.masterRegistered, c.masterRegisters, c.masterReregisters, c.masterFailures, c.masterEpoch, c.masterFenced, c.masterDropped} {
		ch <- d
	}
}

// Collect takes one snapshot and sends its series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	send := func(d *prometheus.Desc, kind prometheus.ValueType, v float64, labels ...string) {
		m, err := prometheus.NewConstMetric(d, kind, v, labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}

	send(c.tierEnabled, prometheus.GaugeValue, 1, TierRAM)
	send(c.tierEnabled, prometheus.GaugeValue, boolValue(s.SSDEnabled), TierSSD)
	for _, m := range c.tiers {
		send(m.desc, m.kind, m.value(s.RAM), TierRAM)
		if s.SSDEnabled {
			send(m.desc, m.kind, m.value(s.SSD), TierSSD)
		}
	}

	send(c.demotions, prometheus.CounterValue, float64(s.Store.Demotions))
	send(c.demotionFailures, prometheus.CounterValue, float64(s.Store.DemotionFailures))
	send(c.promotionsCompleted, prometheus.CounterValue, float64(s.Store.PromotionsCompleted))
	send(c.promotionsFailed, prometheus.CounterValue, float64(s.Store.PromotionsFailed))

	for _, p := range pacer.Paths() {
		send(c.pacerWait, prometheus.CounterValue, s.PacerWait[p].Seconds(), p.String())
	}

	type opStatus struct{ op, status string }
	var order []opStatus
	sums := make(map[opStatus]uint64, len(s.Requests))
	for _, r := range s.Requests {
		k := opStatus{r.Op, r.Status}
		if _, ok := sums[k]; !ok {
			order = append(order, k)
		}
		sums[k] += r.Count
	}
	for _, k := range order {
		send(c.requests, prometheus.CounterValue, float64(sums[k]), k.op, k.status)
	}
	for _, tq := range s.Tenants {
		send(c.tenantBytes, prometheus.GaugeValue, float64(tq.Bytes), tq.Tenant)
		send(c.tenantLimit, prometheus.GaugeValue, float64(tq.Limit), tq.Tenant)
		send(c.tenantRejections, prometheus.CounterValue, float64(tq.Rejections), tq.Tenant)
	}
	if s.MasterEnabled {
		m := s.Master
		send(c.masterRegistered, prometheus.GaugeValue, boolValue(m.Registered))
		send(c.masterRegisters, prometheus.CounterValue, float64(m.Registers))
		send(c.masterReregisters, prometheus.CounterValue, float64(m.Reregisters))
		send(c.masterFailures, prometheus.CounterValue, float64(m.Failures))
		send(c.masterEpoch, prometheus.GaugeValue, float64(m.Epoch))
		send(c.masterFenced, prometheus.CounterValue, float64(m.Fenced))
		send(c.masterDropped, prometheus.CounterValue, float64(m.TasksDropped))
	}
	if s.RESPEnabled {
		r := s.RESP
		send(c.respConns, prometheus.GaugeValue, float64(r.Connections))
		send(c.respCommands, prometheus.CounterValue, float64(r.Commands))
		send(c.respErrors, prometheus.CounterValue, float64(r.Errors))
		send(c.respProtocol, prometheus.CounterValue, float64(r.ProtocolErrors))
		for _, x := range []struct {
			source string
			n      uint64
		}{{"local_ram", r.HitsLocalRAM}, {"local_ssd", r.HitsLocalSSD}, {"remote", r.HitsRemote}, {"miss", r.Misses}} {
			send(c.respReads, prometheus.CounterValue, float64(x.n), x.source)
		}
		send(c.respCorrupt, prometheus.CounterValue, float64(r.CorruptCopies))
		for _, x := range []struct {
			kind string
			n    uint64
		}{{"read_without_master", r.OwnReads}, {"set_in_place", r.InPlaceSets}, {"set_coalesced", r.CoalescedSets}} {
			send(c.respShortcuts, prometheus.CounterValue, float64(x.n), x.kind)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves the metrics gathered from g (the node's registry) in the
// Prometheus exposition formats, for /metrics. A gathering error is an
// HTTP 500 naming it.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}

// Health serves /health: 200 "ok" when check returns nil (or check is
// nil), 503 with the check's error otherwise. check gets the request's
// context. Only GET and HEAD are allowed.
func Health(check func(ctx context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if check != nil {
			if err := check(r.Context()); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "unhealthy: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	}
}

// NewMux returns the node's admin HTTP handler: /metrics from g and
// /health from check.
func NewMux(g prometheus.Gatherer, check func(ctx context.Context) error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(g))
	mux.Handle("/health", Health(check))
	return mux
}
