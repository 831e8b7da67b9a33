package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/netns"
)

// netClusterTarget is the cluster target on real hosts (Spec.Netns): a
// master and Spec.Nodes nodes as processes of the kvpool binary, each on
// a network host of its own whose link the kernel shapes to
// Spec.LinkRate each way (package netns). Every worker runs on node-0's
// host and reads blocks stored on the other nodes, so what it moves
// crosses the source node's egress and node-0's ingress: two real links.
// Worker i reads from remote node 1 + i mod (Nodes−1), with one client
// Fetch of Batch blocks at a random offset of that node's blocks, each
// block checked (key and checksum) by the client. Annotate reports the
// goodput from each node next to the link rate: with two remote nodes,
// the two flows share node-0's ingress.
type netClusterTarget struct {
	c       *cluster.Cluster
	clients []*client.Client
	sources []*netSource
}

// netSource is one remote node and the blocks it holds.
type netSource struct {
	from  client.Location
	ids   []uint64
	bytes atomic.Int64 // verified bytes read from it in the timed run
}

func (t *netClusterTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	if spec.Nodes < 2 {
		return nil, fmt.Errorf("--netns reads across links from other nodes: want --nodes >= 2, got %d", spec.Nodes)
	}
	bin := spec.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the kvpool binary: %w", err)
		}
		bin = exe
	}
	n := spec.blocks()
	share := (n + spec.Nodes - 2) / (spec.Nodes - 1) // on the remote nodes only
	c, err := cluster.Start(ctx, cluster.Options{
		Binary: bin, Nodes: spec.Nodes, Netns: true, Link: netns.Link{Rate: spec.LinkRate},
		RAMBytes:  int64(float64(share)/nodeRAMHeadroom+2) * ramFootprint(spec),
		BlockSize: int64(spec.BlockSize), MaxObjectBytes: int64(maxObject(spec)),
		Heartbeat: clusterHeartbeat, NodeTTL: clusterNodeTTL, StartTimeout: clusterSetupWait,
	})
	if err != nil {
		return nil, err
	}
	t.c = c
	h0 := c.NodeHost(0)
	t.clients = make([]*client.Client, spec.Conns)
	for i := range t.clients {
		cl, err := client.New(ctx, client.Options{Master: c.Master.Addr, Tenant: benchTenant, Token: c.Token,
			Dial: h0.DialContext, LocalNode: c.Nodes[0].Name})
		if err != nil {
			return nil, fmt.Errorf("client %d of %d: %w", i, spec.Conns, err)
		}
		t.clients[i] = cl
	}
	if err := t.store(ctx, spec, n); err != nil {
		return nil, err
	}
	ws := make([]Worker, spec.Conns)
	for i, cl := range t.clients {
		src := t.sources[i%len(t.sources)]
		if len(src.ids) < spec.Batch {
			return nil, fmt.Errorf("node %s holds %d blocks, fewer than a batch (%d): raise --data", src.from.Node, len(src.ids), spec.Batch)
		}
		dst := make([][]byte, spec.Batch)
		for j := range dst {
			dst[j] = make([]byte, spec.BlockSize)
		}
		ws[i] = &netWorker{cl: cl, src: src, mix: newMix(i, len(src.ids)-spec.Batch+1, 0), ids: make([]uint64, spec.Batch), dst: dst}
	}
	return ws, nil
}

