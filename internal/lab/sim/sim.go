package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/lab/netshare"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// timeShift leaves room below each block position for the SSD inserts
// (demotions) made while that block is accessed, so every cache sees
// strictly increasing Access.Time (2^20 > any cache capacity in blocks we
// run; positions stay below 2^43).
const timeShift = 20

// ctxCheckEvery is how many events run between checks of ctx: often enough
// to stop within milliseconds, rarely enough to cost nothing.
const ctxCheckEvery = 4096

// blockIndex maps a key to every replica of it. Each change costs
// O(replicas of that key).
type blockIndex map[policy.Key][]holder

func (x blockIndex) add(k policy.Key, h holder) {
	hs := x[k]
	if slices.Contains(hs, h) {
		return
	}
	x[k] = append(hs, h)
}

func (x blockIndex) remove(k policy.Key, h holder) {
	hs := x[k]
	i := slices.Index(hs, h)
	if i < 0 {
		return
	}
	hs[i] = hs[len(hs)-1]
	hs = hs[:len(hs)-1]
	if len(hs) == 0 {
		delete(x, k)
		return
	}
	x[k] = hs
}

// instance is one prefill instance.
type instance struct {
	ram, ssd *policy.Cache
	queue    []int32 // waiting requests (sorted indices); queue[head:] are live
	head     int
	cur      int32 // request at the head (transferring or prefilling), -1 if idle
	waiting  bool  // cur waits for its transfer
	// waitSum is the estimated service time of the waiting requests;
	// curEstEnd the estimated end of cur's prefill.
	waitSum   float64
	curEstEnd float64

	// Joint state (see joint.go); nil or zero unless its option is on.
	// clock is the last Access.Time given to the RAM cache.
	clock   int64
	pending map[policy.Key]int32 // keys of requests routed here and not yet stored
	last    map[policy.Key]int64 // RAM-resident key → its last local access time
	red     redundantQueue       // candidate redundant replicas, oldest first
}

// reqState is the in-flight state of one request.
type reqState struct {
	inst          int32
	pending       int32 // transfers not yet finished
	reusedTokens  int
	reusedBlocks  int
	transferStart float64
	transferEnd   float64
	transferEst   float64
	estService    float64
	headAt        float64
}

// event is a prefill completion.
type event struct {
	t    float64
	seq  uint64
	inst int32
}

// eventHeap is a binary min-heap of events by (t, seq).
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	return h[i].t < h[j].t || (h[i].t == h[j].t && h[i].seq < h[j].seq)
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, m) {
			m = l
		}
		if r < len(s) && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// simulator is one run's state. It is not safe for concurrent use.
type simulator struct {
	opts       Options
	prof       costmodel.Profile
	blockBytes int64
	cached     bool // mode is local or global

	reqs    []trace.Request
	order   []int     // sorted index → index in reqs
	arrival []float64 // by sorted index
	pos     []int64   // by sorted index: trace position of its first block

	// Oracle support (only when the policy needs the future).
	future    bool
	nextUse   []int64                // by position: shifted position of the next access, or NoNextUse
	positions map[policy.Key][]int64 // key → its positions, increasing

	inst   []instance
	net    *netshare.Network
	idx    blockIndex
	events eventHeap
	seq    uint64
	plan   *Planner

	rs      []reqState
	records []Record // by sorted index

	// Current RAM access, for demotions made during it.
	curPos     int64
	curTime    int64
	demotions  int64
	bytesWrite int64

	fetchesSkipped, ssdSkipped int

	// Joint mechanisms (joint.go).
	joint, hotRepl, redFirst bool
	asks                     map[policy.Key]int32 // requests that asked for a key so far (ReplicateHot)
	replicasSkipped          int64
	redundantEvictions       int64
	lateBlocks               int64

	// Scratch.
	hsl  [][]holder
	best Plan
	done []int
}

