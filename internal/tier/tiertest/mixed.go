package tiertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// The cases of variable-size, named objects: sizes from 1 byte to the
// maximum, names that collide in their ID, churn, readers racing
// eviction, and the limits. Their configurations set MaxObjectSize, so a
// tier sizes its largest object apart from its typical one.

// ident is the identity a payload of k carries (see Payload): it tells
// apart keys that share an ID, as named keys with colliding IDs do.
func ident(k block.Key) uint64 {
	if k.Name == "" {
		return k.ID
	}
	return block.Mix64(k.ID ^ block.FNV1a(k.Name))
}

// randomName returns a name of 1..max bytes, any byte values.
func randomName(rng *rand.Rand, max int) string {
	b := make([]byte, 1+rng.IntN(max))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return string(b)
}

// randomSize returns a size from lo to hi, log-uniform, so small and large
// objects are both common.
func randomSize(rng *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	f := float64(lo) * math.Pow(float64(hi)/float64(lo), rng.Float64())
	return min(max(int(f), lo), hi)
}

// testMixedSizes stores objects of every size class from 1 byte to the
// maximum, named and chain-keyed, and reads each back byte for byte.
func testMixedSizes(t *testing.T, open Opener) {
	const maxObj = 2 << 20
	h := newHarness(t, open, Config{BlockSize: 32 << 10, Blocks: 256, MaxObjectSize: maxObj})
	sizes := []int{1, 2, 27, 28, 511, 512, 513, 4095, 4096, 4097, 5000, 32<<10 - 1, 32 << 10, 32<<10 + 1, 100_000, 1 << 20, maxObj - 1, maxObj}
	var keys []block.Key
	for i, n := range sizes {
		k := block.Key{Tenant: "t", ID: uint64(1000 + i)}
		if i%2 == 0 {
			k = block.Named("t", fmt.Sprintf("obj-%d-%dbytes", i, n))
		}
		keys = append(keys, k)
		h.put(k, Payload(ident(k), 1, n))
	}
	for i, k := range keys {
		h.mustGet(k, Payload(ident(k), 1, sizes[i]))
	}
	// Replacing an object by one of another size, both ways.
	h.put(keys[len(keys)-1], Payload(ident(keys[len(keys)-1]), 2, 3))
	h.put(keys[0], Payload(ident(keys[0]), 2, maxObj))
	h.mustGet(keys[len(keys)-1], Payload(ident(keys[len(keys)-1]), 2, 3))
	h.mustGet(keys[0], Payload(ident(keys[0]), 2, maxObj))
	// Names of any bytes, up to the longest.
	for _, name := range []string{"\x00", strings.Repeat("\xff", 100), strings.Repeat("n", block.MaxNameLen)} {
		k := block.Named("t", name)
		h.put(k, Payload(ident(k), 1, 5000))
		h.mustGet(k, Payload(ident(k), 1, 5000))
	}
	if st := h.tier.Stats(); st.Evicted != 0 || st.HeldBytes < st.Bytes {
		t.Errorf("Stats %+v: want nothing evicted and HeldBytes >= Bytes", st)
	}
}

