package vfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// fsUnderTest names an implementation and gives it a fresh root directory.
type fsUnderTest struct {
	name string
	new  func(t *testing.T) (FS, string)
}

func implementations() []fsUnderTest {
	return []fsUnderTest{
		{"os", func(t *testing.T) (FS, string) { return Default(), t.TempDir() }},
		{"mem", func(t *testing.T) (FS, string) {
			fs := NewMem()
			if err := fs.MkdirAll("/root", 0o755); err != nil {
				t.Fatal(err)
			}
			return fs, "/root"
		}},
	}
}

func TestFSContract(t *testing.T) {
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			fs, root := impl.new(t)
			dir := filepath.Join(root, "a", "b")
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatalf("MkdirAll: %v", err)
			}
			name := filepath.Join(dir, "f")
			f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if _, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, os.ErrExist) {
				t.Errorf("O_EXCL on existing file: got %v, want ErrExist", err)
			}
			if f.Name() != name {
				t.Errorf("Name() = %q, want %q", f.Name(), name)
			}
			if n, err := f.WriteAt([]byte("hello"), 10); n != 5 || err != nil {
				t.Fatalf("WriteAt = %d, %v", n, err)
			}
			if sz, err := fs.Stat(name); sz != 15 || err != nil {
				t.Errorf("Stat = %d, %v; want 15", sz, err)
			}
			buf := make([]byte, 20)
			n, err := f.ReadAt(buf, 0)
			if n != 15 || !errors.Is(err, io.EOF) {
				t.Errorf("ReadAt past end = %d, %v; want 15, EOF", n, err)
			}
			if want := append(make([]byte, 10), "hello"...); !bytes.Equal(buf[:n], want) {
				t.Errorf("ReadAt = %q, want %q", buf[:n], want)
			}
			if err := f.Truncate(12); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(14); err != nil {
				t.Fatal(err)
			}
			n, _ = f.ReadAt(buf, 10)
			if want := []byte("he\x00\x00"); !bytes.Equal(buf[:n], want) {
				t.Errorf("after shrink and grow: %q, want %q", buf[:n], want)
			}
			if err := f.Sync(); err != nil {
				t.Errorf("Sync: %v", err)
			}
			if err := fs.SyncDir(dir); err != nil {
				t.Errorf("SyncDir: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if _, err := f.ReadAt(buf, 0); err == nil {
				t.Error("ReadAt after Close succeeded")
			}
			if _, err := fs.OpenFile(filepath.Join(root, "nodir", "x"), os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("create in missing dir: %v, want ErrNotExist", err)
			}
			if _, err := fs.OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("open missing: %v, want ErrNotExist", err)
			}
			ro, err := fs.OpenFile(name, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ro.WriteAt([]byte("x"), 0); err == nil {
				t.Error("write to read-only file succeeded")
			}
			ro.Close()
			renamed := filepath.Join(dir, "g")
			if err := fs.Rename(name, renamed); err != nil {
				t.Fatalf("Rename: %v", err)
			}
			names, err := fs.ReadDir(dir)
			if err != nil || !slices.Equal(names, []string{"g"}) {
				t.Errorf("ReadDir = %v, %v; want [g]", names, err)
			}
			names, err = fs.ReadDir(filepath.Join(root, "a"))
			if err != nil || !slices.Equal(names, []string{"b"}) {
				t.Errorf("ReadDir(a) = %v, %v; want [b]", names, err)
			}
			if err := fs.Remove(dir); err == nil {
				t.Error("Remove of a non-empty directory succeeded")
			}
			if err := fs.Remove(renamed); err != nil {
				t.Errorf("Remove: %v", err)
			}
			if _, err := fs.Stat(renamed); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Stat removed: %v, want ErrNotExist", err)
			}
			if err := fs.Remove(dir); err != nil {
				t.Errorf("Remove empty dir: %v", err)
			}
			if err := fs.Remove(renamed); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Remove missing: %v, want ErrNotExist", err)
			}
		})
	}
}

func TestOSFd(t *testing.T) {
	f, err := Default().OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Fd() == 0 {
		t.Error("OS file has Fd 0")
	}
	m := NewMem()
	mf, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if mf.Fd() != 0 {
		t.Error("MemFS file has a non-zero Fd")
	}
}

