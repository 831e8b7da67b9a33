package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/node"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/tier/ssd"
)

// Node target sizing. Each constant says where its value comes from. The
// node's tiers are sized in what an object takes there, not in block
// sizes: in RAM its name and payload in whole 4 KiB chunks (ramFootprint;
// a 1000-byte block takes a whole chunk), on SSD its pages and side-table
// entries (ssd.SlotSize).
const (
	// nodeRAMHeadroom: the RAM tier of tier "ram" is the working set's
	// footprint / 0.8, so the working set stays under the RAM tier's
	// default low watermark (config.DefaultRAMLowWatermark, 90 %) and
	// nothing is demoted (BenchmarkNodeGet: room for 80 blocks for 64).
	nodeRAMHeadroom = 0.8
	// nodeSSDRAMBlocks is the RAM tier of tier "ssd": room for 2 blocks,
	// so all but at most 2 blocks are demoted (as BenchmarkNodeGet).
	nodeSSDRAMBlocks = 2
	// nodeSSDFactor sizes the SSD tier at 2 × the data set, clear of its
	// high watermark (ssd.DefaultHighWatermark, 95 %).
	nodeSSDFactor = 2
)

// nodeTarget is one whole node (node.New + Run) in process, read over
// loopback through nodeclient (which verifies every block).
type nodeTarget struct {
	cancel   context.CancelFunc
	done     chan error
	conns    []*nodeclient.Conn
	cleanup  func() error
	rss0     int64
	ramBytes int64
	notes    []string
}

func (t *nodeTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	t.rss0, _ = procStatus("VmRSS:")
	// Reset the peak (VmHWM) so Annotate sees this run's peak (Linux ≥ 4.0;
	// where it fails the peak is the process's whole life, still an upper bound).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.notes = append(t.notes, "peak RSS not reset ("+err.Error()+"): it covers the whole process life")
	}
	n := spec.blocks()
	fp := ramFootprint(spec)
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	// block_size is the typical object size the policies are sized for;
	// max_object_bytes is the limit, raised to the block size if need be.
	cfg.BlockSize = config.Size(spec.BlockSize)
	cfg.MaxObjectBytes = config.Size(maxObject(spec))
	cfg.RAM.ChunkBytes = config.Size(DefaultRAMChunk)
	cfg.RAM.Bytes = config.Size(int64(float64(n)/nodeRAMHeadroom+1) * fp)
	dir, cleanup, err := workDir(spec, "node")
	if err != nil {
		return nil, err
	}
	t.cleanup = cleanup
	cfg.SSD.Enabled = true
	cfg.SSD.Path = filepath.Join(dir, "ssd")
	cfg.SSD.Bytes = config.Size(int64(nodeSSDFactor*(n+8)) * ssd.SlotSize(spec.BlockSize))
	cfg.SSD.Sync = "none" // reads do not depend on it; setup is faster
	if spec.Tier == TierSSD {
		cfg.RAM.Bytes = config.Size(nodeSSDRAMBlocks * fp)
		cfg.Promotion.MaxPerHeartbeat = 0 // SSD blocks stay on SSD
		cfg.SSD.DirectIO = !spec.BufferedIO
	}
	t.ramBytes = int64(cfg.RAM.Bytes)
	addr, err := t.run(ctx, cfg)
	if err != nil && cfg.SSD.DirectIO {
		t.notes = append(t.notes, fmt.Sprintf("O_DIRECT refused (%v): reads may come from the page cache", err))
		cfg.SSD.DirectIO = false
		addr, err = t.run(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	if spec.Tier == TierSSD && !cfg.SSD.DirectIO {
		t.notes = append(t.notes, "buffered SSD I/O: reads may come from the page cache")
	}
	t.conns = make([]*nodeclient.Conn, spec.Conns)
	for i := range t.conns {
		c, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Tenant: benchTenant})
		if err != nil {
			return nil, fmt.Errorf("dial node %s: %w", addr, err)
		}
		t.conns[i] = c
	}
	d := newDataset(n, spec.BlockSize, spec.Named)
	for id := range uint64(n) {
		if err := put(ctx, t.conns[0], d, id); err != nil {
			return nil, fmt.Errorf("%w of %d to node %s", err, n, addr)
		}
	}
	if err := t.checkTier(ctx, spec, n); err != nil {
		return nil, err
	}
	ws := make([]Worker, spec.Conns)
	for i, c := range t.conns {
		w := &nodeWorker{c: c, d: d, mix: newMix(i, n, spec.WriteFraction), dst: make([]byte, 0, spec.BlockSize), size: spec.BlockSize}
		if spec.Batch > 1 {
			w.ids = make([]uint64, spec.Batch)
			w.dsts = make([][]byte, spec.Batch)
			for j := range w.dsts {
				w.dsts[j] = make([]byte, 0, spec.BlockSize)
			}
			if d.names != nil {
				w.names = make([]string, spec.Batch)
			}
		}
		ws[i] = w
	}
	return ws, nil
}

