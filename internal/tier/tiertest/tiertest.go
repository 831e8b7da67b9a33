// Package tiertest is the conformance suite for tier.Tier: every tier (the
// RAM tier, the SSD tier) runs Run against itself, so they all honour the
// same contract. Each subtest gets a fresh tier from the caller's Opener,
// keeps a model of what the tier must hold, and in t.Cleanup checks the
// tier against the model and against its own invariants (when the tier
// has a Check method) before closing it.
//
// Besides the base contract (blocks of up to Config.BlockSize bytes under
// chain keys), the suite covers objects of any size with names of their
// own (mixed.go): sizes from 1 byte to Config.MaxObjectSize compared byte
// for byte, names that share an ID with each other and with a chain key
// (a read returns its own object or a miss, never another's), churn of
// ten times the capacity with the space counters checked after it,
// readers verifying every byte while writers force eviction, and the
// errors for a too-large object or a too-long name.
package tiertest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
)

// Config describes the tier a subtest asks the Opener for.
type Config struct {
	// BlockSize is the size of the subtest's typical object. Unless
	// MaxObjectSize is set, it is also the largest payload the tier must
	// accept: a payload of one byte more must be refused with
	// kvpool.ErrTooLarge.
	BlockSize int
	// Blocks is how many objects of up to BlockSize bytes (chain keys, or
	// names of up to 64 bytes) the tier must hold before it evicts
	// anything. When a subtest asks for 2, the tier must evict by LRU and
	// only what it must: a third put evicts exactly the least recently
	// used object.
	Blocks int
	// MaxObjectSize, when set, is the largest payload the tier must accept
	// (at least BlockSize); the tier's capacity is still sized by Blocks
	// objects of BlockSize bytes.
	MaxObjectSize int
}

// Opener returns a new, empty tier for cfg. Run closes it.
type Opener func(t *testing.T, cfg Config) tier.Tier

// Checker is implemented by tiers that can verify their own invariants;
// Run calls Check in every subtest's cleanup, with no operation in flight.
type Checker interface {
	Check() error
}

// Suite defaults: a block size that is not a multiple of 4096 (so tiers
// that pad to pages are exercised) and room enough that no subtest but the
// eviction ones evicts.
const (
	blockSize  = 5000
	manyBlocks = 64
)

// Run runs the conformance suite.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		run  func(t *testing.T, open Opener)
	}{
		{"RoundTrip", testRoundTrip},
		{"Replace", testReplace},
		{"Delete", testDelete},
		{"Absent", testAbsent},
		{"TooLarge", testTooLarge},
		{"Tenants", testTenants},
		{"ContainsKeepsOrder", testContainsKeepsOrder},
		{"GetUpdatesOrder", testGetUpdatesOrder},
		{"Stats", testStats},
		{"Concurrent", testConcurrent},
		{"Closed", testClosed},
		{"MixedSizes", testMixedSizes},
		{"NameCollisions", testNameCollisions},
		{"Churn", testChurn},
		{"ReadersDuringEviction", testReadersDuringEviction},
		{"Limits", testLimits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open) })
	}
}

// harness is a tier under test and the model of what it must hold.
type harness struct {
	t      *testing.T
	tier   tier.Tier
	cfg    Config
	model  map[block.Key][]byte
	closed bool
}

func newHarness(t *testing.T, open Opener, cfg Config) *harness {
	h := &harness{t: t, tier: open(t, cfg), cfg: cfg, model: map[block.Key][]byte{}}
	t.Cleanup(h.check)
	return h
}

