// Package errorfs wraps a vfs.FS with deterministic fault injection: fail
// the Nth write or every write from the Nth on, short writes, bit flips in
// the data a read returns, a disk that fills up (ENOSPC) after a byte
// budget, failing syncs, a write torn by a crash (power loss in the
// middle of a write). Injectors are small values composed by nesting
// (a filter around a trigger around a fault), after pebble's errorfs:
//
//	errorfs.OnOps(errorfs.OpWrite, errorfs.Nth(3, errorfs.Fail(nil)))
//
// fails the third write, and
//
//	errorfs.OnPath("pages-*.dat", errorfs.OnOps(errorfs.OpRead, errorfs.BitFlip(seed)))
//
// flips one random bit in every read of the SSD tier's page files, and
//
//	errorfs.OnWritePrefix(magic, errorfs.Nth(5, errorfs.Crash(0.5)))
//
// stores half of the fifth write that begins with magic and then crashes
// (see FS.OnCrash). The wrapper counts
// every fault it actually injected, so a test can assert that the code
// under test detected exactly as many faults as were injected.
package errorfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kvpool/kvpool/internal/vfs"
)

// ErrInjected is the error of a Fail fault created with a nil error.
var ErrInjected = errors.New("injected fault")

// ErrCrashed is the error of the write a Crash fault tore, when the FS's
// crash function returns (or none is set), and of every operation after
// it: a crashed FS is a disk without power.
var ErrCrashed = errors.New("injected crash")

// OpKind is a kind of filesystem operation; kinds are bits so a filter can
// name several.
type OpKind uint16

// Operation kinds.
const (
	OpOpen OpKind = 1 << iota
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpClose
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpStat
	OpSyncDir
	// OpAll is every kind.
	OpAll OpKind = 1<<iota - 1
)

var opNames = []string{"open", "read", "write", "sync", "truncate", "close", "remove", "rename", "mkdir", "readdir", "stat", "syncdir"}

// String names the kind (or kinds, joined by |).
func (k OpKind) String() string {
	var parts []string
	for i, n := range opNames {
		if k&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// Op is one operation as an injector sees it.
type Op struct {
	Kind OpKind
	Path string
	// Off and Len are the byte range of a read or write (Off is the new
	// size for a truncate); zero for other kinds.
	Off int64
	Len int
	// Data is what a write would store (nil for other kinds). Injectors
	// must neither modify nor retain it.
	Data []byte
}

// FaultKind says what a Fault does.
type FaultKind uint8

// Fault kinds.
const (
	// FaultNone: carry the operation out unchanged.
	FaultNone FaultKind = iota
	// FaultError: the operation does nothing and returns Err.
	FaultError
	// FaultShortWrite: the write stores only its first N bytes and returns
	// N and Err (io.ErrShortWrite when Err is nil).
	FaultShortWrite
	// FaultNoSpace: the write stores only its first N bytes and returns N
	// and ENOSPC (wrapped in an *os.PathError).
	FaultNoSpace
	// FaultBitFlip: the read succeeds, but bit Bit of the byte at file
	// offset Off is flipped in the returned data.
	FaultBitFlip
	// FaultCrash: the write stores only its first N bytes, then the FS
	// crashes: its crash function (FS.OnCrash) runs, and from then on
	// every operation fails with ErrCrashed. A crash function that ends
	// the process (SIGKILL) leaves exactly that prefix in the file, as a
	// power loss in the middle of the write would.
	FaultCrash
)

// Fault is an injector's decision for one operation. The zero Fault
// injects nothing.
type Fault struct {
	Kind FaultKind
	Err  error
	N    int
	Off  int64
	Bit  uint8
}

// Injector decides which fault, if any, to inject into an operation.
// Injectors are driven under their FS's lock, one operation at a time, so
// they need not be safe for concurrent use; with one goroutine doing I/O
// the sequence of faults is a function of the seeds alone.
type Injector interface {
	Inject(op Op) Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) Fault

// Inject calls f.
func (f InjectorFunc) Inject(op Op) Fault { return f(op) }

// Fail fails every operation it sees with err (ErrInjected when nil).
func Fail(err error) Injector {
	if err == nil {
		err = ErrInjected
	}
	return InjectorFunc(func(Op) Fault { return Fault{Kind: FaultError, Err: err} })
}

// ShortWrite makes every write it sees store only a random prefix
// (possibly empty, never whole) and return io.ErrShortWrite. Other
// operations pass.
func ShortWrite(seed uint64) Injector {
	rng := newRand(seed)
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != OpWrite || op.Len == 0 {
			return Fault{}
		}
		return Fault{Kind: FaultShortWrite, N: rng.IntN(op.Len), Err: io.ErrShortWrite}
	})
}

