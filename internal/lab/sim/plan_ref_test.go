package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// This file keeps the planner's first, direct implementation (every
// instance planned in full, every holder list scanned per instance and
// block) as the reference the fast one must match bit for bit.

func refLocalTiers(hs []Holder, i int32) (ram, ssd bool) {
	for _, h := range hs {
		if h.Inst == i {
			if h.Tier == tierRAM {
				ram = true
			} else {
				ssd = true
			}
		}
	}
	return ram, ssd
}

func (p *Planner) refPlan(c Cluster, hs [][]Holder, i int, req *trace.Request, dst *Plan) {
	n := req.InputLength
	if !p.cached {
		dst.reset(0)
		dst.Prefill = p.o.Profile.PrefillSeconds(n, 0)
		dst.Cost = dst.Prefill
		dst.EstPrefill = dst.Prefill
		return
	}
	me := int32(i)
	ramPrefix, localHit := len(hs), len(hs)
	for j, h := range hs {
		ram, ssd := refLocalTiers(h, me)
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
	var cand Plan
	p.refEvalPlan(c, hs, i, req, ramPrefix, dst)
	if localHit > ramPrefix {
		p.refEvalPlan(c, hs, i, req, localHit, &cand)
		if cand.Cost <= dst.Cost {
			dst.copyFrom(&cand)
		}
	}
	if globalHit > localHit {
		p.refEvalPlan(c, hs, i, req, globalHit, &cand)
		if cand.Cost <= dst.Cost {
			dst.copyFrom(&cand)
		}
	}
	dst.SkippedSSD = localHit > ramPrefix && dst.Prefix < localHit
	dst.SkippedRemote = globalHit > localHit && dst.Prefix < globalHit
}

func (p *Planner) refEvalPlan(c Cluster, hs [][]Holder, i int, req *trace.Request, prefix int, dst *Plan) {
	dst.reset(prefix)
	me := int32(i)
	for j := range prefix {
		h := hs[j]
		tok := min(trace.BlockTokens, req.InputLength-j*trace.BlockTokens)
		var src Source
		switch ram, ssd := refLocalTiers(h, me); {
		case ram:
			src = LocalRAM
		case ssd:
			src = LocalSSD
			p.addFlow(dst, i, Holder{me, tierSSD}, false)
			dst.Fetches = append(dst.Fetches, Fetch{Block: j, From: Holder{me, tierSSD}})
		default:
			from := p.refRemoteSource(c, h, me)
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

func (p *Planner) refRemoteSource(c Cluster, hs []Holder, me int32) Holder {
	best, bestLoad := Holder{Inst: -1}, 0
	for _, h := range hs {
		if h.Inst == me {
			continue
		}
		load := c.Active(EgressLink(p.o.Instances, int(h.Inst)))
		if best.Inst < 0 || load < bestLoad ||
			(load == bestLoad && (h.Tier < best.Tier || (h.Tier == best.Tier && h.Inst < best.Inst))) {
			best, bestLoad = h, load
		}
	}
	return best
}

func (p *Planner) refRoute(c Cluster, hs [][]Holder, req *trace.Request, t float64, dst *Plan) (int, error) {
	P := p.o.Instances
	chosen := -1
	switch p.o.Routing {
	case RoutingRoundRobin:
		chosen = p.rr % P
		p.rr++
		p.refPlan(c, hs, chosen, req, dst)
	case RoutingLeastLoaded:
		bestQ := 0.0
		for i := range P {
			if q := c.QueueEst(i, t); chosen < 0 || q < bestQ {
				chosen, bestQ = i, q
			}
		}
		p.refPlan(c, hs, chosen, req, dst)
	case RoutingCacheAware, RoutingJoint:
		var pc PendingCluster
		if p.joint && p.cached {
			pc = c.(PendingCluster)
		}
		bestEst := 0.0
		var per Plan
		for i := range P {
			p.refPlan(c, hs, i, req, &per)
			if pc != nil {
				ext := per.Prefix
				for ext < len(req.HashIDs) && pc.WillHold(i, req.HashIDs[ext]) {
					ext++
				}
				if ext != per.Prefix {
					per.EstPrefill = p.o.Profile.PrefillSeconds(req.InputLength, min(ext*trace.BlockTokens, req.InputLength))
				}
			}
			if est := p.TTFTEst(c, i, &per, t); chosen < 0 || est < bestEst {
				chosen, bestEst = i, est
				dst.copyFrom(&per)
			}
		}
	default:
		return -1, fmt.Errorf("sim: unknown routing %q", p.o.Routing)
	}
	return chosen, nil
}

// fakeCluster is a Cluster in a fixed random state: few distinct values,
// so that ties are common.
type fakeCluster struct {
	active []int
	capac  []float64
	queue  []float64
	hold   []map[policy.Key]bool
}

func (f *fakeCluster) Active(l int) int                  { return f.active[l] }
func (f *fakeCluster) Capacity(l int) float64            { return f.capac[l] }
func (f *fakeCluster) QueueEst(i int, t float64) float64 { return f.queue[i] }
func (f *fakeCluster) WillHold(i int, k policy.Key) bool { return f.hold[i][k] }

// randomCase draws a cluster of P instances, a request and its holder
// lists: each instance holds a random RAM run of the leading blocks, and
// random other replicas in either tier.
func randomCase(rng *rand.Rand, P int) (*fakeCluster, [][]Holder, trace.Request) {
	f := &fakeCluster{active: make([]int, 3*P), capac: make([]float64, 3*P), queue: make([]float64, P), hold: make([]map[policy.Key]bool, P)}
	for l := range f.active {
		f.active[l] = rng.IntN(3)
		f.capac[l] = []float64{12.5e9, 12.5e9, 4e9, 1e8}[rng.IntN(4)]
	}
	blocks := 1 + rng.IntN(70)
	r := trace.Request{InputLength: blocks*trace.BlockTokens - rng.IntN(trace.BlockTokens)}
	for j := range blocks {
		r.HashIDs = append(r.HashIDs, uint64(1000+j))
	}
	for i := range P {
		f.queue[i] = []float64{0, 0, 0.5, 2, 30, -1e-17}[rng.IntN(6)]
		f.hold[i] = make(map[policy.Key]bool)
		for _, k := range r.HashIDs {
			if rng.IntN(3) == 0 {
				f.hold[i][k] = true
			}
		}
	}
	hs := make([][]Holder, blocks)
	for i := range P {
		run := 0
		if rng.IntN(2) == 0 {
			run = rng.IntN(blocks + 1)
		}
		for j := range blocks {
			ram := j < run || rng.IntN(8) == 0
			ssd := rng.IntN(6) == 0
			if ram {
				hs[j] = append(hs[j], Holder{int32(i), tierRAM})
			}
			if ssd {
				hs[j] = append(hs[j], Holder{int32(i), tierSSD})
			}
		}
	}
	for j := range hs {
		rng.Shuffle(len(hs[j]), func(a, b int) { hs[j][a], hs[j][b] = hs[j][b], hs[j][a] })
		if len(hs[j]) == 0 {
			hs = hs[:j]
			break
		}
	}
	return f, hs, r
}

func samePlan(a, b *Plan) bool {
	same := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	return a.Prefix == b.Prefix && a.ReusedTokens == b.ReusedTokens && a.HitTokens == b.HitTokens &&
		a.HitBlocks == b.HitBlocks && slices.Equal(a.Fetches, b.Fetches) && slices.Equal(a.flows, b.flows) &&
		same(a.Transfer, b.Transfer) && same(a.Prefill, b.Prefill) && same(a.Cost, b.Cost) &&
		same(a.EstPrefill, b.EstPrefill) && a.SkippedRemote == b.SkippedRemote && a.SkippedSSD == b.SkippedSSD
}

// TestPlannerMatchesReference checks that the planner decides exactly as
// the direct implementation: the same instance and the same plan, bit for
// bit, for every mode, routing and prefetch setting, over random clusters
// and holder lists.
func TestPlannerMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 5))
	cases := 0
	for _, mode := range Modes() {
		for _, routing := range Routings() {
			for _, noPrefetch := range []bool{false, true} {
				for n := range 300 {
					P := 1 + rng.IntN(12)
					f, hs, req := randomCase(rng, P)
					o := PlanOptions{Mode: mode, Routing: routing, Instances: P, Profile: prof, NoPrefetch: noPrefetch}
					if mode == ModeRecompute {
						hs = nil
					}
					fast, ref := NewPlanner(o), NewPlanner(o)
					fast.rr, ref.rr = n, n
					var got, want Plan
					gi, err := fast.Route(f, hs, &req, 1, &got)
					if err != nil {
						t.Fatal(err)
					}
					wi, _ := ref.refRoute(f, hs, &req, 1, &want)
					if gi != wi || !samePlan(&got, &want) {
						t.Fatalf("%s %s noPrefetch=%v case %d (P=%d, %d blocks held): routed to %d with\n%+v\nwant %d with\n%+v",
							mode, routing, noPrefetch, n, P, len(hs), gi, got, wi, want)
					}
					i := rng.IntN(P)
					fast.Plan(f, hs, i, &req, &got)
					ref.refPlan(f, hs, i, &req, &want)
					if !samePlan(&got, &want) {
						t.Fatalf("%s case %d: plan on %d\n%+v\nwant\n%+v", mode, n, i, got, want)
					}
					cases++
				}
			}
		}
	}
	t.Logf("%d cases", cases)
}
