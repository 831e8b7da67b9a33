// Package bench is kvpool's benchmark runner (BENCHMARKS.md, "kvpool
// bench"): it drives one
// target — a tier in process (ram, ssd), a whole node over loopback (node),
// the master's lookups (master), a master and N nodes read through the
// public client (cluster), the hit-ratio engine (sim), or a
// comparison point (tcp: raw loopback TCP from one buffer; tcp-set: the
// same from a working set of the node target's size; disk: raw sequential
// reads of the SSD directory; disk-node: raw reads of a node GET's I/O
// size at random slots; disk-tcp: those reads served over loopback TCP
// by a raw server, the physical bound of a node GET from SSD; redis: a redis-server over RESP) — from a number of
// connections for a duration or a count, and reports throughput (ops/s,
// GB/s) and latency (p50, p99, max) as a Result that prints as a table row
// or JSON.
//
// The runner is target-agnostic: a Target prepares its data outside the
// timed region and hands one Worker per connection; each Worker.Do is one
// timed request (one GET, one pipelined burst, one batch lookup, one trace
// replay). Compare runs kvpool's node next to the comparison points in one
// invocation, with the same block size and connections, and reports
// kvpool's figures as ratios to each (by default at 32 KiB, 256 KiB,
// 1 MiB and 4 MiB, the sizes of BENCHMARKS.md's speed targets for objects
// of any size and against the fair references), tcp and disk each
// against the old reference and the fair one, the goals on the fair ones.
//
// Objects of any size. The block size (Spec.BlockSize) is the size of
// every object of a run's data set. The tiers and nodes a target builds
// are sized in what an object takes there — its name and payload in whole
// 4 KiB RAM chunks, its pages and side-table entries on SSD — not in block
// sizes, so a data set fits (and nothing is evicted or demoted that the
// run does not mean to) at any size from 1 byte to 512 MiB; their max
// object size is raised to the block size when above the default 64 MiB;
// and the block size is their typical object size (block_size), which
// only sizes the eviction policies. Spec.Named (--named) stores and reads
// the data set as named objects under LMCache-style names through the
// named paths (tier keys, the node's named ops, the client's GetNamed),
// so named GETs can be set beside raw TCP and Redis as chain-id GETs are.
package bench
