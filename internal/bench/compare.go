package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kvpool/kvpool/internal/option"
)

// Comparison points accepted by CompareOptions.Against.
const (
	VsRedis = TargetRedis
	VsTCP   = TargetTCP
	VsDisk  = TargetDisk
)

// Goals of the storage benchmark (BENCHMARKS.md, "kvpool bench"): kvpool's
// throughput as a share of each comparison point's, from one run.
// GoalRedis is checked at every block size; BENCHMARKS.md ("Objects of any
// size") adds that the 32 KiB and 256 KiB ratios stay at least what they
// were before variable-size objects (a comparison of two runs, old tree
// and new, not of one). GoalTCP and GoalDisk (BENCHMARKS.md, "The data
// plane against fair references") are against the fair references, at the sizes of GoalSizes; the old references ("tcp
// (one buffer)", "disk (sequential)") are printed beside them without a
// goal.
const (
	// GoalRedis: node GET from RAM ≥ 1.0 × Redis GET (256 KiB and 1 MiB,
	// 8 connections).
	GoalRedis = 1.0
	// GoalTCP: node GET from RAM, every block verified by the client,
	// ≥ 0.9 × raw loopback TCP serving the same working set ("tcp
	// (working set)").
	GoalTCP = 0.9
	// GoalDisk: node GET from SSD, every block verified by the node,
	// ≥ 0.9 × raw O_DIRECT reads of the node's I/O size and queue depth
	// ("disk (node I/O)").
	GoalDisk = 0.9
	// GoalBatchOpsPerSec: a batch GET of 32 objects of 4 KiB from one
	// node over loopback, 8 connections, ≥ 256k objects/s (twice the
	// ~128k KV/s Mooncake reports for get_batch of 4 KiB values over TCP;
	// an anchor from other hardware, not a ratio).
	GoalBatchOpsPerSec = 256_000
	// MemoryHeadroom: a node's resident memory ≤ its RAM-tier size + 64 MiB
	// under load.
	MemoryHeadroom = 64 << 20
)

// GoalSizes are the block sizes at which GoalTCP and GoalDisk apply:
// 256 KiB (the live runs' payload) and 1 MiB (BENCHMARKS.md, "The data
// plane against fair references").
func GoalSizes() []int { return []int{256 << 10, 1 << 20} }

// Reference labels: the comparison rows' names for each point, the old
// reference first; disk's third row, disk then tcp (raw), is the physical
// bound of a network GET from SSD (no goal).
const (
	RefTCPOneBuffer  = "tcp (one buffer)"
	RefTCPWorkingSet = "tcp (working set)"
	RefDiskSeq       = "disk (sequential)"
	RefDiskNodeIO    = "disk (node I/O)"
	RefDiskTCP       = "disk then tcp (raw)"
)

// CompareOptions configure Compare. The zero value of each field means its
// default.
type CompareOptions struct {
	// BlockSizes are the value sizes (default DefaultCompareSizes).
	BlockSizes []int
	// Named reads the node's (and redis's) data set by name (Spec.Named):
	// named GET against raw TCP, disk and redis GET of the same names.
	Named bool
	// Conns is the connections of every run (DefaultConns).
	Conns int
	// Depth is the pipelining depth of the redis runs (default 1: a node
	// connection has one GET in flight, so Redis gets the same).
	Depth int
	// Duration is each run's length (DefaultDuration).
	Duration time.Duration
	// Against lists the comparison points (VsRedis, VsTCP, VsDisk;
	// default all three).
	Against []string
	// RedisAddr is a running redis-server; empty skips VsRedis with
	// RedisSkipReason.
	RedisAddr string
	// RedisSkipReason says why there is no redis-server (shown in the
	// skipped row).
	RedisSkipReason string
	// Dir is where the disk-backed runs put their files (default: a
	// temporary directory).
	Dir string
	// BufferedIO turns O_DIRECT off for node-ssd and disk.
	BufferedIO bool
	// Progress receives progress lines of long runs (nil: none).
	Progress io.Writer
}

// DefaultCompareSizes are Compare's block sizes by default: 32 KiB (a
// vLLM-sized block), 256 KiB (the live runs' payload), 1 MiB and 4 MiB
// (an LMCache chunk of a small model), the sizes of BENCHMARKS.md's speed
// targets for objects of any size and of GoalSizes.
func DefaultCompareSizes() []int { return []int{32 << 10, 256 << 10, 1 << 20, 4 << 20} }

// Validate reports the first invalid field.
func (o CompareOptions) Validate() error {
	for _, a := range o.Against {
		if a != VsRedis && a != VsTCP && a != VsDisk {
			return fmt.Errorf("%w: %w", errSpec, option.Errorf("Against", "%q: want redis, tcp or disk", a))
		}
	}
	for _, b := range o.BlockSizes {
		if b <= 0 || b > MaxBlockSize {
			return fmt.Errorf("%w: %w", errSpec, option.Errorf("BlockSizes", "%d: want 1 byte to 512 MiB", b))
		}
	}
	if o.Conns < 0 || o.Depth < 0 || o.Duration < 0 {
		return fmt.Errorf("%w: Conns %d, Depth %d, Duration %v: want ≥ 0", errSpec, o.Conns, o.Depth, o.Duration)
	}
	return nil
}

