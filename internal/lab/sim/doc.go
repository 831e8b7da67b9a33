// Package sim is a discrete-event simulator of a cluster of prefill
// instances in model units (Mooncake FAST'25 world: LLaMA3-70B, 160 MiB
// blocks, seconds of prefill). It replays a request trace against P
// instances with per-instance RAM and SSD block caches driven by the shared
// policy objects of package policy, and reports hit ratios by source, bytes
// moved, TTFT, SLO attainment and goodput.
//
// # Model
//
// Instances. Each instance serves a FIFO queue, one prefill at a time. A
// request's prefill takes costmodel's PrefillSeconds(n, reused) for its n
// tokens of which the first `reused` come from cache. TTFT is the end of
// the prefill minus the arrival; the first decode step is out of scope and
// not included.
//
// Caches. Each instance has a RAM cache (Options.RAMBlocks) and an optional
// SSD cache (Options.SSDBlocks), both *policy.Cache of Options.Policy. A
// RAM eviction is demoted into the SSD (Cache.OnEvict → ssd.Insert, counted
// as an SSD write); an SSD eviction drops the block. A request's blocks are
// accessed in its instance's RAM cache, first to last (Access.Depth, Parent
// and Time set; NextUse too when the policy needs the future), when its
// prefill COMPLETES: its KV exists only then. Blocks loaded from the local
// SSD stay there too (the tiers are not exclusive). Access.Time is the
// block's position in the arrival-sorted trace, shifted left by 20 bits so
// that SSD inserts made during one access get distinct, increasing times;
// each cache sees increasing times because an instance completes requests
// in arrival order. NextUse is the position of the key's next access
// anywhere in the sorted trace (in the same units): a global future, so an
// oracle policy is an approximation when there are several caches.
//
// Modes. recompute has no caches. local lets an instance use only its own
// RAM and SSD; global adds one index key → holders (instance, tier) over
// all caches, updated on every insert and eviction in O(holders). The
// local hit of a request on instance i is the longest prefix of its keys
// in i's RAM or SSD; the global hit is the longest prefix whose every block
// is held somewhere.
//
// Transfers. Blocks in the local SSD are read at the SSD's bandwidth;
// blocks held only by other instances are fetched over the network, from
// the holder with the fewest active egress transfers (ties: RAM before SSD,
// then lowest index), a remote SSD block also crossing the source's SSD.
// A request's blocks from one (source, tier) form one transfer. Each
// instance has an egress and an ingress link of Options.NICGbps and an SSD
// link of Options.SSDGBps; concurrent transfers share links by processor
// sharing (package netshare): a transfer's rate is the smallest of its
// links' fair shares, recomputed whenever a transfer starts or ends — a
// simple approximation of max–min fairness. Bytes are counted in whole
// blocks (costmodel BlockBytes; a live block is one object of the
// payload size), hits in tokens (a partial last block counts its own
// tokens). SSD writes are counted but do not take SSD bandwidth. Concurrent requests needing the
// same block each fetch it (no coalescing).
//
// Fetch or recompute. For the instance a request runs on, the simulator
// considers reusing the local-RAM prefix only, the local (RAM+SSD) prefix,
// and in global mode the global prefix, estimates for each the transfer
// time at the current shares plus the prefill time of the rest, and takes
// the cheapest (ties: the longer prefix). A remote prefix left unused this
// way counts in Summary.FetchesSkipped, a local SSD prefix in
// SSDReadsSkipped. This is the rule "fetch only when loading is faster than
// recomputing": PrefillSeconds(n, localHit) - PrefillSeconds(n, globalHit)
// against the transfer estimate.
//
// Prefetch (on by default). The transfer of a request's plan starts when it
// arrives and overlaps its queueing; at the head of the queue it waits for
// any remainder and then prefills. The plan is fixed at arrival, and the
// blocks it reuses count as pinned until the prefill (as a read lease would
// pin them in the store). With NoPrefetch the plan is made when the request
// reaches the head of the queue and the instance is busy during the
// transfer.
//
// Routing. rr: round robin in arrival order. least-loaded: the shortest
// estimated queue time (the estimated remaining time of the running request
// plus the estimated service times of the waiting ones). cache-aware
// (Mooncake's Algorithm 1): the minimum estimated TTFT = queue time +
// transfer time + prefill time over all instances, with the transfer
// overlapping the queue (max instead of sum) when prefetching; in local
// mode only the instance's own prefix counts, in global mode the global
// prefix with its transfer cost. With Options.Reject, a request whose
// chosen instance's estimated TTFT exceeds the SLO is rejected (any
// routing); it counts as an SLO miss and in Summary.Rejected, and not in
// the TTFT and hit statistics.
//
// Joint routing (RoutingJoint). Algorithm 1 estimates each instance from
// the blocks held now, but under load many of a request's prefix blocks
// are still being computed by an earlier request queued or running
// somewhere: Algorithm 1 sees nothing cached, sends the request to the
// least-loaded instance and recomputes the prefix, and the hit ratio
// falls just when capacity matters (conversation, mooncake policy, at 2.8×
// the trace rate: 22% token hits against 36% at 1×). Each instance keeps the
// keys of the requests routed to it and not yet stored (pending); joint
// routing estimates an instance's prefill with the prefix extended by its
// RAM blocks and pending keys past the planned one, since its FIFO queue
// stores them before the request reaches the head. The plan made at
// arrival (transfers included) is unchanged; at the head of the queue
// the request also reuses every following block then in the instance's
// RAM (late binding, Summary.LateBoundBlocks).
//
// One planner. The plans, routing and admission above are Planner's
// (plan.go), which reads the cluster through the small Cluster interface:
// the simulator's state implements it, and so does the live replayer's
// view of a running cluster (package replay), so a simulated and a live
// run of one configuration decide alike and differ only in what really
// happens.
//
// Replication (Options.Replication). ReplicateAll keeps every fetched
// block as a local replica. ReplicateHot keeps one only when at least
// HotAccesses requests have asked for the key (counted at arrival, as the
// master counts lookups) or another request routed to the same instance
// needs it; otherwise the block is used once and not stored
// (Summary.ReplicasSkipped), and its source copy in another instance's
// RAM is touched, as a read renews a lease in the store. Touches reach a
// cache out of its own order, so each RAM cache's Access.Time is kept
// strictly increasing by a per-cache clock (unchanged times otherwise).
//
// Redundant replicas first (Options.EvictRedundantFirst). Before a new
// block enters a full RAM cache, the simulator evicts what the policy
// would (its Victim, as many as the insert needs, batches included), but
// when the victim is the last copy in the cluster it evicts instead the
// oldest live redundant replica of that instance (a block another
// instance also holds), provided that replica's age is at least a
// quarter of the victim's: a lost replica costs a fetch, a lost last copy
// a recompute, about 4× more at 100 Gbps. Candidates sit in a queue per
// instance, pushed on each local use of a redundant block and when another
// instance gains a replica, and dropped lazily when stale: amortised O(1)
// per eviction besides the policy's Victim. Summary.RedundantEvictions
// counts the substitutions.
//
// Ceiling. NewCeiling bounds what any policy, placement or routing of this
// model can reach: every request reuses every leading block any earlier
// arrival asked for, transfers are free, and one central FIFO queue feeds
// all instances.
//
// Cost. Per request, with B its blocks, H the replicas of its leading
// held blocks (the lengths of its holder lists, summed) and P the
// instances: the lookup reads B index entries; the planner reads the H
// holders once into a per-request view (holderView: each instance's RAM
// run and tier bits, each block's fetch source); cache-aware and joint
// routing then estimate every instance, in O(1) for a plain one (none of
// its replicas lie past its RAM run: its plans are those of every plain
// instance with the same run, O(B) once per run length, on its own
// ingress link) and in O(B) for the others, which hold the request's
// later blocks and are few; the store at the end of the prefill makes B
// cache accesses and an index update per insert or eviction, O(replicas
// of the key). So O(P + H + B·(runs + others)), and at fleet scale the
// O(P) scan of the instances leads; BENCHMARKS.md, "Simulator at fleet
// scale", measures it.
//
// Determinism. Same inputs, same outputs, bit for bit: requests are sorted
// stably by timestamp; simultaneous events run in a fixed order (transfer
// completions, then prefill completions by sequence number, then
// arrivals); no decision depends on map iteration order.
package sim