// Run simulates reqs (in any order; replayed sorted by timestamp, ties in
// slice order) on the cluster described by opts and returns a record per
// request and the summary. It returns an error for invalid options or
// requests (naming the field or the request index) and when ctx is done.
func Run(ctx context.Context, reqs []trace.Request, opts Options) (*Result, error) {
	s, err := newSimulator(reqs, opts)
	if err != nil {
		return nil, err
	}
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	return s.result(), nil
}

// newSimulator checks the options and the trace and builds the simulator:
// the planner, the arrival order, the network and, when blocks are cached,
// the caches and the index.
func newSimulator(reqs []trace.Request, opts Options) (*simulator, error) {
	spec, err := opts.validate()
	if err != nil {
		return nil, err
	}
	if err := checkRequests(reqs); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	P := opts.Instances
	s := &simulator{
		opts:       opts,
		prof:       opts.Profile,
		blockBytes: opts.Profile.BlockBytes(),
		cached:     opts.Mode != ModeRecompute,
		reqs:       reqs,
		inst:       make([]instance, P),
		rs:         make([]reqState, len(reqs)),
		records:    make([]Record, len(reqs)),
	}

	s.plan = NewPlanner(PlanOptions{Mode: opts.Mode, Routing: opts.Routing, Instances: P, Profile: opts.Profile,
		NoPrefetch: opts.NoPrefetch, Reject: opts.Reject, SLOSeconds: opts.SLOSeconds})
	blocks := s.orderArrivals()
	if err := s.buildNetwork(); err != nil {
		return nil, err
	}
	if err := s.buildCaches(spec); err != nil {
		return nil, err
	}
	if s.cached {
		s.idx = make(blockIndex)
		if spec.NeedsFuture() {
			s.buildFuture(blocks)
		}
		s.initJoint()
	}
	return s, nil
}

// checkRequests refuses an empty trace and requests the simulator cannot
// run: a non-positive input length, or hash_ids that do not cover the
// input's blocks.
func checkRequests(reqs []trace.Request) error {
	if len(reqs) == 0 {
		return errors.New("sim: no requests to simulate")
	}
	for i := range reqs {
		r := &reqs[i]
		if r.InputLength <= 0 {
			return fmt.Errorf("sim: request %d: input_length %d is not positive", i, r.InputLength)
		}
		if want := trace.Blocks(r.InputLength); len(r.HashIDs) != want {
			return fmt.Errorf("sim: request %d: %d hash_ids for %d input tokens, want %d",
				i, len(r.HashIDs), r.InputLength, want)
		}
	}
	return nil
}

// orderArrivals sorts the requests by timestamp (stably) into s.order and
// fills s.arrival (seconds after the first request, scaled by the rate
// multiplier) and s.pos (each request's first block in the concatenated
// block stream). It returns the total number of blocks.
func (s *simulator) orderArrivals() int64 {
	reqs := s.reqs
	s.order = make([]int, len(reqs))
	for i := range s.order {
		s.order[i] = i
	}
	slices.SortStableFunc(s.order, func(a, b int) int {
		return cmp.Compare(reqs[a].Timestamp, reqs[b].Timestamp)
	})
	t0 := reqs[s.order[0]].Timestamp
	s.arrival = make([]float64, len(reqs))
	s.pos = make([]int64, len(reqs))
	var p int64
	for k, i := range s.order {
		s.arrival[k] = float64(reqs[i].Timestamp-t0) / 1000 / s.opts.RateMultiplier
		s.pos[k] = p
		p += int64(len(reqs[i].HashIDs))
	}
	return p
}

// buildNetwork builds the links of every instance: NIC egress and
// ingress, and the SSD link.
func (s *simulator) buildNetwork() error {
	P := s.opts.Instances
	caps := make([]float64, 3*P)
	for i := range P {
		caps[s.egress(i)] = s.opts.nicBytesPerSec()
		caps[s.ingress(i)] = s.opts.nicBytesPerSec()
		caps[s.ssdLink(i)] = s.opts.ssdBytesPerSec()
	}
	net, err := netshare.New(caps)
	if err != nil {
		return fmt.Errorf("sim: build network: %w", err)
	}
	s.net = net
	return nil
}

