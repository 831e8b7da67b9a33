package ssd

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
	"github.com/kvpool/kvpool/internal/vfs/errorfs"
)

// removals records OnRemove calls, checking that each removed key has
// already left the index when the hook runs.
type removals struct {
	t   *testing.T
	tr  *Tier
	mu  sync.Mutex
	got []Removed
}

func (r *removals) hook(rm Removed) {
	if r.tr != nil && r.tr.Contains(rm.Key) {
		r.t.Errorf("OnRemove(%s, %v): the key is still indexed", rm.Key, rm.Reason)
	}
	r.mu.Lock()
	r.got = append(r.got, rm)
	r.mu.Unlock()
}

func (r *removals) take() []Removed {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func TestOnRemove(t *testing.T) {
	t.Run("eviction", func(t *testing.T) {
		rec := &removals{t: t}
		o := pageOptions(vfs.NewMem(), 100, SyncNone) // 0.95 / 0.90
		o.OnRemove = rec.hook
		tr := mustOpen(t, o)
		rec.tr = tr
		closeChecked(t, tr)
		for i := range uint64(95) {
			put(t, tr, key(i), []byte("x"))
		}
		if got := rec.take(); len(got) != 0 {
			t.Fatalf("removals under the watermark: %v", got)
		}
		put(t, tr, key(95), []byte("x"))
		got := rec.take()
		var want []Removed
		for i := range uint64(5) {
			want = append(want, Removed{Key: key(i), Reason: RemovedEvicted})
		}
		slices.SortFunc(got, func(a, b Removed) int { return int(a.Key.ID) - int(b.Key.ID) })
		if !slices.Equal(got, want) {
			t.Errorf("removals past the watermark: %v, want %v", got, want)
		}
		// Delete and replacement are the caller's doing: no call.
		if err := tr.Delete(ctx, key(50)); err != nil {
			t.Fatal(err)
		}
		put(t, tr, key(60), []byte("y"))
		if got := rec.take(); len(got) != 0 {
			t.Errorf("removals after Delete and replacement: %v", got)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		rec := &removals{t: t}
		efs := errorfs.Wrap(vfs.NewMem(), nil)
		o := testOptions(efs, 4096, 16, SyncNone)
		o.OnRemove = rec.hook
		tr := mustOpen(t, o)
		rec.tr = tr
		closeChecked(t, tr)
		k := key(7)
		put(t, tr, k, tiertest.Payload(7, 1, 4096))
		sw := errorfs.NewSwitch(errorfs.OnPath("pages-*", errorfs.OnOps(errorfs.OpRead, errorfs.BitFlip(3))))
		efs.SetInjector(sw)
		sw.Set(true)
		if _, _, err := tr.Get(ctx, k, nil); !errors.Is(err, kvpool.ErrCorrupt) {
			t.Fatalf("Get with a flipped bit: %v, want ErrCorrupt", err)
		}
		sw.Set(false)
		if got, want := rec.take(), []Removed{{Key: k, Reason: RemovedCorrupt}}; !slices.Equal(got, want) {
			t.Errorf("removals: %v, want %v", got, want)
		}
		if _, _, err := tr.Get(ctx, k, nil); !errors.Is(err, kvpool.ErrNotFound) {
			t.Errorf("Get after the drop: %v, want ErrNotFound", err)
		}
		if got := rec.take(); len(got) != 0 {
			t.Errorf("a plain miss reported removals: %v", got)
		}
	})
}

func TestItemsAndStat(t *testing.T) {
	dir := vfs.NewMem()
	o := testOptions(dir, 4096, 32, SyncBatch)
	tr := mustOpen(t, o)
	want := map[block.Key]Item{}
	for i := range uint64(10) {
		p := tiertest.Payload(i, 1, int(100+i))
		put(t, tr, key(i), p)
		want[key(i)] = Item{Key: key(i), Size: len(p), Sum: block.Checksum(key(i), p)}
	}
	if err := tr.Delete(ctx, key(3)); err != nil {
		t.Fatal(err)
	}
	delete(want, key(3))
	check := func(tr *Tier, where string) {
		t.Helper()
		before := tr.Stats()
		items := tr.Items()
		if len(items) != len(want) {
			t.Errorf("%s: Items has %d blocks, want %d", where, len(items), len(want))
		}
		for _, it := range items {
			if want[it.Key] != it {
				t.Errorf("%s: Items has %+v, want %+v", where, it, want[it.Key])
			}
			if st, ok := tr.Stat(it.Key); !ok || st != it {
				t.Errorf("%s: Stat(%s) = %+v, %v", where, it.Key, st, ok)
			}
		}
		if _, ok := tr.Stat(key(3)); ok {
			t.Errorf("%s: Stat of a deleted key reports it", where)
		}
		if after := tr.Stats(); after != before {
			t.Errorf("%s: Items and Stat changed the counters: %+v → %+v", where, before, after)
		}
	}
	check(tr, "open")
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if tr.Items() != nil {
		t.Errorf("Items of a closed tier is not nil")
	}
	tr2 := mustOpen(t, o) // the scan finds the same blocks
	closeChecked(t, tr2)
	check(tr2, "reopened")
}
