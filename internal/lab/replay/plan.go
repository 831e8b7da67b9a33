package replay

import (
	"math"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/trace"
)

// fetchItem is one prefix block a plan loads: block j of the request from
// node src's tier.
type fetchItem struct {
	j    int
	src  int
	tier client.Tier
}

// plan is how a request would run on one worker, as in the simulator: the
// reused prefix, the blocks to load and from where, and the estimates.
type plan struct {
	prefix   int         // blocks reused
	localRAM int         // prefix blocks already in the worker node's RAM (reused, not read)
	fetch    []fetchItem // the other prefix blocks, in block order
	reused   int         // planned reused tokens
	transfer float64     // estimated transfer time (model seconds)
	prefill  float64     // prefill time of the rest (model seconds)
	cost     float64

	skippedRemote, skippedSSD bool
}

func (p *plan) reset(prefix int) {
	f := p.fetch[:0]
	*p = plan{prefix: prefix, fetch: f}
}

func (p *plan) copyFrom(q *plan) {
	f := append(p.fetch[:0], q.fetch...)
	*p = *q
	p.fetch = f
}

// view is what routing knows about a request at one moment: the global
// prefix's replicas by worker index, and the active transfers per link.
type view struct {
	reps   [][]client.Location // replicas of the leading cached blocks
	nodeOf func(string) int    // node ID → worker index, -1 if unknown
	active []int               // per link: egress(i)=i, ingress(i)=P+i, ssd(i)=2P+i
	P      int
}

// localTiers reports whether worker i's node holds a block with replicas
// locs in RAM and on SSD.
func (v *view) localTiers(locs []client.Location, i int) (ram, ssd bool) {
	for _, l := range locs {
		if v.nodeOf(l.Node) != i {
			continue
		}
		switch l.Tier {
		case client.TierRAM:
			ram = true
		case client.TierSSD:
			ssd = true
		}
	}
	return ram, ssd
}

// remoteSource picks the replica to load from among locs, excluding worker
// me: the fewest active egress transfers, then RAM before SSD, then the
// lowest index (sim's rule).
func (v *view) remoteSource(locs []client.Location, me int) (int, client.Tier) {
	best, bestTier, bestLoad := -1, client.Tier(0), 0
	for _, l := range locs {
		n := v.nodeOf(l.Node)
		if n < 0 || n == me {
			continue
		}
		load := v.active[n]
		if best < 0 || load < bestLoad || (load == bestLoad && (l.Tier < bestTier || (l.Tier == bestTier && n < best))) {
			best, bestTier, bestLoad = n, l.Tier, load
		}
	}
	return best, bestTier
}

// estimator computes plans in model units.
type estimator struct {
	o          Options
	blockBytes float64
	nicBps     float64
	ssdBps     float64
	mode       sim.Mode
}

func newEstimator(o Options) estimator {
	return estimator{o: o, blockBytes: float64(o.Profile.BlockBytes()), nicBps: o.NICGbps * 1e9 / 8, ssdBps: o.SSDGBps * 1e9, mode: o.Mode}
}

// makePlan fills dst with the cheapest plan for req on worker i (sim's
// "fetch or recompute": the local-RAM prefix, the local prefix, and in
// global mode the global prefix; ties to the longer prefix).
func (e *estimator) makePlan(v *view, i int, req *trace.Request, dst, scratch *plan) {
	n := req.InputLength
	if e.mode == sim.ModeRecompute {
		dst.reset(0)
		dst.prefill = e.o.Profile.PrefillSeconds(n, 0)
		dst.cost = dst.prefill
		return
	}
	L := len(v.reps)
	ramPrefix, localHit := L, L
	for j, locs := range v.reps {
		ram, ssd := v.localTiers(locs, i)
		if !ram && ramPrefix == L {
			ramPrefix = j
		}
		if !ram && !ssd {
			localHit = j
			break
		}
	}
	globalHit := localHit
	if e.mode == sim.ModeGlobal {
		globalHit = L
	}
	e.evalPlan(v, i, req, ramPrefix, dst)
	if localHit > ramPrefix {
		e.evalPlan(v, i, req, localHit, scratch)
		if scratch.cost <= dst.cost {
			dst.copyFrom(scratch)
		}
	}
	if globalHit > localHit {
		e.evalPlan(v, i, req, globalHit, scratch)
		if scratch.cost <= dst.cost {
			dst.copyFrom(scratch)
		}
	}
	dst.skippedSSD = localHit > ramPrefix && dst.prefix < localHit
	dst.skippedRemote = globalHit > localHit && dst.prefix < globalHit
}

// evalPlan fills dst with the plan reusing the first prefix blocks.
func (e *estimator) evalPlan(v *view, i int, req *trace.Request, prefix int, dst *plan) {
	dst.reset(prefix)
	for j := range prefix {
		locs := v.reps[j]
		ram, ssd := v.localTiers(locs, i)
		switch {
		case ram:
			dst.localRAM++ // in the worker's own memory: reused, not read
		case ssd:
			dst.fetch = append(dst.fetch, fetchItem{j: j, src: i, tier: client.TierSSD})
		default:
			src, tier := v.remoteSource(locs, i)
			dst.fetch = append(dst.fetch, fetchItem{j: j, src: src, tier: tier})
		}
		dst.reused += min(trace.BlockTokens, req.InputLength-j*trace.BlockTokens)
	}
	dst.prefill = e.o.Profile.PrefillSeconds(req.InputLength, dst.reused)
	dst.transfer = e.transferEst(v, i, dst.fetch)
	dst.cost = dst.transfer + dst.prefill
}

// transferEst mirrors sim's estimate: per link, the plan's k flows get
// k/(active+k) of the capacity; the plan ends with its most loaded link.
// A flow is the blocks of one (source, tier).
func (e *estimator) transferEst(v *view, i int, items []fetchItem) float64 {
	type load struct{ bytes, flows float64 }
	links := map[int]*load{}
	seen := map[[2]int]bool{}
	add := func(l int, newFlow bool) {
		x := links[l]
		if x == nil {
			x = &load{}
			links[l] = x
		}
		x.bytes += e.blockBytes
		if newFlow {
			x.flows++
		}
	}
	for _, it := range items {
		remote := it.src != i
		key := [2]int{it.src, int(it.tier)}
		nf := !seen[key]
		seen[key] = true
		if it.tier == client.TierSSD {
			add(2*v.P+it.src, nf)
		}
		if remote {
			add(it.src, nf)
			add(v.P+i, nf)
		}
	}
	t := 0.0
	for l, x := range links {
		capacity := e.nicBps
		if l >= 2*v.P {
			capacity = e.ssdBps
		}
		share := capacity * x.flows / (float64(v.active[l]) + x.flows)
		t = max(t, x.bytes/share)
	}
	if math.IsNaN(t) {
		return math.Inf(1)
	}
	return t
}
