package ram

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
)

// taggedPayload is n bytes (at least 16) that name their key and version,
// so that a read can tell whose bytes it got, not only whether they are
// consistent.
func taggedPayload(k block.Key, ver uint64, n int) []byte {
	p := make([]byte, n)
	tag := fmt.Sprintf("%s#%d|", k.Name, ver)
	for i := range p {
		p[i] = tag[i%len(tag)]
	}
	return p
}

// ownedBy reports whether p is a taggedPayload of k (any version).
func ownedBy(p []byte, k block.Key) bool {
	prefix := []byte(k.Name + "#")
	if !bytes.HasPrefix(p, prefix) {
		return false
	}
	end := bytes.IndexByte(p, '|')
	if end < 0 {
		return len(p) < 64 // too short to hold the whole tag
	}
	tag := p[:end+1]
	for i := range p {
		if p[i] != tag[i%len(tag)] {
			return false
		}
	}
	return true
}

// TestReviewCollidingChurn: goroutines put, replace, delete and read (Get,
// View, Acquire held across other operations) a handful of names that all
// share one ID, plus the chain key of that ID, in a tier of 16 chunks so
// that every put evicts. OnEvict checks the copy it is handed and reads
// the key back while it runs. No read may return another name's bytes, a
// mix of versions, or bytes that change while held; nothing may panic.
func TestReviewCollidingChurn(t *testing.T) {
	names := []string{"", "a", "b", "c", "dd", "a\x00"}
	keys := make([]block.Key, len(names))
	for i, n := range names {
		keys[i] = block.Key{Tenant: "t", ID: 7, Name: n}
	}
	var r *RAM
	var evErr sync.Once
	o := chunked(16)
	o.OnEvict = func(ev Evicted) {
		p := ev.Payload.AppendTo(nil)
		if ev.Payload.Checksum(ev.Key) != ev.Sum || !ownedBy(p, ev.Key) {
			evErr.Do(func() { t.Errorf("OnEvict %s: a copy of %d bytes that is not its own", ev.Key, len(p)) })
		}
		// A reader during the eviction sees the copy or a newer one.
		if got, _, err := r.Get(ctx, ev.Key, nil); err == nil && !ownedBy(got, ev.Key) {
			evErr.Do(func() { t.Errorf("Get %s during its eviction: another object's bytes", ev.Key) })
		}
	}
	r = mustOpen(t, o)

	const workers, ops = 4, 1500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			var held []func()
			for i := range ops {
				k := keys[rng.IntN(len(keys))]
				switch rng.IntN(6) {
				case 0, 1:
					n := 16 + rng.IntN(3*512)
					p := taggedPayload(k, uint64(w*ops+i), n)
					err := r.Put(ctx, k, p, block.Checksum(k, p))
					if err != nil && !errors.Is(err, kvpool.ErrFull) && !errors.Is(err, ErrNotAdmitted) {
						t.Errorf("Put %s: %v", k, err)
						return
					}
				case 2:
					if err := r.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						t.Errorf("Delete %s: %v", k, err)
						return
					}
				case 3:
					got, sum, err := r.Get(ctx, k, nil)
					if err == nil && (!ownedBy(got, k) || sum != block.Checksum(k, got)) {
						t.Errorf("Get %s: %d bytes that are not its own", k, len(got))
						return
					}
					if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						t.Errorf("Get %s: %v", k, err)
						return
					}
				case 4:
					err := r.View(k, func(p tier.Segments, sum uint32) error {
						if b := p.AppendTo(nil); !ownedBy(b, k) || p.Checksum(k) != sum {
							return fmt.Errorf("%d bytes that are not its own", len(b))
						}
						return nil
					})
					if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						t.Errorf("View %s: %v", k, err)
						return
					}
				case 5:
					segs, sum, rel, err := r.Acquire(k)
					if errors.Is(err, kvpool.ErrNotFound) {
						continue
					}
					if err != nil {
						t.Errorf("Acquire %s: %v", k, err)
						return
					}
					if !ownedBy(segs.AppendTo(nil), k) || segs.Checksum(k) != sum {
						t.Errorf("Acquire %s: bytes that are not its own", k)
						return
					}
					// Held across the next operations; checked at release.
					held = append(held, func() {
						if segs.Checksum(k) != sum {
							t.Errorf("Acquire %s: the held bytes changed", k)
						}
						rel()
					})
					if len(held) > 2 {
						held[0]()
						held = held[1:]
					}
				}
			}
			for _, h := range held {
				h()
			}
		})
	}
	wg.Wait()
}

// TestReviewEvictedSegmentsNotReused: OnEvict's segments come from a
// pool; a View running concurrently (which takes a segment slice from the
// same pool) must never see them change under it, and an eviction must
// never be handed a slice a View still uses. Each View holds its
// segments while another goroutine's eviction runs.
func TestReviewEvictedSegmentsNotReused(t *testing.T) {
	a := block.Named("t", "held")
	pa := taggedPayload(a, 1, 3*512)
	inView := make(chan struct{})
	evicted := make(chan struct{})
	var r *RAM
	o := chunked(8)
	o.OnEvict = func(ev Evicted) {
		if ev.Key == a {
			return
		}
		if !ownedBy(ev.Payload.AppendTo(nil), ev.Key) {
			t.Errorf("OnEvict %s: not its bytes", ev.Key)
		}
	}
	r = mustOpen(t, o)
	put(t, r, a, pa)
	done := make(chan error, 1)
	go func() {
		done <- r.View(a, func(p tier.Segments, sum uint32) error {
			close(inView)
			<-evicted
			if !bytes.Equal(p.AppendTo(nil), pa) || len(p) == 0 {
				return fmt.Errorf("segments changed while held")
			}
			return nil
		})
	}()
	<-inView
	// Puts that evict each other (a is pinned): each eviction takes a
	// segment slice from the pool while the View holds its own.
	for i := range 20 {
		k := block.Named("t", fmt.Sprintf("k%d", i))
		p := taggedPayload(k, 1, 2*512)
		if err := r.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
			t.Fatal(err)
		}
	}
	close(evicted)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mustGet(t, r, a, pa)
}
