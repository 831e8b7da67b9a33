package ram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
)

var ctx = context.Background()

func key(id uint64) block.Key { return block.Key{Tenant: "ten", ID: id} }

func mustOpen(t testing.TB, o Options) *RAM {
	t.Helper()
	r, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		if err := r.Close(); err != nil && !errors.Is(err, kvpool.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// small returns options for a tier holding n objects of up to bs bytes,
// one chunk each (the slots of before chunks).
func small(bs, n int) Options {
	return ForObjects(bs, n, 0)
}

func put(t testing.TB, r *RAM, k block.Key, p []byte) {
	t.Helper()
	if err := r.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
		t.Fatalf("Put %s: %v", k, err)
	}
}

func mustGet(t testing.TB, r *RAM, k block.Key, want []byte) {
	t.Helper()
	got, sum, err := r.Get(ctx, k, nil)
	if err != nil {
		t.Fatalf("Get %s: %v", k, err)
	}
	if !bytes.Equal(got, want) || sum != block.Checksum(k, want) {
		t.Fatalf("Get %s: wrong bytes or sum", k)
	}
}

func TestConformance(t *testing.T) {
	variants := []struct {
		name string
		opts func(cfg tiertest.Config) Options
	}{
		{"plain", func(cfg tiertest.Config) Options { return ForObjects(cfg.BlockSize, cfg.Blocks, cfg.MaxObjectSize) }},
		{"hook", func(cfg tiertest.Config) Options {
			o := ForObjects(cfg.BlockSize, cfg.Blocks, cfg.MaxObjectSize)
			o.OnEvict = func(ev Evicted) {
				if !block.Verify(ev.Key, ev.Payload.AppendTo(nil), ev.Sum) {
					panic(fmt.Sprintf("OnEvict %s: payload does not match its checksum", ev.Key))
				}
			}
			return o
		}},
		{"noverify", func(cfg tiertest.Config) Options {
			o := ForObjects(cfg.BlockSize, cfg.Blocks, cfg.MaxObjectSize)
			o.SkipVerifyReads = true
			return o
		}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tiertest.Run(t, func(t *testing.T, cfg tiertest.Config) tier.Tier {
				r, err := Open(v.opts(cfg))
				if err != nil {
					t.Fatal(err)
				}
				return r
			})
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		field string // "" = valid
	}{
		{"zero is default", Options{}, ""},
		{"negative block size", Options{BlockSize: -1}, "BlockSize"},
		{"huge block size", Options{BlockSize: 2 << 30}, "BlockSize"},
		{"negative capacity", Options{CapacityBytes: -5}, "CapacityBytes"},
		{"no slot", Options{BlockSize: 4096, CapacityBytes: 4095}, "CapacityBytes"},
		{"too many chunks", Options{ChunkSize: 512, CapacityBytes: 1 << 41}, "CapacityBytes"},
		{"chunk not a power of two", Options{ChunkSize: 1000}, "ChunkSize"},
		{"chunk too small", Options{ChunkSize: 256}, "ChunkSize"},
		{"chunk too large", Options{ChunkSize: 2 << 20}, "ChunkSize"},
		{"negative max object", Options{MaxObjectSize: -1}, "MaxObjectSize"},
		{"max object over 512 MiB", Options{MaxObjectSize: 512<<20 + 1}, "MaxObjectSize"},
		{"max object over capacity", Options{CapacityBytes: 1 << 20, MaxObjectSize: 2 << 20}, "MaxObjectSize"},
		{"max object 512 MiB", Options{CapacityBytes: 1 << 30, MaxObjectSize: 512 << 20}, ""},
		{"small capacity clamps the default max object", Options{CapacityBytes: 1 << 20}, ""},
		{"unknown eviction", Options{Eviction: "mru"}, "Eviction"},
		{"oracle eviction", Options{Eviction: "belady"}, "Eviction"},
		{"unknown admission", Options{Admission: "never"}, "Admission"},
		{"every online policy", Options{Eviction: "s3fifo", Admission: "cms"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "Options."+tt.field) {
				t.Fatalf("Validate = %v, want an error naming Options.%s", err, tt.field)
			}
			if _, err := Open(tt.opts); err == nil {
				t.Fatal("Open accepted what Validate refused")
			}
		})
	}
}

func TestPutRefusals(t *testing.T) {
	r := mustOpen(t, small(100, 4))
	k := key(1)
	p := []byte("payload")
	tests := []struct {
		name string
		k    block.Key
		p    []byte
		sum  uint32
		want error
	}{
		{"bad checksum", k, p, block.Checksum(k, p) ^ 1, kvpool.ErrCorrupt},
		{"checksum of another key", k, p, block.Checksum(key(2), p), kvpool.ErrCorrupt},
		{"too large", k, make([]byte, 101), block.Checksum(k, make([]byte, 101)), kvpool.ErrTooLarge},
		{"bad tenant", block.Key{Tenant: "a/b", ID: 1}, p, block.Checksum(block.Key{Tenant: "a/b", ID: 1}, p), block.ErrBadTenant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := r.Put(ctx, tt.k, tt.p, tt.sum); !errors.Is(err, tt.want) {
				t.Fatalf("Put = %v, want %v", err, tt.want)
			}
			if r.Contains(tt.k) {
				t.Fatal("refused block is resident")
			}
		})
	}
	if st := r.Stats(); st.Blocks != 0 || st.BytesIn != 0 {
		t.Errorf("refused puts changed Stats: %+v", st)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.Put(cctx, k, p, block.Checksum(k, p)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v", err)
	}
}

// TestEvictHook: every evicted block reaches OnEvict once, in LRU order,
// with its bytes and checksum, while it is still resident; afterwards it
// is gone.
func TestEvictHook(t *testing.T) {
	const n = 4
	var got []uint64
	var r *RAM
	o := small(64, n)
	o.OnEvict = func(ev Evicted) {
		if !r.Contains(ev.Key) {
			t.Errorf("OnEvict %s: not resident during the call", ev.Key)
		}
		if g, ok := r.Generation(ev.Key); !ok || g != ev.Gen {
			t.Errorf("OnEvict %s: Generation = %d, %v; want %d", ev.Key, g, ok, ev.Gen)
		}
		if ver, err := tiertest.CheckPayload(ev.Key.ID, ev.Payload.AppendTo(nil)); err != nil || ver != 1 {
			t.Errorf("OnEvict %s: payload version %d, %v", ev.Key, ver, err)
		}
		if ev.Sum != block.Checksum(ev.Key, ev.Payload.AppendTo(nil)) || ev.Clean {
			t.Errorf("OnEvict %s: sum %08x clean %v", ev.Key, ev.Sum, ev.Clean)
		}
		got = append(got, ev.Key.ID)
	}
	r = mustOpen(t, o)
	for i := range uint64(n) {
		put(t, r, key(i), tiertest.Payload(i, 1, 64))
	}
	mustGet(t, r, key(0), tiertest.Payload(0, 1, 64)) // 0 becomes most recent
	for i := uint64(n); i < n+3; i++ {
		put(t, r, key(i), tiertest.Payload(i, 1, 64))
	}
	if want := []uint64{1, 2, 3}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("evicted %v, want %v", got, want)
	}
	for _, id := range got {
		if r.Contains(key(id)) {
			t.Errorf("evicted %d still resident", id)
		}
	}
	st := r.Stats()
	if st.Evicted != 3 || st.EvictAttempts != 3 || st.Blocks != n {
		t.Errorf("Stats %+v, want 3 evicted of 3 attempts, %d blocks", st, n)
	}
}

