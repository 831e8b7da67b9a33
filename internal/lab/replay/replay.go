package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/payload"
	"github.com/kvpool/kvpool/trace"
)

// job is one request in flight.
type job struct {
	k   int // sorted index
	req *trace.Request
	// arrival is the scheduled arrival (model seconds from the start).
	arrival float64
	lag     time.Duration
	worker  int
	plan    sim.Plan
	// links are the links of plan's transfers, active while they run.
	links []int
	// estService is the estimated service time at the worker (model s).
	estService float64
	// transfer state: started and done are live offsets from the start;
	// loaded[f] tells whether plan.fetch[f] arrived verified, from[f]
	// whether it came from a RAM copy (loaded[f] and fromRAM[f] are
	// about plan.Fetches[f]).
	xferStarted, xferDone time.Duration
	xferEst               float64
	loaded                []bool
	fromRAM               []bool
	xfer                  chan struct{} // closed when the transfer ended
	// local are the plan's local RAM blocks (indexes into req.HashIDs),
	// read from the worker's own node next to the transfer; localOK[x]
	// tells whether local[x] arrived verified. localOK is written by the
	// reading goroutine and read only after localDone is closed.
	local     []int
	localOK   []bool
	localDone chan struct{}
}

// worker is one prefill instance: a FIFO queue served by one goroutine,
// bound to one node.
type worker struct {
	i    int
	node client.Node
	// cl makes the worker's reads and stores: the runner's client, or
	// with Options.HostDial one of its own on its node's host.
	cl    *client.Client
	queue chan *job
	store chan *job

	mu        sync.Mutex // guards waitSum and curEstEnd
	waitSum   float64    // estimated service of the waiting jobs (model s)
	curEstEnd float64    // estimated end of the running job (model s), 0 if idle
	busy      bool
}

// runner is one replay's state.
type runner struct {
	o     Options
	plan  *sim.Planner
	reqs  []trace.Request
	order []int
	arr   []float64 // scheduled arrival by sorted index (model s)
	start time.Time

	cl      *client.Client
	workers []*worker
	nodeIdx map[string]int
	// warm is the blocks the nodes held when the replay started.
	warm int

	// loads tracks the goroutines loading blocks (transfers and local
	// reads); run waits for them. bufs pools their block buffers.
	loads sync.WaitGroup
	bufs  sync.Pool

	mu     sync.Mutex // guards active and plan (the planner's state)
	active []int      // transfers in progress per link (sim.EgressLink, ...)

	recMu   sync.Mutex
	records []sim.Record // by sorted index
	live    []LiveRecord
	done    []bool
	lags    []time.Duration

	completed                               atomic.Int64
	hitTok, inTok                           atomic.Int64
	wrong, corrupt, fetchFailed, putFailed  atomic.Int64
	verified                                atomic.Int64
	fetchesSkipped, ssdSkipped              atomic.Int64
	bytesRead, bytesReadRemote, bytesStored atomic.Int64
	firstErrMu                              sync.Mutex
	firstErr                                error
}

// Run replays reqs (sorted stably by timestamp) against the cluster whose
// master is opts.Master, and returns a record per completed request and
// the summary. When ctx ends it stops dispatching, abandons the requests
// not yet finished, and returns what completed with Summary.Partial set
// (and a nil error). It returns an error for bad options or requests and
// when the cluster cannot be reached.
func Run(ctx context.Context, reqs []trace.Request, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.WithDefaults()
	if len(reqs) == 0 {
		return nil, errors.New("replay: no requests to replay")
	}
	for i := range reqs {
		r := &reqs[i]
		if r.InputLength <= 0 {
			return nil, fmt.Errorf("replay: request %d: input_length %d is not positive", i, r.InputLength)
		}
		if want := trace.Blocks(r.InputLength); len(r.HashIDs) != want {
			return nil, fmt.Errorf("replay: request %d: %d hash_ids for %d input tokens, want %d", i, len(r.HashIDs), r.InputLength, want)
		}
	}
	r := &runner{o: o, reqs: reqs}
	r.order = make([]int, len(reqs))
	for i := range r.order {
		r.order[i] = i
	}
	slices.SortStableFunc(r.order, func(a, b int) int { return cmp.Compare(reqs[a].Timestamp, reqs[b].Timestamp) })
	t0 := reqs[r.order[0]].Timestamp
	r.arr = make([]float64, len(reqs))
	for k, i := range r.order {
		r.arr[k] = float64(reqs[i].Timestamp-t0) / 1000
	}
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	defer r.close()
	partial := r.run(ctx)
	return r.result(partial), nil
}

