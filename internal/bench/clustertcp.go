package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/kvpool/kvpool/internal/payload"
)

// clusterTCPTarget is the raw-TCP limit of the cluster target: Spec.Nodes
// minimal servers on loopback, the data set's blocks striped over them
// (block id on server id mod Nodes, each block its own buffer, so the
// servers send from a working set as large as the nodes'), and
// Spec.Conns workers with one connection to every server. A request
// reads Batch consecutive blocks as client.Get does: one request per
// server holding some of them, sent in parallel, each answered with its
// blocks back to back. No lookup, no framing, no checksum: what the
// cluster target's data movement could reach at best on this machine.
type clusterTCPTarget struct {
	rawServers
}

// clusterTCPMaxBatch bounds a request's block count as the server reads
// it, so a corrupt count cannot make it allocate without bound; Spec's
// Batch is at most 4096.
const clusterTCPMaxBatch = 4096

func (t *clusterTCPTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	n := spec.blocks()
	for i := range spec.Nodes {
		// Server i holds blocks i, i+Nodes, … at index id/Nodes.
		var blocks [][]byte
		for id := i; id < n; id += spec.Nodes {
			blocks = append(blocks, payload.New(spec.BlockSize, benchTenant, uint64(id)))
		}
		if _, err := t.listen(func(c net.Conn) { serveRawBatch(c, blocks, spec.Nodes) }); err != nil {
			return nil, fmt.Errorf("raw server %d: %w", i, err)
		}
	}
	ws := make([]Worker, spec.Conns)
	for i := range ws {
		w := &clusterTCPWorker{
			mix:   newMix(i, n-spec.Batch+1, 0),
			nodes: spec.Nodes,
			batch: spec.Batch,
			size:  spec.BlockSize,
			ids:   make([][]uint64, spec.Nodes),
			bufs:  make([][]byte, spec.Nodes),
			reqs:  make([][]byte, spec.Nodes),
			errs:  make([]error, spec.Nodes),
		}
		for j, ln := range t.lns {
			c, err := t.dial(ctx, ln)
			if err != nil {
				return nil, fmt.Errorf("raw server %d: %w", j, err)
			}
			w.conns = append(w.conns, c)
			// A server's share of a run of Batch blocks is at most
			// ceil(Batch/Nodes) blocks.
			w.bufs[j] = make([]byte, (spec.Batch+spec.Nodes-1)/spec.Nodes*spec.BlockSize)
		}
		ws[i] = w
	}
	return ws, nil
}

// Annotate says what the reference is.
func (t *clusterTCPTarget) Annotate(res *Result) {
	s := res.Spec
	res.Notes = append(res.Notes, fmt.Sprintf("%d raw TCP servers, %d blocks striped over them; %d workers with a connection to each (%d connections); a request is %d consecutive blocks, one request per server in parallel, no lookup or checksum",
		s.Nodes, s.blocks(), s.Conns, s.Conns*s.Nodes, s.Batch))
}

// serveRawBatch answers each request read from c — a u32 count and that
// many u64 block ids, little-endian — with the blocks back to back, until
// c fails or a request names a block server does not hold. Server holds
// blocks[id/stride].
func serveRawBatch(c net.Conn, blocks [][]byte, stride int) {
	var hdr [4]byte
	ids := make([]byte, 0, 8*clusterTCPMaxBatch)
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		k := int(binary.LittleEndian.Uint32(hdr[:]))
		if k > clusterTCPMaxBatch {
			return
		}
		ids = ids[:8*k]
		if _, err := io.ReadFull(c, ids); err != nil {
			return
		}
		for j := range k {
			i := binary.LittleEndian.Uint64(ids[8*j:]) / uint64(stride)
			if i >= uint64(len(blocks)) {
				return
			}
			if _, err := c.Write(blocks[i]); err != nil {
				return
			}
		}
	}
}

type clusterTCPWorker struct {
	mix   mix
	nodes int
	batch int
	size  int
	conns []net.Conn
	// Per server, reused by every request: the ids it is asked for, the
	// request bytes, the buffer its blocks are read into, and its error.
	ids  [][]uint64
	reqs [][]byte
	bufs [][]byte
	errs []error
	wg   sync.WaitGroup
}

// Do reads a run of Batch blocks at a random offset: one request per
// server holding some of them, in parallel.
func (w *clusterTCPWorker) Do(ctx context.Context) (Op, error) {
	first, _ := w.mix.next()
	for j := range w.ids {
		w.ids[j] = w.ids[j][:0]
	}
	for id := first; id < first+uint64(w.batch); id++ {
		s := id % uint64(w.nodes)
		w.ids[s] = append(w.ids[s], id)
	}
	for j, ids := range w.ids {
		w.errs[j] = nil
		if len(ids) > 0 {
			w.wg.Go(func() { w.errs[j] = w.fetch(j, ids) })
		}
	}
	w.wg.Wait()
	if err := errors.Join(w.errs...); err != nil {
		return Op{}, fmt.Errorf("blocks %d..%d: %w", first, first+uint64(w.batch)-1, err)
	}
	return Op{Ops: int64(w.batch), Bytes: int64(w.batch * w.size)}, nil
}

// fetch asks server j for ids and reads their blocks.
func (w *clusterTCPWorker) fetch(j int, ids []uint64) error {
	req := binary.LittleEndian.AppendUint32(w.reqs[j][:0], uint32(len(ids)))
	for _, id := range ids {
		req = binary.LittleEndian.AppendUint64(req, id)
	}
	w.reqs[j] = req
	if _, err := w.conns[j].Write(req); err != nil {
		return fmt.Errorf("raw server %d: send request: %w", j, err)
	}
	buf := w.bufs[j][:len(ids)*w.size]
	if _, err := io.ReadFull(w.conns[j], buf); err != nil {
		return fmt.Errorf("raw server %d: read %d blocks (%d bytes): %w", j, len(ids), len(buf), err)
	}
	return nil
}

// CompareCluster runs the cluster target as spec says and then its raw-TCP
// limit (TargetClusterTCP) with the same nodes, connections, batch and
// data set, and returns the cluster's verified throughput as a ratio to
// the raw one. There is no goal: the ratio is what a lookup, the framing
// and every block's verification cost at this shape.
func CompareCluster(ctx context.Context, spec Spec) (Comparison, error) {
	if spec.Target != TargetCluster {
		return Comparison{}, badSpec("Target", spec.Target, "CompareCluster runs the cluster target")
	}
	k, err := Run(ctx, spec)
	if err != nil {
		return Comparison{}, err
	}
	raw := spec
	raw.Target = TargetClusterTCP
	raw.Named = false
	o, err := Run(ctx, raw)
	if err != nil {
		return Comparison{}, err
	}
	c := Comparison{BlockSize: k.Spec.BlockSize, Against: TargetClusterTCP, Kvpool: k, Other: o}
	if o.GBPerSec > 0 {
		c.Ratio = k.GBPerSec / o.GBPerSec
	}
	return c, nil
}
