package main

// The fault-filesystem hook of the multi-process fault suite. The test
// binary, re-executed as kvpool (TestMain), reads faultFSEnv and wraps the
// node's SSD filesystem with it through hooks.nodeFS; the production
// binary has no such variable (main passes the zero hooks).

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kvpool/kvpool/internal/vfs"
	"github.com/kvpool/kvpool/internal/vfs/errorfs"
)

// faultFSEnv selects the SSD fault of a node process started by a fault
// scenario (cluster.Options.NodeEnv):
//
//	enospc-after=N  the first N writes to page files succeed; every later
//	                one stores nothing and fails with ENOSPC (a full disk)
//	torn-after=N    the Nth head entry written to the side table (a put's
//	                commit record, told from continuation entries and
//	                invalidations by its magic and kind) stores only its
//	                first half, then the process kills itself with
//	                SIGKILL: a power loss in the middle of the write, as
//	                the side table sees it
const faultFSEnv = "KVPOOL_TEST_FAULTFS"

// tornMarker starts the line the node prints just before it kills itself,
// so a test can count the torn writes it injected.
const tornMarker = "kvpool test hook: torn head entry write"

// testHooks returns the hooks of a test-binary kvpool process: nodeFS
// built from spec (faultFSEnv's value; "" means none), with crash run
// after a torn write.
func testHooks(spec string, crash func()) (hooks, error) {
	if spec == "" {
		return hooks{}, nil
	}
	kind, val, ok := strings.Cut(spec, "=")
	n, err := strconv.Atoi(val)
	if !ok || err != nil || n < 0 {
		return hooks{}, fmt.Errorf("%s=%q: want enospc-after=N or torn-after=N with N >= 0", faultFSEnv, spec)
	}
	pages := func(inj errorfs.Injector) errorfs.Injector {
		return errorfs.OnPath("pages-*.dat", errorfs.OnOps(errorfs.OpWrite, inj))
	}
	table := func(inj errorfs.Injector) errorfs.Injector {
		return errorfs.OnPath("pages.tbl", errorfs.OnOps(errorfs.OpWrite, inj))
	}
	switch kind {
	case "enospc-after":
		return hooks{nodeFS: func(inner vfs.FS) vfs.FS {
			return errorfs.Wrap(inner, pages(errorfs.From(n+1, errorfs.NoSpace(0))))
		}}, nil
	case "torn-after":
		if n == 0 {
			return hooks{}, fmt.Errorf("%s=%q: the torn write is the Nth, N >= 1", faultFSEnv, spec)
		}
		head := append(binary.LittleEndian.AppendUint32(nil, entryMagic), entryKindHead)
		return hooks{nodeFS: func(inner vfs.FS) vfs.FS {
			fs := errorfs.Wrap(inner, table(errorfs.OnWritePrefix(head, errorfs.Nth(n, errorfs.Crash(0.5)))))
			fs.OnCrash(func() {
				fmt.Fprintf(os.Stderr, "%s (head entry write %d): half stored; power loss now\n", tornMarker, n)
				crash()
			})
			return fs
		}}, nil
	}
	return hooks{}, fmt.Errorf("%s=%q: unknown fault %q (want enospc-after or torn-after)", faultFSEnv, spec, kind)
}

// powerLoss ends this process at once with SIGKILL: nothing it has not
// written yet reaches its files, and no deferred code runs.
func powerLoss() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not caught; wait for it to land
}

func TestFaultFSHook(t *testing.T) {
	tests := []struct {
		spec    string
		wantErr string // "" : valid
		none    bool   // valid and no hook
	}{
		{spec: "", none: true},
		{spec: "enospc-after=0"},
		{spec: "enospc-after=40"},
		{spec: "torn-after=1"},
		{spec: "torn-after", wantErr: "want enospc-after=N"},
		{spec: "torn-after=0", wantErr: "N >= 1"},
		{spec: "enospc-after=-1", wantErr: "want enospc-after=N"},
		{spec: "enospc-after=x", wantErr: "want enospc-after=N"},
		{spec: "bitrot=3", wantErr: `unknown fault "bitrot"`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			h, err := testHooks(tt.spec, func() {})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), faultFSEnv) {
					t.Fatalf("testHooks(%q) = %v; want an error naming %s and containing %q", tt.spec, err, faultFSEnv, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (h.nodeFS == nil) != tt.none {
				t.Fatalf("testHooks(%q): nodeFS set %v; want %v", tt.spec, h.nodeFS != nil, !tt.none)
			}
		})
	}
}

// TestFaultFSHookFaults: what each hook does to page files and the side
// table, on an in-memory filesystem.
func TestFaultFSHookFaults(t *testing.T) {
	header := append(binary.LittleEndian.AppendUint32(nil, entryMagic), entryKindHead)
	header = append(header, make([]byte, 59)...) // a 64-byte head entry
	cont := append(binary.LittleEndian.AppendUint32(nil, entryMagic), entryKindHead+1)
	cont = append(cont, make([]byte, 59)...) // a continuation entry
	payload := make([]byte, 64)
	invalidate := make([]byte, 64)
	type write struct {
		file string
		p    []byte
	}
	page := func(p []byte) write { return write{"/ssd/pages-000.dat", p} }
	entry := func(p []byte) write { return write{"/ssd/pages.tbl", p} }
	other := func(p []byte) write { return write{"/ssd/geometry", p} }
	tests := []struct {
		spec    string
		writes  []write
		failAt  int // first failing write (0-based), -1: none
		crashAt int // write after which crash ran, -1: never
		kept    int // bytes the failing write stored
	}{
		{"enospc-after=3", []write{page(payload), other(payload), entry(header), page(payload), page(payload), page(header)}, 5, -1, 0},
		{"enospc-after=0", []write{other(payload), entry(header), page(payload)}, 2, -1, 0},
		{"torn-after=2", []write{page(payload), entry(header), entry(invalidate), entry(cont), page(header), other(header), entry(header)}, 6, 6, 32},
		{"torn-after=1", []write{entry(invalidate), entry(cont), page(header)}, -1, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			crashes := 0
			h, err := testHooks(tt.spec, func() { crashes++ })
			if err != nil {
				t.Fatal(err)
			}
			mem := vfs.NewMem()
			if err := mem.MkdirAll("/ssd", 0o755); err != nil {
				t.Fatal(err)
			}
			fs := h.nodeFS(mem)
			files := map[string]vfs.File{}
			for i, w := range tt.writes {
				f := files[w.file]
				if f == nil {
					if f, err = fs.OpenFile(w.file, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					files[w.file] = f
				}
				n, err := f.WriteAt(w.p, int64(4096*i))
				switch {
				case tt.failAt < 0 || i < tt.failAt:
					if err != nil {
						t.Fatalf("write %d: %v; want success", i, err)
					}
				case i == tt.failAt:
					if err == nil || n != tt.kept {
						t.Fatalf("write %d = %d, %v; want a failure storing %d bytes", i, n, err, tt.kept)
					}
					if crashes != map[bool]int{true: 1, false: 0}[tt.crashAt == i] {
						t.Fatalf("write %d: crash ran %d times", i, crashes)
					}
				}
			}
			if tt.crashAt < 0 && crashes != 0 {
				t.Errorf("crash ran %d times; want never", crashes)
			}
		})
	}
}