// connect dials the master and every node.
func (r *runner) connect(ctx context.Context) error {
	cl, err := client.New(ctx, client.Options{Master: r.o.Master, Tenant: r.o.Tenant, Token: r.o.Token, RequestTimeout: r.o.IOTimeout})
	if err != nil {
		return fmt.Errorf("replay: connect to master %s: %w", r.o.Master, err)
	}
	r.cl = cl
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		cl.Close()
		return fmt.Errorf("replay: list the nodes of master %s: %w", r.o.Master, err)
	}
	var live []client.Node
	for _, n := range nodes {
		if n.Live {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		cl.Close()
		return fmt.Errorf("replay: master %s lists no live node", r.o.Master)
	}
	sort.Slice(live, func(a, b int) bool { return live[a].ID < live[b].ID })
	info, err := probe(ctx, cl, r.o.PayloadBytes)
	if err != nil {
		cl.Close()
		return err
	}
	r.warm = info.Stored()
	P := len(live)
	r.nodeIdx = make(map[string]int, P)
	r.active = make([]int, 3*P)
	r.plan = sim.NewPlanner(sim.PlanOptions{Mode: r.o.Mode, Routing: r.o.Routing, Instances: P, Profile: r.o.Profile,
		NoPrefetch: r.o.NoPrefetch, Reject: r.o.Reject, SLOSeconds: r.o.SLOSeconds})
	for i, n := range live {
		r.nodeIdx[n.ID] = i
		w := &worker{i: i, node: n, cl: cl, queue: make(chan *job, len(r.reqs)), store: make(chan *job, len(r.reqs))}
		r.workers = append(r.workers, w)
		if r.o.HostDial == nil {
			continue
		}
		dial := r.o.HostDial(n.ID)
		if dial == nil {
			r.close()
			return fmt.Errorf("replay: node %s has no network host of its own (--net kernel replays only a cluster it started)", n.ID)
		}
		if w.cl, err = client.New(ctx, client.Options{Master: r.o.Master, Tenant: r.o.Tenant, Token: r.o.Token,
			RequestTimeout: r.o.IOTimeout, Dial: dial, LocalNode: n.ID}); err != nil {
			r.close()
			return fmt.Errorf("replay: connect worker %d from node %s's host: %w", i, n.ID, err)
		}
	}
	return nil
}

func (r *runner) close() {
	for _, w := range r.workers {
		if w.cl != nil && w.cl != r.cl {
			w.cl.Close()
		}
	}
	if r.cl != nil {
		r.cl.Close()
	}
}

// liveView is the planner's sim.Cluster for a live run: the transfers this
// replayer has in progress per link, the modelled link capacities, and
// the workers' queue estimates. Use it with runner.mu held.
type liveView struct{ r *runner }

var _ sim.Cluster = liveView{}

// Active returns the transfers in progress on link l.
func (v liveView) Active(l int) int { return v.r.active[l] }

// Capacity returns link l's modelled bandwidth (model bytes per second).
func (v liveView) Capacity(l int) float64 {
	if l >= sim.SSDLink(len(v.r.workers), 0) {
		return v.r.o.SSDGBps * 1e9
	}
	return v.r.o.NICGbps * 1e9 / 8
}

// QueueEst returns worker i's queue estimate for a request arriving at t.
func (v liveView) QueueEst(i int, t float64) float64 { return v.r.workers[i].queueEst(t) }

// holders converts a lookup's replicas to the planner's: worker index and
// tier, up to the first block with no replica on a worker of this replay
// (as the simulator's lookup stops at the first block held nowhere).
func (r *runner) holders(reps [][]client.Location) [][]sim.Holder {
	out := make([][]sim.Holder, 0, len(reps))
	for _, locs := range reps {
		var hs []sim.Holder
		for _, l := range locs {
			i, ok := r.nodeIdx[l.Node]
			if !ok || (l.Tier != client.TierRAM && l.Tier != client.TierSSD) {
				continue
			}
			h := sim.Holder{Inst: int32(i), Tier: sim.TierRAM}
			if l.Tier == client.TierSSD {
				h.Tier = sim.TierSSD
			}
			hs = append(hs, h)
		}
		if len(hs) == 0 {
			break
		}
		out = append(out, hs)
	}
	return out
}

