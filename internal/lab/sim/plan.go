package sim

import (
	"math"

	"github.com/kvpool/kvpool/internal/lab/netshare"
	"github.com/kvpool/kvpool/trace"
)

// flowSpec is one transfer of a plan: the blocks of one (source, tier).
type flowSpec struct {
	src    int32
	tier   uint8
	remote bool
	blocks int
	nlinks int
	links  [netshare.MaxLinks]int
}

// plan is how a request would run on one instance: which prefix blocks it
// reuses from where, the transfers that needs, and the estimated times.
type plan struct {
	prefix       int // blocks reused
	reusedTokens int
	hitTokens    [numSources]int
	hitBlocks    [numSources]int
	flows        []flowSpec
	transfer     float64 // estimated transfer time at the current shares
	prefill      float64 // prefill time of the rest (exact)
	cost         float64 // transfer + prefill
	// estPrefill is the prefill time routing expects: prefill, or less
	// when joint routing expects a longer prefix at the head of the queue.
	estPrefill float64

	skippedRemote, skippedSSD bool
}

func (p *plan) reset(prefix int) {
	flows := p.flows[:0]
	*p = plan{prefix: prefix, flows: flows}
}

func (p *plan) copyFrom(q *plan) {
	flows := append(p.flows[:0], q.flows...)
	*p = *q
	p.flows = flows
}

// linkLoad aggregates a plan's transfers on one link.
type linkLoad struct {
	link  int
	bytes float64
	flows int
}

// localTiers reports whether instance i holds a block with holders hs in
// RAM and in SSD.
func localTiers(hs []holder, i int32) (ram, ssd bool) {
	for _, h := range hs {
		if h.inst == i {
			if h.tier == tierRAM {
				ram = true
			} else {
				ssd = true
			}
		}
	}
	return ram, ssd
}

// makePlan fills dst with the plan for req on instance i, given s.hsl (the
// holders of its leading blocks). See the package comment, "Fetch or
// recompute".
func (s *simulator) makePlan(i int, req *trace.Request, dst *plan) {
	n := req.InputLength
	if !s.cached {
		dst.reset(0)
		dst.prefill = s.prof.PrefillSeconds(n, 0)
		dst.cost = dst.prefill
		dst.estPrefill = dst.prefill
		return
	}
	me := int32(i)
	ramPrefix, localHit := len(s.hsl), len(s.hsl)
	for j, hs := range s.hsl {
		ram, ssd := localTiers(hs, me)
		if !ram && ramPrefix == len(s.hsl) {
			ramPrefix = j
		}
		if !ram && !ssd {
			localHit = j
			break
		}
	}
	globalHit := localHit
	if s.opts.Mode == ModeGlobal {
		globalHit = len(s.hsl)
	}

	s.evalPlan(i, req, ramPrefix, dst)
	if localHit > ramPrefix {
		s.evalPlan(i, req, localHit, &s.cand)
		if s.cand.cost <= dst.cost {
			dst.copyFrom(&s.cand)
		}
	}
	if globalHit > localHit {
		s.evalPlan(i, req, globalHit, &s.cand)
		if s.cand.cost <= dst.cost {
			dst.copyFrom(&s.cand)
		}
	}
	dst.skippedSSD = localHit > ramPrefix && dst.prefix < localHit
	dst.skippedRemote = globalHit > localHit && dst.prefix < globalHit
}

// evalPlan fills dst with the plan that reuses the first prefix blocks of
// req on instance i (all of which are held somewhere).
func (s *simulator) evalPlan(i int, req *trace.Request, prefix int, dst *plan) {
	dst.reset(prefix)
	me := int32(i)
	for j := range prefix {
		hs := s.hsl[j]
		tok := min(trace.BlockTokens, req.InputLength-j*trace.BlockTokens)
		var src Source
		switch ram, ssd := localTiers(hs, me); {
		case ram:
			src = LocalRAM
		case ssd:
			src = LocalSSD
			s.addFlow(dst, i, holder{me, tierSSD}, false)
		default:
			h := s.remoteSource(hs, me)
			src = RemoteRAM
			if h.tier == tierSSD {
				src = RemoteSSD
			}
			s.addFlow(dst, i, h, true)
		}
		dst.hitTokens[src] += tok
		dst.hitBlocks[src]++
		dst.reusedTokens += tok
	}
	dst.prefill = s.prof.PrefillSeconds(req.InputLength, dst.reusedTokens)
	dst.transfer = s.transferEst(dst.flows)
	dst.cost = dst.transfer + dst.prefill
	dst.estPrefill = dst.prefill
}

// remoteSource picks the holder to fetch from among hs, excluding instance
// me: the fewest active egress transfers, then RAM before SSD, then the
// lowest index.
func (s *simulator) remoteSource(hs []holder, me int32) holder {
	best, bestLoad := holder{inst: -1}, 0
	for _, h := range hs {
		if h.inst == me {
			continue
		}
		load := s.net.Active(s.egress(int(h.inst)))
		if best.inst < 0 || load < bestLoad ||
			(load == bestLoad && (h.tier < best.tier || (h.tier == best.tier && h.inst < best.inst))) {
			best, bestLoad = h, load
		}
	}
	return best
}

// addFlow adds one block from h to dst's transfers into instance i.
func (s *simulator) addFlow(dst *plan, i int, h holder, remote bool) {
	for fi := range dst.flows {
		if f := &dst.flows[fi]; f.src == h.inst && f.tier == h.tier && f.remote == remote {
			f.blocks++
			return
		}
	}
	f := flowSpec{src: h.inst, tier: h.tier, remote: remote, blocks: 1}
	add := func(l int) { f.links[f.nlinks] = l; f.nlinks++ }
	if h.tier == tierSSD {
		add(s.ssdLink(int(h.inst)))
	}
	if remote {
		add(s.egress(int(h.inst)))
		add(s.ingress(i))
	}
	dst.flows = append(dst.flows, f)
}

// transferEst estimates how long flows would take if started now: on each
// link, the plan's k flows get k/(active+k) of the capacity, and the plan
// finishes when its most loaded link does.
func (s *simulator) transferEst(flows []flowSpec) float64 {
	if len(flows) == 0 {
		return 0
	}
	s.agg = s.agg[:0]
	for fi := range flows {
		f := &flows[fi]
		bytes := float64(f.blocks) * float64(s.blockBytes)
	links:
		for _, l := range f.links[:f.nlinks] {
			for a := range s.agg {
				if s.agg[a].link == l {
					s.agg[a].bytes += bytes
					s.agg[a].flows++
					continue links
				}
			}
			s.agg = append(s.agg, linkLoad{link: l, bytes: bytes, flows: 1})
		}
	}
	t := 0.0
	for _, a := range s.agg {
		k := float64(a.flows)
		share := s.net.Capacity(a.link) * k / (float64(s.net.Active(a.link)) + k)
		t = max(t, a.bytes/share)
	}
	if math.IsNaN(t) {
		return math.Inf(1)
	}
	return t
}