// buildCaches resets every instance and, when blocks are cached, gives it
// its RAM (and SSD) cache of spec's policy and hooks its evictions.
func (s *simulator) buildCaches(spec policy.Spec) error {
	for i := range s.inst {
		in := &s.inst[i]
		in.cur = -1
		if !s.cached {
			continue
		}
		var err error
		if in.ram, err = spec.NewCache(s.opts.RAMBlocks); err != nil {
			return fmt.Errorf("sim: RAM cache of instance %d: %w", i, err)
		}
		if s.opts.SSDBlocks > 0 {
			if in.ssd, err = spec.NewCache(s.opts.SSDBlocks); err != nil {
				return fmt.Errorf("sim: SSD cache of instance %d: %w", i, err)
			}
		}
		s.hookEvictions(i)
	}
	return nil
}

// Link numbering: egress of i, ingress of i, SSD of i (EgressLink,
// IngressLink, SSDLink).
func (s *simulator) egress(i int) int  { return EgressLink(s.opts.Instances, i) }
func (s *simulator) ingress(i int) int { return IngressLink(s.opts.Instances, i) }
func (s *simulator) ssdLink(i int) int { return SSDLink(s.opts.Instances, i) }

// The simulator is the planner's Cluster: its network and its queues.
var _ PendingCluster = (*simulator)(nil)

// Active returns the transfers in progress on link l.
func (s *simulator) Active(l int) int { return s.net.Active(l) }

// Capacity returns link l's bandwidth (model bytes per second).
func (s *simulator) Capacity(l int) float64 { return s.net.Capacity(l) }

// QueueEst is queueEst.
func (s *simulator) QueueEst(i int, t float64) float64 { return s.queueEst(i, t) }

// WillHold reports whether instance i will hold k in RAM when a request
// routed there now reaches the head: k is in its RAM or pending there (a
// request queued or running there will store it first, since the queue
// is FIFO).
func (s *simulator) WillHold(i int, k policy.Key) bool {
	in := &s.inst[i]
	return in.ram.Contains(k) || in.pending[k] > 0
}

// hookEvictions wires instance i's caches to the index and the demotion
// path.
func (s *simulator) hookEvictions(i int) {
	in := &s.inst[i]
	ssdHolder := holder{int32(i), tierSSD}
	in.ram.OnEvict = func(k policy.Key) { s.ramEvicted(i, k) }
	if in.ssd != nil {
		in.ssd.OnEvict = func(k policy.Key) { s.idx.remove(k, ssdHolder) }
	}
}

// ramEvicted updates the index for a block that left instance i's RAM
// and demotes it to the SSD tier, if any.
func (s *simulator) ramEvicted(i int, k policy.Key) {
	in := &s.inst[i]
	s.idx.remove(k, holder{int32(i), tierRAM})
	if in.last != nil {
		delete(in.last, k)
	}
	if in.ssd != nil {
		s.demote(in.ssd, holder{int32(i), tierSSD}, k)
	}
}

// demote writes a block evicted from RAM into the SSD tier.
func (s *simulator) demote(ssd *policy.Cache, h holder, k policy.Key) {
	s.demotions++
	a := policy.Access{Key: k, Time: s.curTime + s.demotions, NextUse: policy.NoNextUse}
	if s.future {
		a.NextUse = s.nextAfter(k, s.curPos)
	}
	if ssd.Contains(k) {
		ssd.Insert(a) // already there: a touch, no write
		return
	}
	ssd.Insert(a)
	if ssd.Contains(k) {
		s.idx.add(k, h)
		s.bytesWrite += s.blockBytes
	}
}

// buildFuture computes every access's next use for oracle policies.
func (s *simulator) buildFuture(total int64) {
	s.future = true
	s.nextUse = make([]int64, total)
	s.positions = make(map[policy.Key][]int64)
	for k, i := range s.order {
		for j, key := range s.reqs[i].HashIDs {
			s.positions[key] = append(s.positions[key], s.pos[k]+int64(j))
		}
	}
	for k, i := range s.order {
		for j, key := range s.reqs[i].HashIDs {
			s.nextUse[s.pos[k]+int64(j)] = s.nextAfter(key, s.pos[k]+int64(j))
		}
	}
}

