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
)

// Node target sizing. Each constant says where its value comes from.
const (
	// nodeRAMHeadroom: the RAM tier of tier "ram" is the working set /
	// 0.8, so the working set stays under the RAM tier's default low
	// watermark (config.DefaultRAMLowWatermark, 90 %) and nothing is
	// demoted (BenchmarkNodeGet uses 80 slots for 64 blocks).
	nodeRAMHeadroom = 0.8
	// nodeSSDRAMBlocks is the RAM tier of tier "ssd": 2 blocks, so all
	// but at most 2 blocks are demoted (as BenchmarkNodeGet).
	nodeSSDRAMBlocks = 2
	// nodeSSDFactor sizes the SSD tier at 2 × the data set, clear of its
	// high watermark (ssd.DefaultHighWatermark, 95 %) with headers.
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
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.BlockSize = config.Size(spec.BlockSize)
	cfg.RAM.Bytes = config.Size(int64(float64(n)/nodeRAMHeadroom+1) * int64(spec.BlockSize))
	dir, cleanup, err := workDir(spec, "node")
	if err != nil {
		return nil, err
	}
	t.cleanup = cleanup
	cfg.SSD.Enabled = true
	cfg.SSD.Path = filepath.Join(dir, "ssd")
	cfg.SSD.Bytes = config.Size(int64(nodeSSDFactor*(n+8)) * int64(spec.BlockSize))
	cfg.SSD.Sync = "none" // reads do not depend on it; setup is faster
	if spec.Tier == TierSSD {
		cfg.RAM.Bytes = config.Size(nodeSSDRAMBlocks * spec.BlockSize)
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
	d := newDataset(n, spec.BlockSize)
	for id := range uint64(n) {
		if err := t.conns[0].Put(ctx, id, d.payload(id)); err != nil {
			return nil, fmt.Errorf("put block %d of %d to node %s: %w", id, n, addr, err)
		}
	}
	if err := t.checkTier(ctx, spec, n); err != nil {
		return nil, err
	}
	ws := make([]Worker, spec.Conns)
	for i, c := range t.conns {
		ws[i] = &nodeWorker{c: c, d: d, mix: newMix(i, n, spec.WriteFraction), dst: make([]byte, 0, spec.BlockSize), size: spec.BlockSize}
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

// nodeWorker GETs (or PUTs) random blocks over one connection.
type nodeWorker struct {
	c    *nodeclient.Conn
	d    *dataset
	mix  mix
	dst  []byte
	size int
}

func (w *nodeWorker) Do(ctx context.Context) (Op, error) {
	id, write := w.mix.next()
	if write {
		if err := w.c.Put(ctx, id, w.d.payload(id)); err != nil {
			return Op{}, fmt.Errorf("put block %d: %w", id, err)
		}
		return Op{Ops: 1, Bytes: int64(w.size)}, nil
	}
	p, _, err := w.c.Get(ctx, id, w.dst)
	if err != nil {
		return Op{}, fmt.Errorf("get block %d: %w", id, err)
	}
	if err := checkLen("get block", id, len(p), w.size); err != nil {
		return Op{}, err
	}
	return Op{Ops: 1, Bytes: int64(len(p))}, nil
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
