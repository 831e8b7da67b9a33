package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node"
)

// Cluster target shape. Each constant says where its value comes from.
const (
	// clusterHeartbeat is the nodes' heartbeat (told to them by the
	// master at registration): 50 ms, as in the cluster target's command
	// (BENCHMARKS.md, "cluster target"), so a
	// stored block enters the index within a few tens of milliseconds and
	// setup is quick; the default 1 s would only slow setup down.
	clusterHeartbeat = 50 * time.Millisecond
	// clusterNodeTTL is the master's node TTL: 10 s, 200 heartbeats, so a
	// node whose heartbeat goroutine is starved on a loaded 2-core machine
	// (load averages of 8 in BENCHMARKS.md) is not dropped mid-run, which
	// would turn the run into a failure-handling benchmark.
	clusterNodeTTL = 10 * time.Second
	// clusterSetupWait bounds each setup wait (every node live, every
	// block indexed): a few heartbeats on an idle machine; 30 s leaves
	// room for a heavily loaded one and still fails a run that cannot
	// come up rather than hanging.
	clusterSetupWait = 30 * time.Second
	// clusterPutChunk is the most blocks stored by one client.Put (one
	// PLACE): masterproto.DefaultMaxBatch, the most keys of one request.
	// One PLACE spreads its blocks evenly over the nodes (each choice adds
	// the block's footprint — its name and payload in whole RAM chunks —
	// to its node's usage), and the setup waits for a chunk to be indexed
	// before placing the next, so the next sees the usage.
	clusterPutChunk = masterproto.DefaultMaxBatch
	// clusterMaxNodes bounds Spec.Nodes: 64 in-process nodes, each with a
	// listener, an admin server and a heartbeat loop, is far more than a
	// 2-core machine serves meaningfully; the bound only stops typos.
	clusterMaxNodes = 64
)

// clusterTarget is a master (masterserver on loopback) and Spec.Nodes
// nodes in process, each registered with the master through
// masterclient, read by one public client per worker: each request is a
// client.Get (leased lookup, parallel MGETs, per-block verification) of
// Batch consecutive blocks at a random offset — or, when Spec.Named, one
// client.GetNamed of the names of Batch consecutive blocks (a point
// lookup each, then the same fetches).
type clusterTarget struct {
	cancel  context.CancelFunc // stops the master server (and, through it, everything)
	wg      sync.WaitGroup     // the master server's and the nodes' goroutines
	mu      sync.Mutex
	runErrs []error // errors returned by the server and the nodes' Run

	nodes   []*clusterNode
	clients []*client.Client
	perNode map[string]int // blocks per node ID, as the index placed them
	blocks  int
	names   []string // objectName of each block when Spec.Named, else nil
}

// clusterNode is one in-process node and its connection to the master.
type clusterNode struct {
	cancel context.CancelFunc
	exited chan struct{} // closed when Run has returned
	lm     *node.LazyMaster
}