// nextAfter returns the shifted position of key's first access after
// position p, or NoNextUse.
func (s *simulator) nextAfter(key policy.Key, p int64) int64 {
	ps := s.positions[key]
	i, found := slices.BinarySearch(ps, p)
	if found {
		i++
	}
	if i >= len(ps) {
		return policy.NoNextUse
	}
	return ps[i] << timeShift
}

// run is the event loop.
func (s *simulator) run(ctx context.Context) error {
	next := 0 // next arrival (sorted index)
	for iter := 0; ; iter++ {
		if iter%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("sim: stopped at event %d: %w", iter, err)
			}
		}
		tn, okn := s.net.NextDone()
		oke := len(s.events) > 0
		oka := next < len(s.order)
		var te, ta float64
		if oke {
			te = s.events[0].t
		}
		if oka {
			ta = s.arrival[next]
		}
		switch {
		case okn && (!oke || tn <= te) && (!oka || tn <= ta):
			if err := s.advanceNet(tn); err != nil {
				return err
			}
		case oke && (!oka || te <= ta):
			e := s.events.pop()
			if err := s.prefillDone(int(e.inst), e.t); err != nil {
				return err
			}
		case oka:
			if err := s.arrive(next, ta); err != nil {
				return err
			}
			next++
		default:
			return nil
		}
	}
}

// advanceNet completes the transfers that end at t.
func (s *simulator) advanceNet(t float64) error {
	var err error
	s.done, err = s.net.Advance(t, s.done[:0])
	if err != nil {
		return fmt.Errorf("sim: advance network to %g s: %w", t, err)
	}
	s.flowsDone(t)
	return nil
}

// flowsDone handles the completions in s.done at time t.
func (s *simulator) flowsDone(t float64) {
	// Starting a prefill never starts a transfer, so s.done is not
	// appended to while this loop runs.
	for _, r := range s.done {
		rs := &s.rs[r]
		rs.pending--
		if rs.pending > 0 {
			continue
		}
		rs.transferEnd = t
		in := &s.inst[rs.inst]
		if in.cur == int32(r) && in.waiting {
			s.startPrefill(int(rs.inst), t)
		}
	}
	s.done = s.done[:0]
}

// lookup fills s.hsl with the holders of r's leading blocks, up to the
// first block held nowhere.
func (s *simulator) lookup(r int) {
	s.hsl = s.hsl[:0]
	if !s.cached {
		return
	}
	for _, k := range s.reqs[s.order[r]].HashIDs {
		hs := s.idx[k]
		if len(hs) == 0 {
			return
		}
		s.hsl = append(s.hsl, hs)
	}
}

// queueEst estimates how long a request arriving now at instance i would
// wait to reach the head of its queue.
func (s *simulator) queueEst(i int, t float64) float64 {
	in := &s.inst[i]
	q := in.waitSum
	if in.cur >= 0 {
		q += max(in.curEstEnd-t, 0)
	}
	return q
}

// arrive routes, plans and enqueues sorted request r at time t.
func (s *simulator) arrive(r int, t float64) error {
	req := &s.reqs[s.order[r]]
	rec := &s.records[r]
	*rec = Record{ID: s.order[r], Arrival: t, Instance: -1, InputTokens: req.InputLength, Blocks: len(req.HashIDs)}
	s.lookup(r)
	s.asked(req)
	chosen, err := s.plan.Route(s, s.hsl, req, t, &s.best)
	if err != nil {
		return err
	}
	if !s.plan.Admit(s, chosen, &s.best, t) {
		rec.Rejected = true
		return nil
	}
	rs := &s.rs[r]
	rs.inst = int32(chosen)
	rec.Instance = chosen
	s.routed(chosen, req)
	rs.estService = s.plan.EstService(&s.best)
	if !s.opts.NoPrefetch {
		if err := s.commit(r, &s.best, t); err != nil {
			return err
		}
	}
	in := &s.inst[chosen]
	in.queue = append(in.queue, int32(r))
	in.waitSum += rs.estService
	if in.cur < 0 {
		return s.startNext(chosen, t)
	}
	return nil
}

