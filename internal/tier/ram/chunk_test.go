package ram

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
)

// chunked returns options for n chunks of 512 bytes.
func chunked(n int) Options {
	return Options{BlockSize: 512, ChunkSize: 512, CapacityBytes: int64(512 * n)}
}

func view(t *testing.T, r *RAM, k block.Key) (tier.Segments, []byte) {
	t.Helper()
	var segs tier.Segments
	var got []byte
	err := r.View(k, func(p tier.Segments, sum uint32) error {
		for _, s := range p {
			segs = append(segs, bytes.Clone(s))
		}
		got = p.AppendTo(nil)
		if sum != block.Checksum(k, got) {
			t.Errorf("View %s: sum %08x does not match", k, sum)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View %s: %v", k, err)
	}
	return segs, got
}

// TestRuns: an object is one run when the free chunks are adjacent, and
// one run per hole when they are not; View hands out one segment per run
// and every read path returns the same bytes.
func TestRuns(t *testing.T) {
	r := mustOpen(t, chunked(16))
	big := block.Named("t", "big")
	p := tiertest.Payload(1, 1, 4*512-len(big.Name))
	put(t, r, big, p)
	if segs, got := view(t, r, big); len(segs) != 1 || !bytes.Equal(got, p) {
		t.Fatalf("object in 4 adjacent chunks: %d segments, bytes equal %v", len(segs), bytes.Equal(got, p))
	}
	// Fill the other 12 chunks with one-chunk objects, free every other.
	for i := range uint64(12) {
		put(t, r, key(i), tiertest.Payload(i, 1, 100))
	}
	for i := uint64(0); i < 12; i += 2 {
		if err := r.Delete(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	frag := block.Named("t", "fragmented")
	p2 := tiertest.Payload(2, 1, 6*512-len(frag.Name))
	put(t, r, frag, p2)
	segs, got := view(t, r, frag)
	if len(segs) != 6 || !bytes.Equal(got, p2) {
		t.Fatalf("object in 6 separate chunks: %d segments, bytes equal %v; want 6, true", len(segs), bytes.Equal(got, p2))
	}
	mustGet(t, r, frag, p2)
	acq, _, rel, err := r.Acquire(frag)
	if err != nil || !bytes.Equal(acq.AppendTo(nil), p2) {
		t.Fatalf("Acquire: %v", err)
	}
	rel()
	if st := r.Stats(); st.Evicted != 0 {
		t.Fatalf("evicted %d with enough free chunks", st.Evicted)
	}
}

// TestEvictUntilFree: a Put evicts least recently used objects until its
// chunks are free, and no more.
func TestEvictUntilFree(t *testing.T) {
	var evicted []uint64
	o := chunked(8)
	o.OnEvict = func(ev Evicted) { evicted = append(evicted, ev.Key.ID) }
	r := mustOpen(t, o)
	for i := range uint64(8) {
		put(t, r, key(i), tiertest.Payload(i, 1, 500))
	}
	mustGet(t, r, key(0), tiertest.Payload(0, 1, 500))
	put(t, r, key(100), tiertest.Payload(100, 1, 3*512))
	if got := evicted; len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("evicted %v, want [1 2 3] (LRU, and just enough for 3 chunks)", got)
	}
	mustGet(t, r, key(100), tiertest.Payload(100, 1, 3*512))
	if c := r.Counters(); c.UsedChunks != 8 || c.Objects != 6 {
		t.Fatalf("Counters %+v, want 8 chunks used by 6 objects", c)
	}
}

// TestTooLargeUpFront: an object needing more chunks than the tier has
// is refused before anything is evicted, naming the sizes.
func TestTooLargeUpFront(t *testing.T) {
	o := chunked(8)
	o.MaxObjectSize = 8 * 512
	r := mustOpen(t, o)
	for i := range uint64(8) {
		put(t, r, key(i), tiertest.Payload(i, 1, 500))
	}
	k := block.Named("t", "name")
	p := tiertest.Payload(9, 1, 8*512) // fits MaxObjectSize, but not with its name
	err := r.Put(ctx, k, p, block.Checksum(k, p))
	if !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), "need 9 chunks") || !strings.Contains(err.Error(), "has 8") || !strings.Contains(err.Error(), "--ram-bytes") {
		t.Fatalf("Put of %d bytes named %q into 8 chunks of 512: %v; want ErrTooLarge naming 9 and 8 chunks", len(p), k.Name, err)
	}
	p = tiertest.Payload(9, 1, 8*512+1)
	if err := r.Put(ctx, k, p, block.Checksum(k, p)); !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), "4097-byte payload") || !strings.Contains(err.Error(), "4096 bytes") {
		t.Fatalf("Put over MaxObjectSize: %v", err)
	}
	if st := r.Stats(); st.Evicted != 0 || st.EvictAttempts != 0 || st.Blocks != 8 {
		t.Fatalf("Stats %+v: a refused object evicted something", st)
	}
	// With most of the tier pinned, a Put that could not be made room for
	// fails with ErrFull without evicting the rest.
	var rels []func()
	for i := range uint64(6) {
		_, _, rel, err := r.Acquire(key(i))
		if err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
	}
	p = tiertest.Payload(10, 1, 3*512)
	if err := r.Put(ctx, key(10), p, block.Checksum(key(10), p)); !errors.Is(err, kvpool.ErrFull) {
		t.Fatalf("Put of 3 chunks with 6 of 8 pinned: %v, want ErrFull", err)
	}
	if st := r.Stats(); st.Evicted != 0 || st.Blocks != 8 {
		t.Fatalf("Stats %+v: a Put that could not fit evicted", st)
	}
	for _, rel := range rels {
		rel()
	}
}