func readAll(t *testing.T, fs FS, name string) []byte {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sz, err := fs.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, sz)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

func TestMemCrash(t *testing.T) {
	tests := []struct {
		name string
		ops  func(t *testing.T, f File)
		want string
	}{
		{"unsynced write lost", func(t *testing.T, f File) {
			f.WriteAt([]byte("abc"), 0)
		}, ""},
		{"synced write kept", func(t *testing.T, f File) {
			f.WriteAt([]byte("abc"), 0)
			f.Sync()
		}, "abc"},
		{"write after sync lost", func(t *testing.T, f File) {
			f.WriteAt([]byte("abc"), 0)
			f.Sync()
			f.WriteAt([]byte("XY"), 1)
			f.WriteAt([]byte("de"), 3)
		}, "abc"},
		{"synced truncate kept", func(t *testing.T, f File) {
			f.WriteAt([]byte("abcdef"), 0)
			f.Truncate(2)
			f.Sync()
			f.Truncate(10)
		}, "ab"},
		{"overwrites applied in order", func(t *testing.T, f File) {
			f.WriteAt([]byte("aaaa"), 0)
			f.WriteAt([]byte("bb"), 1)
			f.Sync()
		}, "abba"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := NewMem()
			f, err := fs.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			tt.ops(t, f)
			fs.Crash()
			if got := readAll(t, fs, "/f"); string(got) != tt.want {
				t.Errorf("after crash: %q, want %q", got, tt.want)
			}
			if _, err := f.WriteAt([]byte("z"), 0); !errors.Is(err, ErrCrashed) {
				t.Errorf("write through pre-crash handle: %v, want ErrCrashed", err)
			}
			if err := f.Sync(); !errors.Is(err, ErrCrashed) {
				t.Errorf("sync through pre-crash handle: %v, want ErrCrashed", err)
			}
		})
	}
}

func TestMemCrashTorn(t *testing.T) {
	build := func() *MemFS {
		fs := NewMem()
		f, _ := fs.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
		f.WriteAt(bytes.Repeat([]byte{1}, 8192), 0)
		f.Sync()
		for i := range 64 {
			f.WriteAt(bytes.Repeat([]byte{byte(i + 2)}, 4096), int64(i%2)*4096)
		}
		return fs
	}
	var outcomes [][]byte
	for seed := range uint64(16) {
		a, b := build(), build()
		a.CrashTorn(seed)
		b.CrashTorn(seed)
		ga, gb := readAll(t, a, "/f"), readAll(t, b, "/f")
		if !bytes.Equal(ga, gb) {
			t.Fatalf("seed %d: CrashTorn is not reproducible", seed)
		}
		if len(ga) != 8192 {
			t.Fatalf("seed %d: size %d, want 8192", seed, len(ga))
		}
		// Every 512-byte sector holds one write's bytes whole.
		for s := 0; s < len(ga); s += 512 {
			sec := ga[s : s+512]
			if !bytes.Equal(sec, bytes.Repeat(sec[:1], 512)) {
				t.Fatalf("seed %d: sector at %d mixes writes", seed, s)
			}
		}
		outcomes = append(outcomes, ga)
	}
	distinct := 0
	for i := range outcomes {
		if i == 0 || !bytes.Equal(outcomes[i], outcomes[0]) {
			distinct++
		}
	}
	if distinct < 2 {
		t.Error("16 seeds gave the same crash outcome: CrashTorn is not random")
	}
}

func TestMemDirectAlignment(t *testing.T) {
	if ODirect == 0 {
		t.Skip("no O_DIRECT on this platform")
	}
	fs := NewMem()
	f, err := fs.OpenFile("/f", os.O_RDWR|os.O_CREATE|ODirect, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		off  int64
		n    int
		fail bool
	}{
		{0, 4096, false},
		{4096, 8192, false},
		{100, 4096, true},
		{0, 100, true},
	}
	for _, tt := range tests {
		_, err := f.WriteAt(make([]byte, tt.n), tt.off)
		if got := errors.Is(err, syscall.EINVAL); got != tt.fail {
			t.Errorf("WriteAt(len %d, off %d) = %v, want EINVAL %v", tt.n, tt.off, err, tt.fail)
		}
	}
}
