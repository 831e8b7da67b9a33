package errorfs

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"os"
	"syscall"
	"testing"

	"github.com/kvpool/kvpool/internal/vfs"
)

func open(t *testing.T, fs vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestWriteFaults(t *testing.T) {
	tests := []struct {
		name     string
		inj      Injector
		writes   int
		failed   []int // 1-based indexes of writes that must fail
		isErr    error
		want     Counts
		wantData func(i int, p []byte) []byte // what write i left in the file
	}{
		{
			name: "nth write", inj: OnOps(OpWrite, Nth(3, Fail(nil))), writes: 5,
			failed: []int{3}, isErr: ErrInjected, want: Counts{WriteErrors: 1},
		},
		{
			name: "every write from the nth", inj: OnOps(OpWrite, From(3, Fail(syscall.EIO))), writes: 5,
			failed: []int{3, 4, 5}, isErr: syscall.EIO, want: Counts{WriteErrors: 3},
		},
		{
			name: "nth write on one path only", inj: OnPath("other", Nth(1, Fail(nil))), writes: 3,
			failed: nil, want: Counts{},
		},
		{
			name: "short write", inj: OnOps(OpWrite, Nth(2, ShortWrite(7))), writes: 3,
			failed: []int{2}, isErr: io.ErrShortWrite, want: Counts{ShortWrites: 1},
		},
		{
			name: "disk full after 10 bytes", inj: NoSpace(10), writes: 4,
			failed: []int{3, 4}, isErr: syscall.ENOSPC, want: Counts{NoSpace: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fs := Wrap(mem, tt.inj)
			f := open(t, fs, "/f")
			for i := 1; i <= tt.writes; i++ {
				p := bytes.Repeat([]byte{byte('a' + i)}, 4)
				off := int64(4 * (i - 1))
				n, err := f.WriteAt(p, off)
				mustFail := false
				for _, j := range tt.failed {
					mustFail = mustFail || j == i
				}
				if !mustFail {
					if err != nil || n != 4 {
						t.Fatalf("write %d = %d, %v; want success", i, n, err)
					}
					continue
				}
				if err == nil || n >= 4 {
					t.Fatalf("write %d = %d, %v; want a failure", i, n, err)
				}
				if !errors.Is(err, tt.isErr) {
					t.Errorf("write %d: %v, want errors.Is %v", i, err, tt.isErr)
				}
				// What the write claims to have written is in the file.
				got := make([]byte, n)
				raw, _ := mem.OpenFile("/f", os.O_RDONLY, 0)
				raw.ReadAt(got, off)
				raw.Close()
				if !bytes.Equal(got, p[:n]) {
					t.Errorf("write %d: file holds %q, want the reported prefix %q", i, got, p[:n])
				}
			}
			if got := fs.Counts(); got != tt.want {
				t.Errorf("Counts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDiskFullPartial(t *testing.T) {
	fs := Wrap(vfs.NewMem(), NoSpace(10))
	f := open(t, fs, "/f")
	if _, err := f.WriteAt(make([]byte, 8), 0); err != nil {
		t.Fatal(err)
	}
	n, err := f.WriteAt(make([]byte, 8), 8)
	if n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("crossing write = %d, %v; want 2, ENOSPC", n, err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != "/f" {
		t.Errorf("error %v does not name the file", err)
	}
	buf := make([]byte, 16)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("read on a full disk: %v", err)
	}
}

func TestBitFlips(t *testing.T) {
	data := bytes.Repeat([]byte{0x5a}, 4096)
	tests := []struct {
		name      string
		inj       Injector
		path      string
		reads     int
		wantFlips uint64
		region    [2]int64 // flips must land in [lo, hi)
	}{
		{"every read", OnOps(OpRead, BitFlip(1)), "/data", 10, 10, [2]int64{0, 4096}},
		{"other path", OnPath("x*", BitFlip(1)), "/data", 10, 0, [2]int64{0, 4096}},
		{"region only", InRegion(1000, 24, BitFlip(2)), "/data", 50, 50, [2]int64{1000, 1024}},
		{"fixed offset", BitFlipAt(77, 3), "/data", 3, 3, [2]int64{77, 78}},
		{"probability", Probability(0.5, 9, BitFlip(3)), "/data", 1000, 0, [2]int64{0, 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			w := open(t, mem, tt.path)
			w.WriteAt(data, 0)
			fs := Wrap(mem, tt.inj)
			f := open(t, fs, tt.path)
			var flips uint64
			buf := make([]byte, len(data))
			for range tt.reads {
				if _, err := f.ReadAt(buf, 0); err != nil {
					t.Fatal(err)
				}
				diff := 0
				for i := range buf {
					if d := bits.OnesCount8(buf[i] ^ data[i]); d > 0 {
						diff += d
						if int64(i) < tt.region[0] || int64(i) >= tt.region[1] {
							t.Fatalf("flip at %d outside [%d, %d)", i, tt.region[0], tt.region[1])
						}
					}
				}
				if diff > 1 {
					t.Fatalf("%d bits differ in one read, want at most 1", diff)
				}
				flips += uint64(diff)
			}
			got := fs.Counts().BitFlips
			if got != flips {
				t.Errorf("counted %d flips, observed %d", got, flips)
			}
			if tt.name == "probability" {
				if flips < 400 || flips > 600 {
					t.Errorf("p=0.5 over 1000 reads flipped %d", flips)
				}
			} else if flips != tt.wantFlips {
				t.Errorf("observed %d flips, want %d", flips, tt.wantFlips)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	run := func() []bool {
		fs := Wrap(vfs.NewMem(), OnOps(OpWrite, Probability(0.3, 42, Fail(nil))))
		f := open(t, fs, "/f")
		var out []bool
		for i := range 200 {
			_, err := f.WriteAt([]byte{1}, int64(i))
			out = append(out, err != nil)
		}
		return out
	}
	a, b := run(), run()
	fails := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("write %d: runs with the same seed differ", i)
		}
		if a[i] {
			fails++
		}
	}
	if fails == 0 || fails == len(a) {
		t.Errorf("p=0.3 failed %d of %d writes", fails, len(a))
	}
}

func TestOtherOps(t *testing.T) {
	mem := vfs.NewMem()
	sw := NewSwitch(Any(OnOps(OpSync, Fail(nil)), OnOps(OpOpen|OpStat, Fail(syscall.EIO))))
	fs := Wrap(mem, sw)
	f := open(t, fs, "/f")
	if err := f.Sync(); err != nil {
		t.Fatalf("sync with the switch off: %v", err)
	}
	sw.Set(true)
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Errorf("Sync = %v, want ErrInjected", err)
	}
	if _, err := fs.OpenFile("/g", os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, syscall.EIO) {
		t.Errorf("OpenFile = %v, want EIO", err)
	}
	if _, err := fs.Stat("/f"); !errors.Is(err, syscall.EIO) {
		t.Errorf("Stat = %v, want EIO", err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Errorf("write not targeted failed: %v", err)
	}
	want := Counts{SyncErrors: 1, OtherErrors: 2}
	if got := fs.Counts(); got != want || got.Total() != 3 {
		t.Errorf("Counts = %+v, want %+v", got, want)
	}
	sw.Set(false)
	fs.SetInjector(nil)
	if err := f.Sync(); err != nil {
		t.Errorf("sync without injector: %v", err)
	}
	if got := (OpRead | OpWrite).String(); got != "read|write" {
		t.Errorf("OpKind.String = %q", got)
	}
}

func TestCrash(t *testing.T) {
	magic := []byte("HDR!")
	tests := []struct {
		name      string
		inj       Injector
		withFn    bool
		writes    [][]byte // written at 0, 16, 32, …
		tornAt    int      // 0-based index of the torn write; -1: none
		keep      int      // bytes the torn write stores
		wantCount Counts
	}{
		{
			name: "second commit record torn in half", withFn: true,
			inj:    OnWritePrefix(magic, Nth(2, Crash(0.5))),
			writes: [][]byte{[]byte("HDR!aaaa"), []byte("data0000"), []byte("HDR!bbbb"), []byte("HDR!cccc")},
			tornAt: 2, keep: 4, wantCount: Counts{Crashes: 1},
		},
		{
			name: "no crash function: the write still fails", withFn: false,
			inj:    OnWritePrefix(magic, Crash(0.25)),
			writes: [][]byte{[]byte("data0000"), []byte("HDR!dddd"), []byte("data1111")},
			tornAt: 1, keep: 2, wantCount: Counts{Crashes: 1},
		},
		{
			name: "bad fraction clamped to nothing kept", withFn: true,
			inj:    OnWritePrefix(magic, Crash(-3)),
			writes: [][]byte{[]byte("HDR!eeee")},
			tornAt: 0, keep: 0, wantCount: Counts{Crashes: 1},
		},
		{
			name: "prefix never written: no crash", withFn: true,
			inj:    OnWritePrefix(magic, Crash(1)),
			writes: [][]byte{[]byte("data2222"), []byte("HDR"), []byte("xHDR!fff")},
			tornAt: -1, wantCount: Counts{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fs := Wrap(mem, tt.inj)
			crashes := 0
			if tt.withFn {
				fs.OnCrash(func() { crashes++ })
			}
			f := open(t, fs, "/f")
			for i, p := range tt.writes {
				off := int64(16 * i)
				n, err := f.WriteAt(p, off)
				switch {
				case tt.tornAt < 0 || i < tt.tornAt:
					if err != nil || n != len(p) {
						t.Fatalf("write %d = %d, %v; want success", i, n, err)
					}
				case i == tt.tornAt:
					if n != tt.keep || !errors.Is(err, ErrCrashed) {
						t.Fatalf("torn write %d = %d, %v; want %d, ErrCrashed", i, n, err, tt.keep)
					}
					raw, _ := mem.OpenFile("/f", os.O_RDONLY, 0)
					got := make([]byte, len(p))
					m, _ := raw.ReadAt(got, off)
					raw.Close()
					want := append(append([]byte(nil), p[:tt.keep]...), make([]byte, len(p)-tt.keep)...)
					if !bytes.Equal(got[:m], want[:m]) || m < tt.keep {
						t.Errorf("file holds %q after the torn write, want the prefix %q", got[:m], p[:tt.keep])
					}
				default:
					if n != 0 || !errors.Is(err, ErrCrashed) {
						t.Fatalf("write %d after the crash = %d, %v; want 0, ErrCrashed", i, n, err)
					}
				}
			}
			wantFn := 0
			if tt.withFn && tt.tornAt >= 0 {
				wantFn = 1
			}
			if crashes != wantFn {
				t.Errorf("crash function ran %d times, want %d", crashes, wantFn)
			}
			if tt.tornAt >= 0 {
				if err := f.Sync(); !errors.Is(err, ErrCrashed) {
					t.Errorf("Sync after the crash = %v, want ErrCrashed", err)
				}
				if _, err := fs.Stat("/f"); !errors.Is(err, ErrCrashed) {
					t.Errorf("Stat after the crash = %v, want ErrCrashed", err)
				}
			}
			if got := fs.Counts(); got != tt.wantCount || got.Total() != tt.wantCount.Crashes {
				t.Errorf("Counts = %+v, want %+v", got, tt.wantCount)
			}
		})
	}
}