// store puts blocks 0..n-1 on the remote nodes, a chunk at a time (at
// most clusterPutChunk blocks, and a second of the link's rate) with each
// chunk's placement hint the next remote node, waits for the index, and
// records where each block is.
func (t *netClusterTarget) store(ctx context.Context, spec Spec, n int) error {
	cl := t.clients[0]
	d := newDataset(min(n, maxSources), spec.BlockSize, false)
	byNode := map[string]*netSource{}
	for _, e := range t.c.Nodes[1:] {
		s := &netSource{from: client.Location{Node: e.Name, Addr: e.Addr, Tier: client.TierRAM}}
		byNode[e.Name] = s
		t.sources = append(t.sources, s)
	}
	// One Put must cross the link within the client's request timeout:
	// a chunk is at most a second of the link's rate.
	per := clusterPutChunk
	if spec.LinkRate > 0 {
		per = max(1, min(per, int(spec.LinkRate/float64(spec.BlockSize))))
	}
	for lo, chunk := 0, 0; lo < n; lo, chunk = lo+per, chunk+1 {
		hi := min(n, lo+per)
		ids := make([]uint64, 0, hi-lo)
		payloads := make([][]byte, 0, hi-lo)
		for id := uint64(lo); id < uint64(hi); id++ {
			ids = append(ids, id)
			payloads = append(payloads, d.payload(id))
		}
		hint := t.sources[chunk%len(t.sources)].from.Node
		errs, err := cl.Put(ctx, ids, payloads, client.PutOptions{Replicas: 1, Hint: hint})
		if err != nil {
			return fmt.Errorf("put blocks %d..%d: %w", lo, hi-1, err)
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("put blocks %d..%d: %w", lo, hi-1, err)
		}
		reps, err := waitIndexed(ctx, cl, ids)
		if err != nil {
			return err
		}
		for i, rs := range reps {
			for _, r := range rs {
				if s := byNode[r.Node]; s != nil && r.Tier == client.TierRAM {
					s.ids = append(s.ids, ids[i])
					break
				}
			}
		}
	}
	return nil
}

// Annotate reports the goodput from each remote node against the link
// rate.
func (t *netClusterTarget) Annotate(res *Result) {
	rate := res.Spec.LinkRate
	var total int64
	for _, s := range t.sources {
		total += s.bytes.Load()
	}
	res.Notes = append(res.Notes, fmt.Sprintf("real hosts (--netns): %d nodes on their own network namespaces, links %s each way (htb, shared fairly between peers); %d workers on node-0's host, each reading one remote node's blocks with client Fetch, every block verified",
		len(t.c.Nodes), linkRate(rate), len(t.clients)))
	for _, s := range t.sources {
		b := s.bytes.Load()
		line := fmt.Sprintf("from %s (%d blocks): %.1f MB/s", s.from.Node, len(s.ids), float64(b)/res.Seconds/1e6)
		if total > 0 {
			line += fmt.Sprintf(", %.0f%% of the total", 100*float64(b)/float64(total))
		}
		if rate > 0 {
			line += fmt.Sprintf(", %.3f of the fair share (link rate / %d)", float64(b)/res.Seconds/(rate/float64(len(t.sources))), len(t.sources))
		}
		res.Notes = append(res.Notes, line)
	}
	if rate > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("goodput %.1f MB/s = %.3f of node-0's ingress link (%s); the kernel counts Ethernet frames, about 4.5%% more than the payload at MTU 1500",
			float64(total)/res.Seconds/1e6, float64(total)/res.Seconds/rate, linkRate(rate)))
	}
}

// linkRate says a link rate in flag terms.
func linkRate(r float64) string {
	if r == 0 {
		return "unshaped"
	}
	return fmt.Sprintf("%.1f MB/s", r/1e6)
}

// Close closes the clients and stops the cluster (its processes, then
// its hosts).
func (t *netClusterTarget) Close() error {
	var errs []error
	for _, cl := range t.clients {
		if cl != nil {
			errs = append(errs, cl.Close())
		}
	}
	if t.c != nil {
		errs = append(errs, t.c.Stop())
	}
	return errors.Join(errs...)
}

// netWorker reads Batch blocks of one remote node per request.
type netWorker struct {
	cl  *client.Client
	src *netSource
	mix mix // picks the first block of the run
	ids []uint64
	dst [][]byte
}

func (w *netWorker) Do(ctx context.Context) (Op, error) {
	first, _ := w.mix.next()
	copy(w.ids, w.src.ids[first:])
	res, err := w.cl.Fetch(ctx, w.src.from, w.ids, client.FetchOptions{Dst: w.dst})
	if err != nil {
		return Op{}, fmt.Errorf("fetch %d blocks from %s: %w", len(w.ids), w.src.from.Node, err)
	}
	var moved int64
	for i, s := range res.Status {
		if s != client.Loaded {
			return Op{}, fmt.Errorf("block %d from %s: %v", w.ids[i], w.src.from.Node, s)
		}
		moved += int64(len(res.Blocks[i]))
	}
	w.src.bytes.Add(moved)
	return Op{Ops: int64(len(w.ids)), Bytes: moved}, nil
}