// lookup returns the holders of req's leading cached blocks (none in
// recompute mode); a failed lookup is remembered and plans from nothing.
func (r *runner) lookup(ctx context.Context, k int) [][]sim.Holder {
	if r.o.Mode == sim.ModeRecompute {
		return nil
	}
	pre, err := r.cl.Lookup(ctx, r.reqs[r.order[k]].HashIDs)
	if err != nil {
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("replay: lookup of request %d: %w", r.order[k], err))
		}
		return nil
	}
	return r.holders(pre.Replicas)
}

// now returns the model time since the start.
func (r *runner) now() float64 { return time.Since(r.start).Seconds() * r.o.Speed }

// fail remembers the first unexpected error (reported in the summary).
func (r *runner) fail(err error) {
	r.firstErrMu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.firstErrMu.Unlock()
}

// run dispatches every request and waits for the workers; it reports
// whether the run was cut short.
func (r *runner) run(ctx context.Context) bool {
	n := len(r.reqs)
	r.records = make([]sim.Record, n)
	r.live = make([]LiveRecord, n)
	r.done = make([]bool, n)
	r.lags = make([]time.Duration, 0, n)

	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(2)
		go func() { defer wg.Done(); r.serve(ctx, w) }()
		go func() { defer wg.Done(); r.storer(ctx, w) }()
	}
	// The start is set before the progress goroutine starts, which reads
	// it (the go statement orders the write before its reads).
	r.start = time.Now()
	stopProgress := r.startProgress()
	cut := false
	for k := 0; k < n; {
		if d := time.Until(r.due(k)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			cut = true
			break
		}
		// Every request due by now arrives in one burst (the published
		// traces give many requests the same timestamp): their lookups
		// go to the master together, and then each is routed and planned
		// in arrival order, as the simulator takes simultaneous arrivals.
		// A request's lag is how late it was planned: the dispatcher's
		// wake-up, the burst's lookups and the planning of the requests
		// before it in the burst.
		now := time.Now()
		m := k + 1
		for m < n && !r.due(m).After(now) {
			m++
		}
		hss := r.lookups(ctx, k, m)
		for x := k; x < m; x++ {
			lag := max(time.Since(r.due(x)), 0)
			r.recMu.Lock()
			r.lags = append(r.lags, lag)
			r.recMu.Unlock()
			if j := r.arrive(ctx, x, lag, hss[x-k]); j != nil {
				r.workers[j.worker].queue <- j
			}
		}
		k = m
	}
	for _, w := range r.workers {
		close(w.queue)
	}
	wg.Wait()
	r.loads.Wait()
	stopProgress()
	return cut || ctx.Err() != nil
}

// due returns when sorted request k is to arrive, in live time.
func (r *runner) due(k int) time.Time {
	return r.start.Add(time.Duration(r.arr[k] / r.o.Speed * float64(time.Second)))
}

// lookups looks sorted requests k to m-1 up on the master at once (the
// master client pipelines them on its connection), each as lookup does.
func (r *runner) lookups(ctx context.Context, k, m int) [][][]sim.Holder {
	out := make([][][]sim.Holder, m-k)
	if m-k == 1 {
		out[0] = r.lookup(ctx, k)
		return out
	}
	var wg sync.WaitGroup
	for x := k; x < m; x++ {
		wg.Add(1)
		go func() { defer wg.Done(); out[x-k] = r.lookup(ctx, x) }()
	}
	wg.Wait()
	return out
}

// arrive routes and plans sorted request k at its arrival, with hs the
// holders of its leading blocks (lookup), and starts its transfer when
// prefetching. It returns nil when the request could not be planned (the
// error is remembered).
func (r *runner) arrive(ctx context.Context, k int, lag time.Duration, hs [][]sim.Holder) *job {
	req := &r.reqs[r.order[k]]
	j := &job{k: k, req: req, arrival: r.arr[k], lag: lag, xfer: make(chan struct{}), localDone: make(chan struct{})}
	t := r.now()
	r.mu.Lock()
	v := liveView{r}
	chosen, err := r.plan.Route(v, hs, req, t, &j.plan)
	if err != nil {
		r.mu.Unlock()
		r.fail(fmt.Errorf("replay: route request %d: %w", r.order[k], err))
		return nil
	}
	if !r.plan.Admit(v, chosen, &j.plan, t) {
		r.mu.Unlock()
		r.reject(j)
		return nil
	}
	j.worker = chosen
	j.estService = r.plan.EstService(&j.plan)
	if !r.o.NoPrefetch {
		r.commitLocked(j)
	}
	r.mu.Unlock()
	w := r.workers[chosen]
	w.mu.Lock()
	w.waitSum += j.estService
	w.mu.Unlock()
	if !r.o.NoPrefetch {
		r.startLocal(ctx, j)
		r.loads.Add(1)
		go func() { defer r.loads.Done(); r.transfer(ctx, j) }()
	}
	return j
}

