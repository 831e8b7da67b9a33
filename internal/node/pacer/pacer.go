// Package pacer limits the byte rate of one I/O path with a token bucket.
//
// Live experiments shape every paced path of a node (network egress and
// ingress, SSD reads and writes) to model_bandwidth × r × S bytes per second
// (docs/design.md, "Scale model"), so that transfer and SSD time keep the ratios
// of the model world while real bytes move. A Pacer is that token bucket; a
// Set holds the four of a node.
//
// Unlike golang.org/x/time/rate, Wait accepts a request larger than the
// burst: it simply takes proportionally longer (n / rate seconds once the
// bucket is empty), because a 256 KiB block on a slow modelled link is a
// normal request, not an error.
//
// Requests are served in the order they reserved their bytes (first come,
// first served): each Wait takes its place in a virtual queue when it is
// called and sleeps until the bucket has paid for every byte ahead of it and
// its own. A cancelled Wait withdraws its whole reservation (its bytes never
// pass), so the callers behind it move up.
package pacer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBurstWindow sizes the default burst: an idle pacer lets
// rate × 10 ms through at once. 10 ms is short next to what the pacers
// shape — a model-scale block fetch takes tens of milliseconds of model time
// (a 160 MiB block at 100 Gbps takes 13 ms) — yet long against the ~1 ms
// resolution of the operating system's timers, so that paced callers
// rarely sleep for less than the scheduler can deliver.
const DefaultBurstWindow = 10 * time.Millisecond

// minBurst is the smallest default burst in bytes, so that a very slow
// pacer still lets a typical 4 KiB write through without a sleep per
// request (one page, vfs.DirectIOAlign).
const minBurst = 4096

// Options configure a Pacer. The zero value is an unlimited pacer on the
// system clock.
type Options struct {
	// Rate is the limit in bytes per second; 0 means unlimited.
	Rate float64
	// Burst is the bucket's size in bytes: how much may pass at once after
	// an idle period. 0 means max(Rate × DefaultBurstWindow, 4096).
	Burst float64
	// Clock is the time source (default: the system clock).
	Clock Clock
}

// Validate reports the first bad field, by name.
func (o Options) Validate() error {
	switch {
	case !finiteNonNeg(o.Rate):
		return fmt.Errorf("pacer: Options.Rate: %v bytes/s is not a finite non-negative number", o.Rate)
	case !finiteNonNeg(o.Burst):
		return fmt.Errorf("pacer: Options.Burst: %v bytes is not a finite non-negative number", o.Burst)
	}
	return nil
}

func finiteNonNeg(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// Pacer is a token bucket limiting the bytes per second through one path.
// It is safe for concurrent use. With rate 0 (unlimited) Wait returns at
// once without taking any lock.
type Pacer struct {
	clock Clock
	// unlimited mirrors rate == 0 for Wait's lock-free fast path.
	unlimited atomic.Bool
	// waitedNanos is the cumulative time callers spent blocked in Wait.
	waitedNanos atomic.Int64

	mu    sync.Mutex
	rate  float64 // bytes per second; 0 = unlimited
	burst float64 // configured burst; 0 = derived from rate
	// The bucket, as two cumulative counters: granted is every byte the
	// bucket has paid for up to last, reserved every byte callers have
	// asked for. The bucket holds granted - reserved tokens (negative while
	// callers wait); a caller whose reservation ends at mark may go once
	// granted >= mark.
	granted, reserved float64
	last              time.Time
	// queue holds the blocked waiters in reservation (FIFO) order.
	queue []*waiter
	// changed is closed (and replaced) when the rate changes or a waiter
	// cancels, so that sleeping waiters recompute their deadline.
	changed chan struct{}
}

// New returns a pacer configured by o.
func New(o Options) (*Pacer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	p := &Pacer{clock: o.Clock, burst: o.Burst, changed: make(chan struct{})}
	p.setRateLocked(o.Rate, o.Clock.Now())
	return p, nil
}

// ErrBadSize is returned by Wait for a negative byte count.
var ErrBadSize = errors.New("negative byte count")

// Wait blocks until n bytes may pass, or ctx is done. A request larger than
// the burst is allowed and waits n / rate seconds once the bucket is empty.
// It returns nil when the bytes may pass, ctx's error (wrapped) when ctx
// ended first — the reservation is then withdrawn — and ErrBadSize for n < 0. n == 0 and an unlimited pacer never block.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	if n <= 0 || p.unlimited.Load() {
		if n < 0 {
			return fmt.Errorf("pacer: wait for %d bytes: %w", n, ErrBadSize)
		}
		return nil
	}
	size := float64(n)
	p.mu.Lock()
	now := p.clock.Now()
	p.advance(now)
	if p.rate == 0 {
		p.mu.Unlock()
		return nil
	}
	p.reserved += size
	if p.granted >= p.reserved {
		p.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		p.reserved -= size // the last reservation: nobody is behind it
		p.capBucket()
		p.mu.Unlock()
		return fmt.Errorf("pacer: wait for %d bytes: %w", n, err)
	}
	w := &waiter{mark: p.reserved, size: size}
	p.queue = append(p.queue, w)
	start := now
	for {
		d := durationFor(w.mark-p.granted, p.rate)
		changed := p.changed
		p.mu.Unlock()

		timer := p.clock.NewTimer(d)
		var cancelled bool
		select {
		case <-timer.C():
		case <-changed:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			cancelled = true
		}

		p.mu.Lock()
		now = p.clock.Now()
		p.advance(now)
		done := p.rate == 0 || p.granted >= w.mark
		if done || cancelled {
			p.dequeue(w, !done)
			p.mu.Unlock()
			if d := now.Sub(start); d > 0 {
				p.waitedNanos.Add(int64(d))
			}
			if !done {
				return fmt.Errorf("pacer: wait for %d bytes: %w", n, ctx.Err())
			}
			return nil
		}
	}
}

