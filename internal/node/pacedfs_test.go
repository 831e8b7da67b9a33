package node

import (
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvpool/kvpool/internal/node/pacer"
	"github.com/kvpool/kvpool/internal/vfs"
)

// fdFile pretends to be a real file (a descriptor for sendfile).
type fdFile struct{ vfs.File }

func (fdFile) Fd() uintptr { return 42 }

type fdFS struct{ vfs.FS }

func (f fdFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return fdFile{file}, nil
}

// TestPacedFS: once armed, reads and writes wait for their pacer (in
// synctest's fake time: 4096 bytes at 1024 B/s with a 1-byte bucket take
// 4 s), and reads are not sent with sendfile; before arming, and on an
// unpaced direction, nothing waits.
func TestPacedFS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate = 1024
		read, err := pacer.New(pacer.Options{Rate: rate, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		pfs := &pacedFS{FS: fdFS{vfs.NewMem()}, read: read}
		f, err := pfs.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		timed := func(what string, op func([]byte, int64) (int, error), want time.Duration) {
			t.Helper()
			start := time.Now()
			if _, err := op(buf, 0); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := time.Since(start); got < want-10*time.Millisecond || got > want+10*time.Millisecond {
				t.Errorf("%s took %v of fake time, want %v", what, got, want)
			}
		}
		timed("write before arming", f.WriteAt, 0)
		timed("read before arming", f.ReadAt, 0)
		if f.Fd() != 42 {
			t.Errorf("Fd hidden before arming")
		}
		pfs.armed.Store(true)
		timed("paced read", f.ReadAt, 4*time.Second)
		timed("unpaced write", f.WriteAt, 0)
		if f.Fd() != 0 {
			t.Errorf("Fd shown while reads are paced: sendfile would bypass the pacer")
		}
		if read.Waited() == 0 {
			t.Errorf("the read pacer counted no wait")
		}
	})
}
