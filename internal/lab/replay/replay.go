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

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/payload"
	"github.com/kvpool/kvpool/internal/tier"
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
	plan    plan
	// estService is the estimated service time at the worker (model s).
	estService float64
	// transfer state: started and done are live offsets from the start;
	// loaded[f] tells whether plan.fetch[f] arrived verified, from[f]
	// whether it came from a RAM copy.
	xferStarted, xferDone time.Duration
	xferEst               float64
	loaded                []bool
	fromRAM               []bool
	xfer                  chan struct{} // closed when the transfer ended
}

// worker is one prefill instance: a FIFO queue served by one goroutine,
// bound to one node.
type worker struct {
	i     int
	node  client.Node
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
	est   estimator
	reqs  []trace.Request
	order []int
	arr   []float64 // scheduled arrival by sorted index (model s)
	start time.Time

	cl      *client.Client
	pools   []*nodeclient.Pool
	workers []*worker
	nodeIdx map[string]int

	mu     sync.Mutex // guards active, rr and the plan scratch
	active []int
	rr     int
	cand   plan

	recMu   sync.Mutex
	records []sim.Record // by sorted index
	live    []LiveRecord
	done    []bool
	lags    []time.Duration

	completed                              atomic.Int64
	hitTok, inTok                          atomic.Int64
	wrong, corrupt, fetchFailed, putFailed atomic.Int64
	fetchesSkipped, ssdSkipped             atomic.Int64
	liveBytesFetched, liveBytesStored      atomic.Int64
	firstErrMu                             sync.Mutex
	firstErr                               error
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
	r := &runner{o: o, est: newEstimator(o), reqs: reqs}
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
	cl, err := client.New(ctx, client.Options{Master: r.o.Master, Tenant: r.o.Tenant, Token: r.o.Token})
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
	P := len(live)
	r.nodeIdx = make(map[string]int, P)
	r.active = make([]int, 3*P)
	for i, n := range live {
		r.nodeIdx[n.ID] = i
		p, err := nodeclient.NewPool(n.Addr, nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Tenant: r.o.Tenant, Token: []byte(r.o.Token)}})
		if err != nil {
			r.close()
			return fmt.Errorf("replay: connection pool for node %s at %s: %w", n.ID, n.Addr, err)
		}
		r.pools = append(r.pools, p)
		r.workers = append(r.workers, &worker{i: i, node: n, queue: make(chan *job, len(r.reqs)), store: make(chan *job, len(r.reqs))})
	}
	return nil
}

func (r *runner) close() {
	for _, p := range r.pools {
		p.Close()
	}
	if r.cl != nil {
		r.cl.Close()
	}
}

