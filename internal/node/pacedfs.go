package node

import (
	"context"
	"os"
	"sync/atomic"

	"github.com/kvpool/kvpool/internal/node/pacer"
	"github.com/kvpool/kvpool/internal/vfs"
)

// pacedFS paces the reads and writes of the files it opens (the SSD
// tier's slot files) once armed: the tier's start-up scan runs unpaced,
// so a restart is not slowed to the experiment's scaled SSD rate.
type pacedFS struct {
	vfs.FS
	read, write *pacer.Pacer // nil: that direction is not paced
	armed       atomic.Bool
}

// OpenFile opens name and wraps it.
func (p *pacedFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := p.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &pacedFile{File: f, fs: p}, nil
}

// pacedFile is a file of a pacedFS.
type pacedFile struct {
	vfs.File
	fs *pacedFS
}

// ReadAt waits for len(b) bytes of the SSD read pacer, then reads. The
// wait is not cancellable (the tier's reads take no context); it is
// bounded by len(b) / rate.
func (f *pacedFile) ReadAt(b []byte, off int64) (int, error) {
	if f.fs.read != nil && f.fs.armed.Load() {
		if err := f.fs.read.Wait(context.Background(), len(b)); err != nil {
			return 0, err
		}
	}
	return f.File.ReadAt(b, off)
}

// WriteAt waits for len(b) bytes of the SSD write pacer, then writes.
func (f *pacedFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fs.write != nil && f.fs.armed.Load() {
		if err := f.fs.write.Wait(context.Background(), len(b)); err != nil {
			return 0, err
		}
	}
	return f.File.WriteAt(b, off)
}

// Fd hides the descriptor while reads are paced, so the data plane reads
// SSD blocks with ReadAt (paced) instead of sendfile (which would bypass
// the pacer).
func (f *pacedFile) Fd() uintptr {
	if f.fs.read != nil && f.fs.armed.Load() {
		return 0
	}
	return f.File.Fd()
}
