package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrCrashed is returned by every operation on a File that was open when
// its MemFS crashed: the process that held it is, in the simulation, dead.
var ErrCrashed = errors.New("file handle predates a simulated crash")

// MemFS is an in-memory FS that tracks, per file, what has been synced, so
// a test can simulate power loss with Crash or CrashTorn.
//
// Crash model and its simplifications:
//   - File contents: a write or truncate is durable only after a Sync of
//     that file (through any handle). Crash drops everything else;
//     CrashTorn keeps a random subset of the unsynced writes, some only in
//     part (a prefix of whole 512-byte sectors), as a drive with a volatile
//     write cache may.
//   - Namespace: creating, removing and renaming files and directories is
//     durable at once, as if every directory were synced after every
//     change; SyncDir does nothing. A file created and never synced
//     survives a crash empty.
//   - Memory: unsynced writes are kept as a log until the next Sync, so a
//     file that is never synced holds every write twice.
//
// With ODirect (on platforms that have it) offsets and lengths must be
// multiples of DirectIOAlign, as Linux requires; buffer addresses are not
// checked.
//
// MemFS is safe for concurrent use; Crash must not run concurrently with
// operations whose outcome the test relies on.
type MemFS struct {
	mu    sync.Mutex
	dirs  map[string]bool
	files map[string]*memNode
	epoch atomic.Uint64 // incremented by every crash
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty in-memory filesystem holding only the root
// directory (and ".", the working directory).
func NewMem() *MemFS {
	return &MemFS{
		dirs:  map[string]bool{string(filepath.Separator): true, ".": true},
		files: map[string]*memNode{},
	}
}

// memNode is one file's contents.
type memNode struct {
	mu      sync.RWMutex
	data    []byte  // what reads see
	durable []byte  // what survives a crash
	pending []memOp // unsynced changes, oldest first
}

// memOp is one unsynced change: a write (data != nil) or a truncate.
type memOp struct {
	off  int64 // write offset, or the new size of a truncate
	data []byte
}

func (op memOp) applyTo(b []byte) []byte {
	if op.data == nil {
		return resize(b, op.off)
	}
	end := op.off + int64(len(op.data))
	if end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[op.off:], op.data)
	return b
}

func resize(b []byte, n int64) []byte {
	if n <= int64(len(b)) {
		clear(b[n:])
		return b[:n]
	}
	if n <= int64(cap(b)) {
		old := len(b)
		b = b[:n]
		clear(b[old:])
		return b
	}
	nb := make([]byte, n, max(n, int64(2*cap(b))))
	copy(nb, b)
	return nb
}

func (n *memNode) sync() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, op := range n.pending {
		n.durable = op.applyTo(n.durable)
	}
	n.pending = nil
}

// crash replaces the contents by the durable ones plus, when rng is not
// nil, a random part of the unsynced writes.
func (n *memNode) crash(rng *rand.Rand) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if rng != nil {
		for _, op := range n.pending {
			switch r := rng.IntN(3); {
			case r == 0: // lost
			case r == 1 || op.data == nil || len(op.data) <= 512: // reached the medium whole
				n.durable = op.applyTo(n.durable)
			default: // torn: a prefix of whole sectors reached the medium
				sectors := (len(op.data) + 511) / 512
				keep := rng.IntN(sectors) * 512
				n.durable = memOp{off: op.off, data: op.data[:keep]}.applyTo(n.durable)
			}
		}
	}
	n.pending = nil
	n.data = slices.Clone(n.durable)
	if n.data == nil {
		n.data = []byte{}
	}
}

// Crash simulates power loss: every file loses what was written to it
// since its last Sync, and every open File becomes unusable (ErrCrashed).
func (fs *MemFS) Crash() { fs.crash(nil) }

// CrashTorn simulates power loss during which some unsynced writes reached
// the medium: each is, independently and reproducibly for a seed, lost,
// kept whole, or kept in part (a prefix of whole 512-byte sectors). Every
// open File becomes unusable.
func (fs *MemFS) CrashTorn(seed uint64) {
	fs.crash(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
}

func (fs *MemFS) crash(rng *rand.Rand) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.epoch.Add(1)
	names := make([]string, 0, len(fs.files))
	for name := range fs.files {
		names = append(names, name)
	}
	slices.Sort(names) // a fixed order makes CrashTorn reproducible
	for _, name := range names {
		fs.files[name].crash(rng)
	}
}

func memPath(name string) string { return filepath.Clean(name) }

func (fs *MemFS) parentExists(p string) bool { return fs.dirs[filepath.Dir(p)] }

