package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/netns"
	"github.com/kvpool/kvpool/internal/node/store"
	"github.com/kvpool/kvpool/internal/option"
)

// Target names accepted by Spec.Target.
const (
	TargetRAM    = "ram"
	TargetSSD    = "ssd"
	TargetNode   = "node"
	TargetMaster = "master"
	TargetSim    = "sim"
	// TargetTCP is raw loopback TCP sending one buffer ("tcp (one
	// buffer)"); TargetTCPSet the same from a working set of the node
	// target's size ("tcp (working set)", the fair reference of node GET
	// from RAM).
	TargetTCP    = "tcp"
	TargetTCPSet = "tcp-set"
	// TargetDisk is raw disk reads in file order ("disk (sequential)");
	// TargetDiskNode reads of a node GET's I/O size at random slots with
	// the node's queue depth ("disk (node I/O)", the fair reference of
	// node GET from SSD).
	TargetDisk     = "disk"
	TargetDiskNode = "disk-node"
	// TargetDiskTCP is disk-node's reads served over loopback TCP by a
	// minimal server, each block written as it is read ("disk then tcp
	// (raw)", the physical bound of a node GET from SSD; no goal).
	TargetDiskTCP = "disk-tcp"
	TargetRedis   = "redis"
	// TargetCluster is a master and Spec.Nodes nodes in process, read
	// through the public client (lookup with lease, parallel MGETs,
	// verification).
	TargetCluster = "cluster"
	// TargetClusterTCP is the cluster target's raw-TCP limit: Spec.Nodes
	// minimal servers and the same connections, batches and working set,
	// without lookup, framing or checksum.
	TargetClusterTCP = "cluster-tcp"
	// TargetMasterIndex is a master's index of Spec.Keys keys built in
	// process, looked up through Master.Lookup (masterindex.go).
	TargetMasterIndex = "master-index"
)

// Targets returns the target names Run accepts.
func Targets() []string {
	return []string{TargetRAM, TargetSSD, TargetNode, TargetMaster, TargetSim, TargetTCP, TargetTCPSet, TargetDisk, TargetDiskNode, TargetDiskTCP, TargetRedis, TargetCluster, TargetClusterTCP, TargetMasterIndex}
}

// Defaults of Spec's zero fields. Each says where its value comes from.
const (
	// DefaultBlockSize is 256 KiB, the live runs' usual payload
	// (64–256 KiB; docs/design.md, "Scale model") and one of the sizes
	// BENCHMARKS.md reports.
	DefaultBlockSize = 256 << 10
	// MaxBlockSize is the largest Spec.BlockSize: the largest object a
	// node can be configured to take (store.MaxObjectSizeLimit, 512 MiB).
	MaxBlockSize = store.MaxObjectSizeLimit
	// DefaultRAMChunk is the RAM tier's chunk size in the ram, node and
	// cluster targets: a node's default (config.DefaultRAMChunkBytes,
	// 4 KiB), so the targets measure the tier a node runs by default
	// whatever the block size.
	DefaultRAMChunk = int(config.DefaultRAMChunkBytes)
	// DefaultConns is 8, the connection count of the benchmark's targets
	// (BENCHMARKS.md).
	DefaultConns = 8
	// DefaultMasterBatch is 32 keys per lookup, the master target of
	// BENCHMARKS.md.
	DefaultMasterBatch = 32
	// DefaultMasterDepth is 2 lookups in flight per connection: with the
	// default 8 connections that is 16 goroutines, what
	// BenchmarkLookup32Loopback uses on this 2-core machine.
	DefaultMasterDepth = 2
	// DefaultClusterBatch is 8 blocks per client.Get of the cluster
	// target: BENCHMARKS.md's cluster command (--batch 8), a 4k-token prefix of
	// 512-token blocks.
	DefaultClusterBatch = 8
	// DefaultClusterNodes is the cluster target's node count: 3, as the
	// master target's registered nodes and cluster.DefaultNodes of
	// `kvpool up`.
	DefaultClusterNodes = 3
	// DefaultDuration is 5 s, as in BENCHMARKS.md's commands.
	DefaultDuration = 5 * time.Second
	// DefaultWorkingBlocks is the working set of the ram, node and redis
	// targets: 64 blocks, as BenchmarkNodeGet (random reads spread over
	// many slots; setup well under a second at 1 MiB).
	DefaultWorkingBlocks = 64
	// DefaultDiskBytes is the data set of the ssd and disk targets and of
	// node with tier ssd: 256 MiB, written once at setup (about a second)
	// and read with O_DIRECT, so the page cache does not serve it.
	DefaultDiskBytes = 256 << 20
	// DefaultSimCapacity is the LRU cache of the sim target, 5,000 blocks,
	// as BenchmarkHitrateLRU.
	DefaultSimCapacity = 5000
	// DefaultProgressEvery is how often a progress line is written once a
	// run has lasted ProgressAfter.
	DefaultProgressEvery = time.Second
	// ProgressAfter is how long a run goes before the first progress line:
	// a run longer than about 2 s shows progress.
	ProgressAfter = 2 * time.Second
)