// testNameCollisions: names sharing one ID, and a chain key of that ID,
// are distinct objects; each read returns its own bytes or a miss.
func testNameCollisions(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	ctx := context.Background()
	a := block.Key{Tenant: "t", ID: 7, Name: "a"}
	b := block.Key{Tenant: "t", ID: 7, Name: "b"}
	ab := block.Key{Tenant: "t", ID: 7, Name: "ab"}
	chain := block.Key{Tenant: "t", ID: 7}
	absent := block.Key{Tenant: "t", ID: 7, Name: "c"}
	other := block.Key{Tenant: "u", ID: 7, Name: "a"}
	sizes := map[block.Key]int{a: 100, b: 4000, ab: 1, chain: blockSize}
	for _, k := range []block.Key{a, b, ab, chain} {
		h.put(k, Payload(ident(k), 1, sizes[k]))
	}
	check := func(when string) {
		t.Helper()
		for k, want := range h.model {
			got, sum, err := h.tier.Get(ctx, k, nil)
			if err != nil || !equal(got, want) || sum != block.Checksum(k, want) {
				t.Fatalf("%s: Get %s: %d bytes (sum %08x), %v; want its own %d bytes", when, k, len(got), sum, err, len(want))
			}
			if !h.tier.Contains(k) {
				t.Fatalf("%s: Contains %s = false", when, k)
			}
		}
		for _, k := range []block.Key{absent, other} {
			if _, _, err := h.tier.Get(ctx, k, nil); !errors.Is(err, kvpool.ErrNotFound) {
				t.Fatalf("%s: Get %s (never put; shares an ID with resident names) = %v, want ErrNotFound", when, k, err)
			}
			if h.tier.Contains(k) {
				t.Fatalf("%s: Contains %s (never put) = true", when, k)
			}
			if err := h.tier.Delete(ctx, k); !errors.Is(err, kvpool.ErrNotFound) {
				t.Fatalf("%s: Delete %s (never put) = %v, want ErrNotFound", when, k, err)
			}
		}
	}
	check("all four put")
	if err := h.tier.Delete(ctx, a); err != nil {
		t.Fatalf("Delete %s: %v", a, err)
	}
	delete(h.model, a)
	h.mustMiss(a)
	check("after deleting a")
	h.put(b, Payload(ident(b), 2, 10)) // a replace touches only b
	check("after replacing b")
	h.put(a, Payload(ident(a), 3, 3000))
	if err := h.tier.Delete(ctx, chain); err != nil {
		t.Fatalf("Delete %s: %v", chain, err)
	}
	delete(h.model, chain)
	h.mustMiss(chain)
	check("after deleting the chain key")
	if st := h.tier.Stats(); st.Blocks != 3 {
		t.Errorf("Stats.Blocks %d, want 3", st.Blocks)
	}
}

// testChurn puts ten times the tier's capacity of objects of random sizes
// under random names (some with colliding IDs) and chain keys; afterwards
// every resident object reads back byte-identical and the space counters
// match (the harness's cleanup checks Stats against the model).
func testChurn(t *testing.T, open Opener) {
	const maxObj = 256 << 10
	h := newHarness(t, open, Config{BlockSize: 16 << 10, Blocks: 64, MaxObjectSize: maxObj})
	rng := rand.New(rand.NewPCG(15, 1))
	capacity := h.tier.Stats().CapacityBytes
	var keys []block.Key
	for i := range 400 {
		switch i % 4 {
		case 0:
			keys = append(keys, block.Key{Tenant: "t", ID: uint64(i)})
		case 1:
			// A name whose ID collides with others' (and with chain keys').
			keys = append(keys, block.Key{Tenant: "t", ID: uint64(i % 12), Name: randomName(rng, 64)})
		default:
			keys = append(keys, block.Named("t", randomName(rng, 64)))
		}
	}
	var written int64
	for ver := uint64(1); written < 10*capacity; ver++ {
		k := keys[rng.IntN(len(keys))]
		n := randomSize(rng, 1, maxObj)
		h.put(k, Payload(ident(k), ver, n))
		written += int64(n)
		if ver%97 == 0 {
			// Spot-check a random key while the churn goes on.
			k := keys[rng.IntN(len(keys))]
			if want, ok := h.model[k]; ok && h.tier.Contains(k) {
				h.mustGet(k, want)
			}
		}
	}
	resident, bytes := 0, int64(0)
	for k, want := range h.model {
		if !h.tier.Contains(k) {
			continue
		}
		h.mustGet(k, want)
		resident++
		bytes += int64(len(want))
	}
	st := h.tier.Stats()
	if st.Evicted == 0 || resident == 0 {
		t.Fatalf("after writing %d bytes into %d: %d resident, %d evicted; want churn", written, capacity, resident, st.Evicted)
	}
	if st.Bytes != bytes || st.Blocks != resident {
		t.Errorf("Stats: %d objects, %d bytes; the resident objects are %d, %d bytes", st.Blocks, st.Bytes, resident, bytes)
	}
	if st.HeldBytes < st.Bytes {
		t.Errorf("HeldBytes %d below the payload bytes %d", st.HeldBytes, st.Bytes)
	}
}