// waiter is a Wait blocked in the queue. Its reservation is the interval
// (mark-size, mark] of the reserved counter.
type waiter struct {
	mark, size float64
}

// dequeue removes w from the queue. A cancelled waiter's bytes never pass:
// its reservation is withdrawn, every waiter behind it moves up by its
// size and is woken to recompute its deadline; waiters ahead of it are
// unaffected. Called with mu held.
func (p *Pacer) dequeue(w *waiter, cancelled bool) {
	i := 0
	for i < len(p.queue) && p.queue[i] != w {
		i++
	}
	if i == len(p.queue) {
		return
	}
	behind := p.queue[i+1:]
	if cancelled {
		for _, b := range behind {
			b.mark -= w.size
		}
		p.reserved -= w.size
		p.capBucket()
		if len(behind) > 0 {
			p.broadcast()
		}
	}
	copy(p.queue[i:], behind)
	p.queue[len(p.queue)-1] = nil
	p.queue = p.queue[:len(p.queue)-1]
}

// advance pays the bucket for the time since last. Called with mu held.
func (p *Pacer) advance(now time.Time) {
	if !now.After(p.last) {
		return // a clock that stands still or steps back pays nothing
	}
	if p.rate > 0 {
		p.granted += p.rate * now.Sub(p.last).Seconds()
		p.capBucket()
	}
	p.last = now
	if len(p.queue) == 0 && p.reserved > 1<<40 {
		// Keep the counters small so float64 stays exact to the byte;
		// with nobody waiting no mark refers to them.
		p.granted -= p.reserved
		p.reserved = 0
	}
}

// capBucket keeps the bucket from holding more than the burst.
func (p *Pacer) capBucket() {
	if b := p.effectiveBurst(); p.granted-p.reserved > b {
		p.granted = p.reserved + b
	}
}

func (p *Pacer) effectiveBurst() float64 {
	if p.burst > 0 {
		return p.burst
	}
	return max(p.rate*DefaultBurstWindow.Seconds(), minBurst)
}

func (p *Pacer) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// durationFor is how long rate takes to pay for bytes, rounded up to the
// nanosecond so that a waiter never wakes just short of its mark.
func durationFor(bytes, rate float64) time.Duration {
	s := bytes / rate * float64(time.Second)
	if s >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(s))
}

// SetRate changes the limit to rate bytes per second (0 = unlimited) from
// now on. Waiters recompute their deadlines at the new rate; with rate 0
// they are released at once. A negative, NaN or infinite rate is an error
// and leaves the pacer unchanged.
func (p *Pacer) SetRate(rate float64) error {
	if !finiteNonNeg(rate) {
		return fmt.Errorf("pacer: set rate %v bytes/s: not a finite non-negative number", rate)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	p.advance(now) // settle the bucket at the old rate
	p.setRateLocked(rate, now)
	p.broadcast()
	return nil
}

func (p *Pacer) setRateLocked(rate float64, now time.Time) {
	if p.rate == 0 && rate > 0 {
		// Leaving unlimited mode: start with a full bucket.
		p.rate = rate
		p.granted = p.reserved + p.effectiveBurst()
	}
	p.rate = rate
	p.capBucket()
	p.last = now
	p.unlimited.Store(rate == 0)
}

// Rate returns the current limit in bytes per second (0 = unlimited).
func (p *Pacer) Rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate
}

// Waited returns the cumulative time callers have spent blocked in Wait
// (summed over concurrent callers), for the pacer-wait metric.
func (p *Pacer) Waited() time.Duration {
	return time.Duration(p.waitedNanos.Load())
}