// OpenFile opens or creates a file.
func (fs *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	p := memPath(name)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.dirs[p] {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	n, ok := fs.files[p]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case !ok && !fs.parentExists(p):
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case !ok:
		n = &memNode{data: []byte{}}
		fs.files[p] = n
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if flag&os.O_TRUNC != 0 && writable {
		n.mu.Lock()
		n.data = n.data[:0]
		n.pending = append(n.pending, memOp{off: 0})
		n.mu.Unlock()
	}
	return &memFile{
		fs:       fs,
		n:        n,
		name:     name,
		epoch:    fs.epoch.Load(),
		writable: writable,
		direct:   ODirect != 0 && flag&ODirect != 0,
	}, nil
}

// Remove deletes a file or an empty directory.
func (fs *MemFS) Remove(name string) error {
	p := memPath(name)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, ok := fs.files[p]; ok {
		delete(fs.files, p)
		return nil
	}
	if !fs.dirs[p] {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	for q := range fs.files {
		if filepath.Dir(q) == p {
			return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
		}
	}
	for q := range fs.dirs {
		if q != p && filepath.Dir(q) == p {
			return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
		}
	}
	delete(fs.dirs, p)
	return nil
}

// Rename renames a file (directories cannot be renamed).
func (fs *MemFS) Rename(oldname, newname string) error {
	op, np := memPath(oldname), memPath(newname)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, ok := fs.files[op]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	if fs.dirs[np] || !fs.parentExists(np) {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EINVAL}
	}
	delete(fs.files, op)
	fs.files[np] = n
	return nil
}

// MkdirAll creates dir and its parents.
func (fs *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	p := memPath(dir)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for q := p; ; q = filepath.Dir(q) {
		if _, ok := fs.files[q]; ok {
			return &os.PathError{Op: "mkdir", Path: q, Err: syscall.ENOTDIR}
		}
		if fs.dirs[q] {
			break
		}
		fs.dirs[q] = true
		if filepath.Dir(q) == q {
			break
		}
	}
	return nil
}

// ReadDir lists the entries of dir, sorted.
func (fs *MemFS) ReadDir(dir string) ([]string, error) {
	p := memPath(dir)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.dirs[p] {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	var names []string
	for q := range fs.files {
		if filepath.Dir(q) == p {
			names = append(names, filepath.Base(q))
		}
	}
	for q := range fs.dirs {
		if q != p && filepath.Dir(q) == p {
			names = append(names, filepath.Base(q))
		}
	}
	slices.Sort(names)
	return names, nil
}

// Stat returns the size of a file (0 for a directory).
func (fs *MemFS) Stat(name string) (int64, error) {
	p := memPath(name)
	fs.mu.Lock()
	n, ok := fs.files[p]
	isDir := fs.dirs[p]
	fs.mu.Unlock()
	switch {
	case ok:
		n.mu.RLock()
		defer n.mu.RUnlock()
		return int64(len(n.data)), nil
	case isDir:
		return 0, nil
	}
	return 0, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
}

// SyncDir does nothing: MemFS makes namespace changes durable at once.
func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.dirs[memPath(dir)] {
		return &os.PathError{Op: "sync", Path: dir, Err: os.ErrNotExist}
	}
	return nil
}

// memFile is an open MemFS file.
type memFile struct {
	fs       *MemFS
	n        *memNode
	name     string
	epoch    uint64
	writable bool
	direct   bool
	closed   atomic.Bool
}

func (f *memFile) check(op string) error {
	switch {
	case f.closed.Load():
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case f.epoch != f.fs.epoch.Load():
		return &os.PathError{Op: op, Path: f.name, Err: ErrCrashed}
	}
	return nil
}

func (f *memFile) checkIO(op string, n int, off int64) error {
	if err := f.check(op); err != nil {
		return err
	}
	if off < 0 {
		return &os.PathError{Op: op, Path: f.name, Err: fmt.Errorf("negative offset %d: %w", off, syscall.EINVAL)}
	}
	if f.direct && (off%DirectIOAlign != 0 || n%DirectIOAlign != 0) {
		return &os.PathError{Op: op, Path: f.name, Err: fmt.Errorf("O_DIRECT needs %d-aligned offset and length, got off %d len %d: %w", DirectIOAlign, off, n, syscall.EINVAL)}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.checkIO("read", len(p), off); err != nil {
		return 0, err
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.checkIO("write", len(p), off); err != nil {
		return 0, err
	}
	if !f.writable {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	op := memOp{off: off, data: slices.Clone(p)}
	if op.data == nil {
		op.data = []byte{}
	}
	f.n.data = op.applyTo(f.n.data)
	f.n.pending = append(f.n.pending, op)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if err := f.check("sync"); err != nil {
		return err
	}
	f.n.sync()
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	if !f.writable {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EBADF}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.data = resize(f.n.data, size)
	f.n.pending = append(f.n.pending, memOp{off: size})
	return nil
}

func (f *memFile) Close() error {
	if f.closed.Swap(true) {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Fd() uintptr { return 0 }
