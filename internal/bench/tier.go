package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/tier/ssd"
)

// ramTarget is a RAM tier in process holding the working set: chunks of
// DefaultRAMChunk bytes, room for one object more than the working set
// (so nothing is evicted), a max object size of at least the block size,
// and policies sized for the block size as the typical object size.
type ramTarget struct {
	r *ram.RAM
}

func (t *ramTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	n := spec.blocks()
	capacity := int64(n+1) * ramFootprint(spec)
	r, err := ram.Open(ram.Options{
		BlockSize: spec.BlockSize, ChunkSize: DefaultRAMChunk, CapacityBytes: capacity,
		MaxObjectSize: int(min(int64(maxObject(spec)), capacity)),
	})
	if err != nil {
		return nil, fmt.Errorf("open RAM tier: %w", err)
	}
	t.r = r
	d := newDataset(n, spec.BlockSize, spec.Named)
	if err := fill(ctx, r, d); err != nil {
		return nil, err
	}
	return tierWorkers(r, d, spec), nil
}

func (t *ramTarget) Close() error {
	if t.r == nil {
		return nil
	}
	return t.r.Close()
}

// ssdTarget is an SSD tier in process on spec.Dir, with O_DIRECT unless
// spec.BufferedIO (or the filesystem refuses it), with room for 8 objects
// more than the data set and a max object size of at least the block size.
type ssdTarget struct {
	t       *ssd.Tier
	cleanup func() error
	notes   []string
}

func (t *ssdTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	dir, cleanup, err := workDir(spec, "ssd")
	if err != nil {
		return nil, err
	}
	t.cleanup = cleanup
	n := spec.blocks()
	// ssd.SlotSize counts names of up to 64 bytes, as objectName's are.
	capacity := int64(n+8) * ssd.SlotSize(spec.BlockSize)
	opts := ssd.Options{
		Dir: dir, BlockSize: spec.BlockSize,
		CapacityBytes: capacity,
		MaxObjectSize: min(maxObject(spec), ssd.CapacityPayload(capacity)),
		Sync:          ssd.SyncNone, HighWatermark: 1, LowWatermark: 1,
		DirectIO: !spec.BufferedIO,
	}
	st, err := ssd.Open(ctx, opts)
	if errors.Is(err, ssd.ErrNoDirectIO) {
		t.notes = append(t.notes, "O_DIRECT refused by the filesystem: reads may come from the page cache")
		opts.DirectIO = false
		st, err = ssd.Open(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("open SSD tier in %s: %w", dir, err)
	}
	if !opts.DirectIO {
		t.notes = append(t.notes, "buffered I/O: reads may come from the page cache")
	}
	t.t = st
	d := newDataset(n, spec.BlockSize, spec.Named)
	if err := fill(ctx, st, d); err != nil {
		return nil, err
	}
	return tierWorkers(st, d, spec), nil
}

func (t *ssdTarget) Annotate(res *Result) { res.Notes = append(res.Notes, t.notes...) }

func (t *ssdTarget) Close() error {
	var errs []error
	if t.t != nil {
		errs = append(errs, t.t.Close())
	}
	if t.cleanup != nil {
		errs = append(errs, t.cleanup())
	}
	return errors.Join(errs...)
}

// fill puts every block of d into tr.
func fill(ctx context.Context, tr tier.Tier, d *dataset) error {
	for id := range uint64(d.n) {
		if err := tr.Put(ctx, d.key(id), d.payload(id), d.sums[id]); err != nil {
			return fmt.Errorf("put block %d of %d: %w", id, d.n, err)
		}
	}
	return nil
}

func tierWorkers(tr tier.Tier, d *dataset, spec Spec) []Worker {
	ws := make([]Worker, spec.Conns)
	for i := range ws {
		ws[i] = &tierWorker{tr: tr, d: d, mix: newMix(i, d.n, spec.WriteFraction), dst: make([]byte, 0, spec.BlockSize), size: spec.BlockSize}
	}
	return ws
}

// tierWorker reads (or writes) random blocks of a tier.
type tierWorker struct {
	tr   tier.Tier
	d    *dataset
	mix  mix
	dst  []byte
	size int
}

func (w *tierWorker) Do(ctx context.Context) (Op, error) {
	id, write := w.mix.next()
	if write {
		if err := w.tr.Put(ctx, w.d.key(id), w.d.payload(id), w.d.sums[id]); err != nil {
			return Op{}, fmt.Errorf("put block %d: %w", id, err)
		}
		return Op{Ops: 1, Bytes: int64(w.size)}, nil
	}
	p, _, err := w.tr.Get(ctx, w.d.key(id), w.dst)
	if err != nil {
		return Op{}, fmt.Errorf("get block %d: %w", id, err)
	}
	if err := checkLen("get block", id, len(p), w.size); err != nil {
		return Op{}, err
	}
	return Op{Ops: 1, Bytes: int64(len(p))}, nil
}