// TestPinned: a block held through Acquire or View is never evicted or
// overwritten; eviction counts the attempts it skipped; with every slot
// pinned a Put fails with ErrFull and stores nothing.
func TestPinned(t *testing.T) {
	r := mustOpen(t, small(64, 3))
	for i := range uint64(3) {
		put(t, r, key(i), tiertest.Payload(i, 1, 64))
	}
	p0seg, sum0, rel0, err := r.Acquire(key(0)) // a read: 0 becomes most recent...
	if err != nil {
		t.Fatal(err)
	}
	p0 := p0seg.AppendTo(nil)

	mustGet(t, r, key(1), tiertest.Payload(1, 1, 64))
	mustGet(t, r, key(2), tiertest.Payload(2, 1, 64)) // ...and now the LRU victim again
	put(t, r, key(10), tiertest.Payload(10, 1, 64))   // skips 0, evicts 1
	if !r.Contains(key(0)) || r.Contains(key(1)) {
		t.Fatalf("after one eviction: 0 present %v, 1 present %v; want 0 kept (pinned), 1 evicted", r.Contains(key(0)), r.Contains(key(1)))
	}
	if st := r.Stats(); st.EvictAttempts != 2 || st.Evicted != 1 {
		t.Errorf("EvictAttempts %d Evicted %d, want 2 and 1", st.EvictAttempts, st.Evicted)
	}
	_, _, rel2, err := r.Acquire(key(2))
	if err != nil {
		t.Fatal(err)
	}
	err = r.View(key(10), func(tier.Segments, uint32) error {
		// Every slot is pinned now: a Put must fail, and change nothing.
		p := tiertest.Payload(20, 1, 64)
		if err := r.Put(ctx, key(20), p, block.Checksum(key(20), p)); !errors.Is(err, kvpool.ErrFull) {
			t.Errorf("Put with every slot pinned = %v, want ErrFull", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Contains(key(20)) || r.Counters().Full != 1 {
		t.Errorf("refused put visible %v, Counters %+v", r.Contains(key(20)), r.Counters())
	}
	if !bytes.Equal(p0, tiertest.Payload(0, 1, 64)) || sum0 != block.Checksum(key(0), p0) {
		t.Error("pinned payload changed")
	}
	if c := r.Counters(); c.PinnedSlots != 2 {
		t.Errorf("PinnedSlots %d, want 2", c.PinnedSlots)
	}
	rel0()
	rel0() // a second release does nothing
	rel2()
	put(t, r, key(20), tiertest.Payload(20, 1, 64))
	if c := r.Counters(); c.PinnedSlots != 0 || c.UsedSlots != 3 {
		t.Errorf("Counters %+v after releases", c)
	}
}

// TestDeletePinned: a deleted or replaced block that is being read stays
// readable to its reader and frees its slot on release.
func TestDeletePinned(t *testing.T) {
	r := mustOpen(t, small(64, 2))
	put(t, r, key(1), tiertest.Payload(1, 1, 64))
	put(t, r, key(2), tiertest.Payload(2, 1, 64))
	p1seg, _, rel1, err := r.Acquire(key(1))
	if err != nil {
		t.Fatal(err)
	}
	p1 := p1seg.AppendTo(nil)

	p2seg, _, rel2, err := r.Acquire(key(2))
	if err != nil {
		t.Fatal(err)
	}
	p2 := p2seg.AppendTo(nil)

	if err := r.Delete(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	// Replacing 2 needs a slot: none is free and both are pinned.
	p := tiertest.Payload(2, 2, 64)
	if err := r.Put(ctx, key(2), p, block.Checksum(key(2), p)); !errors.Is(err, kvpool.ErrFull) {
		t.Fatalf("replace with both slots pinned = %v, want ErrFull", err)
	}
	if r.Contains(key(1)) || r.Watermark() != 1 {
		t.Fatalf("deleted key resident %v, watermark %v", r.Contains(key(1)), r.Watermark())
	}
	if !bytes.Equal(p1, tiertest.Payload(1, 1, 64)) || !bytes.Equal(p2, tiertest.Payload(2, 1, 64)) {
		t.Fatal("pinned bytes changed")
	}
	rel1() // frees the deleted block's slot
	if w := r.Watermark(); w != 0.5 {
		t.Fatalf("watermark %v after releasing the deleted block, want 0.5", w)
	}
	put(t, r, key(2), p) // replaces 2 into the free slot; the old copy is still pinned
	if !bytes.Equal(p2, tiertest.Payload(2, 1, 64)) {
		t.Fatal("replacement overwrote a pinned copy")
	}
	mustGet(t, r, key(2), p)
	rel2()
	if w := r.Watermark(); w != 0.5 {
		t.Fatalf("watermark %v after releasing the replaced copy, want 0.5", w)
	}
}

// TestReaderDuringEviction: a reader that pins a block while OnEvict runs
// keeps its slot; the Put evicts another block instead.
func TestReaderDuringEviction(t *testing.T) {
	var r *RAM
	var held []func()
	var evicted []uint64
	o := small(64, 2)
	o.OnEvict = func(ev Evicted) {
		evicted = append(evicted, ev.Key.ID)
		if ev.Key.ID == 1 {
			pseg, _, rel, err := r.Acquire(ev.Key)
			p := pseg.AppendTo(nil)
			if err != nil || !bytes.Equal(p, ev.Payload.AppendTo(nil)) {
				t.Errorf("Acquire during OnEvict: %v", err)
			}
			held = append(held, rel)
		}
	}
	r = mustOpen(t, o)
	put(t, r, key(1), tiertest.Payload(1, 1, 64))
	put(t, r, key(2), tiertest.Payload(2, 1, 64))
	put(t, r, key(3), tiertest.Payload(3, 1, 64))
	if fmt.Sprint(evicted) != "[1 2]" {
		t.Fatalf("evicted %v, want [1 2] (1's slot was held by a reader)", evicted)
	}
	if r.Contains(key(1)) || r.Contains(key(2)) || !r.Contains(key(3)) {
		t.Fatal("want only 3 resident")
	}
	if w := r.Watermark(); w != 1 {
		t.Fatalf("watermark %v: the held slot must stay in use", w)
	}
	for _, rel := range held {
		rel()
	}
	if w := r.Watermark(); w != 0.5 {
		t.Fatalf("watermark %v after release, want 0.5", w)
	}
}

// TestSupersededDuringEviction: a Put or Delete of the evicted key while
// OnEvict runs supersedes the evicted copy; Generation shows it.
func TestSupersededDuringEviction(t *testing.T) {
	for _, action := range []string{"put", "delete"} {
		t.Run(action, func(t *testing.T) {
			var r *RAM
			o := small(64, 2)
			fresh := tiertest.Payload(1, 2, 64)
			o.OnEvict = func(ev Evicted) {
				if ev.Key.ID != 1 {
					return
				}
				switch action {
				case "put":
					// Needs a slot: evicts 2 (OnEvict again, for 2).
					if err := r.Put(ctx, ev.Key, fresh, block.Checksum(ev.Key, fresh)); err != nil {
						t.Errorf("Put during OnEvict: %v", err)
					}
				case "delete":
					if err := r.Delete(ctx, ev.Key); err != nil {
						t.Errorf("Delete during OnEvict: %v", err)
					}
				}
				if g, ok := r.Generation(ev.Key); ok && g == ev.Gen {
					t.Errorf("Generation still %d after the key was superseded", g)
				}
			}
			r = mustOpen(t, o)
			put(t, r, key(1), tiertest.Payload(1, 1, 64))
			put(t, r, key(2), tiertest.Payload(2, 1, 64))
			put(t, r, key(3), tiertest.Payload(3, 1, 64))
			switch action {
			case "put":
				mustGet(t, r, key(1), fresh)
			case "delete":
				if r.Contains(key(1)) {
					t.Fatal("deleted key resident")
				}
			}
		})
	}
}

func TestCorruptionDetected(t *testing.T) {
	for _, verify := range []bool{true, false} {
		t.Run(fmt.Sprintf("verify=%v", verify), func(t *testing.T) {
			o := small(64, 4)
			o.SkipVerifyReads = !verify
			r := mustOpen(t, o)
			p := tiertest.Payload(1, 1, 64)
			put(t, r, key(1), p)
			s, _ := r.lookupLocked(key(1))
			r.arena[int(r.objs[s].first)*r.cs+40] ^= 0x10 // a bit flips in memory
			got, _, err := r.Get(ctx, key(1), nil)
			st := r.Stats()
			if !verify {
				if err != nil || bytes.Equal(got, p) || st.Corruptions != 0 {
					t.Fatalf("without verification: %v, corruptions %d; want the flipped bytes served", err, st.Corruptions)
				}
				r.arena[int(r.objs[s].first)*r.cs+40] ^= 0x10
				return
			}
			if !errors.Is(err, kvpool.ErrCorrupt) || len(got) != 0 {
				t.Fatalf("Get of a flipped copy: %d bytes, %v; want ErrCorrupt and no bytes", len(got), err)
			}
			if r.Contains(key(1)) || st.Corruptions != 1 || st.Misses != 1 || st.Hits != 0 || st.Blocks != 0 {
				t.Fatalf("after corruption: resident %v, Stats %+v", r.Contains(key(1)), st)
			}
		})
	}
}

func TestAdmission(t *testing.T) {
	o := small(64, 4)
	o.Admission = "second-hit"
	r := mustOpen(t, o)
	p := tiertest.Payload(1, 1, 64)
	if err := r.Put(ctx, key(1), p, block.Checksum(key(1), p)); !errors.Is(err, ErrNotAdmitted) {
		t.Fatalf("first Put under second-hit = %v, want ErrNotAdmitted", err)
	}
	if r.Contains(key(1)) {
		t.Fatal("refused block resident")
	}
	put(t, r, key(1), p) // second miss: admitted
	put(t, r, key(1), p) // resident: a replacement, admission not asked
	if _, err := r.Insert(ctx, key(2), tiertest.Payload(2, 1, 64), block.Checksum(key(2), tiertest.Payload(2, 1, 64)), InsertOptions{SkipAdmission: true}); err != nil {
		t.Fatalf("Insert skipping admission: %v", err)
	}
	if c := r.Counters(); c.Rejected != 1 {
		t.Errorf("Rejected %d, want 1", c.Rejected)
	}
}

func TestInsertOptions(t *testing.T) {
	var evicted []Evicted
	o := small(64, 2)
	o.OnEvict = func(ev Evicted) { evicted = append(evicted, ev) }
	r := mustOpen(t, o)
	ins := func(id, ver uint64, how InsertOptions) (uint64, error) {
		p := tiertest.Payload(id, ver, 64)
		return r.Insert(ctx, key(id), p, block.Checksum(key(id), p), how)
	}
	g1, err := ins(1, 1, InsertOptions{Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := r.Generation(key(1)); !ok || g != g1 {
		t.Fatalf("Generation %d, %v; Insert said %d", g, ok, g1)
	}
	if _, err := ins(1, 2, InsertOptions{IfAbsent: true}); !errors.Is(err, ErrExists) {
		t.Fatalf("IfAbsent over a resident key = %v, want ErrExists", err)
	}
	mustGet(t, r, key(1), tiertest.Payload(1, 1, 64))
	if _, err := ins(2, 1, InsertOptions{Clean: true, NoEvict: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ins(3, 1, InsertOptions{NoEvict: true}); !errors.Is(err, kvpool.ErrFull) {
		t.Fatalf("NoEvict into a full tier = %v, want ErrFull", err)
	}
	if len(evicted) != 0 || r.Contains(key(3)) {
		t.Fatal("NoEvict evicted or stored")
	}
	g2, err := ins(2, 2, InsertOptions{}) // a replacement is not clean
	if err != nil || g2 <= g1 {
		t.Fatalf("replace: gen %d after %d, %v", g2, g1, err)
	}
	mustGet(t, r, key(2), tiertest.Payload(2, 2, 64)) // 1 is now the LRU
	if _, err := ins(3, 1, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ins(4, 1, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(evicted) != 2 || evicted[0].Key != key(1) || !evicted[0].Clean || evicted[1].Key != key(2) || evicted[1].Clean || evicted[1].Gen != g2 {
		t.Fatalf("evicted %+v; want 1 (clean) then 2 (replaced, not clean, gen %d)", evicted, g2)
	}
}

// TestEveryPolicy: each online eviction policy drives the tier through
// churn without breaking its invariants or serving a wrong block.
func TestEveryPolicy(t *testing.T) {
	for _, name := range policy.EvictionNames() {
		if (policy.Spec{Eviction: name}).NeedsFuture() {
			continue
		}
		for _, adm := range policy.AdmissionNames() {
			t.Run(name+"+"+adm, func(t *testing.T) {
				o := small(32, 20)
				o.Eviction, o.Admission = name, adm
				r := mustOpen(t, o)
				rng := rand.New(rand.NewPCG(1, 2))
				for i := range 2000 {
					id := uint64(rng.IntN(60))
					if rng.IntN(3) == 0 {
						p := tiertest.Payload(id, uint64(i), 16+rng.IntN(17))
						err := r.Put(ctx, key(id), p, block.Checksum(key(id), p))
						if err != nil && !errors.Is(err, ErrNotAdmitted) {
							t.Fatalf("Put: %v", err)
						}
						continue
					}
					got, _, err := r.Get(ctx, key(id), nil)
					if errors.Is(err, kvpool.ErrNotFound) {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if _, err := tiertest.CheckPayload(id, got); err != nil {
						t.Fatal(err)
					}
				}
				if st := r.Stats(); st.Blocks > 20 || st.Evicted == 0 {
					t.Errorf("Stats %+v: want churn within 20 blocks", st)
				}
			})
		}
	}
}

// TestConcurrentChurn: readers (Get, View, Acquire), writers and deleters
// race on a tier small enough to evict constantly; no reader ever sees a
// wrong byte, OnEvict always sees a consistent block, and the invariants
// hold afterwards.
func TestConcurrentChurn(t *testing.T) {
	const (
		workers = 6
		ops     = 1500
		keys    = 40
		bs      = 256
	)
	var hookErrs sync.Map
	o := small(bs, 16)
	o.OnEvict = func(ev Evicted) {
		if _, err := tiertest.CheckPayload(ev.Key.ID, ev.Payload.AppendTo(nil)); err != nil || !block.Verify(ev.Key, ev.Payload.AppendTo(nil), ev.Sum) {
			hookErrs.Store(ev.Key, fmt.Errorf("OnEvict %s: %v", ev.Key, err))
		}
	}
	r := mustOpen(t, o)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			var dst []byte
			for i := range ops {
				k := key(rng.Uint64N(keys))
				check := func(p []byte, sum uint32) error {
					if _, err := tiertest.CheckPayload(k.ID, p); err != nil {
						return err
					}
					if !block.Verify(k, p, sum) {
						return fmt.Errorf("%s: sum does not match", k)
					}
					return nil
				}
				var err error
				switch op := rng.IntN(10); {
				case op < 4:
					p := tiertest.Payload(k.ID, uint64(w<<20|i), 16+rng.IntN(bs-15))
					err = r.Put(ctx, k, p, block.Checksum(k, p))
				case op < 6:
					var sum uint32
					if dst, sum, err = r.Get(ctx, k, dst); err == nil {
						err = check(dst, sum)
					}
				case op < 8:
					err = r.View(k, func(p tier.Segments, sum uint32) error { return check(p.AppendTo(nil), sum) })
				case op < 9:
					var p tier.Segments
					var sum uint32
					var rel func()
					if p, sum, rel, err = r.Acquire(k); err == nil {
						err = check(p.AppendTo(nil), sum)
						rel()
					}
				default:
					err = r.Delete(ctx, k)
				}
				if err != nil && !errors.Is(err, kvpool.ErrNotFound) && !errors.Is(err, kvpool.ErrFull) {
					errs <- err
					return
				}
				r.Contains(k)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	hookErrs.Range(func(_, v any) bool { t.Error(v); return true })
	st := r.Stats()
	if st.Evicted == 0 || st.Corruptions != 0 {
		t.Errorf("Stats %+v: want evictions and no corruption", st)
	}
}

func TestWatermark(t *testing.T) {
	r := mustOpen(t, small(10, 4))
	if w := r.Watermark(); w != 0 {
		t.Fatalf("empty watermark %v", w)
	}
	put(t, r, key(1), []byte("a"))
	put(t, r, key(2), []byte("b"))
	put(t, r, key(3), []byte("c"))
	if w := r.Watermark(); w != 0.75 {
		t.Fatalf("watermark %v, want 0.75", w)
	}
	if err := r.Delete(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	if w := r.Watermark(); w != 0.5 {
		t.Fatalf("watermark %v, want 0.5", w)
	}
}

func TestClosed(t *testing.T) {
	r, err := Open(small(10, 2))
	if err != nil {
		t.Fatal(err)
	}
	put(t, r, key(1), []byte("a"))
	p, _, rel, err := r.Acquire(key(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if string(p.AppendTo(nil)) != "a" {
		t.Error("acquired bytes changed at Close")
	}
	rel()
	if err := r.View(key(1), func(tier.Segments, uint32) error { return nil }); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("View after Close = %v", err)
	}
	if _, _, _, err := r.Acquire(key(1)); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("Acquire after Close = %v", err)
	}
	if _, ok := r.Generation(key(1)); ok {
		t.Error("Generation after Close reports the key")
	}
	if err := r.Close(); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
}

// TestViewError: fn's error comes back wrapped, and the slot is released.
func TestViewError(t *testing.T) {
	r := mustOpen(t, small(10, 2))
	put(t, r, key(1), []byte("a"))
	boom := errors.New("socket closed")
	if err := r.View(key(1), func(tier.Segments, uint32) error { return boom }); !errors.Is(err, boom) || !strings.Contains(err.Error(), key(1).String()) {
		t.Fatalf("View = %v, want the callback's error naming the key", err)
	}
	if c := r.Counters(); c.PinnedSlots != 0 {
		t.Fatalf("slot still pinned after View returned: %+v", c)
	}
}

// TestZeroAllocs: Put (with eviction and the OnEvict hook) and View
// allocate nothing in steady state.
func TestZeroAllocs(t *testing.T) {
	o := small(4096, 8)
	o.OnEvict = func(Evicted) {}
	r := mustOpen(t, o)
	payloads := make([][]byte, 32)
	sums := make([]uint32, 32)
	for i := range payloads {
		payloads[i] = tiertest.Payload(uint64(i), 1, 4096)
		sums[i] = block.Checksum(key(uint64(i)), payloads[i])
	}
	i := 0
	putNext := func() {
		k := key(uint64(i % 32))
		if err := r.Put(ctx, k, payloads[i%32], sums[i%32]); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for range 64 { // warm up: intern the tenant, fill the tier
		putNext()
	}
	if a := testing.AllocsPerRun(200, putNext); a != 0 {
		t.Errorf("Put: %v allocs/op, want 0", a)
	}
	var n int
	view := func(p tier.Segments, _ uint32) error { n += p.Len(); return nil }
	last := key(uint64((i - 1) % 32))
	if a := testing.AllocsPerRun(200, func() {
		if err := r.View(last, view); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("View: %v allocs/op, want 0", a)
	}
	dst := make([]byte, 0, 4096)
	if a := testing.AllocsPerRun(200, func() {
		var err error
		if dst, _, err = r.Get(ctx, last, dst); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Get into a large enough dst: %v allocs/op, want 0", a)
	}
}

// TestWatermarks: past the high watermark a Put evicts down to the low
// one; a batch policy evicts its batch; NoEvict inserts never trim.
func TestWatermarks(t *testing.T) {
	tests := []struct {
		name      string
		slots     int
		opts      Options
		puts      int
		wantUsed  int // resident blocks after the puts
		wantEvict uint64
	}{
		{"default: full, one at a time", 8, Options{}, 10, 8, 2},
		{"0.75/0.5", 8, Options{HighWatermark: 0.75, LowWatermark: 0.5}, 7, 4, 3},
		{"0.75/0.5 below high", 8, Options{HighWatermark: 0.75, LowWatermark: 0.5}, 6, 6, 0},
		{"high only", 8, Options{HighWatermark: 0.5}, 5, 4, 1},
		{"mooncake batch", 100, Options{Eviction: "mooncake"}, 91, 86, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var evicted uint64
			o := tt.opts
			f := small(16, tt.slots)
			o.BlockSize, o.ChunkSize, o.CapacityBytes, o.MaxObjectSize = f.BlockSize, f.ChunkSize, f.CapacityBytes, f.MaxObjectSize
			o.OnEvict = func(Evicted) { evicted++ }
			r := mustOpen(t, o)
			for i := range uint64(tt.puts) {
				put(t, r, key(i), []byte("x"))
			}
			if st := r.Stats(); st.Blocks != tt.wantUsed || evicted != tt.wantEvict || st.Evicted != tt.wantEvict {
				t.Fatalf("after %d puts: %d blocks, %d evicted (hook saw %d); want %d, %d", tt.puts, st.Blocks, st.Evicted, evicted, tt.wantUsed, tt.wantEvict)
			}
			if w := r.Watermark(); w != float64(tt.wantUsed)/float64(tt.slots) {
				t.Fatalf("watermark %v, want %d/%d", w, tt.wantUsed, tt.slots)
			}
		})
	}
	t.Run("NoEvict does not trim", func(t *testing.T) {
		o := small(16, 4)
		o.HighWatermark = 0.5
		r := mustOpen(t, o)
		for i := range uint64(4) {
			p := []byte("x")
			if _, err := r.Insert(ctx, key(i), p, block.Checksum(key(i), p), InsertOptions{NoEvict: true}); err != nil {
				t.Fatal(err)
			}
		}
		if st := r.Stats(); st.Blocks != 4 || st.Evicted != 0 {
			t.Fatalf("Stats %+v, want 4 blocks, nothing evicted", st)
		}
	})
	if err := (Options{HighWatermark: 0.5, LowWatermark: 0.6}).Validate(); err == nil || !strings.Contains(err.Error(), "LowWatermark") {
		t.Errorf("low above high: %v", err)
	}
	if err := (Options{HighWatermark: 1.5}).Validate(); err == nil || !strings.Contains(err.Error(), "HighWatermark") {
		t.Errorf("high above 1: %v", err)
	}
}