// commit fixes plan p for sorted request r at time t: records its hits and
// bytes and starts its transfers.
func (s *simulator) commit(r int, p *Plan, t float64) error {
	rec := &s.records[r]
	rs := &s.rs[r]
	rec.HitTokens = p.HitTokens
	rec.HitBlocks = p.HitBlocks
	rec.BytesNet = int64(p.HitBlocks[RemoteRAM]+p.HitBlocks[RemoteSSD]) * s.blockBytes
	rec.BytesSSDRead = int64(p.HitBlocks[LocalSSD]+p.HitBlocks[RemoteSSD]) * s.blockBytes
	if p.SkippedRemote {
		s.fetchesSkipped++
	}
	if p.SkippedSSD {
		s.ssdSkipped++
	}
	rs.reusedTokens = p.ReusedTokens
	rs.reusedBlocks = p.Prefix
	rs.transferStart, rs.transferEnd = t, t
	rs.transferEst = p.Transfer
	rs.pending = int32(len(p.flows))
	for fi := range p.flows {
		f := &p.flows[fi]
		var err error
		s.done, err = s.net.Start(t, float64(f.blocks)*float64(s.blockBytes), f.links[:f.nlinks], r, s.done)
		if err != nil {
			return fmt.Errorf("sim: start transfer %d of request %d: %w", fi, s.order[r], err)
		}
	}
	s.flowsDone(t)
	return nil
}

// startNext moves the next waiting request of idle instance i to the head.
func (s *simulator) startNext(i int, t float64) error {
	in := &s.inst[i]
	if in.cur >= 0 || in.head == len(in.queue) {
		return nil
	}
	r := int(in.queue[in.head])
	in.head++
	if in.head == len(in.queue) {
		in.queue, in.head, in.waitSum = in.queue[:0], 0, 0
	} else {
		in.waitSum -= s.rs[r].estService
		if in.head > 1024 && in.head*2 > len(in.queue) {
			in.queue = append(in.queue[:0], in.queue[in.head:]...)
			in.head = 0
		}
	}
	rs := &s.rs[r]
	rs.headAt = t
	in.cur = int32(r)
	if s.opts.NoPrefetch {
		s.lookup(r)
		s.plan.Plan(s, s.hsl, i, &s.reqs[s.order[r]], &s.best)
		if err := s.commit(r, &s.best, t); err != nil {
			return err
		}
	}
	if s.joint && !s.opts.NoPrefetch {
		s.lateBind(i, r)
	}
	if rs.pending > 0 {
		in.waiting = true
		in.curEstEnd = max(t, rs.transferStart+rs.transferEst) + s.prof.PrefillSeconds(s.reqs[s.order[r]].InputLength, rs.reusedTokens)
		return nil
	}
	s.startPrefill(i, t)
	return nil
}

// startPrefill starts the prefill of instance i's head request at t.
func (s *simulator) startPrefill(i int, t float64) {
	in := &s.inst[i]
	r := int(in.cur)
	in.waiting = false
	d := s.prof.PrefillSeconds(s.reqs[s.order[r]].InputLength, s.rs[r].reusedTokens)
	s.records[r].Prefill = d
	in.curEstEnd = t + d
	s.seq++
	s.events.push(event{t: t + d, seq: s.seq, inst: int32(i)})
}

// prefillDone completes instance i's prefill at t.
func (s *simulator) prefillDone(i int, t float64) error {
	in := &s.inst[i]
	r := int(in.cur)
	rs := &s.rs[r]
	rec := &s.records[r]
	rec.Queue = rs.headAt - rec.Arrival
	rec.Transfer = rs.transferEnd - rs.transferStart
	rec.TTFT = t - rec.Arrival
	if s.cached {
		s.store(i, r)
		s.stored(i, r)
	}
	in.cur = -1
	return s.startNext(i, t)
}

