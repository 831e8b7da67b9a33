package masterserver

import (
	"github.com/kvpool/kvpool/internal/master"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a master.Master's Stats as Prometheus metrics: every
// promotion series under Mooncake's prefix (master_promotion_*),
// everything else under kvpool_master_*. Register it on a registry the caller owns:
//
//	reg.MustRegister(masterserver.NewCollector(m))
//
// A scrape takes one Stats snapshot (which scans the index to count active
// leases). Collector is safe for concurrent use.
type Collector struct {
	m     func() *master.Master
	descs []metricDesc
}

var _ prometheus.Collector = (*Collector)(nil)

type metricDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*master.Stats) float64
}

// NewCollector returns a collector of m's metrics.
func NewCollector(m *master.Master) *Collector {
	return newCollectorOf(func() *master.Master { return m })
}

// newCollectorOf returns a collector of the master m returns when
// scraped; it sends nothing while m returns nil (a standby).
func newCollectorOf(m func() *master.Master) *Collector {
	c := &Collector{m: m}
	add := func(name, help string, kind prometheus.ValueType, value func(*master.Stats) float64) {
		c.descs = append(c.descs, metricDesc{prometheus.NewDesc(name, help, nil, nil), kind, value})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	f := func(v int64) float64 { return float64(v) }

	add("master_promotion_in_flight", "SSD-to-RAM promotions admitted and not yet completed, failed or expired.", gauge,
		func(s *master.Stats) float64 { return f(s.Promotion.InFlight) })
	add("master_promotion_admitted_total", "SSD-to-RAM promotions admitted.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.Admitted) })
	add("master_promotion_completed_total", "SSD-to-RAM promotions the node reported completed.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.Completed) })
	add("master_promotion_completed_bytes_total", "Bytes moved by completed SSD-to-RAM promotions.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.CompletedBytes) })
	add("master_promotion_rejected_frequency_total", "SSD-hit reports of blocks below the promotion threshold.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.RejectedFrequency) })
	add("master_promotion_rejected_watermark_total", "Promotions refused because the node's RAM was at its watermark.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.RejectedWatermark) })
	add("master_promotion_rejected_cap_total", "Promotions refused because the node's promotion queue was full.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.RejectedCap) })
	add("master_promotion_failed_total", "SSD-to-RAM promotions the node reported failed.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.Failed) })
	add("master_promotion_expired_total", "SSD-to-RAM promotions not acknowledged in time or dropped with their node.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.Expired) })

	add("kvpool_master_nodes_live", "Registered nodes within their heartbeat TTL.", gauge,
		func(s *master.Stats) float64 { return f(s.NodesLive) })
	add("kvpool_master_nodes_dropped_total", "Nodes dropped for missing their heartbeat TTL.", counter,
		func(s *master.Stats) float64 { return f(s.NodesDropped) })
	add("kvpool_master_ram_replicas", "RAM replicas in the index.", gauge,
		func(s *master.Stats) float64 { return f(s.RAMReplicas) })
	add("kvpool_master_ssd_replicas", "SSD replicas in the index.", gauge,
		func(s *master.Stats) float64 { return f(s.SSDReplicas) })
	add("kvpool_master_pool_ram_bytes", "RAM capacity of the live nodes.", gauge,
		func(s *master.Stats) float64 { return f(s.PoolRAMBytes) })
	add("kvpool_master_pool_ram_used_bytes", "Slot-rounded RAM used by indexed replicas not under an eviction order.", gauge,
		func(s *master.Stats) float64 { return f(s.PoolRAMUsed) })
	add("kvpool_master_lookups_total", "Lookup calls.", counter,
		func(s *master.Stats) float64 { return f(s.Lookups) })
	add("kvpool_master_lookup_keys_total", "Keys asked for by Lookup calls.", counter,
		func(s *master.Stats) float64 { return f(s.LookupKeys) })
	add("kvpool_master_lookup_hit_keys_total", "Keys of the cached prefixes Lookup calls found.", counter,
		func(s *master.Stats) float64 { return f(s.LookupHitKeys) })
	add("kvpool_master_leases_active", "Replicas whose read lease is running.", gauge,
		func(s *master.Stats) float64 { return f(s.LeasesActive) })
	add("kvpool_master_leases_granted_total", "Replica read leases granted or extended.", counter,
		func(s *master.Stats) float64 { return f(s.LeasesGranted) })
	add("kvpool_master_evict_attempts_total", "Eviction victims proposed by the policy.", counter,
		func(s *master.Stats) float64 { return f(s.EvictAttempts) })
	add("kvpool_master_evict_freed_total", "Eviction victims ordered out.", counter,
		func(s *master.Stats) float64 { return f(s.EvictFreed) })
	add("kvpool_master_evict_freed_bytes_total", "RAM bytes of the eviction victims ordered out.", counter,
		func(s *master.Stats) float64 { return f(s.EvictFreedBytes) })
	add("kvpool_master_evict_skipped_leased_total", "Eviction victims skipped for an active read lease.", counter,
		func(s *master.Stats) float64 { return f(s.EvictSkippedLeased) })
	add("kvpool_master_evict_confirmed_total", "Eviction orders confirmed by the node's inventory delta.", counter,
		func(s *master.Stats) float64 { return f(s.EvictConfirmed) })
	add("kvpool_master_evict_failed_total", "Eviction orders the node reported failed or did not confirm.", counter,
		func(s *master.Stats) float64 { return f(s.EvictFailed) })
	add("kvpool_master_evict_expired_total", "Eviction orders not acknowledged in time or withdrawn with their node.", counter,
		func(s *master.Stats) float64 { return f(s.EvictExpired) })
	add("master_promotion_ignored_total", "SSD-hit reports of blocks already in RAM or already being promoted.", counter,
		func(s *master.Stats) float64 { return f(s.Promotion.Ignored) })
	add("master_promotion_queued", "Admitted promotions not yet handed out to their node.", gauge,
		func(s *master.Stats) float64 { return f(s.Promotion.Queued) })
	add("kvpool_master_heartbeats_total", "Heartbeats accepted.", counter,
		func(s *master.Stats) float64 { return f(s.Heartbeats) })
	add("kvpool_master_registers_total", "Registrations accepted.", counter,
		func(s *master.Stats) float64 { return f(s.Registers) })
	add("kvpool_master_index_full_total", "Replicas nodes reported that the index could not hold (their shard at its limit of keys or overflow replicas): lookups do not find them.", counter,
		func(s *master.Stats) float64 { return f(s.IndexFull) })
	add("kvpool_master_delta_unknown_total", "Inventory delta entries naming a replica the index did not hold.", counter,
		func(s *master.Stats) float64 { return f(s.DeltaUnknown) })
	return c
}

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
}

// Collect sends the current value of every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m()
	if m == nil {
		return
	}
	st := m.Stats()
	for _, d := range c.descs {
		ch <- prometheus.MustNewConstMetric(d.desc, d.kind, d.value(&st))
	}
}