// TestCollidingNamesPinned: two names sharing an ID and a chain key of
// it live side by side; deleting or replacing one while another is being
// read leaves the others as they were.
func TestCollidingNamesPinned(t *testing.T) {
	r := mustOpen(t, chunked(16))
	a := block.Key{Tenant: "t", ID: 7, Name: "a"}
	b := block.Key{Tenant: "t", ID: 7, Name: "b"}
	c := block.Key{Tenant: "t", ID: 7}
	pa, pb, pc := tiertest.Payload(1, 1, 700), tiertest.Payload(2, 1, 30), tiertest.Payload(3, 1, 1200)
	put(t, r, a, pa)
	put(t, r, b, pb)
	put(t, r, c, pc)
	segs, _, rel, err := r.Acquire(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if r.Contains(a) || !r.Contains(b) || !r.Contains(c) {
		t.Fatal("deleting a changed which of a, b, c are resident")
	}
	put(t, r, b, tiertest.Payload(2, 2, 2000))
	mustGet(t, r, b, tiertest.Payload(2, 2, 2000))
	mustGet(t, r, c, pc)
	if !bytes.Equal(segs.AppendTo(nil), pa) {
		t.Fatal("a's pinned bytes changed")
	}
	rel()
	if _, _, err := r.Get(ctx, a, nil); !errors.Is(err, kvpool.ErrNotFound) {
		t.Fatalf("Get of deleted a: %v", err)
	}
	if PolicyKey(a) == PolicyKey(b) || PolicyKey(a) == PolicyKey(c) {
		t.Fatal("names sharing an ID share a policy key")
	}
}

// TestNamedZeroAllocs: Get and View of a named object of several chunks
// allocate nothing either.
func TestNamedZeroAllocs(t *testing.T) {
	r := mustOpen(t, Options{BlockSize: 32 << 10, CapacityBytes: 1 << 20})
	k := block.Named("t", "meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16kv_bytes")
	p := tiertest.Payload(1, 1, 32<<10)
	put(t, r, k, p)
	n := 0
	fn := func(s tier.Segments, _ uint32) error { n += s.Len(); return nil }
	if a := testing.AllocsPerRun(200, func() {
		if err := r.View(k, fn); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("View: %v allocs/op", a)
	}
	dst := make([]byte, 0, 32<<10)
	if a := testing.AllocsPerRun(200, func() {
		var err error
		if dst, _, err = r.Get(ctx, k, dst); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Get: %v allocs/op", a)
	}
}

// TestEveryPolicyOverCapacity: with objects much smaller than BlockSize
// the tier holds more objects than its policies were sized for (64
// chunks, policies sized for 8 objects); every policy copes, and no
// reader sees a wrong object. A batch policy (mooncake) counts objects
// and keeps to its capacity.
func TestEveryPolicyOverCapacity(t *testing.T) {
	for _, name := range policy.EvictionNames() {
		if (policy.Spec{Eviction: name}).NeedsFuture() {
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := mustOpen(t, Options{BlockSize: 4096, ChunkSize: 512, CapacityBytes: 512 * 64, Eviction: name, HighWatermark: 0.9, LowWatermark: 0.8})
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range 3000 {
				id := uint64(rng.IntN(200))
				if rng.IntN(2) == 0 {
					p := tiertest.Payload(id, uint64(i), 16+rng.IntN(1500))
					if err := r.Put(ctx, key(id), p, block.Checksum(key(id), p)); err != nil && !errors.Is(err, ErrNotAdmitted) {
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
			// A batch policy counts objects (it keeps at most the 8 it is
			// sized for); the others are bounded by the chunks only.
			_, batch := r.pol.(policy.Batcher)
			if st := r.Stats(); st.Evicted == 0 || batch && st.Blocks > 8 || !batch && st.Blocks <= 8 {
				t.Errorf("Stats %+v: want churn, and more than 8 objects resident unless the policy batches (%v)", st, batch)
			}
		})
	}
}

// TestLargerThanLowWatermark: with watermarks, a Put past the high one
// trims to the low one, the newest object last, so an object larger than
// the low watermark would be evicted by the Put that stored it. It is
// refused up front instead, and one that fits is kept.
func TestLargerThanLowWatermark(t *testing.T) {
	o := chunked(20)
	o.HighWatermark, o.LowWatermark = 0.9, 0.5 // trim past 18 chunks down to 10
	r := mustOpen(t, o)
	k := block.Named("t", "big")
	p := tiertest.Payload(1, 1, 11*512)
	err := r.Put(ctx, k, p, block.Checksum(k, p))
	if !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), "need 12 chunks") || !strings.Contains(err.Error(), "the 10 (5120 bytes)") || !strings.Contains(err.Error(), "--ram-low-watermark") {
		t.Fatalf("Put of 12 chunks into a tier keeping 10: %v; want ErrTooLarge naming both", err)
	}
	p = tiertest.Payload(1, 1, 9*512)
	put(t, r, k, p)
	for i := range uint64(9) { // pushes past the high watermark: the big one is the LRU victim
		put(t, r, key(i), tiertest.Payload(i, 1, 500))
	}
	p = tiertest.Payload(2, 1, 9*512)
	k2 := block.Named("t", "big2")
	put(t, r, k2, p) // past 18 chunks: trimmed to 10, the newest kept
	if !r.Contains(k2) {
		t.Fatal("an object within the low watermark was evicted by its own Put")
	}
}

// TestAllocStaysInTouched: overwriting one object again and again, and
// putting and deleting others, reuses the chunks already written rather
// than marching through the arena (each first write of a page is a page
// fault); the arena is reached further only when the data needs it, and
// then all of it serves.
func TestAllocStaysInTouched(t *testing.T) {
	r := mustOpen(t, chunked(1024))
	k := block.Named("t", "hot")
	for i := range uint64(500) {
		put(t, r, k, tiertest.Payload(i, 1, 8*512-len(k.Name)))
		if i%3 == 0 {
			put(t, r, key(i), tiertest.Payload(i, 2, 300))
			if err := r.Delete(ctx, key(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.mu.Lock()
	touched := r.touched
	r.mu.Unlock()
	// The live object (8 chunks), its replacement being written (8) and a
	// small one (1): everything fits in the first 17 chunks.
	if touched > 17 {
		t.Fatalf("500 overwrites of one 8-chunk object touched %d of 1024 chunks; want at most 17", touched)
	}
	mustGet(t, r, k, tiertest.Payload(499, 1, 8*512-len(k.Name)))
	// The arena is reached further as the data grows: with 1000 small
	// objects beside the hot one (1008 chunks), nothing is evicted and
	// exactly the chunks holding them are touched; past the tier's size
	// every chunk serves.
	for i := range uint64(1000) {
		put(t, r, key(1000+i), tiertest.Payload(i, 3, 300))
	}
	if st := r.Stats(); st.Evicted != 0 {
		t.Fatalf("evicted %d before the tier was full", st.Evicted)
	}
	r.mu.Lock()
	touched = r.touched
	r.mu.Unlock()
	if touched != 1008 {
		t.Fatalf("1008 chunks of data touched %d of 1024 chunks", touched)
	}
	for i := range uint64(100) {
		put(t, r, key(3000+i), tiertest.Payload(i, 4, 300))
	}
	r.mu.Lock()
	touched = r.touched
	r.mu.Unlock()
	if touched != 1024 {
		t.Fatalf("a full tier touched %d of 1024 chunks", touched)
	}
}
