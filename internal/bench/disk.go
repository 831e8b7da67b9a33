package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/vfs"
)

// diskTarget is the raw disk read limit of the SSD directory: one file of
// DataBytes written once, then read with O_DIRECT where the platform and
// filesystem allow it, by Conns workers with one read each in flight.
//
// Without node (target disk, "disk (sequential)") the reads are BlockSize
// chunks taken in file order across all workers (each takes the next
// chunk): the disk's streaming limit. With node (target disk-node, "disk
// (node I/O)") they are what a node GET from SSD asks of the disk: one
// read of the block's whole pages (BlockSize rounded up to ssd.PageSize,
// the record of a chain key whose name sits in the head entry) at a
// random page-aligned slot of the file, Conns reads in flight (the node
// target's connections, each with one GET outstanding) — the fair
// reference for node GET from SSD.
type diskTarget struct {
	dataFile
	node bool
}

func (t *diskTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	ioSize := spec.BlockSize
	if t.node {
		ioSize = (spec.BlockSize + ssd.PageSize - 1) / ssd.PageSize * ssd.PageSize
	}
	if err := t.open(ctx, spec, "disk", ioSize); err != nil {
		return nil, err
	}
	next := new(atomic.Int64)
	ws := make([]Worker, spec.Conns)
	for i := range ws {
		w := &diskWorker{f: t.f, buf: alignedBuf(ioSize), next: next, chunks: int64(t.chunks), payload: spec.BlockSize}
		if t.node {
			w.mix = newMix(i, t.chunks, 0)
		}
		ws[i] = w
	}
	return ws, nil
}

// dataFile is the raw disk targets' data: one file of Spec.DataBytes in
// chunks of a given I/O size, in the SSD directory (Spec.Dir), opened
// for O_DIRECT reads unless Spec.BufferedIO or the filesystem refuses it
// (which notes says).
type dataFile struct {
	f       *os.File
	chunks  int
	cleanup func() error
	notes   []string
}

// open writes the file in a work directory named for the target (name)
// and opens it for reading.
func (d *dataFile) open(ctx context.Context, spec Spec, name string, ioSize int) error {
	if ioSize%vfs.DirectIOAlign != 0 && !spec.BufferedIO {
		return fmt.Errorf("block size %d is not a multiple of %d, as O_DIRECT needs (or ask for buffered I/O)", spec.BlockSize, vfs.DirectIOAlign)
	}
	dir, cleanup, err := workDir(spec, name)
	if err != nil {
		return err
	}
	d.cleanup = cleanup
	d.chunks = max(1, int(spec.DataBytes/int64(ioSize)))
	path := filepath.Join(dir, "disk.dat")
	if err := writeDataFile(ctx, path, d.chunks, ioSize); err != nil {
		return err
	}
	flag := os.O_RDONLY
	if !spec.BufferedIO {
		flag |= vfs.ODirect
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil && flag != os.O_RDONLY {
		d.notes = append(d.notes, fmt.Sprintf("O_DIRECT refused (%v): reads may come from the page cache", err))
		flag = os.O_RDONLY
		f, err = os.OpenFile(path, flag, 0)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if flag == os.O_RDONLY {
		d.notes = append(d.notes, "buffered I/O: reads may come from the page cache")
	}
	d.f = f
	return nil
}

func (d *dataFile) Annotate(res *Result) { res.Notes = append(res.Notes, d.notes...) }

// Close closes the file and removes the work directory.
func (d *dataFile) Close() error {
	var errs []error
	if d.f != nil {
		errs = append(errs, d.f.Close())
	}
	if d.cleanup != nil {
		errs = append(errs, d.cleanup())
	}
	return errors.Join(errs...)
}

// writeDataFile writes chunks × size bytes to path and syncs it.
func writeDataFile(ctx context.Context, path string, chunks, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	chunk := make([]byte, size)
	for i := range chunks {
		if ctx.Err() != nil {
			f.Close()
			return ctx.Err()
		}
		for j := range chunk {
			chunk[j] = byte(i + j)
		}
		if _, err := w.Write(chunk); err != nil {
			f.Close()
			return fmt.Errorf("write chunk %d of %s: %w", i, path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// alignedBuf returns n bytes starting at a vfs.DirectIOAlign boundary.
func alignedBuf(n int) []byte {
	b := make([]byte, n+vfs.DirectIOAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % vfs.DirectIOAlign); r != 0 {
		off = vfs.DirectIOAlign - r
	}
	return b[off : off+n : off+n]
}

type diskWorker struct {
	f       *os.File
	buf     []byte
	next    *atomic.Int64
	mix     mix // picks a random chunk (disk-node); zero: the next chunk
	chunks  int64
	payload int // the block size: bytes counted per read
}

func (w *diskWorker) Do(ctx context.Context) (Op, error) {
	var i int64
	if w.mix.rng != nil {
		id, _ := w.mix.next()
		i = int64(id)
	} else {
		i = (w.next.Add(1) - 1) % w.chunks
	}
	off := i * int64(len(w.buf))
	if _, err := w.f.ReadAt(w.buf, off); err != nil {
		return Op{}, fmt.Errorf("read %d bytes at %d of %s: %w", len(w.buf), off, w.f.Name(), err)
	}
	return Op{Ops: 1, Bytes: int64(w.payload)}, nil
}