// reject records j as turned away by admission control at its arrival.
func (r *runner) reject(j *job) {
	rec := sim.Record{ID: r.order[j.k], Arrival: j.arrival, Instance: -1, InputTokens: j.req.InputLength, Blocks: len(j.req.HashIDs), Rejected: true}
	r.recMu.Lock()
	r.records[j.k], r.live[j.k], r.done[j.k] = rec, LiveRecord{ID: rec.ID, Lag: j.lag.Seconds()}, true
	r.recMu.Unlock()
	r.completed.Add(1)
}

// queueEst estimates the wait of a request arriving now at w (model s).
func (w *worker) queueEst(t float64) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.waitSum
	if w.busy {
		q += max(w.curEstEnd-t, 0)
	}
	return q
}

// commitLocked fixes j's plan: counts skips and marks its transfers'
// links active. r.mu is held.
func (r *runner) commitLocked(j *job) {
	if j.plan.SkippedRemote {
		r.fetchesSkipped.Add(1)
	}
	if j.plan.SkippedSSD {
		r.ssdSkipped.Add(1)
	}
	j.xferEst = j.plan.Transfer
	j.xferStarted = time.Since(r.start)
	j.links = j.plan.AppendLinks(j.links[:0])
	for _, l := range j.links {
		r.active[l]++
	}
}

// transfer loads j's planned blocks: one client Fetch per source node,
// in parallel, each block verified by the client (key and checksum) and,
// with VerifyFull, against its regenerated payload.
func (r *runner) transfer(ctx context.Context, j *job) {
	defer close(j.xfer)
	fetch := j.plan.Fetches
	j.loaded = make([]bool, len(fetch))
	j.fromRAM = make([]bool, len(fetch))
	groups := map[int][]int{}
	var srcs []int
	for f, it := range fetch {
		src := int(it.From.Inst)
		if src < 0 {
			continue
		}
		if groups[src] == nil {
			srcs = append(srcs, src)
		}
		groups[src] = append(groups[src], f)
	}
	var wg sync.WaitGroup
	for _, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.fetchFrom(ctx, j, src, groups[src])
		}()
	}
	wg.Wait()
	j.xferDone = time.Since(r.start)
	r.mu.Lock()
	for _, l := range j.links {
		r.active[l]--
	}
	r.mu.Unlock()
}

// fetchFrom loads j's planned fetches fs, all from worker src's node, and
// marks those that arrived verified.
func (r *runner) fetchFrom(ctx context.Context, j *job, src int, fs []int) {
	fetch := j.plan.Fetches
	tier := client.TierRAM
	if fetch[fs[0]].From.Tier == sim.TierSSD {
		tier = client.TierSSD
	}
	ids := make([]uint64, len(fs))
	for x, f := range fs {
		ids[x] = j.req.HashIDs[fetch[f].Block]
	}
	ok := r.read(ctx, j, src, tier, ids)
	for x, f := range fs {
		j.loaded[f] = ok[x]
		j.fromRAM[f] = ok[x] && fetch[f].From.Tier == sim.TierRAM
	}
}

// localRAM returns the blocks of plan p reused from the worker's own RAM:
// the prefix blocks it does not fetch.
func localRAM(p *sim.Plan) []int {
	fetched := make(map[int]bool, len(p.Fetches))
	for _, it := range p.Fetches {
		fetched[it.Block] = true
	}
	var out []int
	for b := range p.Prefix {
		if !fetched[b] {
			out = append(out, b)
		}
	}
	return out
}