// check compares the tier with the model and closes it.
func (h *harness) check() {
	t := h.t
	if h.closed {
		return
	}
	ctx := context.Background()
	st := h.tier.Stats()
	blocks, bytes := 0, int64(0)
	for k, want := range h.model {
		if !h.tier.Contains(k) {
			if st.Evicted == 0 {
				t.Errorf("invariant: %s is missing and nothing was evicted", k)
			}
			continue
		}
		got, sum, err := h.tier.Get(ctx, k, nil)
		if err != nil {
			t.Errorf("invariant: Get %s: %v", k, err)
			continue
		}
		if !equal(got, want) || sum != block.Checksum(k, want) {
			t.Errorf("invariant: %s holds %d bytes (sum %08x), want %d bytes", k, len(got), sum, len(want))
		}
		blocks++
		bytes += int64(len(want))
	}
	st = h.tier.Stats()
	if st.Blocks != blocks || st.Bytes != bytes {
		t.Errorf("invariant: Stats say %d blocks, %d bytes; the model's present keys are %d blocks, %d bytes", st.Blocks, st.Bytes, blocks, bytes)
	}
	if st.Evicted > st.EvictAttempts {
		t.Errorf("invariant: Evicted %d > EvictAttempts %d", st.Evicted, st.EvictAttempts)
	}
	if c, ok := h.tier.(Checker); ok {
		if err := c.Check(); err != nil {
			t.Errorf("invariant: Check: %v", err)
		}
	}
	if err := h.tier.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func (h *harness) put(k block.Key, p []byte) {
	h.t.Helper()
	if err := h.tier.Put(context.Background(), k, p, block.Checksum(k, p)); err != nil {
		h.t.Fatalf("Put %s (%d bytes): %v", k, len(p), err)
	}
	h.model[k] = bytes.Clone(p)
}

func (h *harness) mustGet(k block.Key, want []byte) {
	h.t.Helper()
	got, sum, err := h.tier.Get(context.Background(), k, nil)
	if err != nil {
		h.t.Fatalf("Get %s: %v", k, err)
	}
	if !equal(got, want) {
		h.t.Fatalf("Get %s: %d bytes differ from the %d put", k, len(got), len(want))
	}
	if want := block.Checksum(k, want); sum != want {
		h.t.Fatalf("Get %s: sum %08x, want %08x", k, sum, want)
	}
}

func (h *harness) mustMiss(k block.Key) {
	h.t.Helper()
	if _, _, err := h.tier.Get(context.Background(), k, nil); !errors.Is(err, kvpool.ErrNotFound) {
		h.t.Fatalf("Get %s: %v, want ErrNotFound", k, err)
	}
	if h.tier.Contains(k) {
		h.t.Fatalf("Contains %s after a miss", k)
	}
}

func equal(a, b []byte) bool { return len(a) == len(b) && bytes.Equal(a, b) }

// Payload builds the payload of version ver of block id: n bytes (n >= 16
// holds id and ver in its first 16 bytes, so any payload can be checked
// alone with CheckPayload) then pseudo-random bytes determined by both.
func Payload(id, ver uint64, n int) []byte {
	p := make([]byte, n)
	rng := rand.New(rand.NewPCG(id, ver))
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(p[i:], w[:])
	}
	if n >= 16 {
		binary.LittleEndian.PutUint64(p[0:], id)
		binary.LittleEndian.PutUint64(p[8:], ver)
	}
	return p
}

// CheckPayload verifies a payload built by Payload for block id and
// returns its version.
func CheckPayload(id uint64, p []byte) (uint64, error) {
	if len(p) < 16 {
		return 0, fmt.Errorf("payload of %d bytes is too short to identify", len(p))
	}
	gotID, ver := binary.LittleEndian.Uint64(p[0:]), binary.LittleEndian.Uint64(p[8:])
	if gotID != id {
		return 0, fmt.Errorf("payload of block %016x returned for %016x", gotID, id)
	}
	if !bytes.Equal(p, Payload(id, ver, len(p))) {
		return 0, fmt.Errorf("payload of block %016x version %d has wrong bytes", id, ver)
	}
	return ver, nil
}

func key(id uint64) block.Key { return block.Key{Tenant: "t", ID: id} }

