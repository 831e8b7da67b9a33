package nodeserver

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// TestPutBudget: acquisitions within the budget pass; one beyond waits
// until bytes are released; waiters are served first come, first served
// (a small one does not overtake a large one at the head); a waiter whose
// context ends leaves the queue, and those behind it get their turn.
func TestPutBudget(t *testing.T) {
	ctx := context.Background()
	b := newPutBudget(100)
	if err := b.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if err := b.acquire(ctx, 40); err != nil {
		t.Fatal(err)
	}
	big, small := make(chan error, 1), make(chan error, 1)
	go func() { big <- b.acquire(ctx, 70) }()
	waitWaiting(t, b, 1)
	go func() { small <- b.acquire(ctx, 10) }()
	waitWaiting(t, b, 2)
	b.release(40) // 60 held: neither 70 (head) nor, behind it, 10
	if used, waiting := b.state(); used != 60 || waiting != 2 {
		t.Fatalf("after releasing 40: %d held, %d waiting; want 60 and 2 (first come, first served)", used, waiting)
	}
	b.release(60)
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	if err := <-small; err != nil {
		t.Fatal(err)
	}
	if used, _ := b.state(); used != 80 {
		t.Fatalf("%d held, want 80", used)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancelled, after := make(chan error, 1), make(chan error, 1)
	go func() { cancelled <- b.acquire(cctx, 50) }()
	waitWaiting(t, b, 1)
	go func() { after <- b.acquire(ctx, 20) }()
	waitWaiting(t, b, 2)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if err := <-after; err != nil { // 80 + 20 fits once the head left
		t.Fatal(err)
	}
	b.release(100)
	if used, waiting := b.state(); used != 0 || waiting != 0 {
		t.Fatalf("at the end: %d held, %d waiting", used, waiting)
	}
}

func waitWaiting(t *testing.T, b *putBudget, n int) {
	t.Helper()
	for {
		if _, w := b.state(); w == n {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("never %d waiters", n)
		default:
			runtime.Gosched()
		}
	}
}

// TestBufPoolLargeNotPooled: buffers over 8 MiB are allocated exactly and
// not kept by the pool (a pool holding 512 MiB buffers until the next GC
// is a leak in practice); smaller classes still recycle.
func TestBufPoolLargeNotPooled(t *testing.T) {
	p := newBufPool(512 << 20)
	if got := len(p.classes); got != maxPooledBits-minClassBits+1 {
		t.Fatalf("%d classes for a 512 MiB max, want %d (4 KiB to 8 MiB)", got, maxPooledBits-minClassBits+1)
	}
	b := p.get(8<<20 + 1)
	if cap(*b) != 8<<20+1 {
		t.Fatalf("a buffer of 8 MiB + 1: cap %d, want exact", cap(*b))
	}
	p.put(b) // dropped: no class holds it
	b = p.get(8 << 20)
	if cap(*b) != 8<<20 {
		t.Fatalf("a buffer of 8 MiB: cap %d", cap(*b))
	}
	p.put(b)
}