// startLocal starts reading j's local RAM blocks from its worker's own
// node (readLocal), next to the plan's other loads.
func (r *runner) startLocal(ctx context.Context, j *job) {
	j.local = localRAM(&j.plan)
	if len(j.local) == 0 {
		close(j.localDone)
		return
	}
	r.loads.Add(1)
	go func() { defer r.loads.Done(); r.readLocal(ctx, j) }()
}

// readLocal reads and verifies j's local RAM blocks: a local hit is
// reused only once its bytes are known to be right (see serve).
func (r *runner) readLocal(ctx context.Context, j *job) {
	defer close(j.localDone)
	ids := make([]uint64, len(j.local))
	for x, b := range j.local {
		ids[x] = j.req.HashIDs[b]
	}
	j.localOK = r.read(ctx, j, j.worker, client.TierRAM, ids)
}

// read loads blocks ids of job j from worker src's node in one client
// Fetch and verifies each: the client checks key and checksum, and with
// VerifyFull the bytes are compared with the block's regenerated payload.
// It counts every outcome (verified, corrupt, wrong, failed; the bytes
// read, and those read from another node than j's worker's) and reports
// which blocks arrived verified.
func (r *runner) read(ctx context.Context, j *job, src int, tier client.Tier, ids []uint64) []bool {
	node := r.workers[src].node
	from := client.Location{Node: node.ID, Addr: node.Addr, Tier: tier}
	ok := make([]bool, len(ids))
	dsts := make([][]byte, len(ids))
	for x := range ids {
		dsts[x] = r.buffer()
	}
	defer func() {
		for _, b := range dsts {
			r.bufs.Put(&b)
		}
	}()
	res, err := r.workers[j.worker].cl.Fetch(ctx, from, ids, client.FetchOptions{Dst: dsts})
	if err != nil {
		r.fetchFailed.Add(int64(len(ids)))
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("replay: fetch %d blocks of request %d from node %s: %w", len(ids), r.order[j.k], node.ID, err))
		}
		return ok
	}
	for x := range ids {
		switch res.Status[x] {
		case client.Loaded:
		case client.Corrupt:
			r.corrupt.Add(1)
			continue
		default:
			r.fetchFailed.Add(1)
			continue
		}
		n := int64(len(res.Blocks[x]))
		r.bytesRead.Add(n)
		if src != j.worker {
			r.bytesReadRemote.Add(n)
		}
		if r.o.Verify == VerifyFull {
			if err := payload.Check(res.Blocks[x], r.o.PayloadBytes, r.o.Tenant, ids[x]); err != nil {
				r.wrong.Add(1)
				r.fail(fmt.Errorf("replay: request %d from node %s: %w", r.order[j.k], node.ID, err))
				continue
			}
		}
		r.verified.Add(1)
		ok[x] = true
	}
	return ok
}

// buffer returns a block buffer of the payload size from the pool: a
// block read is checked and dropped, so its buffer serves the next read
// (every hit is read, up to the whole working set a second, and fresh
// buffers would be as many bytes of garbage).
func (r *runner) buffer() []byte {
	if b, ok := r.bufs.Get().(*[]byte); ok && cap(*b) >= r.o.PayloadBytes {
		return (*b)[:r.o.PayloadBytes]
	}
	return make([]byte, r.o.PayloadBytes)
}