func (t *clusterTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	n := spec.blocks()
	t.blocks = n
	m, err := master.New(master.Options{NodeTTL: clusterNodeTTL, HeartbeatInterval: clusterHeartbeat, Placement: meta.LeastUsed})
	if err != nil {
		return nil, fmt.Errorf("create master: %w", err)
	}
	srv, err := masterserver.New(m, masterserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("create master server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the master: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.cancel = cancel
	t.wg.Go(func() {
		if err := srv.Serve(runCtx, ln); err != nil && !errors.Is(err, masterserver.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			t.runErr(fmt.Errorf("master server: %w", err))
		}
	})
	addr := ln.Addr().String()

	// Each node's RAM tier holds its even share of the data set (one
	// PLACE spreads blocks evenly) with nodeRAMHeadroom to spare, so
	// nothing is demoted or evicted.
	share := (n + spec.Nodes - 1) / spec.Nodes
	ramBytes := int64(float64(share)/nodeRAMHeadroom+2) * ramFootprint(spec)
	for i := range spec.Nodes {
		if err := t.startNode(ctx, runCtx, addr, i, spec, ramBytes); err != nil {
			return nil, err
		}
	}

	t.clients = make([]*client.Client, spec.Conns)
	for i := range t.clients {
		c, err := client.New(ctx, client.Options{Master: addr, Tenant: benchTenant})
		if err != nil {
			return nil, fmt.Errorf("client %d of %d: %w", i, spec.Conns, err)
		}
		t.clients[i] = c
	}
	if err := t.waitLive(ctx, spec.Nodes); err != nil {
		return nil, err
	}
	// The client computes each block's checksum at Put and verifies it at
	// Get, so the dataset's own sums are not needed: keep it small.
	d := newDataset(min(n, maxSources), spec.BlockSize, false)
	if spec.Named {
		t.names = make([]string, n)
		for id := range t.names {
			t.names[id] = objectName(uint64(id))
		}
	}
	if err := t.store(ctx, n, d); err != nil {
		return nil, err
	}
	ws := make([]Worker, spec.Conns)
	for i, c := range t.clients {
		dst := make([][]byte, spec.Batch)
		for j := range dst {
			dst[j] = make([]byte, spec.BlockSize)
		}
		ws[i] = &clusterWorker{cl: c, mix: newMix(i, n-spec.Batch+1, 0), ids: make([]uint64, spec.Batch), names: t.names, dst: dst, size: spec.BlockSize}
	}
	return ws, nil
}

// startNode runs node i, registered with the master at addr, and waits
// until it serves. Like the node target's, its block_size is spec's block
// size (the typical size its policies are sized for), its max object size
// at least that, and its RAM chunks DefaultRAMChunk.
func (t *clusterTarget) startNode(ctx, runCtx context.Context, addr string, i int, spec Spec, ramBytes int64) error {
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.NodeName = fmt.Sprintf("bench-node-%d", i)
	cfg.BlockSize = config.Size(spec.BlockSize)
	cfg.MaxObjectBytes = config.Size(maxObject(spec))
	cfg.RAM.ChunkBytes = config.Size(DefaultRAMChunk)
	cfg.RAM.Bytes = config.Size(ramBytes)
	cfg.SSD.Enabled = false
	cfg.HeartbeatInterval = clusterHeartbeat
	lm := node.NewLazyMaster(func(ctx context.Context) (node.ClosableMaster, error) {
		return masterclient.Dial(ctx, addr, masterclient.Options{})
	})
	nd, err := node.New(cfg, node.Options{Master: lm})
	if err != nil {
		return errors.Join(fmt.Errorf("configure node %s: %w", cfg.NodeName, err), lm.Close())
	}
	nctx, ncancel := context.WithCancel(runCtx)
	cn := &clusterNode{cancel: ncancel, exited: make(chan struct{}), lm: lm}
	t.nodes = append(t.nodes, cn)
	t.wg.Go(func() {
		defer close(cn.exited)
		if err := nd.Run(nctx); err != nil {
			t.runErr(fmt.Errorf("run node %s: %w", cfg.NodeName, err))
		}
	})
	select {
	case <-nd.Ready():
		return nil
	case <-cn.exited:
		return fmt.Errorf("node %s stopped before it was ready: %w", cfg.NodeName, errors.Join(t.errs()...))
	case <-ctx.Done():
		return fmt.Errorf("wait for node %s: %w", cfg.NodeName, ctx.Err())
	}
}

// waitLive waits until the master lists want live nodes.
func (t *clusterTarget) waitLive(ctx context.Context, want int) error {
	return poll(ctx, fmt.Sprintf("%d nodes live on the master", want), func(ctx context.Context) (string, error) {
		ns, err := t.clients[0].Nodes(ctx)
		if err != nil {
			return "", err
		}
		live := 0
		for _, nd := range ns {
			if nd.Live {
				live++
			}
		}
		if live == want {
			return "", nil
		}
		return fmt.Sprintf("%d live", live), nil
	})
}

// store puts blocks 0..n-1 (or their names) with one replica each through
// the public client, clusterPutChunk at a time, and waits until the index
// holds each chunk (polling Lookup, or WaitIndexedNamed) before placing
// the next.
func (t *clusterTarget) store(ctx context.Context, n int, d *dataset) error {
	c := t.clients[0]
	t.perNode = map[string]int{}
	ids := make([]uint64, 0, min(n, clusterPutChunk))
	payloads := make([][]byte, 0, cap(ids))
	for lo := 0; lo < n; lo += clusterPutChunk {
		hi := min(n, lo+clusterPutChunk)
		ids, payloads = ids[:0], payloads[:0]
		for id := uint64(lo); id < uint64(hi); id++ {
			ids = append(ids, id)
			payloads = append(payloads, d.payload(id))
		}
		var (
			errs []error
			err  error
		)
		if t.names != nil {
			errs, err = c.PutNamed(ctx, t.names[lo:hi], payloads, client.PutOptions{Replicas: 1})
		} else {
			errs, err = c.Put(ctx, ids, payloads, client.PutOptions{Replicas: 1})
		}
		if err != nil {
			return fmt.Errorf("put blocks %d..%d: %w", lo, hi-1, err)
		}
		for i, e := range errs {
			if e != nil {
				return fmt.Errorf("put block %d: %w", ids[i], e)
			}
		}
		reps, err := t.indexed(ctx, ids)
		if err != nil {
			return err
		}
		for i, r := range reps {
			if len(r) != 1 || r[0].Tier != client.TierRAM || r[0].Size != int64(len(payloads[i])) {
				return fmt.Errorf("block %d indexed as %+v, want one RAM replica of %d bytes", ids[i], r, len(payloads[i]))
			}
			t.perNode[r[0].Node]++
		}
	}
	return nil
}

// indexed waits until the index lists every block of ids and returns
// their replicas.
func (t *clusterTarget) indexed(ctx context.Context, ids []uint64) ([][]client.Location, error) {
	c := t.clients[0]
	lo, hi := ids[0], ids[len(ids)-1]
	if t.names != nil {
		names := t.names[lo : hi+1]
		ok, err := c.WaitIndexedNamed(ctx, names, clusterSetupWait)
		if err != nil {
			return nil, fmt.Errorf("wait for objects of blocks %d..%d in the master's index: %w", lo, hi, err)
		}
		if !ok {
			return nil, fmt.Errorf("wait for objects of blocks %d..%d in the master's index: not all indexed after %v", lo, hi, clusterSetupWait)
		}
		reps := make([][]client.Location, len(names))
		for i, name := range names {
			if reps[i], err = c.LocateNamed(ctx, name); err != nil {
				return nil, fmt.Errorf("locate object %q (block %d): %w", name, lo+uint64(i), err)
			}
		}
		return reps, nil
	}
	return waitIndexed(ctx, c, ids)
}

// waitIndexed waits, through c's lookups, until the index lists every
// block of ids (consecutive) and returns their replicas.
func waitIndexed(ctx context.Context, c *client.Client, ids []uint64) ([][]client.Location, error) {
	var p client.Prefix
	err := poll(ctx, fmt.Sprintf("blocks %d..%d in the master's index", ids[0], ids[len(ids)-1]), func(ctx context.Context) (string, error) {
		var lerr error
		if p, lerr = c.Lookup(ctx, ids); lerr != nil {
			return "", lerr
		}
		if p.Len == len(ids) {
			return "", nil
		}
		return fmt.Sprintf("prefix %d of %d indexed", p.Len, len(ids)), nil
	})
	if err != nil {
		return nil, err
	}
	return p.Replicas, nil
}

// poll calls check every clusterHeartbeat until it reports done (an
// empty state), fails, ctx ends or clusterSetupWait passes. state says
// how far things are, for the timeout error.
func poll(ctx context.Context, what string, check func(ctx context.Context) (state string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, clusterSetupWait)
	defer cancel()
	tick := time.NewTicker(clusterHeartbeat)
	defer tick.Stop()
	for {
		state, err := check(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("wait for %s: %w", what, err)
		case state == "":
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %s after %v: %w", what, state, clusterSetupWait, ctx.Err())
		case <-tick.C:
		}
	}
}

func (t *clusterTarget) runErr(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runErrs = append(t.runErrs, err)
}

func (t *clusterTarget) errs() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.runErrs)
}