func testRoundTrip(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	sizes := []int{0, 1, 15, 16, 4095, 4096, 4097, blockSize - 1, blockSize}
	for i, n := range sizes {
		k := key(uint64(i))
		h.put(k, Payload(k.ID, 1, n))
	}
	for i, n := range sizes {
		k := key(uint64(i))
		want := Payload(k.ID, 1, n)
		h.mustGet(k, want)
		// Get appends to dst[:0], whatever dst holds.
		for _, dst := range [][]byte{nil, make([]byte, 3), make([]byte, 0, 2*blockSize), bytes.Repeat([]byte{0xff}, blockSize)} {
			got, _, err := h.tier.Get(context.Background(), k, dst)
			if err != nil || !equal(got, want) {
				t.Fatalf("Get %s with dst of len %d cap %d: %d bytes, %v", k, len(dst), cap(dst), len(got), err)
			}
			if cap(dst) >= n && n > 0 && &got[0] != &dst[:1][0] {
				t.Errorf("Get %s: did not reuse a dst of cap %d for %d bytes", k, cap(dst), n)
			}
		}
		if !h.tier.Contains(k) {
			t.Errorf("Contains %s = false after Put", k)
		}
	}
	// The tier keeps a copy: changing the caller's buffer changes nothing.
	k := key(100)
	p := Payload(k.ID, 1, 1000)
	h.put(k, p)
	clear(p)
	h.mustGet(k, Payload(k.ID, 1, 1000))
}

func testReplace(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	k := key(7)
	h.put(k, Payload(k.ID, 1, 3000))
	h.put(k, Payload(k.ID, 2, 100))
	h.mustGet(k, Payload(k.ID, 2, 100))
	h.put(k, Payload(k.ID, 3, blockSize))
	h.mustGet(k, Payload(k.ID, 3, blockSize))
	if st := h.tier.Stats(); st.Blocks != 1 || st.Bytes != blockSize {
		t.Errorf("after replacing: %d blocks, %d bytes; want 1, %d", st.Blocks, st.Bytes, blockSize)
	}
}