func (r *runner) nodeOf(id string) int {
	if i, ok := r.nodeIdx[id]; ok {
		return i
	}
	return -1
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
	var xfers sync.WaitGroup
	stopProgress := r.startProgress()
	r.start = time.Now()
	cut := false
	for k := range r.order {
		target := r.start.Add(time.Duration(r.arr[k] / r.o.Speed * float64(time.Second)))
		if d := time.Until(target); d > 0 {
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
		lag := max(time.Since(target), 0)
		r.recMu.Lock()
		r.lags = append(r.lags, lag)
		r.recMu.Unlock()
		j := r.arrive(ctx, k, lag, &xfers)
		if j == nil {
			continue
		}
		r.workers[j.worker].queue <- j
	}
	for _, w := range r.workers {
		close(w.queue)
	}
	wg.Wait()
	xfers.Wait()
	stopProgress()
	return cut || ctx.Err() != nil
}

// arrive routes and plans sorted request k at its arrival and starts its
// transfer when prefetching. It returns nil when the request could not be
// planned (the error is remembered).
func (r *runner) arrive(ctx context.Context, k int, lag time.Duration, xfers *sync.WaitGroup) *job {
	req := &r.reqs[r.order[k]]
	j := &job{k: k, req: req, arrival: r.arr[k], lag: lag, xfer: make(chan struct{})}
	var reps [][]client.Location
	if r.o.Mode != sim.ModeRecompute {
		pre, err := r.cl.Lookup(ctx, req.HashIDs)
		if err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("replay: lookup of request %d: %w", r.order[k], err))
			}
			reps = nil
		} else {
			reps = pre.Replicas
		}
	}
	t := r.now()
	r.mu.Lock()
	v := &view{reps: reps, nodeOf: r.nodeOf, active: r.active, P: len(r.workers)}
	P := len(r.workers)
	chosen := -1
	switch r.o.Routing {
	case sim.RoutingRoundRobin:
		chosen = r.rr % P
		r.rr++
		r.est.makePlan(v, chosen, req, &j.plan, &r.cand)
	case sim.RoutingLeastLoaded:
		best := 0.0
		for i := range P {
			if q := r.workers[i].queueEst(t); chosen < 0 || q < best {
				chosen, best = i, q
			}
		}
		r.est.makePlan(v, chosen, req, &j.plan, &r.cand)
	default: // cache-aware
		best := 0.0
		var p, scratch plan
		for i := range P {
			r.est.makePlan(v, i, req, &p, &scratch)
			q := r.workers[i].queueEst(t)
			est := max(q, p.transfer) + p.prefill
			if r.o.NoPrefetch {
				est = q + p.transfer + p.prefill
			}
			if chosen < 0 || est < best {
				chosen, best = i, est
				j.plan.copyFrom(&p)
			}
		}
	}
	j.worker = chosen
	j.estService = j.plan.prefill
	if r.o.NoPrefetch {
		j.estService += j.plan.transfer
	} else {
		r.commitLocked(j)
	}
	r.mu.Unlock()
	w := r.workers[chosen]
	w.mu.Lock()
	w.waitSum += j.estService
	w.mu.Unlock()
	if !r.o.NoPrefetch {
		xfers.Add(1)
		go func() { defer xfers.Done(); r.transfer(ctx, j) }()
	}
	return j
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

// links returns the links a fetch of item it into worker i crosses.
func (r *runner) links(it fetchItem, i int) []int {
	P := len(r.workers)
	var ls []int
	if it.tier == client.TierSSD {
		ls = append(ls, 2*P+it.src)
	}
	if it.src != i {
		ls = append(ls, it.src, P+i)
	}
	return ls
}

// commitLocked fixes j's plan: counts skips and marks its flows active.
// r.mu is held.
func (r *runner) commitLocked(j *job) {
	if j.plan.skippedRemote {
		r.fetchesSkipped.Add(1)
	}
	if j.plan.skippedSSD {
		r.ssdSkipped.Add(1)
	}
	j.xferEst = j.plan.transfer
	j.xferStarted = time.Since(r.start)
	for _, l := range r.flowLinks(j) {
		r.active[l]++
	}
}

// flowLinks lists the links of j's flows (one flow per source and tier),
// with repetition for links crossed by several flows.
func (r *runner) flowLinks(j *job) []int {
	seen := map[[2]int]bool{}
	var out []int
	for _, it := range j.plan.fetch {
		key := [2]int{it.src, int(it.tier)}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, r.links(it, j.worker)...)
	}
	return out
}