// Node tiers accepted by Spec.Tier for the node target.
const (
	TierRAM = "ram"
	TierSSD = "ssd"
)

// Spec describes one benchmark run. The zero value of every field means its
// default; Target is required.
type Spec struct {
	// Target is one of Targets().
	Target string `json:"target"`
	// Tier is the node target's tier under test, TierRAM (default) or
	// TierSSD. Other targets ignore it.
	Tier string `json:"tier,omitempty"`
	// BlockSize is the value size in bytes (DefaultBlockSize): every
	// object of the data set has this many bytes. The tiers and nodes a
	// target builds take objects up to at least this size (their max
	// object size is raised to it when above the default 64 MiB), keep
	// them in 4 KiB RAM chunks (DefaultRAMChunk) and size their
	// eviction policies for it as their typical object size.
	BlockSize int `json:"block_size"`
	// Named stores and reads the data set as named objects, under
	// LMCache-style names ("meta-llama/Llama-3.1-8B@1@0@<hex>@bfloat16kv_bytes",
	// objectNameLen bytes), through the named forms (the tiers' named
	// keys, the node's named ops, the client's GetNamed; redis keys are
	// the same names), rather than as 64-bit chain ids. ram, ssd, node,
	// cluster and redis accept it.
	Named bool `json:"named,omitempty"`
	// Conns is the number of connections (or workers, for in-process
	// targets), each with its own goroutine(s) (DefaultConns; 1 for sim).
	Conns int `json:"conns"`
	// Batch is the number of keys per master lookup (master:
	// DefaultMasterBatch), of consecutive blocks per client.Get
	// (cluster: DefaultClusterBatch), or of random blocks per MGET of the
	// node target (0 or 1: one GET per request; reads only). Only those
	// targets batch.
	Batch int `json:"batch,omitempty"`
	// Nodes is the cluster target's number of in-process nodes
	// (DefaultClusterNodes). Other targets ignore it.
	Nodes int `json:"nodes,omitempty"`
	// Netns runs the cluster target on real hosts: the master and the
	// nodes as processes of Binary, each on a network namespace of its
	// own, node links shaped by the kernel to LinkRate (package netns;
	// Linux, root and iproute2).
	Netns bool `json:"netns,omitempty"`
	// LinkRate is every node's link rate with Netns, in bytes per second
	// each way (0: unshaped).
	LinkRate float64 `json:"link_rate,omitempty"`
	// Binary is the kvpool executable the Netns cluster runs (default:
	// this process's own).
	Binary string `json:"-"`
	// Keys is the master-index target's index size (DefaultIndexKeys
	// when 0, at most MaxIndexKeys). Other targets refuse it.
	Keys int64 `json:"keys,omitempty"`
	// Depth is the number of requests in flight per connection: the
	// pipelining depth of redis, the goroutines sharing each connection
	// of master (DefaultMasterDepth). 0 means 1 elsewhere; node, tcp and
	// disk serve one request at a time per connection and refuse more.
	Depth int `json:"depth,omitempty"`
	// WriteFraction is the share of requests that write (PUT/SET) rather
	// than read, in [0, 1]; 0 reads only. ram, ssd, node and redis accept it.
	WriteFraction float64 `json:"write_fraction,omitempty"`
	// Duration bounds the timed run (DefaultDuration when Count is 0).
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Count, when positive, is the number of requests (Worker.Do calls)
	// to time instead of a duration.
	Count int64 `json:"count,omitempty"`
	// DataBytes is the data set: the working set read at random (ram,
	// node ram, redis: DefaultWorkingBlocks blocks) or the bytes laid on
	// disk (ssd, disk, node ssd: DefaultDiskBytes).
	DataBytes int64 `json:"data_bytes,omitempty"`
	// Dir is where the ssd, disk and node-ssd targets put their files
	// (default: a new directory under os.TempDir, removed at Close).
	Dir string `json:"dir,omitempty"`
	// BufferedIO turns off O_DIRECT for the ssd, disk and node-ssd
	// targets, so reads may come from the page cache.
	BufferedIO bool `json:"buffered_io,omitempty"`
	// Addr is the redis target's server address (required for redis).
	Addr string `json:"addr,omitempty"`
	// TracePath is the sim target's trace (JSON Lines); empty generates
	// a synthetic chat trace (tracegen.ChatOptions).
	TracePath string `json:"trace,omitempty"`
	// Progress, when set, receives a progress line every ProgressEvery
	// once the run has lasted ProgressAfter.
	Progress io.Writer `json:"-"`
	// ProgressEvery is the progress interval (DefaultProgressEvery).
	ProgressEvery time.Duration `json:"-"`
}