func testDelete(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	ctx := context.Background()
	a, b := key(1), key(2)
	h.put(a, Payload(a.ID, 1, 500))
	h.put(b, Payload(b.ID, 1, 600))
	if err := h.tier.Delete(ctx, a); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	delete(h.model, a)
	h.mustMiss(a)
	h.mustGet(b, Payload(b.ID, 1, 600))
	if err := h.tier.Delete(ctx, a); !errors.Is(err, kvpool.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if err := h.tier.Delete(ctx, key(99)); !errors.Is(err, kvpool.ErrNotFound) {
		t.Errorf("Delete of a never-put key: %v, want ErrNotFound", err)
	}
	// A deleted key can be put again.
	h.put(a, Payload(a.ID, 2, 700))
	h.mustGet(a, Payload(a.ID, 2, 700))
	if st := h.tier.Stats(); st.Blocks != 2 || st.Bytes != 1300 {
		t.Errorf("Stats: %d blocks, %d bytes; want 2, 1300", st.Blocks, st.Bytes)
	}
}

func testAbsent(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	before := h.tier.Stats()
	h.mustMiss(key(1))
	got, sum, err := h.tier.Get(context.Background(), key(2), make([]byte, 10))
	if !errors.Is(err, kvpool.ErrNotFound) || len(got) != 0 || sum != 0 {
		t.Errorf("Get absent = %d bytes, sum %08x, %v; want none, ErrNotFound", len(got), sum, err)
	}
	after := h.tier.Stats()
	if after.Misses != before.Misses+2 || after.Hits != before.Hits || after.BytesOut != before.BytesOut {
		t.Errorf("two misses moved Stats from %+v to %+v", before, after)
	}
}

func testTooLarge(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	k := key(1)
	p := Payload(k.ID, 1, blockSize+1)
	err := h.tier.Put(context.Background(), k, p, block.Checksum(k, p))
	if !errors.Is(err, kvpool.ErrTooLarge) {
		t.Fatalf("Put of %d bytes into blocks of %d: %v, want ErrTooLarge", len(p), blockSize, err)
	}
	h.mustMiss(k)
	// An oversize put over an existing copy leaves the old copy or none,
	// never a partial one.
	h.put(k, Payload(k.ID, 2, 10))
	if err := h.tier.Put(context.Background(), k, p, block.Checksum(k, p)); !errors.Is(err, kvpool.ErrTooLarge) {
		t.Fatalf("oversize replace: %v, want ErrTooLarge", err)
	}
	if h.tier.Contains(k) {
		h.mustGet(k, Payload(k.ID, 2, 10))
	} else {
		delete(h.model, k)
	}
}

func testTenants(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	ctx := context.Background()
	keys := []block.Key{{Tenant: "", ID: 5}, {Tenant: "alice", ID: 5}, {Tenant: "bob", ID: 5}}
	for i, k := range keys {
		h.put(k, Payload(k.ID, uint64(i+1), 100*(i+1)))
	}
	for i, k := range keys {
		h.mustGet(k, Payload(k.ID, uint64(i+1), 100*(i+1)))
	}
	h.mustMiss(block.Key{Tenant: "carol", ID: 5})
	if err := h.tier.Delete(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	delete(h.model, keys[1])
	h.mustMiss(keys[1])
	h.mustGet(keys[0], Payload(5, 1, 100))
	h.mustGet(keys[2], Payload(5, 3, 300))
	bad := block.Key{Tenant: "no spaces", ID: 1}
	if err := h.tier.Put(ctx, bad, nil, block.Checksum(bad, nil)); err == nil {
		t.Error("Put with an invalid tenant name succeeded")
	}
}

// testContainsKeepsOrder: with room for two blocks under LRU, put a, b;
// Contains(a) must not make a recent, so putting c evicts a.
func testContainsKeepsOrder(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: 2})
	a, b, c := key(1), key(2), key(3)
	h.put(a, Payload(a.ID, 1, 100))
	h.put(b, Payload(b.ID, 1, 100))
	before := h.tier.Stats()
	for range 3 {
		if !h.tier.Contains(a) {
			t.Fatal("Contains(a) = false")
		}
	}
	if h.tier.Contains(c) {
		t.Fatal("Contains(c) before its Put")
	}
	if after := h.tier.Stats(); after != before {
		t.Errorf("Contains changed Stats from %+v to %+v", before, after)
	}
	h.put(c, Payload(c.ID, 1, 100))
	if h.tier.Contains(a) {
		t.Errorf("a survived: Contains(a) made it recently used, or the tier evicted b")
	}
	if !h.tier.Contains(b) || !h.tier.Contains(c) {
		t.Errorf("b present %v, c present %v; want both (evict exactly one, the LRU)", h.tier.Contains(b), h.tier.Contains(c))
	}
	if st := h.tier.Stats(); st.Evicted != 1 {
		t.Errorf("Evicted = %d, want 1", st.Evicted)
	}
}

// testGetUpdatesOrder is the control for testContainsKeepsOrder: a Get
// does make a block recent, so the order is observable.
func testGetUpdatesOrder(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: 2})
	a, b, c := key(1), key(2), key(3)
	h.put(a, Payload(a.ID, 1, 100))
	h.put(b, Payload(b.ID, 1, 100))
	h.mustGet(a, Payload(a.ID, 1, 100))
	h.put(c, Payload(c.ID, 1, 100))
	if !h.tier.Contains(a) || h.tier.Contains(b) || !h.tier.Contains(c) {
		t.Errorf("after Get(a), put c: a %v b %v c %v; want a and c (LRU evicts b)", h.tier.Contains(a), h.tier.Contains(b), h.tier.Contains(c))
	}
}