// testReadersDuringEviction: readers Get and verify every object while
// writers force eviction; no reader ever sees a wrong byte.
func testReadersDuringEviction(t *testing.T, open Opener) {
	const (
		maxObj  = 64 << 10
		writers = 3
		readers = 4
		puts    = 300
	)
	h := newHarness(t, open, Config{BlockSize: 8 << 10, Blocks: 16, MaxObjectSize: maxObj})
	ctx := context.Background()
	keys := []block.Key{{Tenant: "t", ID: 3}, {Tenant: "t", ID: 3, Name: "x"}, {Tenant: "t", ID: 3, Name: "y"}}
	rng := rand.New(rand.NewPCG(15, 2))
	for i := range 45 {
		if i%3 == 0 {
			keys = append(keys, block.Key{Tenant: "t", ID: uint64(100 + i)})
		} else {
			keys = append(keys, block.Named("t", randomName(rng, 40)))
		}
	}
	var wg sync.WaitGroup
	var done sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, writers+readers)
	for w := range writers {
		done.Add(1)
		go func() {
			defer done.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for i := range puts {
				k := keys[rng.IntN(len(keys))]
				p := Payload(ident(k), uint64(w)<<32|uint64(i), randomSize(rng, 16, maxObj))
				if err := h.tier.Put(ctx, k, p, block.Checksum(k, p)); err != nil && !errors.Is(err, kvpool.ErrFull) {
					errs <- fmt.Errorf("Put %s: %w", k, err)
					return
				}
			}
		}()
	}
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 4))
			var dst []byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[rng.IntN(len(keys))]
				got, sum, err := h.tier.Get(ctx, k, dst)
				if errors.Is(err, kvpool.ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("Get %s: %w", k, err)
					return
				}
				if _, err := CheckPayload(ident(k), got); err != nil {
					errs <- fmt.Errorf("Get %s: %w", k, err)
					return
				}
				if sum != block.Checksum(k, got) {
					errs <- fmt.Errorf("Get %s: sum %08x does not match the payload", k, sum)
					return
				}
				dst = got
			}
		}()
	}
	done.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The model is what the tier holds now, each copy verified.
	for _, k := range keys {
		got, _, err := h.tier.Get(ctx, k, nil)
		switch {
		case errors.Is(err, kvpool.ErrNotFound):
		case err != nil:
			t.Errorf("final Get %s: %v", k, err)
		default:
			if _, err := CheckPayload(ident(k), got); err != nil {
				t.Errorf("final Get %s: %v", k, err)
			}
			h.model[k] = got
		}
	}
	if st := h.tier.Stats(); st.Evicted == 0 || st.Corruptions != 0 {
		t.Errorf("Stats %+v: want evictions and no corruption", st)
	}
}

// testLimits: a payload over the maximum object size and a name over
// block.MaxNameLen are refused with errors naming the size and the limit,
// and leave nothing stored.
func testLimits(t *testing.T, open Opener) {
	const maxObj = 1 << 20
	h := newHarness(t, open, Config{BlockSize: 64 << 10, Blocks: 32, MaxObjectSize: maxObj})
	ctx := context.Background()
	k := block.Named("t", "big")
	h.put(k, Payload(ident(k), 1, maxObj))
	big := Payload(ident(k), 2, maxObj+1)
	err := h.tier.Put(ctx, k, big, block.Checksum(k, big))
	if !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), strconv.Itoa(maxObj+1)) || !strings.Contains(err.Error(), strconv.Itoa(maxObj)) {
		t.Errorf("Put of %d bytes, limit %d: %v; want ErrTooLarge naming both", maxObj+1, maxObj, err)
	}
	// The old copy stays, or none: never a partial one.
	if h.tier.Contains(k) {
		h.mustGet(k, Payload(ident(k), 1, maxObj))
	} else {
		delete(h.model, k)
	}
	long := block.Key{Tenant: "t", ID: 1, Name: strings.Repeat("n", block.MaxNameLen+1)}
	p := Payload(ident(long), 1, 100)
	err = h.tier.Put(ctx, long, p, block.Checksum(long, p))
	if !errors.Is(err, block.ErrBadName) || !strings.Contains(err.Error(), strconv.Itoa(block.MaxNameLen+1)) || !strings.Contains(err.Error(), strconv.Itoa(block.MaxNameLen)) {
		t.Errorf("Put under a %d-byte name: %v; want block.ErrBadName naming the length and the limit %d", block.MaxNameLen+1, err, block.MaxNameLen)
	}
	if h.tier.Contains(long) {
		t.Error("an object under a too-long name is resident")
	}
	if st := h.tier.Stats(); st.Blocks != len(h.model) {
		t.Errorf("Stats.Blocks %d after refusals, want %d", st.Blocks, len(h.model))
	}
}