// NoSpace simulates a disk with budget free bytes: writes it sees succeed
// until their total would exceed the budget; the write that crosses it
// stores what still fits, and it and every later write fail with ENOSPC.
func NoSpace(budget int64) Injector {
	left := budget
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != OpWrite {
			return Fault{}
		}
		if int64(op.Len) <= left {
			left -= int64(op.Len)
			return Fault{}
		}
		n := int(max(left, 0))
		left = 0
		return Fault{Kind: FaultNoSpace, N: n}
	})
}

// Crash tears the write it sees: it stores the first keep (a fraction,
// clamped to [0, 1]) of the write's bytes, rounded down, and crashes the
// FS (FaultCrash). Other operations pass.
func Crash(keep float64) Injector {
	keep = min(max(keep, 0), 1)
	if keep != keep { // NaN
		keep = 0
	}
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != OpWrite {
			return Fault{}
		}
		return Fault{Kind: FaultCrash, N: int(keep * float64(op.Len))}
	})
}

// BitFlip flips one random bit of every read it sees (of the bytes the
// read asked for; a flip that falls past what the read returned is not
// injected and not counted).
func BitFlip(seed uint64) Injector {
	rng := newRand(seed)
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != OpRead || op.Len == 0 {
			return Fault{}
		}
		return Fault{Kind: FaultBitFlip, Off: op.Off + rng.Int64N(int64(op.Len)), Bit: uint8(rng.IntN(8))}
	})
}

// BitFlipAt flips bit bit of the byte at file offset off in every read
// that covers it.
func BitFlipAt(off int64, bit uint8) Injector {
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != OpRead || off < op.Off || off >= op.Off+int64(op.Len) {
			return Fault{}
		}
		return Fault{Kind: FaultBitFlip, Off: off, Bit: bit % 8}
	})
}