// serve is worker w's loop: FIFO, one prefill at a time.
func (r *runner) serve(ctx context.Context, w *worker) {
	defer close(w.store)
	for j := range w.queue {
		if ctx.Err() != nil {
			continue // drain: abandoned
		}
		head := time.Since(r.start)
		t := head.Seconds() * r.o.Speed
		w.mu.Lock()
		w.waitSum -= j.estService
		w.busy = true
		w.mu.Unlock()
		if r.o.NoPrefetch {
			r.replan(ctx, w, j)
		}
		w.mu.Lock()
		w.curEstEnd = max(t, j.xferStarted.Seconds()*r.o.Speed+j.xferEst) + j.plan.Prefill
		w.mu.Unlock()
		if r.o.NoPrefetch {
			r.startLocal(ctx, j)
			r.transfer(ctx, j)
		} else {
			select {
			case <-j.xfer:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			continue
		}
		pStart := time.Since(r.start)
		rec, localWait, ok := r.prefill(ctx, j)
		if !ok {
			continue
		}
		end := time.Since(r.start)
		w.mu.Lock()
		w.busy = false
		w.mu.Unlock()
		S := r.o.Speed
		arrLive := time.Duration(j.arrival / S * float64(time.Second))
		rec.Queue = (head - arrLive).Seconds() * S
		if j.xferDone > j.xferStarted && len(j.plan.Fetches) > 0 {
			rec.Transfer = (j.xferDone - j.xferStarted).Seconds() * S
		}
		rec.TTFT = (end - arrLive).Seconds() * S
		lr := LiveRecord{ID: rec.ID, Lag: j.lag.Seconds(), Queue: (head - arrLive).Seconds(),
			Transfer: rec.Transfer / S, Prefill: (end - pStart).Seconds(), LocalWait: localWait.Seconds(), TTFT: (end - arrLive).Seconds()}
		r.recMu.Lock()
		r.records[j.k], r.live[j.k], r.done[j.k] = rec, lr, true
		r.recMu.Unlock()
		r.completed.Add(1)
		r.hitTok.Add(int64(rec.TotalHitTokens()))
		r.inTok.Add(int64(rec.InputTokens))
		if r.o.Mode != sim.ModeRecompute {
			w.store <- j
		}
	}
}

// prefill runs j's prefill once its transfer has ended. Its local RAM
// blocks are being read meanwhile (readLocal): the prefill starts as if
// they were all right, as the model's local hits cost no time, and the
// request's first token waits until they have been read and verified.
// When one of them did not arrive verified, the reused prefix ends before
// it, and the worker spends the prefill time of the tokens that must now
// be recomputed before the TTFT ends: a wrong or missing block is never
// delivered. It returns the record (Prefill set), how long the worker
// waited for the local reads after its planned prefill, and false when
// ctx ended first.
func (r *runner) prefill(ctx context.Context, j *job) (sim.Record, time.Duration, bool) {
	rec, reused := r.outcome(j, nil)
	d := r.o.Profile.PrefillSeconds(j.req.InputLength, reused)
	if !r.compute(ctx, r.liveTime(d)) {
		return rec, 0, false
	}
	waited := time.Now()
	select {
	case <-j.localDone:
	case <-ctx.Done():
		return rec, 0, false
	}
	wait := time.Since(waited)
	if got, n := r.outcome(j, j.localOK); n < reused {
		full := r.o.Profile.PrefillSeconds(j.req.InputLength, n)
		if !r.compute(ctx, r.liveTime(full-d)) {
			return rec, 0, false
		}
		rec, d = got, full
	}
	rec.Prefill = d
	return rec, wait, true
}

// liveTime converts model seconds to live time.
func (r *runner) liveTime(model float64) time.Duration {
	return time.Duration(model / r.o.Speed * float64(time.Second))
}

// replan makes j's plan at the head of the queue (no prefetch).
func (r *runner) replan(ctx context.Context, w *worker, j *job) {
	hs := r.lookup(ctx, j.k)
	r.mu.Lock()
	r.plan.Plan(liveView{r}, hs, w.i, j.req, &j.plan)
	r.commitLocked(j)
	r.mu.Unlock()
}

// outcome builds j's record from its plan and what its transfer loaded:
// the reused prefix runs up to the first planned block that did not
// arrive. local tells which of j.local (the local RAM blocks) arrived
// verified; nil counts them all as arrived (the plan's speculation while
// they are being read).
func (r *runner) outcome(j *job, local []bool) (sim.Record, int) {
	req := j.req
	rec := sim.Record{ID: r.order[j.k], Arrival: j.arrival, Instance: j.worker, InputTokens: req.InputLength, Blocks: len(req.HashIDs)}
	fetched := make(map[int]int, len(j.plan.Fetches))
	for f, it := range j.plan.Fetches {
		fetched[it.Block] = f
	}
	bad := map[int]bool{}
	for x, b := range j.local {
		if local != nil && (x >= len(local) || !local[x]) {
			bad[b] = true
		}
	}
	bb := r.o.Profile.BlockBytes()
	reused := 0
	for b := range j.plan.Prefix {
		src := sim.LocalRAM
		if bad[b] {
			break
		}
		if f, ok := fetched[b]; ok {
			if j.loaded == nil || !j.loaded[f] {
				break
			}
			local := int(j.plan.Fetches[f].From.Inst) == j.worker
			switch {
			case local && j.fromRAM[f]:
				src = sim.LocalRAM
			case local:
				src = sim.LocalSSD
			case j.fromRAM[f]:
				src = sim.RemoteRAM
			default:
				src = sim.RemoteSSD
			}
		}
		tok := min(trace.BlockTokens, req.InputLength-b*trace.BlockTokens)
		rec.HitTokens[src] += tok
		rec.HitBlocks[src]++
		reused += tok
	}
	// Bytes moved are those of the plan's flows that arrived (model units,
	// whole blocks, as the simulator counts them).
	for f, it := range j.plan.Fetches {
		if j.loaded == nil || !j.loaded[f] {
			continue
		}
		if int(it.From.Inst) != j.worker {
			rec.BytesNet += bb
		}
		if it.From.Tier == sim.TierSSD {
			rec.BytesSSDRead += bb
		}
	}
	return rec, reused
}

// compute spends d of live time as the prefill mode says; false when ctx
// ended first.
func (r *runner) compute(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	if r.o.Prefill == PrefillCPU {
		return burn(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// burn keeps the CPU busy with a floating-point kernel until d has passed.
func burn(ctx context.Context, d time.Duration) bool {
	end := time.Now().Add(d)
	x := 1.0
	for i := 0; ; i++ {
		for range 1024 {
			x = x*1.0000001 + 1e-9
		}
		if time.Now().After(end) {
			return x > 0
		}
		if i%64 == 0 && ctx.Err() != nil {
			return false
		}
	}
}

// storer is worker w's store path: after a prefill, the request's
// accesses go to the worker's node in one client Access, first block to
// last as the simulator accesses its cache when a prefill completes: a
// touch of each planned local RAM block that was read and verified
// (the node holds it; its bytes need not travel again) and a put of
// every other block, each with its chain position (depth and
// parent), so the node's eviction policy sees what the simulator's sees.
// A touched block the node no longer holds is put after the others, as
// the simulator's access re-inserts a block evicted since its plan. Off
// the critical path, as in the simulator.
func (r *runner) storer(ctx context.Context, w *worker) {
	for j := range w.store {
		if ctx.Err() != nil {
			continue
		}
		// The local RAM blocks read and verified are touched; one that
		// did not arrive verified is put again, so a wrong copy is
		// replaced.
		local := make(map[int]bool, len(j.local))
		for x, b := range j.local {
			local[b] = j.localOK[x]
		}
		keys := j.req.HashIDs
		pls := make([][]byte, len(keys))
		for b, id := range keys {
			if !local[b] {
				pls[b] = payload.New(r.o.PayloadBytes, r.o.Tenant, id)
			}
		}
		acc := client.Chain(keys, pls)
		res, ok := r.access(ctx, w, j, acc)
		if !ok {
			continue
		}
		// Touched blocks the node had evicted since the plan: put them.
		var again []client.Access
		for b, st := range res.Status {
			if st == client.AccessNotHeld {
				a := acc[b]
				a.Payload = payload.New(r.o.PayloadBytes, r.o.Tenant, a.ID)
				again = append(again, a)
			}
		}
		if len(again) > 0 {
			r.access(ctx, w, j, again)
		}
	}
}

// access sends one Access of job j to worker w's node and counts the
// outcome of its puts; ok is false when the call failed as a whole.
func (r *runner) access(ctx context.Context, w *worker, j *job, acc []client.Access) (res client.AccessResult, ok bool) {
	res, err := w.cl.Access(ctx, acc, client.AccessOptions{Node: w.node.ID})
	if err != nil {
		puts := 0
		for _, a := range acc {
			if !a.Touch() {
				puts++
			}
		}
		r.putFailed.Add(int64(puts))
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("replay: store %d blocks of request %d on node %s: %w", puts, r.order[j.k], w.node.ID, err))
		}
		return res, false
	}
	for x, st := range res.Status {
		switch {
		case st == client.AccessStored:
			r.bytesStored.Add(int64(r.o.PayloadBytes))
		case st != client.AccessFailed:
			// A touch recorded, of a block no longer held, or by a node
			// that takes no touches.
		case acc[x].Touch():
			r.fail(fmt.Errorf("replay: touch block %016x of request %d on node %s: %w", acc[x].ID, r.order[j.k], w.node.ID, res.Errs[x]))
		default:
			r.putFailed.Add(1)
			r.fail(fmt.Errorf("replay: store block %016x of request %d on node %s: %w", acc[x].ID, r.order[j.k], w.node.ID, res.Errs[x]))
		}
	}
	return res, true
}
