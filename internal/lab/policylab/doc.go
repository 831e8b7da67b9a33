// Package policylab runs the policy experiments (docs/policy.md) as code and
// turns them into a report section by section: how much of the gap between
// LRU and Belady an online policy (kvchain by default) closes on the tuning
// half, the held-out half and the whole of each trace, and how robust that
// result is.
//
// The experiments, each a pure function of the traces and the Options:
//
//  1. Gap table. Every policy (the baselines LRU, LFU, S3-FIFO and ARC,
//     the extra Mooncake, the subject and the Belady oracle) at every
//     capacity, one global cache in request order (package hitrate), on
//     each trace cut into three parts: the first half by time (the part
//     kvchain was tuned on, docs/policy.md), the second half and the whole.
//     Halves are split at half the trace's last timestamp (relative to its
//     first) with tracesample; each half starts with a cold cache. Gap
//     closed = (subject − LRU) / (Belady − LRU), undefined when Belady − LRU
//     is under half a point; "vs best" = subject − the best baseline.
//     Generated traces (package tracegen) with other statistics get the same
//     table.
//  2. Robustness (a): wrong reuse predictions. The subject run with an
//     injected fraction p of wrong reuse predictions (policy spec
//     "kvchain(perr=p,seed=s)"), for each p: the order-only hit ratio at one
//     capacity, and the goodput of the Fig 10 cluster (package sim, global
//     pool, cache-aware routing), with LRU and the best baseline as flat
//     references.
//  3. Robustness (b): two tenants sharing one pool. Two traces (conversation
//     as tenant A, synthetic as tenant B) are merged into one request stream
//     (see Merge for the time alignment and the key mapping) and replayed
//     through one cache; each tenant's hit ratio shared is set beside its hit
//     ratio alone with half and with all of the capacity, and fairness is
//     Jain's index of the tenants' shared hit ratios normalised by their
//     solo-at-half hit ratios.
//  4. Robustness (c): capacities not used for tuning (order-only, same table
//     as 1) and node counts not used for tuning in the timed simulator.
//
// Run executes the experiments on a bounded pool of workers; Result.Report
// lays them out as report sections and Write writes the report directory
// with CSV and JSON next to it.
package policylab