// OnOps passes only operations of the given kinds to inj.
func OnOps(kinds OpKind, inj Injector) Injector {
	return InjectorFunc(func(op Op) Fault {
		if op.Kind&kinds == 0 {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// OnPath passes only operations on paths matching pattern (filepath.Match
// syntax) to inj. A pattern without a separator is matched against the
// base name, otherwise against the whole path.
func OnPath(pattern string, inj Injector) Injector {
	return InjectorFunc(func(op Op) Fault {
		name := op.Path
		if !strings.ContainsRune(pattern, filepath.Separator) {
			name = filepath.Base(name)
		}
		if ok, _ := filepath.Match(pattern, name); !ok {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// InRegion passes to inj only reads and writes that overlap the byte range
// [off, off+n), with their range clipped to it (so a BitFlip inside lands
// in the region).
func InRegion(off, n int64, inj Injector) Injector {
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != OpRead && op.Kind != OpWrite {
			return Fault{}
		}
		lo, hi := max(op.Off, off), min(op.Off+int64(op.Len), off+n)
		if lo >= hi {
			return Fault{}
		}
		f := inj.Inject(Op{Kind: op.Kind, Path: op.Path, Off: lo, Len: int(hi - lo)})
		if f.Kind == FaultShortWrite || f.Kind == FaultNoSpace {
			f.N += int(lo - op.Off) // the clipped prefix was written too
		}
		return f
	})
}

// OnWritePrefix passes to inj only writes whose data begins with prefix:
// the commit record of a format, say, told apart by its magic number from
// the other writes at the same offsets.
func OnWritePrefix(prefix []byte, inj Injector) Injector {
	prefix = bytes.Clone(prefix)
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != OpWrite || !bytes.HasPrefix(op.Data, prefix) {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// Nth passes only the nth operation it sees (1-based) to inj.
func Nth(n int, inj Injector) Injector {
	seen := 0
	return InjectorFunc(func(op Op) Fault {
		seen++
		if seen != n {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// From passes the nth operation it sees (1-based) and every later one to inj.
func From(n int, inj Injector) Injector {
	seen := 0
	return InjectorFunc(func(op Op) Fault {
		seen++
		if seen < n {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// Probability passes each operation to inj with probability p, drawn from a
// generator seeded with seed.
func Probability(p float64, seed uint64, inj Injector) Injector {
	rng := newRand(seed)
	return InjectorFunc(func(op Op) Fault {
		if rng.Float64() >= p {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// Any consults injs in order; the first fault wins and later injectors do
// not see that operation.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) Fault {
		for _, inj := range injs {
			if f := inj.Inject(op); f.Kind != FaultNone {
				return f
			}
		}
		return Fault{}
	})
}

// Switch turns an injector on and off at run time (a disk that fills up
// now). It starts off. Its methods are safe for concurrent use.
type Switch struct {
	on  atomic.Bool
	inj Injector
}

// NewSwitch returns a Switch, initially off, around inj.
func NewSwitch(inj Injector) *Switch { return &Switch{inj: inj} }

// Set turns the switch on or off.
func (s *Switch) Set(on bool) { s.on.Store(on) }

// Inject passes op to the wrapped injector while the switch is on.
func (s *Switch) Inject(op Op) Fault {
	if !s.on.Load() {
		return Fault{}
	}
	return s.inj.Inject(op)
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
}

// Counts are the faults an FS injected (carried out, not just decided).
type Counts struct {
	ReadErrors  uint64 // reads failed
	WriteErrors uint64 // writes failed whole
	SyncErrors  uint64 // syncs failed
	OtherErrors uint64 // other operations failed
	ShortWrites uint64 // writes cut short
	NoSpace     uint64 // writes failed with ENOSPC
	BitFlips    uint64 // bits flipped in read data
	Crashes     uint64 // writes torn by a crash
}

// Total is the number of faults of every kind.
func (c Counts) Total() uint64 {
	return c.ReadErrors + c.WriteErrors + c.SyncErrors + c.OtherErrors + c.ShortWrites + c.NoSpace + c.BitFlips + c.Crashes
}

// FS wraps a vfs.FS with an injector. It is safe for concurrent use.
type FS struct {
	inner vfs.FS

	mu      sync.Mutex
	inj     Injector
	counts  Counts
	crash   func()
	crashed bool
}

var _ vfs.FS = (*FS)(nil)

// Wrap returns inner with faults from inj injected (nil: none yet).
func Wrap(inner vfs.FS, inj Injector) *FS { return &FS{inner: inner, inj: inj} }

// SetInjector replaces the injector (nil: none).
func (fs *FS) SetInjector(inj Injector) {
	fs.mu.Lock()
	fs.inj = inj
	fs.mu.Unlock()
}

// OnCrash sets the function a Crash fault runs once the torn write's
// prefix is stored (nil: none). It runs on the writing goroutine, without
// the FS's lock held; a test of a real process passes one that kills the
// process (power loss), an in-process test one that records the crash.
func (fs *FS) OnCrash(fn func()) {
	fs.mu.Lock()
	fs.crash = fn
	fs.mu.Unlock()
}

// Counts returns the faults injected so far.
func (fs *FS) Counts() Counts {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.counts
}

func (fs *FS) decide(op Op) Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.crashed {
		return Fault{Kind: FaultError, Err: ErrCrashed} // the crash, not a new fault: not counted
	}
	if fs.inj == nil {
		return Fault{}
	}
	f := fs.inj.Inject(op)
	switch f.Kind {
	case FaultError:
		switch op.Kind {
		case OpRead:
			fs.counts.ReadErrors++
		case OpWrite:
			fs.counts.WriteErrors++
		case OpSync:
			fs.counts.SyncErrors++
		default:
			fs.counts.OtherErrors++
		}
	case FaultShortWrite, FaultNoSpace, FaultCrash:
		if op.Kind != OpWrite {
			return Fault{} // meaningless for other operations
		}
		f.N = min(max(f.N, 0), op.Len)
		switch f.Kind {
		case FaultShortWrite:
			fs.counts.ShortWrites++
		case FaultNoSpace:
			fs.counts.NoSpace++
		default:
			fs.counts.Crashes++
			fs.crashed = true // every later operation fails
		}
	case FaultBitFlip:
		if op.Kind != OpRead {
			return Fault{}
		}
		// Counted when carried out (see file.ReadAt).
	}
	return f
}

// crashFunc returns the crash function.
func (fs *FS) crashFunc() func() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.crash
}

func (fs *FS) countFlip() {
	fs.mu.Lock()
	fs.counts.BitFlips++
	fs.mu.Unlock()
}

// simple runs a non-I/O operation through the injector.
func (fs *FS) simple(kind OpKind, path string) error {
	f := fs.decide(Op{Kind: kind, Path: path})
	if f.Kind == FaultError {
		return &os.PathError{Op: kind.String(), Path: path, Err: f.Err}
	}
	return nil
}

// OpenFile opens a file whose operations are subject to injection.
func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if err := fs.simple(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := fs.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{fs: fs, f: f}, nil
}

// Remove removes name.
func (fs *FS) Remove(name string) error {
	if err := fs.simple(OpRemove, name); err != nil {
		return err
	}
	return fs.inner.Remove(name)
}

// Rename renames oldname (the path injectors see) to newname.
func (fs *FS) Rename(oldname, newname string) error {
	if err := fs.simple(OpRename, oldname); err != nil {
		return err
	}
	return fs.inner.Rename(oldname, newname)
}

// MkdirAll creates dir.
func (fs *FS) MkdirAll(dir string, perm os.FileMode) error {
	if err := fs.simple(OpMkdir, dir); err != nil {
		return err
	}
	return fs.inner.MkdirAll(dir, perm)
}

// ReadDir lists dir.
func (fs *FS) ReadDir(dir string) ([]string, error) {
	if err := fs.simple(OpReadDir, dir); err != nil {
		return nil, err
	}
	return fs.inner.ReadDir(dir)
}

// Stat returns the size of name.
func (fs *FS) Stat(name string) (int64, error) {
	if err := fs.simple(OpStat, name); err != nil {
		return 0, err
	}
	return fs.inner.Stat(name)
}

// SyncDir syncs dir.
func (fs *FS) SyncDir(dir string) error {
	if err := fs.simple(OpSyncDir, dir); err != nil {
		return err
	}
	return fs.inner.SyncDir(dir)
}

// file is an open file of an FS.
type file struct {
	fs *FS
	f  vfs.File
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	fault := f.fs.decide(Op{Kind: OpRead, Path: f.f.Name(), Off: off, Len: len(p)})
	if fault.Kind == FaultError {
		return 0, &os.PathError{Op: "read", Path: f.f.Name(), Err: fault.Err}
	}
	n, err := f.f.ReadAt(p, off)
	if fault.Kind == FaultBitFlip && fault.Off >= off && fault.Off < off+int64(n) {
		p[fault.Off-off] ^= 1 << fault.Bit
		f.fs.countFlip()
	}
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	fault := f.fs.decide(Op{Kind: OpWrite, Path: f.f.Name(), Off: off, Len: len(p), Data: p})
	switch fault.Kind {
	case FaultError:
		return 0, &os.PathError{Op: "write", Path: f.f.Name(), Err: fault.Err}
	case FaultCrash:
		n, err := f.f.WriteAt(p[:fault.N], off)
		if crash := f.fs.crashFunc(); crash != nil {
			crash()
		}
		if err != nil {
			return n, fmt.Errorf("write %s torn by a crash after %d of %d bytes: %w (%w)", f.f.Name(), n, len(p), ErrCrashed, err)
		}
		return n, &os.PathError{Op: "write", Path: f.f.Name(), Err: fmt.Errorf("torn after %d of %d bytes: %w", n, len(p), ErrCrashed)}
	case FaultShortWrite, FaultNoSpace:
		n, err := f.f.WriteAt(p[:fault.N], off)
		if err != nil {
			return n, err
		}
		if fault.Kind == FaultNoSpace {
			return n, &os.PathError{Op: "write", Path: f.f.Name(), Err: syscall.ENOSPC}
		}
		ferr := fault.Err
		if ferr == nil {
			ferr = io.ErrShortWrite
		}
		return n, fmt.Errorf("write %s: %d of %d bytes: %w", f.f.Name(), n, len(p), ferr)
	}
	return f.f.WriteAt(p, off)
}

func (f *file) Sync() error {
	if fault := f.fs.decide(Op{Kind: OpSync, Path: f.f.Name()}); fault.Kind == FaultError {
		return &os.PathError{Op: "sync", Path: f.f.Name(), Err: fault.Err}
	}
	return f.f.Sync()
}

func (f *file) Truncate(size int64) error {
	if fault := f.fs.decide(Op{Kind: OpTruncate, Path: f.f.Name(), Off: size}); fault.Kind == FaultError {
		return &os.PathError{Op: "truncate", Path: f.f.Name(), Err: fault.Err}
	}
	return f.f.Truncate(size)
}

func (f *file) Close() error {
	if fault := f.fs.decide(Op{Kind: OpClose, Path: f.f.Name()}); fault.Kind == FaultError {
		f.f.Close()
		return &os.PathError{Op: "close", Path: f.f.Name(), Err: fault.Err}
	}
	return f.f.Close()
}

func (f *file) Name() string { return f.f.Name() }

func (f *file) Fd() uintptr { return f.f.Fd() }