// errSpec marks an invalid Spec.
var errSpec = errors.New("invalid bench spec")

func badSpec(field string, v any, why string) error {
	return fmt.Errorf("%w: %w", errSpec, option.Errorf(field, "%v: %s", v, why))
}

// Validate reports the first invalid field.
func (s Spec) Validate() error {
	if !slices.Contains(Targets(), s.Target) {
		return badSpec("Target", fmt.Sprintf("%q", s.Target), fmt.Sprintf("want one of %v", Targets()))
	}
	if s.Tier != "" && s.Tier != TierRAM && s.Tier != TierSSD {
		return badSpec("Tier", fmt.Sprintf("%q", s.Tier), "want ram or ssd")
	}
	if s.BlockSize < 0 || s.BlockSize > MaxBlockSize {
		return badSpec("BlockSize", s.BlockSize, "want 0 (default) to 512 MiB")
	}
	if s.Named && !slices.Contains(namedTargets, s.Target) {
		return badSpec("Named", s.Named, fmt.Sprintf("target %s has no named objects; want one of %v", s.Target, namedTargets))
	}
	if s.Conns < 0 || s.Conns > 1024 {
		return badSpec("Conns", s.Conns, "want 0 (default) to 1024")
	}
	if s.Batch < 0 || s.Batch > 4096 {
		return badSpec("Batch", s.Batch, "want 0 (default) to 4096")
	}
	if s.Depth < 0 || s.Depth > 1024 {
		return badSpec("Depth", s.Depth, "want 0 (default) to 1024")
	}
	if s.Nodes < 0 || s.Nodes > clusterMaxNodes {
		return badSpec("Nodes", s.Nodes, fmt.Sprintf("want 0 (default) to %d", clusterMaxNodes))
	}
	switch {
	case s.Keys < 0:
		return badSpec("Keys", s.Keys, fmt.Sprintf("want at least 1 (0 = default %d)", DefaultIndexKeys))
	case s.Keys > MaxIndexKeys:
		return badSpec("Keys", s.Keys, fmt.Sprintf("want at most %d keys", MaxIndexKeys))
	case s.Keys != 0 && s.Target != TargetMasterIndex:
		return badSpec("Keys", s.Keys, "only the master-index target builds an index of a given size")
	}
	if s.Depth > 1 && (s.Target == TargetMasterIndex || s.clusterShaped() || s.Target == TargetNode || s.Target == TargetTCP || s.Target == TargetTCPSet || s.Target == TargetDisk || s.Target == TargetDiskNode || s.Target == TargetDiskTCP || s.Target == TargetRAM || s.Target == TargetSSD || s.Target == TargetSim) {
		return badSpec("Depth", s.Depth, "target "+s.Target+" serves one request at a time per connection; use Conns")
	}
	switch {
	case s.Netns && s.Target != TargetCluster:
		return badSpec("Netns", s.Netns, "only the cluster target runs on real hosts")
	case s.Netns && s.Named:
		return badSpec("Named", s.Named, "the cluster target on real hosts reads chain ids")
	case s.Netns && s.Nodes == 1:
		return badSpec("Nodes", s.Nodes, "the cluster target on real hosts reads from the other nodes: want at least 2")
	case !s.Netns && s.LinkRate != 0:
		return badSpec("LinkRate", s.LinkRate, "links are shaped only on real hosts (Netns)")
	}
	if err := (netns.Link{Rate: s.LinkRate}).Validate(); err != nil {
		return badSpec("LinkRate", s.LinkRate, err.Error())
	}
	if !(s.WriteFraction >= 0 && s.WriteFraction <= 1) {
		return badSpec("WriteFraction", s.WriteFraction, "want a fraction in [0, 1]")
	}
	if s.WriteFraction > 0 && !slices.Contains([]string{TargetRAM, TargetSSD, TargetNode, TargetRedis}, s.Target) {
		return badSpec("WriteFraction", s.WriteFraction, "target "+s.Target+" only reads")
	}
	if s.Duration < 0 {
		return badSpec("Duration", s.Duration, "want ≥ 0")
	}
	if s.Count < 0 {
		return badSpec("Count", s.Count, "want ≥ 0")
	}
	if s.DataBytes < 0 {
		return badSpec("DataBytes", s.DataBytes, "want ≥ 0")
	}
	if s.DataBytes > 0 && s.DataBytes < int64(s.withDefaults().BlockSize) {
		return badSpec("DataBytes", s.DataBytes, "want at least one block")
	}
	if d := s.withDefaults(); s.clusterShaped() && s.DataBytes > 0 && d.blocks() < d.Batch {
		return badSpec("DataBytes", s.DataBytes, fmt.Sprintf("the cluster target reads runs of Batch = %d blocks: want at least %d bytes", d.Batch, int64(d.Batch)*int64(d.BlockSize)))
	}
	if s.Target == TargetNode && s.Batch > 1 && s.WriteFraction > 0 {
		return badSpec("Batch", s.Batch, "the node target's batches read (MGET); give no WriteFraction with it")
	}
	if s.Target == TargetRedis && s.Addr == "" {
		return badSpec("Addr", `""`, "the redis target needs a server address")
	}
	if s.ProgressEvery < 0 {
		return badSpec("ProgressEvery", s.ProgressEvery, "want ≥ 0")
	}
	return nil
}

