// Package bench is kvpool's benchmark runner (BENCHMARKS.md, "kvpool
// bench"): it drives one
// target — a tier in process (ram, ssd), a whole node over loopback (node),
// the master's lookups (master), a master and N nodes read through the
// public client (cluster), the hit-ratio engine (sim), or a
// comparison point (tcp: raw loopback TCP; disk: raw sequential reads of the
// SSD directory; redis: a redis-server over RESP) — from a number of
// connections for a duration or a count, and reports throughput (ops/s,
// GB/s) and latency (p50, p99, max) as a Result that prints as a table row
// or JSON.
//
// The runner is target-agnostic: a Target prepares its data outside the
// timed region and hands one Worker per connection; each Worker.Do is one
// timed request (one GET, one pipelined burst, one batch lookup, one trace
// replay). Compare runs kvpool's node next to the comparison points in one
// invocation, with the same block size and connections, and reports
// kvpool's figures as ratios to each.
package bench