// transfer loads j's planned blocks: one MGET per source node, in
// parallel, each block verified by the node client (key and checksum)
// and, with VerifyFull, against its regenerated payload.
func (r *runner) transfer(ctx context.Context, j *job) {
	defer close(j.xfer)
	fetch := j.plan.fetch
	j.loaded = make([]bool, len(fetch))
	j.fromRAM = make([]bool, len(fetch))
	groups := map[int][]int{}
	var srcs []int
	for f, it := range fetch {
		if it.src < 0 {
			continue
		}
		if groups[it.src] == nil {
			srcs = append(srcs, it.src)
		}
		groups[it.src] = append(groups[it.src], f)
	}
	var wg sync.WaitGroup
	for _, src := range srcs {
		fs := groups[src]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, len(fs))
			dsts := make([][]byte, len(fs))
			for x, f := range fs {
				ids[x] = j.req.HashIDs[fetch[f].j]
				dsts[x] = make([]byte, r.o.PayloadBytes)
			}
			cctx, cancel := context.WithTimeout(ctx, r.o.IOTimeout)
			res, err := r.pools[src].MGet(cctx, ids, dsts)
			cancel()
			if err != nil {
				r.fetchFailed.Add(int64(len(fs)))
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("replay: fetch %d blocks of request %d from node %s: %w", len(fs), r.order[j.k], r.workers[src].node.ID, err))
				}
				return
			}
			for x, f := range fs {
				switch {
				case res[x].Err == nil:
				case errors.Is(res[x].Err, tier.ErrCorrupt):
					r.corrupt.Add(1)
					continue
				default:
					r.fetchFailed.Add(1)
					continue
				}
				r.liveBytesFetched.Add(int64(len(res[x].Payload)))
				if r.o.Verify == VerifyFull {
					if err := payload.Check(res[x].Payload, r.o.PayloadBytes, r.o.Tenant, ids[x]); err != nil {
						r.wrong.Add(1)
						r.fail(fmt.Errorf("replay: request %d from node %s: %w", r.order[j.k], r.workers[src].node.ID, err))
						continue
					}
				}
				j.loaded[f] = true
				j.fromRAM[f] = fetch[f].tier == client.TierRAM
			}
		}()
	}
	wg.Wait()
	j.xferDone = time.Since(r.start)
	r.mu.Lock()
	for _, l := range r.flowLinks(j) {
		r.active[l]--
	}
	r.mu.Unlock()
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
		w.curEstEnd = max(t, j.xferStarted.Seconds()*r.o.Speed+j.xferEst) + j.plan.prefill
		w.mu.Unlock()
		if r.o.NoPrefetch {
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
		rec, reused := r.outcome(j)
		d := r.o.Profile.PrefillSeconds(j.req.InputLength, reused)
		pStart := time.Since(r.start)
		if !r.compute(ctx, time.Duration(d/r.o.Speed*float64(time.Second))) {
			continue
		}
		end := time.Since(r.start)
		w.mu.Lock()
		w.busy = false
		w.mu.Unlock()
		S := r.o.Speed
		arrLive := time.Duration(j.arrival / S * float64(time.Second))
		rec.Prefill = d
		rec.Queue = (head - arrLive).Seconds() * S
		if j.xferDone > j.xferStarted && len(j.plan.fetch) > 0 {
			rec.Transfer = (j.xferDone - j.xferStarted).Seconds() * S
		}
		rec.TTFT = (end - arrLive).Seconds() * S
		lr := LiveRecord{ID: rec.ID, Lag: j.lag.Seconds(), Queue: (head - arrLive).Seconds(),
			Transfer: rec.Transfer / S, Prefill: (end - pStart).Seconds(), TTFT: (end - arrLive).Seconds()}
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

// replan makes j's plan at the head of the queue (no prefetch).
func (r *runner) replan(ctx context.Context, w *worker, j *job) {
	var reps [][]client.Location
	if r.o.Mode != sim.ModeRecompute {
		if pre, err := r.cl.Lookup(ctx, j.req.HashIDs); err == nil {
			reps = pre.Replicas
		} else if ctx.Err() == nil {
			r.fail(fmt.Errorf("replay: lookup of request %d: %w", r.order[j.k], err))
		}
	}
	r.mu.Lock()
	v := &view{reps: reps, nodeOf: r.nodeOf, active: r.active, P: len(r.workers)}
	r.est.makePlan(v, w.i, j.req, &j.plan, &r.cand)
	r.commitLocked(j)
	r.mu.Unlock()
}

// outcome builds j's record from its plan and what its transfer loaded:
// the reused prefix runs up to the first planned block that did not
// arrive.
func (r *runner) outcome(j *job) (sim.Record, int) {
	req := j.req
	rec := sim.Record{ID: r.order[j.k], Arrival: j.arrival, Instance: j.worker, InputTokens: req.InputLength, Blocks: len(req.HashIDs)}
	fetched := make(map[int]int, len(j.plan.fetch))
	for f, it := range j.plan.fetch {
		fetched[it.j] = f
	}
	bb := r.o.Profile.BlockBytes()
	reused := 0
	for b := range j.plan.prefix {
		src := sim.LocalRAM
		if f, ok := fetched[b]; ok {
			if j.loaded == nil || !j.loaded[f] {
				break
			}
			it := j.plan.fetch[f]
			switch {
			case it.src == j.worker && j.fromRAM[f]:
				src = sim.LocalRAM
			case it.src == j.worker:
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
	for f, it := range j.plan.fetch {
		if j.loaded == nil || !j.loaded[f] {
			continue
		}
		if it.src != j.worker {
			rec.BytesNet += bb
		}
		if it.tier == client.TierSSD {
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
// accesses go to the worker's node in one ACCESS, first block to last as
// the simulator accesses its cache when a prefill completes: a touch of
// each planned local RAM block (reused without being read) and a put of
// every other block, each with its chain position (depth and parent), so
// the node's eviction policy sees what the simulator's sees. A touched
// block the node no longer holds is put after the others, as the
// simulator's access re-inserts a block evicted since its plan. Off the
// critical path, as in the simulator.
func (r *runner) storer(ctx context.Context, w *worker) {
	for j := range w.store {
		if ctx.Err() != nil {
			continue
		}
		local := make(map[int]bool)
		for b := range j.plan.prefix {
			local[b] = true
		}
		for _, it := range j.plan.fetch {
			delete(local, it.j)
		}
		keys := j.req.HashIDs
		hints := make([]wire.Hint, len(keys))
		pls := make([][]byte, len(keys))
		for b, id := range keys {
			hints[b] = wire.Hint{Hint: block.Hint{Depth: b}, Touch: local[b]}
			if b > 0 {
				hints[b].Parent = keys[b-1]
			}
			if !local[b] {
				pls[b] = payload.New(r.o.PayloadBytes, r.o.Tenant, id)
			}
		}
		errs, ok := r.access(ctx, w, j, keys, hints, pls)
		if !ok {
			continue
		}
		// Touched blocks the node had evicted since the plan: put them.
		var again []int
		for b, e := range errs {
			if hints[b].Touch && errors.Is(e, tier.ErrNotFound) {
				again = append(again, b)
			}
		}
		if len(again) == 0 {
			continue
		}
		ids, hs, ps := make([]uint64, len(again)), make([]wire.Hint, len(again)), make([][]byte, len(again))
		for x, b := range again {
			ids[x], hs[x] = keys[b], hints[b]
			hs[x].Touch = false
			ps[x] = payload.New(r.o.PayloadBytes, r.o.Tenant, keys[b])
		}
		r.access(ctx, w, j, ids, hs, ps)
	}
}

// access sends one ACCESS of job j to worker w's node and counts the
// outcome of its puts; ok is false when the call failed as a whole.
func (r *runner) access(ctx context.Context, w *worker, j *job, ids []uint64, hints []wire.Hint, pls [][]byte) (errs []error, ok bool) {
	cctx, cancel := context.WithTimeout(ctx, r.o.IOTimeout)
	errs, err := r.pools[w.i].MAccess(cctx, ids, hints, pls)
	cancel()
	puts := 0
	for _, h := range hints {
		if !h.Touch {
			puts++
		}
	}
	if err != nil {
		r.putFailed.Add(int64(puts))
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("replay: store %d blocks of request %d on node %s: %w", puts, r.order[j.k], w.node.ID, err))
		}
		return nil, false
	}
	for x, e := range errs {
		switch {
		case hints[x].Touch:
			if e != nil && !errors.Is(e, tier.ErrNotFound) && !errors.Is(e, wire.ErrUnknownOp) {
				r.fail(fmt.Errorf("replay: touch block %016x of request %d on node %s: %w", ids[x], r.order[j.k], w.node.ID, e))
			}
		case e != nil:
			r.putFailed.Add(1)
			r.fail(fmt.Errorf("replay: store block %016x of request %d on node %s: %w", ids[x], r.order[j.k], w.node.ID, e))
		default:
			r.liveBytesStored.Add(int64(r.o.PayloadBytes))
		}
	}
	return errs, true
}
