// Package replay is the live trace replayer: it drives a running kvpool
// cluster (a master and N nodes) with a request trace under the scale
// model (docs/design.md, "Scale model"), mirroring the simulator (package
// sim) so that a sim run and a live run of the same configuration can be
// compared record by record, in the same formats (sim.Record, sim.Summary,
// sim.WriteRecordsCSV).
//
// # Workers and time
//
// Worker i is a prefill instance bound to node i (the live nodes sorted by
// ID): one goroutine serving a FIFO queue. A dispatcher starts request k
// at (timestamp_k - timestamp_0) / S of live time and measures how late it
// was planned (the lag; Summary.KeptUp is false when its p99 exceeds
// MaxLagP99). Requests due together (the published traces give up to 19
// the same timestamp) arrive as one burst: their lookups go to the master
// at once, then each is routed and planned in arrival order. Looked up one
// after another, a burst's later requests waited for the earlier ones'
// lookups (≈0.65 ms each): 4.3 ms mean lag on the demo's global arm at
// speed 25, against 0.7 ms of wake-up lateness with the burst's lookups
// together (plus the burst's one lookup round, which the lag includes: a
// run whose lookups are slow is planned late and is not judged).
// Every interval is measured live and reported ×S as model seconds; the
// live seconds are kept in LiveRecord.
//
// # One request
//
// At arrival the dispatcher looks the request's keys up on the master (no
// lease) and hands the replicas to the simulator's planner (sim.Planner,
// the very code the simulator calls), which routes the request (rr,
// least-loaded or cache-aware, with the simulator's estimates: a worker's
// queue estimate is the estimated service of its waiting requests plus
// the rest of its running one) and fixes its plan ("fetch or recompute":
// reuse the local RAM prefix, the local RAM+SSD prefix, or in global mode
// the global prefix, whichever has the lowest estimated transfer +
// prefill); with Reject it also turns the request away when its
// estimated TTFT exceeds the SLO, as the simulator's admission control
// does. The planner reads the live cluster through a small view (the
// replayer's transfers in progress per link, the modelled link
// capacities, the workers' queues), so a live run and a simulated one
// can differ only in what really happens, never in what they decide. In
// local mode replicas on other nodes are ignored. With prefetch the
// plan's loads start at once: one client Fetch per source node, in
// parallel, paced by the source's egress and SSD pacers, and one more
// Fetch of the blocks in the worker node's own RAM. Every hit is read and
// verified before it counts: the client checks each block's key and
// checksum and, with VerifyFull, the replayer regenerates it (package
// payload) and compares it byte for byte (Summary.VerifiedHits).
//
// A local RAM hit is free in the model (the block is in the prefill
// node's own memory), so its read is kept off the critical path: at the
// head of the queue the worker waits for the transfer of the other
// blocks only, then "prefills" the tokens after the planned prefix for
// PrefillSeconds/S (sleep, or a busy CPU kernel) while its local reads
// finish, and waits for them only after the prefill
// (LiveRecord.LocalWait, normally 0). The reused prefix ends at the first
// planned block that did not arrive verified, local or not; when a local
// block failed, the worker recomputes the tokens from it on (the prefill
// time of the shorter prefix less the time already spent) before the
// request's first token: a wrong or missing block is never delivered,
// and is put again by the store step below. The request's TTFT ends
// here. Then, off the critical path, the worker's
// store goroutine reports the request's accesses to its node in one
// client Access, first block to last as the simulator accesses its cache
// when a prefill completes: a touch of each local RAM block read and
// verified and a put of every other block (so fetched blocks replicate,
// and a local copy that failed is replaced), each with its
// depth and parent, so the node's eviction policy sees the simulator's
// access sequence. Recompute mode looks up, loads and stores nothing.
//
// The replayer moves data only through the public client package, as an
// integrator would (package lab states the rule and checks it).
//
// # The nodes' caches
//
// ClusterOptions sizes a node's RAM tier for RAMSlotsFor(RAMBlocks)
// blocks of the payload size (its block_size) with both watermarks at RAMWatermark(RAMBlocks): the node keeps exactly
// RAMBlocks blocks and evicts one at a time after the Put that exceeds
// them, as the simulator's cache does, with its policy sized for
// RAMBlocks; and the pool stays under the master's eviction watermark, so
// the master's global policy never evicts. Before these (BENCHMARKS.md,
// "The policy in the live store"), the node's policy saw slot numbers
// without chain positions, local RAM hits were not reported to it, and
// the nodes evicted in batches down to 90% of their slots: kvchain ran
// 2.1 points under its simulated hit ratio on the conversation trace at
// 1,000 blocks per node.
//
// # Differences from the simulator
//
// The master learns of stored and evicted blocks at the nodes' next
// heartbeat, so a block becomes visible a heartbeat after its PUT (use a
// short heartbeat; kvpool replay --local uses 20 ms), and a plan may
// count a local RAM block the node evicted since the last heartbeat:
// its read finds it missing, the prefix ends there and the rest is
// recomputed (the simulator's cache, exact at every instant, would not
// have planned it). The accesses of a request reach the node when its
// store goroutine sends them, which can interleave differently with
// other requests' than the simulator's completion order. Every read (a
// Fetch, local or remote) also counts as an access, without chain hints,
// on the node read from, which the simulator's lookups and transfers do
// not; a local read precedes the request's own access of the same blocks.
// A local read crosses the node's egress pacer, which models the NIC: it
// takes a share of the modelled network the simulator's local hits do
// not (measured in kvpool demo's arms: the local reads take 1.4–2.3% of
// a node's paced egress rate, and a read of a typical local prefix fits
// in the pacer's 10 ms burst), and it is hidden under the prefill unless
// it outlasts it (then LocalWait says by how much; it is counted in the
// TTFT). The
// destination's
// ingress pacer paces the stores rather than the loads (a load travels
// from the source node to this process). A replica on a node that joined
// after the replay started is not one of its workers': the planned prefix
// ends at the first block with no replica on a worker.
//
// # Cancellation
//
// When the context ends, dispatching stops, requests not yet finished are
// abandoned, and Run returns the completed ones with Summary.Partial set.
package replay