// checkTier checks that the tier under test holds the data set (all of it
// in RAM for tier ram, all but nodeSSDRAMBlocks on SSD for tier ssd).
func (t *nodeTarget) checkTier(ctx context.Context, spec Spec, n int) error {
	ts, err := t.conns[0].Stats(ctx)
	if err != nil {
		return fmt.Errorf("node stats: %w", err)
	}
	want := n
	if spec.Tier == TierSSD {
		want = n - nodeSSDRAMBlocks
	}
	for _, s := range ts {
		if s.Name == spec.Tier {
			if int(s.Stats.Blocks) < want {
				return fmt.Errorf("node's %s tier holds %d blocks after %d puts, want at least %d", spec.Tier, s.Stats.Blocks, n, want)
			}
			return nil
		}
	}
	return fmt.Errorf("node reports no %s tier", spec.Tier)
}

// run starts the node and waits until it is ready.
func (t *nodeTarget) run(ctx context.Context, cfg config.Node) (string, error) {
	nd, err := node.New(cfg, node.Options{})
	if err != nil {
		return "", fmt.Errorf("configure node: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- nd.Run(runCtx) }()
	select {
	case <-nd.Ready():
		t.cancel, t.done = cancel, done
		return nd.Addr(), nil
	case err := <-done:
		cancel()
		return "", fmt.Errorf("run node: %w", err)
	case <-ctx.Done():
		cancel()
		<-done
		return "", ctx.Err()
	}
}

func (t *nodeTarget) Annotate(res *Result) {
	res.Notes = append(res.Notes, t.notes...)
	res.RAMTierBytes = t.ramBytes
	res.RSSBeforeBytes = t.rss0
	if peak, err := procStatus("VmHWM:"); err == nil {
		res.RSSPeakBytes = peak
	} else {
		res.Notes = append(res.Notes, "resident memory unknown: "+err.Error())
	}
}

func (t *nodeTarget) Close() error {
	var errs []error
	for _, c := range t.conns {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	if t.cancel != nil {
		t.cancel()
		errs = append(errs, <-t.done)
	}
	if t.cleanup != nil {
		errs = append(errs, t.cleanup())
	}
	return errors.Join(errs...)
}

// put stores block id of d through c: a PUT of its chain id, or a named
// PUT of its name.
func put(ctx context.Context, c *nodeclient.Conn, d *dataset, id uint64) error {
	if d.names != nil {
		if err := c.PutNamed(ctx, d.names[id], d.payload(id)); err != nil {
			return fmt.Errorf("put %s: %w", d.what(id), err)
		}
		return nil
	}
	if err := c.Put(ctx, id, d.payload(id)); err != nil {
		return fmt.Errorf("put block %d: %w", id, err)
	}
	return nil
}

// nodeWorker GETs (or PUTs) random blocks over one connection, by chain
// id or, for a named data set, by name (the node's named ops); with ids
// set, it MGETs len(ids) random blocks per request.
type nodeWorker struct {
	c     *nodeclient.Conn
	d     *dataset
	mix   mix
	dst   []byte
	size  int
	ids   []uint64 // a batch's ids (Spec.Batch > 1), nil for single GETs
	names []string // a named batch's names
	dsts  [][]byte // a batch's buffers
}

func (w *nodeWorker) Do(ctx context.Context) (Op, error) {
	if w.ids != nil {
		return w.batch(ctx)
	}
	id, write := w.mix.next()
	if write {
		if err := put(ctx, w.c, w.d, id); err != nil {
			return Op{}, err
		}
		return Op{Ops: 1, Bytes: int64(w.size)}, nil
	}
	var (
		p   []byte
		err error
	)
	if w.d.names != nil {
		p, _, err = w.c.GetNamed(ctx, w.d.names[id], w.dst)
	} else {
		p, _, err = w.c.Get(ctx, id, w.dst)
	}
	if err != nil {
		return Op{}, fmt.Errorf("get %s: %w", w.d.what(id), err)
	}
	if err := checkLen("get block", id, len(p), w.size); err != nil {
		return Op{}, err
	}
	return Op{Ops: 1, Bytes: int64(len(p))}, nil
}

// batch MGETs len(w.ids) random blocks (verified by the client, as a
// GET) and checks that each came back whole and with its own checksum.
func (w *nodeWorker) batch(ctx context.Context) (Op, error) {
	for i := range w.ids {
		w.ids[i], _ = w.mix.next()
	}
	var (
		res []nodeclient.Result
		err error
	)
	if w.names != nil {
		for i, id := range w.ids {
			w.names[i] = w.d.names[id]
		}
		res, err = w.c.MGetNamed(ctx, w.names, w.dsts)
	} else {
		res, err = w.c.MGet(ctx, w.ids, w.dsts)
	}
	if err != nil {
		return Op{}, fmt.Errorf("mget %d blocks: %w", len(w.ids), err)
	}
	var n int64
	for i, r := range res {
		id := w.ids[i]
		if r.Err != nil {
			return Op{}, fmt.Errorf("mget %s: %w", w.d.what(id), r.Err)
		}
		if err := checkLen("mget block", id, len(r.Payload), w.size); err != nil {
			return Op{}, err
		}
		if r.Sum != w.d.sums[id] {
			return Op{}, fmt.Errorf("mget %s: checksum %08x, stored %08x", w.d.what(id), r.Sum, w.d.sums[id])
		}
		n += int64(len(r.Payload))
	}
	return Op{Ops: int64(len(res)), Bytes: n}, nil
}

// procStatus returns a byte figure of /proc/self/status (field "VmRSS:"
// or "VmHWM:", in kB there; Linux only).
func procStatus(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read resident memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == field {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s %q: %w", field, f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("read resident memory: no %s in /proc/self/status", field)
}