func testStats(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	ctx := context.Background()
	base := h.tier.Stats()
	if base.Blocks != 0 || base.Bytes != 0 || base.Hits != 0 || base.Misses != 0 {
		t.Fatalf("a new tier has Stats %+v", base)
	}
	if base.CapacityBytes < int64(manyBlocks)*blockSize {
		t.Errorf("CapacityBytes %d below the %d blocks of %d asked for", base.CapacityBytes, manyBlocks, blockSize)
	}
	for i := range 10 {
		k := key(uint64(i))
		h.put(k, Payload(k.ID, 1, 100*(i+1)))
	}
	for i := range 5 {
		k := key(uint64(i))
		h.mustGet(k, Payload(k.ID, 1, 100*(i+1)))
	}
	h.mustMiss(key(50))
	if err := h.tier.Delete(ctx, key(9)); err != nil {
		t.Fatal(err)
	}
	delete(h.model, key(9))
	st := h.tier.Stats()
	want := tier.Stats{
		Blocks:        9,
		Bytes:         100 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9),
		CapacityBytes: base.CapacityBytes,
		Hits:          5,
		Misses:        1,
		BytesIn:       100 * 55,
		BytesOut:      100 * 15,
		HeldBytes:     st.HeldBytes, // checked by the mixed-size cases
	}
	if st != want {
		t.Errorf("Stats = %+v\nwant    %+v", st, want)
	}
}

func testConcurrent(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	const (
		workers = 8
		ops     = 300
		keys    = 24 // fewer than the capacity: nothing is evicted
	)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var dst []byte
			for i := range ops {
				k := key(rng.Uint64N(keys))
				switch r := rng.IntN(10); {
				case r < 4:
					ver := uint64(w)<<32 | uint64(i)
					p := Payload(k.ID, ver, 16+int((k.ID*131+ver)%(blockSize-16)))
					if err := h.tier.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
						errs <- fmt.Errorf("Put %s: %w", k, err)
						return
					}
				case r < 9:
					got, sum, err := h.tier.Get(ctx, k, dst)
					if errors.Is(err, kvpool.ErrNotFound) {
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("Get %s: %w", k, err)
						return
					}
					if _, err := CheckPayload(k.ID, got); err != nil {
						errs <- fmt.Errorf("Get %s: %w", k, err)
						return
					}
					if sum != block.Checksum(k, got) {
						errs <- fmt.Errorf("Get %s: sum %08x does not match the payload", k, sum)
						return
					}
					dst = got
				default:
					if err := h.tier.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						errs <- fmt.Errorf("Delete %s: %w", k, err)
						return
					}
				}
				h.tier.Contains(k)
				h.tier.Stats()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Rebuild the model from what the tier now holds (each copy verified),
	// so the cleanup checks Stats against it.
	for id := range uint64(keys) {
		k := key(id)
		got, _, err := h.tier.Get(ctx, k, nil)
		switch {
		case errors.Is(err, kvpool.ErrNotFound):
		case err != nil:
			t.Errorf("final Get %s: %v", k, err)
		default:
			if _, err := CheckPayload(k.ID, got); err != nil {
				t.Errorf("final Get %s: %v", k, err)
			}
			h.model[k] = got
		}
	}
	if st := h.tier.Stats(); st.Evicted != 0 || st.Corruptions != 0 || st.IOErrors != 0 {
		t.Errorf("Stats after the concurrent run: %+v; want no eviction, corruption or I/O error", st)
	}
}

func testClosed(t *testing.T, open Opener) {
	h := newHarness(t, open, Config{BlockSize: blockSize, Blocks: manyBlocks})
	ctx := context.Background()
	k := key(1)
	h.put(k, Payload(k.ID, 1, 100))
	if err := h.tier.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h.closed = true
	p := Payload(2, 1, 100)
	if err := h.tier.Put(ctx, key(2), p, block.Checksum(key(2), p)); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("Put after Close: %v, want ErrClosed", err)
	}
	if _, _, err := h.tier.Get(ctx, k, nil); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if err := h.tier.Delete(ctx, k); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("Delete after Close: %v, want ErrClosed", err)
	}
	if h.tier.Contains(k) {
		t.Error("Contains after Close = true")
	}
	if err := h.tier.Close(); err != nil && !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("second Close: %v, want nil or ErrClosed", err)
	}
}