// Comparison is kvpool's figure against one comparison point.
type Comparison struct {
	// BlockSize is the value size of both runs.
	BlockSize int `json:"block_size"`
	// Against is the comparison point (redis, tcp, disk).
	Against string `json:"against"`
	// Reference names the point's row: "redis", or one of the Ref labels
	// (tcp and disk have two references each).
	Reference string `json:"reference"`
	// Kvpool is the node run (tier ram, or ssd against disk).
	Kvpool Result `json:"kvpool"`
	// Other is the comparison point's run (zero when Skipped).
	Other Result `json:"other"`
	// Ratio is Kvpool.GBPerSec / Other.GBPerSec.
	Ratio float64 `json:"ratio"`
	// Goal is the target ratio (BENCHMARKS.md), 0 where none is set
	// (then Met is false); Met reports Ratio ≥ Goal.
	Goal float64 `json:"goal"`
	Met  bool    `json:"met"`
	// Skipped, when set, says why the comparison did not run.
	Skipped string `json:"skipped,omitempty"`
}

// Compare runs, for each block size, the node GET from RAM (and from SSD
// when disk is compared) and each comparison point with the same block
// size and connections, one after the other in this process, and returns
// kvpool's throughput as a ratio to each. With Named the node (and redis)
// read named objects; tcp and disk have no keys and run as without.
func Compare(ctx context.Context, o CompareOptions) ([]Comparison, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(o.BlockSizes) == 0 {
		o.BlockSizes = DefaultCompareSizes()
	}
	if len(o.Against) == 0 {
		o.Against = []string{VsRedis, VsTCP, VsDisk}
	}
	if o.Depth == 0 {
		o.Depth = 1
	}
	var out []Comparison
	for _, size := range o.BlockSizes {
		base := Spec{BlockSize: size, Conns: o.Conns, Duration: o.Duration, Dir: o.Dir, BufferedIO: o.BufferedIO, Progress: o.Progress}
		run := func(s Spec) (Result, error) { return Run(ctx, s) }
		var nodeRAM, nodeSSD *Result
		kv := func(tier string) (Result, error) {
			p := &nodeRAM
			if tier == TierSSD {
				p = &nodeSSD
			}
			if *p != nil {
				return **p, nil
			}
			s := base
			s.Target, s.Tier, s.Named = TargetNode, tier, o.Named
			r, err := run(s)
			if err != nil {
				return r, err
			}
			*p = &r
			return r, nil
		}
		for _, a := range o.Against {
			for _, ref := range references(a) {
				c := Comparison{BlockSize: size, Against: a, Reference: ref.label, Goal: ref.goal(size)}
				tier := TierRAM
				if a == VsDisk {
					tier = TierSSD
				}
				k, err := kv(tier)
				if err != nil {
					return out, err
				}
				c.Kvpool = k
				if a == VsRedis && o.RedisAddr == "" {
					c.Skipped = o.RedisSkipReason
					if c.Skipped == "" {
						c.Skipped = "no redis-server address"
					}
					out = append(out, c)
					continue
				}
				s := base
				s.Target = ref.target
				if a == VsRedis {
					s.Addr, s.Depth, s.Named = o.RedisAddr, o.Depth, o.Named
				}
				if c.Other, err = run(s); err != nil {
					return out, err
				}
				if c.Other.GBPerSec > 0 {
					c.Ratio = c.Kvpool.GBPerSec / c.Other.GBPerSec
				}
				c.Met = c.Goal > 0 && c.Ratio >= c.Goal
				out = append(out, c)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Comparison) int { return a.BlockSize - b.BlockSize })
	return out, nil
}

// reference is one run a comparison point stands for.
type reference struct {
	label  string
	target string
	goal   func(size int) float64
}

// references returns point a's runs: redis, or the old and the fair
// reference of tcp and disk (the goal on the fair one, at GoalSizes).
func references(a string) []reference {
	none := func(int) float64 { return 0 }
	at := func(g float64) func(int) float64 {
		return func(size int) float64 {
			if slices.Contains(GoalSizes(), size) {
				return g
			}
			return 0
		}
	}
	switch a {
	case VsTCP:
		return []reference{{RefTCPOneBuffer, TargetTCP, none}, {RefTCPWorkingSet, TargetTCPSet, at(GoalTCP)}}
	case VsDisk:
		return []reference{{RefDiskSeq, TargetDisk, none}, {RefDiskNodeIO, TargetDiskNode, at(GoalDisk)}, {RefDiskTCP, TargetDiskTCP, none}}
	}
	return []reference{{VsRedis, TargetRedis, func(int) float64 { return GoalRedis }}}
}