// Annotate notes the cluster's shape and the clients' fetch counters.
func (t *clusterTarget) Annotate(res *Result) {
	ids := make([]string, 0, len(t.perNode))
	for id := range t.perNode {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var spread []string
	for _, id := range ids {
		spread = append(spread, fmt.Sprintf("%s %d", id, t.perNode[id]))
	}
	get := "client.Get"
	if t.names != nil {
		get = "client.GetNamed"
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d nodes, %d blocks, one RAM replica each (%s); ops are blocks, a request is one %s of %d blocks",
		len(t.nodes), t.blocks, strings.Join(spread, ", "), get, res.Spec.Batch))
	var s client.Stats
	for _, c := range t.clients {
		cs := c.Stats()
		s.Gets += cs.Gets
		s.NodeFetches += cs.NodeFetches
		s.Coalesced += cs.Coalesced
		s.Corruptions += cs.Corruptions
		s.NodeFailures += cs.NodeFailures
	}
	if s.Gets > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("clients (one per worker): %.2f MGETs per Get, %d blocks coalesced, %d corrupt copies, %d node failures",
			float64(s.NodeFetches)/float64(s.Gets), s.Coalesced, s.Corruptions, s.NodeFailures))
	}
}

// Close closes the clients, stops the nodes, then the master, and waits
// for every goroutine Start started.
func (t *clusterTarget) Close() error {
	var errs []error
	for _, c := range t.clients {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	for _, nd := range t.nodes {
		nd.cancel()
	}
	for _, nd := range t.nodes {
		<-nd.exited
		errs = append(errs, nd.lm.Close())
	}
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
	errs = append(errs, t.errs()...)
	return errors.Join(errs...)
}

// clusterWorker reads Batch consecutive blocks at a random offset with
// one client.Get (or client.GetNamed of their names) each request, and
// checks every block loaded whole.
type clusterWorker struct {
	cl    *client.Client
	mix   mix // picks the first block of the run
	ids   []uint64
	names []string // every block's name when named, else nil
	dst   [][]byte
	size  int
}

func (w *clusterWorker) Do(ctx context.Context) (Op, error) {
	first, _ := w.mix.next()
	for i := range w.ids {
		w.ids[i] = first + uint64(i)
	}
	var (
		res client.GetResult
		err error
	)
	if w.names != nil {
		// Past the stored blocks (a test's runs) there are no names: ask
		// for names never stored, which must come back missing.
		res, err = w.cl.GetNamed(ctx, w.runNames(first), w.dst)
	} else {
		res, err = w.cl.Get(ctx, w.ids, w.dst)
	}
	if err != nil {
		return Op{}, fmt.Errorf("get blocks %d..%d: %w", first, first+uint64(len(w.ids))-1, err)
	}
	var moved int64
	for i, s := range res.Status {
		if s != client.Loaded {
			return Op{}, fmt.Errorf("get blocks %d..%d: block %d %v (index prefix %d of %d)", first, first+uint64(len(w.ids))-1, w.ids[i], s, res.Cached, len(w.ids))
		}
		if err := checkLen("get block", w.ids[i], len(res.Blocks[i]), w.size); err != nil {
			return Op{}, err
		}
		moved += int64(len(res.Blocks[i]))
	}
	return Op{Ops: int64(len(w.ids)), Bytes: moved}, nil
}

// runNames returns the names of the run of blocks from first.
func (w *clusterWorker) runNames(first uint64) []string {
	if hi := first + uint64(len(w.ids)); hi <= uint64(len(w.names)) {
		return w.names[first:hi]
	}
	names := make([]string, len(w.ids))
	for i, id := range w.ids {
		names[i] = objectName(id)
	}
	return names
}