// store accesses sorted request r's blocks in instance i's RAM cache.
// With ReplicateHot a cold block it fetched from another instance is not
// stored (its source copy is touched instead); with EvictRedundantFirst
// room for a new block is made by makeRoom first.
func (s *simulator) store(i, r int) {
	in := &s.inst[i]
	keys := s.reqs[s.order[r]].HashIDs
	h := holder{int32(i), tierRAM}
	reused := s.rs[r].reusedBlocks
	for j, k := range keys {
		p := s.pos[r] + int64(j)
		a := s.access(keys, j, p)
		a.Time = s.ramTime(i, a.Time)
		s.curPos, s.curTime, s.demotions = p, a.Time, 0
		// Only the joint mechanisms ask whether k was resident before
		// the access (a lookup in the policy's index per block).
		resident := (s.hotRepl || s.redFirst) && in.ram.Contains(k)
		if s.hotRepl && !resident && j < reused && s.fetched(i, k) && !s.hot(i, k) {
			s.replicasSkipped++
			s.touchSource(i, keys, j, p)
			continue
		}
		if s.redFirst && !resident {
			s.makeRoom(i)
		}
		if !in.ram.Access(a) && in.ram.Contains(k) {
			s.idx.add(k, h)
			s.holderAdded(k, i)
		}
		if s.redFirst && in.ram.Contains(k) {
			s.localAccess(i, k, a.Time)
		}
	}
}

// access returns the policy access of block j of keys at trace position
// p (Time unshifted by any per-cache clock).
func (s *simulator) access(keys []policy.Key, j int, p int64) policy.Access {
	a := policy.Access{Key: keys[j], Hint: block.Hint{Depth: j}, Time: p << timeShift, NextUse: policy.NoNextUse}
	if j > 0 {
		a.Parent = keys[j-1]
	}
	if s.future {
		a.NextUse = s.nextUse[p]
	}
	return a
}

// ramTime returns the Access.Time to give instance i's RAM cache for an
// access whose natural time is t, keeping that cache's times strictly
// increasing, 2^timeShift apart so that the demotions made during one
// access keep distinct times. An instance's own accesses come in trace
// order, so t is returned unchanged unless a touch from another instance
// (ReplicateHot) has moved the clock past it.
func (s *simulator) ramTime(i int, t int64) int64 {
	in := &s.inst[i]
	t = max(t, in.clock+1<<timeShift)
	in.clock = t
	return t
}

// result assembles the Result.
func (s *simulator) result() *Result {
	o := s.opts
	sum := Summary{
		Mode:            o.Mode,
		Routing:         o.Routing,
		Policy:          o.Policy,
		Profile:         o.Profile.Name,
		Instances:       o.Instances,
		RAMBlocks:       o.RAMBlocks,
		SSDBlocks:       o.SSDBlocks,
		NICGbps:         o.NICGbps,
		SSDGBps:         o.SSDGBps,
		RateMultiplier:  o.RateMultiplier,
		Prefetch:        !o.NoPrefetch,
		Reject:          o.Reject,
		SLO:             o.SLOSeconds,
		BytesSSDWrite:   s.bytesWrite,
		FetchesSkipped:  s.fetchesSkipped,
		SSDReadsSkipped: s.ssdSkipped,

		Replication:         o.Replication,
		HotAccesses:         o.HotAccesses,
		EvictRedundantFirst: o.EvictRedundantFirst,
		ReplicasSkipped:     s.replicasSkipped,
		RedundantEvictions:  s.redundantEvictions,
		LateBoundBlocks:     s.lateBlocks,
	}
	if !s.cached {
		sum.RAMBlocks, sum.SSDBlocks = 0, 0
	}
	Summarize(&sum, s.records)
	return &Result{Records: s.records, Summary: sum}
}