// withDefaults returns s with its zero fields replaced by their defaults.
func (s Spec) withDefaults() Spec {
	if s.Tier == "" {
		s.Tier = TierRAM
	}
	if s.BlockSize == 0 {
		s.BlockSize = DefaultBlockSize
	}
	if s.Conns == 0 {
		s.Conns = DefaultConns
		if s.Target == TargetSim {
			s.Conns = 1
		}
	}
	if s.Target == TargetMaster || s.Target == TargetMasterIndex {
		if s.Batch == 0 {
			s.Batch = DefaultMasterBatch
		}
		if s.Depth == 0 && s.Target == TargetMaster {
			s.Depth = DefaultMasterDepth
		}
	}
	if s.clusterShaped() {
		if s.Batch == 0 {
			s.Batch = DefaultClusterBatch
		}
		if s.Nodes == 0 {
			s.Nodes = DefaultClusterNodes
		}
	}
	if s.Depth == 0 {
		s.Depth = 1
	}
	if s.Count == 0 && s.Duration == 0 {
		s.Duration = DefaultDuration
	}
	if s.DataBytes == 0 {
		if s.onDisk() {
			s.DataBytes = DefaultDiskBytes
		} else {
			s.DataBytes = int64(DefaultWorkingBlocks) * int64(s.BlockSize)
			if s.clusterShaped() {
				// It reads runs of Batch blocks: at least one.
				s.DataBytes = int64(max(DefaultWorkingBlocks, s.Batch)) * int64(s.BlockSize)
			}
		}
	}
	if s.ProgressEvery == 0 {
		s.ProgressEvery = DefaultProgressEvery
	}
	return s
}

// namedTargets are the targets that accept Spec.Named.
var namedTargets = []string{TargetRAM, TargetSSD, TargetNode, TargetCluster, TargetRedis}

// ramFootprint is the RAM-tier memory one object of spec's data set takes
// in chunks of DefaultRAMChunk bytes: its name and payload rounded up to
// whole chunks (at least one), as the RAM tier allocates them. Targets
// size their RAM tiers in it, so the data set fits at any block size.
func ramFootprint(spec Spec) int64 {
	c := int64(DefaultRAMChunk)
	return max(1, (int64(nameLen(spec)+spec.BlockSize)+c-1)/c) * c
}

// maxObject is the max object size of spec's tiers and nodes: the
// default 64 MiB (config.DefaultMaxObjectBytes), or the block size when
// it is larger (the limit is on the payload; the name is not counted).
func maxObject(spec Spec) int {
	return max(int(config.DefaultMaxObjectBytes), spec.BlockSize)
}

