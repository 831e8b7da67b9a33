package nodeserver

import (
	"context"
	"slices"
	"sync"
)

// putBudget bounds the PUT payload bytes a server holds at once, across
// connections: each PUT payload is read whole into a buffer before the
// backend stores it, so without a bound 1024 connections each sending a
// 64 MiB object would make the node allocate 64 GiB beside its RAM tier.
// A PUT whose payload does not fit waits, in arrival order, before its
// payload is read (its connection is not read meanwhile, so TCP pushes
// back on the sender); a connection holds at most one payload's bytes at
// a time (the blocks of an MPUT are read and stored one by one), so every
// holder is reading or storing and the wait ends. Safe for concurrent
// use.
type putBudget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters []*budgetWaiter // first come, first served
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

func newPutBudget(size int64) *putBudget { return &putBudget{size: size} }

// acquire takes n bytes (at most the budget's size), waiting until they
// are free and every earlier waiter is served, or until ctx ends.
func (b *putBudget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.size)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: give the bytes back
		b.used -= n
	default:
		i := slices.Index(b.waiters, w)
		b.waiters = slices.Delete(b.waiters, i, i+1)
	}
	b.grantLocked() // the waiters behind may fit now
	return ctx.Err()
}

// release gives back n bytes taken by acquire.
func (b *putBudget) release(n int64) {
	b.mu.Lock()
	b.used -= min(n, b.size)
	b.grantLocked()
	b.mu.Unlock()
}

// grantLocked serves the waiters, in order, while the first one fits.
func (b *putBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.size {
		w := b.waiters[0]
		b.used += w.n
		close(w.ready)
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
	}
}

// state returns the bytes held and the number of waiters.
func (b *putBudget) state() (used int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, len(b.waiters)
}
