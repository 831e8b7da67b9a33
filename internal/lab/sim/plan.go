package sim

import (
	"fmt"
	"math"

	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/lab/netshare"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// This file is the planner and router of the simulator and of the live
// replayer (package replay): both call it, each with its own Cluster, so
// the two can differ only in what really happens, never in what they
// decide.

// Tier is where on an instance a replica is, in the planner's order: RAM
// before SSD.
type Tier uint8

// The tiers.
const (
	TierRAM Tier = 0
	TierSSD Tier = 1
)

const (
	tierRAM = TierRAM
	tierSSD = TierSSD
)

// Holder is one replica of a block: a prefill instance and a tier.
type Holder struct {
	Inst int32
	Tier Tier
}

// holder is the simulator's name for a Holder.
type holder = Holder

// Link numbering of a cluster of P instances, as Cluster.Active and
// Cluster.Capacity take it: the egress of instance i is link i, its
// ingress P+i, its SSD 2P+i.

// EgressLink returns the link of instance i's egress.
func EgressLink(P, i int) int { return i }

// IngressLink returns the link of instance i's ingress.
func IngressLink(P, i int) int { return P + i }

// SSDLink returns the link of instance i's SSD.
func SSDLink(P, i int) int { return 2*P + i }

// Cluster is what planning and routing read of a cluster at one moment:
// the transfers in progress on each link, the links' capacities, and the
// queues. The simulator's state implements it, and so does the live
// replayer's view of a running cluster. Links are numbered as EgressLink,
// IngressLink and SSDLink say.
type Cluster interface {
	// Active returns the number of transfers in progress on link l.
	Active(l int) int
	// Capacity returns link l's bandwidth in model bytes per second.
	Capacity(l int) float64
	// QueueEst returns how long a request arriving at model time t at
	// instance i would wait to reach the head of its queue (model
	// seconds): the estimated service of the waiting requests plus the
	// rest of the running one.
	QueueEst(i int, t float64) float64
}

// PendingCluster is a Cluster that joint routing can use: it also knows
// which blocks instance i will hold in RAM when a request routed there
// now reaches the head of its queue (those in its RAM now, and those a
// request queued or running there will store first).
type PendingCluster interface {
	Cluster
	WillHold(i int, k policy.Key) bool
}

// Fetch is one prefix block a plan loads: block Block of the request,
// from From (the instance itself for a local SSD block).
type Fetch struct {
	Block int
	From  Holder
}

// flowSpec is one transfer of a plan: the blocks of one (source, tier).
type flowSpec struct {
	src    int32
	tier   Tier
	remote bool
	blocks int
	nlinks int
	links  [netshare.MaxLinks]int
}

// Plan is how a request would run on one instance: which prefix blocks it
// reuses from where, the transfers that needs, and the estimated times
// (model seconds). Planner.Plan and Planner.Route fill it; reuse one Plan
// across calls to keep its slices.
type Plan struct {
	// Prefix is the number of leading blocks reused; ReusedTokens their
	// tokens.
	Prefix       int
	ReusedTokens int
	// HitTokens and HitBlocks count the reused prefix by source.
	HitTokens [numSources]int
	HitBlocks [numSources]int
	// Fetches lists the prefix blocks to load, in block order: every
	// prefix block except those in the instance's own RAM.
	Fetches []Fetch
	// Transfer is the estimated transfer time at the current link loads,
	// Prefill the prefill time of the rest (exact), Cost their sum.
	Transfer, Prefill, Cost float64
	// EstPrefill is the prefill time routing expects: Prefill, or less
	// when joint routing expects a longer prefix at the head of the queue.
	EstPrefill float64
	// SkippedRemote and SkippedSSD report that a longer prefix held on
	// another instance, or on the local SSD, was cheaper to recompute.
	SkippedRemote, SkippedSSD bool

	flows []flowSpec
}

func (p *Plan) reset(prefix int) {
	flows, fetches := p.flows[:0], p.Fetches[:0]
	*p = Plan{Prefix: prefix, flows: flows, Fetches: fetches}
}

func (p *Plan) copyFrom(q *Plan) {
	flows := append(p.flows[:0], q.flows...)
	fetches := append(p.Fetches[:0], q.Fetches...)
	*p = *q
	p.flows, p.Fetches = flows, fetches
}

// Flows returns the number of transfers of the plan: one per (source,
// tier) of its fetches.
func (p *Plan) Flows() int { return len(p.flows) }

// AppendLinks appends to dst the links each transfer of the plan crosses,
// transfer by transfer (a link crossed by k transfers appears k times),
// and returns it: what to count as active while the plan's transfers run.
func (p *Plan) AppendLinks(dst []int) []int {
	for fi := range p.flows {
		f := &p.flows[fi]
		dst = append(dst, f.links[:f.nlinks]...)
	}
	return dst
}

// linkLoad aggregates a plan's transfers on one link.
type linkLoad struct {
	link  int
	bytes float64
	flows int
}

// PlanOptions configure a Planner. Mode, Routing, Instances and Profile
// are required (see Options for their meaning).
type PlanOptions struct {
	Mode      Mode
	Routing   Routing
	Instances int
	Profile   costmodel.Profile
	// NoPrefetch: a request's transfer starts at the head of its queue
	// (it adds to the queue rather than overlapping it).
	NoPrefetch bool
	// Reject turns on admission control: Admit refuses a request whose
	// estimated TTFT exceeds SLOSeconds.
	Reject     bool
	SLOSeconds float64
}

// Planner makes the plans and the routing and admission decisions of
// one run. It is not safe for concurrent use: the simulator drives it
// from its event loop, the live replayer under its lock.
type Planner struct {
	o          PlanOptions
	blockBytes int64
	cached     bool // mode is local or global
	global     bool
	joint      bool
	rr         int

	// Scratch.
	cand, perInst Plan
	agg           []linkLoad
	view          holderView
	// The plain plans of the request being routed, by RAM run length
	// (plainAt), and its global prefix's prefill.
	plains   []plainPlan
	prefillG float64
}

// plainPlan is what the plans of a plain instance (holderView.plainRun)
// whose RAM run is r blocks share with every plain instance of the same
// run: the prefill of the run and, when the global prefix is longer, the
// transfer of the rest from its sources, split into the estimate on every
// link but the instance's ingress and the load the ingress takes.
type plainPlan struct {
	ok      bool
	prefill float64 // PrefillSeconds of the run
	global  bool    // the global prefix is longer than the run
	common  float64 // transferEst's maximum over every link but the ingress
	inBytes float64 // bytes the transfers bring in through the ingress
	inFlows int     // transfers crossing the ingress
}

// NewPlanner returns a planner for o.
func NewPlanner(o PlanOptions) *Planner {
	return &Planner{
		o:          o,
		blockBytes: o.Profile.BlockBytes(),
		cached:     o.Mode != ModeRecompute,
		global:     o.Mode == ModeGlobal,
		joint:      o.Routing == RoutingJoint,
	}
}

// Plan fills dst with the plan for req on instance i, given hs (the
// holders of its leading blocks, up to the first block held nowhere).
// See the package comment, "Fetch or recompute". It costs O(holders in
// hs + blocks).
func (p *Planner) Plan(c Cluster, hs [][]Holder, i int, req *trace.Request, dst *Plan) {
	if p.cached {
		p.view.load(hs, p.o.Instances)
	}
	p.plan(c, i, req, dst)
}

// plan is Plan on the holders of p.view (loaded by the caller).
func (p *Planner) plan(c Cluster, i int, req *trace.Request, dst *Plan) {
	n := req.InputLength
	if !p.cached {
		dst.reset(0)
		dst.Prefill = p.o.Profile.PrefillSeconds(n, 0)
		dst.Cost = dst.Prefill
		dst.EstPrefill = dst.Prefill
		return
	}
	hs := p.view.hs
	ramPrefix, localHit := len(hs), len(hs)
	for j := range hs {
		ram, ssd := p.view.tiers(i, j)
		if !ram && ramPrefix == len(hs) {
			ramPrefix = j
		}
		if !ram && !ssd {
			localHit = j
			break
		}
	}
	globalHit := localHit
	if p.global {
		globalHit = len(hs)
	}

	p.evalPlan(c, i, req, ramPrefix, dst)
	if localHit > ramPrefix {
		p.evalPlan(c, i, req, localHit, &p.cand)
		if p.cand.Cost <= dst.Cost {
			dst.copyFrom(&p.cand)
		}
	}
	if globalHit > localHit {
		p.evalPlan(c, i, req, globalHit, &p.cand)
		if p.cand.Cost <= dst.Cost {
			dst.copyFrom(&p.cand)
		}
	}
	dst.SkippedSSD = localHit > ramPrefix && dst.Prefix < localHit
	dst.SkippedRemote = globalHit > localHit && dst.Prefix < globalHit
}

// evalPlan fills dst with the plan that reuses the first prefix blocks of
// req on instance i (all of which are held somewhere, as p.view says).
func (p *Planner) evalPlan(c Cluster, i int, req *trace.Request, prefix int, dst *Plan) {
	dst.reset(prefix)
	me := int32(i)
	for j := range prefix {
		tok := min(trace.BlockTokens, req.InputLength-j*trace.BlockTokens)
		var src Source
		switch ram, ssd := p.view.tiers(i, j); {
		case ram:
			src = LocalRAM
		case ssd:
			src = LocalSSD
			p.addFlow(dst, i, Holder{me, tierSSD}, false)
			dst.Fetches = append(dst.Fetches, Fetch{Block: j, From: Holder{me, tierSSD}})
		default:
			from := p.view.source(p, c, j)
			src = RemoteRAM
			if from.Tier == tierSSD {
				src = RemoteSSD
			}
			p.addFlow(dst, i, from, true)
			dst.Fetches = append(dst.Fetches, Fetch{Block: j, From: from})
		}
		dst.HitTokens[src] += tok
		dst.HitBlocks[src]++
		dst.ReusedTokens += tok
	}
	dst.Prefill = p.o.Profile.PrefillSeconds(req.InputLength, dst.ReusedTokens)
	dst.Transfer = p.transferEst(c, dst.flows)
	dst.Cost = dst.Transfer + dst.Prefill
	dst.EstPrefill = dst.Prefill
}

// remoteSource picks the holder an instance holding none of hs's
// replicas fetches from: the fewest active egress transfers, then RAM
// before SSD, then the lowest index.
func (p *Planner) remoteSource(c Cluster, hs []Holder) Holder {
	best, bestLoad := Holder{Inst: -1}, 0
	for _, h := range hs {
		load := c.Active(EgressLink(p.o.Instances, int(h.Inst)))
		if best.Inst < 0 || load < bestLoad ||
			(load == bestLoad && (h.Tier < best.Tier || (h.Tier == best.Tier && h.Inst < best.Inst))) {
			best, bestLoad = h, load
		}
	}
	return best
}

// addFlow adds one block from h to dst's transfers into instance i.
func (p *Planner) addFlow(dst *Plan, i int, h Holder, remote bool) {
	for fi := range dst.flows {
		if f := &dst.flows[fi]; f.src == h.Inst && f.tier == h.Tier && f.remote == remote {
			f.blocks++
			return
		}
	}
	P := p.o.Instances
	f := flowSpec{src: h.Inst, tier: h.Tier, remote: remote, blocks: 1}
	add := func(l int) { f.links[f.nlinks] = l; f.nlinks++ }
	if h.Tier == tierSSD {
		add(SSDLink(P, int(h.Inst)))
	}
	if remote {
		add(EgressLink(P, int(h.Inst)))
		add(IngressLink(P, i))
	}
	dst.flows = append(dst.flows, f)
}

// transferEst estimates how long flows would take if started now: on each
// link, the plan's k flows get k/(active+k) of the capacity, and the plan
// finishes when its most loaded link does.
func (p *Planner) transferEst(c Cluster, flows []flowSpec) float64 {
	if len(flows) == 0 {
		return 0
	}
	p.aggregate(flows)
	t := 0.0
	for _, a := range p.agg {
		k := float64(a.flows)
		share := c.Capacity(a.link) * k / (float64(c.Active(a.link)) + k)
		t = max(t, a.bytes/share)
	}
	if math.IsNaN(t) {
		return math.Inf(1)
	}
	return t
}

// aggregate sets p.agg to the bytes and flows of flows on each link they
// cross, links in order of first use.
func (p *Planner) aggregate(flows []flowSpec) {
	p.agg = p.agg[:0]
	for fi := range flows {
		f := &flows[fi]
		bytes := float64(f.blocks) * float64(p.blockBytes)
	links:
		for _, l := range f.links[:f.nlinks] {
			for a := range p.agg {
				if p.agg[a].link == l {
					p.agg[a].bytes += bytes
					p.agg[a].flows++
					continue links
				}
			}
			p.agg = append(p.agg, linkLoad{link: l, bytes: bytes, flows: 1})
		}
	}
}

// transferParts is transferEst for remote flows into one instance, split
// at that instance's ingress link in: the maximum over every other link
// (NaN if one is), and the bytes and flows on in. transferEst of the same
// flows is max(common, inBytes/share of in), or +Inf if that is NaN.
func (p *Planner) transferParts(c Cluster, flows []flowSpec, in int) (common, inBytes float64, inFlows int) {
	p.aggregate(flows)
	for _, a := range p.agg {
		if a.link == in {
			inBytes, inFlows = a.bytes, a.flows
			continue
		}
		k := float64(a.flows)
		share := c.Capacity(a.link) * k / (float64(c.Active(a.link)) + k)
		common = max(common, a.bytes/share)
	}
	return common, inBytes, inFlows
}

// TTFTEst estimates the TTFT of plan pl on instance i for a request
// arriving at t: its queue and its transfer overlap with prefetch, add up
// without.
func (p *Planner) TTFTEst(c Cluster, i int, pl *Plan, t float64) float64 {
	return p.ttft(c.QueueEst(i, t), pl.Transfer, pl.EstPrefill)
}

// ttft is TTFTEst of a plan with transfer estimate x and expected prefill
// e on an instance whose queue estimate is q.
func (p *Planner) ttft(q, x, e float64) float64 {
	if p.o.NoPrefetch {
		return q + x + e
	}
	return max(q, x) + e
}

// Route chooses the instance of req arriving at t by the routing policy
// and fills dst with its plan there, given hs (the holders of req's
// leading blocks): rr takes instances in turn; least-loaded the shortest
// queue estimate; cache-aware (Mooncake's Algorithm 1) and joint the
// lowest estimated TTFT, joint also counting, through PendingCluster, the
// blocks pending on each instance. Ties go to the lowest index.
func (p *Planner) Route(c Cluster, hs [][]Holder, req *trace.Request, t float64, dst *Plan) (int, error) {
	P := p.o.Instances
	chosen := -1
	switch p.o.Routing {
	case RoutingRoundRobin:
		chosen = p.rr % P
		p.rr++
		p.Plan(c, hs, chosen, req, dst)
	case RoutingLeastLoaded:
		bestQ := 0.0
		for i := range P {
			if q := c.QueueEst(i, t); chosen < 0 || q < bestQ {
				chosen, bestQ = i, q
			}
		}
		p.Plan(c, hs, chosen, req, dst)
	case RoutingCacheAware, RoutingJoint:
		// Joint routing counts pending blocks only where blocks are
		// cached: in recompute mode it is cache-aware routing.
		var pc PendingCluster
		if p.joint && p.cached {
			var ok bool
			if pc, ok = c.(PendingCluster); !ok {
				return -1, fmt.Errorf("sim: joint routing of request at %g s: the cluster does not report pending blocks", t)
			}
		}
		// A plain instance's estimate comes from the plans it shares
		// with every plain instance of its RAM run (plainEst, O(1));
		// the others are planned in full. The chosen one is planned
		// again into dst: Plan depends only on c, hs and i, which do
		// not change here.
		if p.cached {
			p.view.load(hs, P)
			p.startPlain(req)
		}
		bestEst := 0.0
		for i := range P {
			r, plain := 0, false
			if p.cached {
				r, plain = p.view.plainRun(i)
			}
			var est float64
			if plain {
				est = p.plainEst(c, pc, i, r, req, t)
			} else {
				p.plan(c, i, req, &p.perInst)
				if pc != nil {
					p.extendPending(pc, i, req, &p.perInst)
				}
				est = p.TTFTEst(c, i, &p.perInst, t)
			}
			if chosen < 0 || est < bestEst {
				chosen, bestEst = i, est
			}
		}
		p.plan(c, chosen, req, dst)
		if pc != nil {
			p.extendPending(pc, chosen, req, dst)
		}
	default:
		return -1, fmt.Errorf("sim: unknown routing %q", p.o.Routing)
	}
	return chosen, nil
}

// extendPending lowers plan pl's expected prefill on instance i to what
// the request will find at the head of i's queue: past the planned
// prefix, every leading block c says i will hold then.
func (p *Planner) extendPending(c PendingCluster, i int, req *trace.Request, pl *Plan) {
	pl.EstPrefill = p.pendingPrefill(c, i, req, pl.Prefix, pl.EstPrefill)
}

// pendingPrefill returns the expected prefill on instance i of req with
// a plan of prefix blocks and expected prefill e, extended as
// extendPending says.
func (p *Planner) pendingPrefill(c PendingCluster, i int, req *trace.Request, prefix int, e float64) float64 {
	keys := req.HashIDs
	ext := prefix
	for ext < len(keys) && c.WillHold(i, keys[ext]) {
		ext++
	}
	if ext == prefix {
		return e
	}
	return p.o.Profile.PrefillSeconds(req.InputLength, min(ext*trace.BlockTokens, req.InputLength))
}

// startPlain forgets the plain plans of the previous request and
// computes req's global prefix prefill.
func (p *Planner) startPlain(req *trace.Request) {
	g := len(p.view.hs)
	p.plains = append(p.plains[:0], make([]plainPlan, g+1)...)
	if p.global && g > 0 {
		p.prefillG = p.o.Profile.PrefillSeconds(req.InputLength, prefixTokens(req, g))
	}
}

// prefixTokens returns the tokens of req's first prefix blocks, summed
// as evalPlan sums them.
func prefixTokens(req *trace.Request, prefix int) int {
	n := 0
	for j := range prefix {
		n += min(trace.BlockTokens, req.InputLength-j*trace.BlockTokens)
	}
	return n
}

// plainAt returns the shared plans of plain instances with a RAM run of r
// blocks, computing them on first use: evalPlan of the run (no transfer)
// and, in global mode, of the global prefix, whose blocks past the run
// all come from their sources (holderView.source), into any instance.
func (p *Planner) plainAt(c Cluster, req *trace.Request, r int) *plainPlan {
	pp := &p.plains[r]
	if pp.ok {
		return pp
	}
	pp.ok = true
	pp.prefill = p.o.Profile.PrefillSeconds(req.InputLength, prefixTokens(req, r))
	g := len(p.view.hs)
	if !p.global || g <= r {
		return pp
	}
	pp.global = true
	const into = 0 // any instance: only its ingress link differs
	dst := &p.cand
	dst.reset(g)
	for j := r; j < g; j++ {
		p.addFlow(dst, into, p.view.source(p, c, j), true)
	}
	pp.common, pp.inBytes, pp.inFlows = p.transferParts(c, dst.flows, IngressLink(p.o.Instances, into))
	return pp
}

// plainEst returns TTFTEst of plain instance i's plan (its RAM run is r
// blocks) for req arriving at t, joint routing's pending blocks counted
// when pc is not nil, exactly as Plan, extendPending and TTFTEst would
// compute it, in O(1) besides pc: the plan of the run costs the run's
// prefill; the global plan, taken when its transfer plus prefill is no
// more, transfers what every plain instance of the run does, on i's own
// ingress link.
func (p *Planner) plainEst(c Cluster, pc PendingCluster, i, r int, req *trace.Request, t float64) float64 {
	pp := p.plainAt(c, req, r)
	prefix, x, e := r, 0.0, pp.prefill
	if pp.global {
		l := IngressLink(p.o.Instances, i)
		k := float64(pp.inFlows)
		share := c.Capacity(l) * k / (float64(c.Active(l)) + k)
		xg := max(pp.common, pp.inBytes/share)
		if math.IsNaN(xg) {
			xg = math.Inf(1)
		}
		if xg+p.prefillG <= pp.prefill {
			prefix, x, e = len(p.view.hs), xg, p.prefillG
		}
	}
	if pc != nil {
		e = p.pendingPrefill(pc, i, req, prefix, e)
	}
	return p.ttft(c.QueueEst(i, t), x, e)
}

// Admit reports whether a request routed to instance i with plan pl at t
// is served: always, unless Reject is on and its estimated TTFT exceeds
// the SLO (Algorithm 1's rejection).
func (p *Planner) Admit(c Cluster, i int, pl *Plan, t float64) bool {
	return !p.o.Reject || !(p.TTFTEst(c, i, pl, t) > p.o.SLOSeconds)
}

// EstService returns the service time a queue estimate counts for a
// request with plan pl: its expected prefill, plus its transfer when the
// transfer starts only at the head of the queue (NoPrefetch).
func (p *Planner) EstService(pl *Plan) float64 {
	if p.o.NoPrefetch {
		return pl.EstPrefill + pl.Transfer
	}
	return pl.EstPrefill
}