// onDisk reports whether the target's data set lives in files.
func (s Spec) onDisk() bool {
	return s.Target == TargetSSD || s.Target == TargetDisk || s.Target == TargetDiskNode || s.Target == TargetDiskTCP || (s.Target == TargetNode && s.Tier == TierSSD)
}

// clusterShaped reports whether the target reads runs of Batch blocks
// from Nodes servers: the cluster target and its raw-TCP limit.
func (s Spec) clusterShaped() bool {
	return s.Target == TargetCluster || s.Target == TargetClusterTCP
}

// blocks is the number of blocks in the data set (at least 1).
func (s Spec) blocks() int {
	return max(1, int(s.DataBytes/int64(s.BlockSize)))
}

// Result is the outcome of one run.
type Result struct {
	// Spec is the run's spec with defaults filled in.
	Spec Spec `json:"spec"`
	// Name labels the row (target, and tier for node; "-named" when
	// Spec.Named).
	Name string `json:"name"`
	// Seconds is the timed wall-clock duration.
	Seconds float64 `json:"seconds"`
	// Requests is the number of Worker.Do calls timed.
	Requests int64 `json:"requests"`
	// Ops is the number of operations (GETs, SETs, keys looked up, block
	// accesses replayed): a pipelined burst or a batch counts each member.
	Ops int64 `json:"ops"`
	// Bytes is the payload bytes moved.
	Bytes int64 `json:"bytes"`
	// OpsPerSec is Ops / Seconds.
	OpsPerSec float64 `json:"ops_per_sec"`
	// GBPerSec is Bytes / Seconds / 1e9.
	GBPerSec float64 `json:"gb_per_sec"`
	// P50Micros, P99Micros and MaxMicros are latencies of one request
	// (Worker.Do) in microseconds.
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
	MaxMicros float64 `json:"max_us"`
	// RSSBeforeBytes is this process's resident memory (VmRSS) before
	// the target started; RSSPeakBytes its peak (VmHWM, reset at Start)
	// over setup and run — the whole process: node, clients and harness,
	// so an upper bound of the node's. RAMTierBytes is the node's RAM-tier
	// budget. Set by the node target.
	RSSBeforeBytes int64 `json:"rss_before_bytes,omitempty"`
	RSSPeakBytes   int64 `json:"rss_peak_bytes,omitempty"`
	RAMTierBytes   int64 `json:"ram_tier_bytes,omitempty"`
	// Notes say how the run deviated from what was asked (for example
	// "O_DIRECT refused: reads may come from the page cache").
	Notes []string `json:"notes,omitempty"`
	// Index holds the master-index target's figures (nil for the others).
	Index *IndexResult `json:"index,omitempty"`
}

// IndexResult is what the master-index target measures beyond lookups.
type IndexResult struct {
	// Keys is the number of keys indexed, one RAM replica each.
	Keys int64 `json:"keys"`
	// BytesPerKey is the heap in use after a full GC with the index built,
	// less the heap in use before the master was created, over Keys: the
	// whole process's heap, so it means the index's only when nothing
	// else in the process allocates meanwhile (kvpool bench runs alone).
	BytesPerKey float64 `json:"bytes_per_key"`
	// BytesPerKeyAfter is BytesPerKey measured again after the timed
	// run: the index as its lookups left it (the LRU log holds a stale
	// record for each access not yet swept away).
	BytesPerKeyAfter float64 `json:"bytes_per_key_after"`
	// BuildSeconds is the time to register the nodes and add every key
	// through heartbeat deltas.
	BuildSeconds float64 `json:"build_seconds"`
	// FullGCMillis is the wall time of one runtime.GC with the index
	// built: the mark work the index's pointers cost.
	FullGCMillis float64 `json:"full_gc_ms"`
	// GCCycles is the number of GC cycles over build and run.
	GCCycles int64 `json:"gc_cycles"`
	// GCPauseP99Micros and GCPauseMaxMicros are the 99th percentile and
	// the longest stop-the-world GC pause over build and run (the upper
	// bound of their bucket in runtime/metrics' /gc/pauses:seconds).
	GCPauseP99Micros float64 `json:"gc_pause_p99_us"`
	GCPauseMaxMicros float64 `json:"gc_pause_max_us"`
	// KeysPerCPUSecond is the keys looked up per second of this
	// process's CPU time (user and system) over the timed run: on a
	// shared machine it moves less with the neighbours' load than keys
	// per wall-clock second do (0 where the CPU time is not known).
	KeysPerCPUSecond float64 `json:"keys_per_cpu_second,omitempty"`
}
