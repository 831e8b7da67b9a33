package node

import (
	"path/filepath"
	"testing"

	"github.com/kvpool/kvpool/internal/vfs"
	"github.com/kvpool/kvpool/internal/vfs/errorfs"
)

// TestWrapSSDFS: Options.WrapSSDFS sits under the SSD tier, paced or not:
// a disk that is full from the start fails every demotion, which the node
// counts, while its RAM tier keeps serving.
func TestWrapSSDFS(t *testing.T) {
	for _, paced := range []bool{false, true} {
		name := map[bool]string{false: "unpaced", true: "paced"}[paced]
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(filepath.Join(t.TempDir(), "ssd"))
			if paced {
				cfg.Pacers.SSDWrite = 1 << 30
			}
			var efs *errorfs.FS
			wrapped := 0
			opts := Options{WrapSSDFS: func(inner vfs.FS) vfs.FS {
				wrapped++
				efs = errorfs.Wrap(inner, errorfs.OnPath("pages-*.dat", errorfs.NoSpace(0)))
				return efs
			}}
			r := start(t, cfg, opts)
			if wrapped != 1 {
				t.Fatalf("WrapSSDFS called %d times, want 1", wrapped)
			}
			p := pool(t, r.n.Addr())
			// RAM holds 16 blocks of 64 KiB (with their keys, in its 4 KiB
			// chunks): at least 24 demotions.
			const n, size = 40, 64<<10 - 128
			for i := range uint64(n) {
				if err := p.Put(ctx, i, payload(i, size)); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			for i := uint64(n - 8); i < n; i++ {
				got, _, err := p.Get(ctx, i, nil)
				if err != nil || string(got) != string(payload(i, size)) {
					t.Fatalf("get %d from RAM on a full disk: %v", i, err)
				}
			}
			_, text := httpGet(t, "http://"+r.n.AdminAddr()+"/metrics")
			failed := metric(t, text, "kvpool_node_demotion_failures_total", "")
			injected := efs.Counts().NoSpace
			if failed < n-16 || injected == 0 {
				t.Errorf("demotion failures %v, ENOSPC injected %d; want >= %d and > 0", failed, injected, n-16)
			}
			if v := metric(t, text, "kvpool_node_tier_resident_blocks", `tier="ssd"`); v != 0 {
				t.Errorf("SSD holds %v blocks on a disk that is full", v)
			}
		})
	}
}
