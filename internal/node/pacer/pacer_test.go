package pacer

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Every timing test runs in a synctest bubble: time is virtual and only
// moves when every goroutine is blocked, so elapsed times are exact and no
// test sleeps for real.

// near reports whether got is within 1µs of want (float rounding of the
// bucket; virtual time itself is exact).
func near(got, want time.Duration) bool {
	d := got - want
	return d > -time.Microsecond && d < time.Microsecond
}

func mustNew(t *testing.T, o Options) *Pacer {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return p
}

func TestWaitTakesBytesOverRate(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		burst    float64
		requests []int
		want     []time.Duration // elapsed since start after each request
	}{
		{"within burst", 1000, 500, []int{200, 300}, []time.Duration{0, 0}},
		{"burst then rate", 1000, 100, []int{100, 1000, 500}, []time.Duration{0, time.Second, 1500 * time.Millisecond}},
		{"request larger than burst", 1000, 10, []int{5000}, []time.Duration{4990 * time.Millisecond}},
		{"default burst is 10ms of rate", 1e6, 0, []int{10000, 1000000}, []time.Duration{0, time.Second}},
		{"default burst has a floor of 4096", 1000, 0, []int{4096, 1000}, []time.Duration{0, time.Second}},
		{"zero bytes never wait", 1, 1, []int{1, 0, 0}, []time.Duration{0, 0, 0}},
		{"slow rate, exact", 3, 1, []int{1, 10}, []time.Duration{0, 10 * time.Second / 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := mustNew(t, Options{Rate: tt.rate, Burst: tt.burst})
				start := time.Now()
				for i, n := range tt.requests {
					if err := p.Wait(context.Background(), n); err != nil {
						t.Fatalf("Wait(%d): %v", n, err)
					}
					if got := time.Since(start); !near(got, tt.want[i]) {
						t.Errorf("after request %d (%d bytes): elapsed %v, want %v", i, n, got, tt.want[i])
					}
				}
				if got, want := p.Waited(), tt.want[len(tt.want)-1]; !near(got, want) {
					t.Errorf("Waited() = %v, want %v", got, want)
				}
			})
		})
	}
}

func TestBucketRefillsWhileIdleUpToBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Options{Rate: 100, Burst: 50})
		ctx := context.Background()
		if err := p.Wait(ctx, 50); err != nil { // empties the bucket
			t.Fatal(err)
		}
		time.Sleep(time.Hour) // idle: refills to the burst, no further
		start := time.Now()
		if err := p.Wait(ctx, 150); err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(start), time.Second; !near(got, want) {
			t.Errorf("150 bytes after a long idle with burst 50 at 100 B/s took %v, want %v", got, want)
		}
	})
}

func TestUnlimited(t *testing.T) {
	for _, o := range []Options{{}, {Rate: 0, Burst: 1}} {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, o)
			start := time.Now()
			for range 1000 {
				if err := p.Wait(context.Background(), 1<<30); err != nil {
					t.Fatal(err)
				}
			}
			if time.Since(start) != 0 || p.Waited() != 0 {
				t.Errorf("unlimited pacer waited: elapsed %v, Waited %v", time.Since(start), p.Waited())
			}
			if p.Rate() != 0 {
				t.Errorf("Rate() = %v, want 0", p.Rate())
			}
		})
	}
}

func TestCancellation(t *testing.T) {
	t.Run("deadline ends a long wait promptly", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Options{Rate: 100, Burst: 1})
			_ = p.Wait(context.Background(), 1)
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := p.Wait(ctx, 1000) // would take 10 s
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait past deadline = %v, want DeadlineExceeded", err)
			}
			if got := time.Since(start); got != 250*time.Millisecond {
				t.Errorf("Wait returned after %v, want at the 250ms deadline", got)
			}
			if got := p.Waited(); got != 250*time.Millisecond {
				t.Errorf("Waited() = %v, want 250ms", got)
			}
			// The cancelled reservation was withdrawn: the bucket holds
			// its burst of 1 byte again, so 100 more take 0.99 s, not
			// 10.74 s.
			start = time.Now()
			if err := p.Wait(context.Background(), 100); err != nil {
				t.Fatal(err)
			}
			if got, want := time.Since(start), 990*time.Millisecond; !near(got, want) {
				t.Errorf("next Wait after cancellation took %v, want %v", got, want)
			}
		})
	})
	t.Run("already cancelled context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Options{Rate: 100, Burst: 10})
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := p.Wait(ctx, 5); err != nil {
				t.Errorf("Wait within the burst on a cancelled ctx = %v, want nil (no blocking needed)", err)
			}
			if err := p.Wait(ctx, 1000); !errors.Is(err, context.Canceled) {
				t.Errorf("blocking Wait on a cancelled ctx = %v, want Canceled", err)
			}
			start := time.Now()
			if err := p.Wait(context.Background(), 105); err != nil {
				t.Fatal(err)
			}
			if got, want := time.Since(start), time.Second; !near(got, want) {
				t.Errorf("Wait after refused reservation took %v, want %v", got, want)
			}
		})
	})
	t.Run("cancelled waiter lets the one behind move up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Options{Rate: 100, Burst: 1})
			_ = p.Wait(context.Background(), 1)
			ctx, cancel := context.WithCancel(context.Background())
			start := time.Now()
			var firstErr error
			var secondAt time.Duration
			var wg sync.WaitGroup
			wg.Go(func() { firstErr = p.Wait(ctx, 1000) }) // 0–10 s
			synctest.Wait()
			wg.Go(func() { // queued behind: 10–11 s
				_ = p.Wait(context.Background(), 100)
				secondAt = time.Since(start)
			})
			synctest.Wait()
			time.Sleep(time.Second)
			cancel()
			wg.Wait()
			if !errors.Is(firstErr, context.Canceled) {
				t.Errorf("cancelled Wait = %v, want Canceled", firstErr)
			}
			// At 1 s the bucket has paid 100 bytes; withdrawing the first
			// waiter's 1000 moves the second one to the front, and its 100
			// bytes are covered at once.
			if want := time.Second; !near(secondAt, want) {
				t.Errorf("second waiter finished at %v, want %v", secondAt, want)
			}
		})
	})
	t.Run("cancelling a middle waiter does not speed up the one ahead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Options{Rate: 1000, Burst: 1})
			_ = p.Wait(context.Background(), 1)
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			var aAt, cAt time.Duration
			var bErr error
			var wg sync.WaitGroup
			wg.Go(func() { _ = p.Wait(context.Background(), 1000); aAt = time.Since(start) }) // 0–1 s
			synctest.Wait()
			wg.Go(func() { bErr = p.Wait(ctx, 1000) }) // 1–2 s
			synctest.Wait()
			wg.Go(func() { _ = p.Wait(context.Background(), 1000); cAt = time.Since(start) }) // 2–3 s
			synctest.Wait()
			time.Sleep(500 * time.Millisecond)
			cancel()
			wg.Wait()
			if !errors.Is(bErr, context.Canceled) {
				t.Errorf("cancelled Wait = %v, want Canceled", bErr)
			}
			if !near(aAt, time.Second) {
				t.Errorf("waiter ahead finished at %v, want 1s (unaffected)", aAt)
			}
			if !near(cAt, 2*time.Second) {
				t.Errorf("waiter behind finished at %v, want 2s (moved up by 1000 bytes)", cAt)
			}
		})
	})
}

func TestFIFOOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, Options{Rate: 1000, Burst: 1})
		_ = p.Wait(context.Background(), 1)
		start := time.Now()
		done := make([]time.Duration, 4)
		var wg sync.WaitGroup
		for i := range done {
			wg.Go(func() {
				if err := p.Wait(context.Background(), 1000); err != nil {
					t.Error(err)
				}
				done[i] = time.Since(start)
			})
			synctest.Wait() // reserve strictly in order i = 0, 1, 2, 3
		}
		wg.Wait()
		for i, got := range done {
			if want := time.Duration(i+1) * time.Second; !near(got, want) {
				t.Errorf("waiter %d finished at %v, want %v", i, got, want)
			}
		}
		if got, want := p.Waited(), 10*time.Second; !near(got, want) { // 1+2+3+4
			t.Errorf("Waited() = %v, want %v (summed over waiters)", got, want)
		}
	})
}

func TestSetRate(t *testing.T) {
	t.Run("faster rate shortens a wait in progress", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Options{Rate: 100, Burst: 1})
			_ = p.Wait(context.Background(), 1)
			start := time.Now()
			var at time.Duration
			var wg sync.WaitGroup
			wg.Go(func() {
				_ = p.Wait(context.Background(), 1000) // 10 s at 100 B/s
				at = time.Since(start)
			})
			time.Sleep(time.Second) // 100 bytes paid
			if err := p.SetRate(1000); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if want := 1900 * time.Millisecond; !near(at, want) { // 900 more at 1000 B/s
				t.Errorf("wait finished at %v, want %v", at, want)
			}
			if p.Rate() != 1000 {
				t.Errorf("Rate() = %v, want 1000", p.Rate())
			}
		})
	})
	t.Run("rate 0 releases waiters", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Options{Rate: 1, Burst: 1})
			_ = p.Wait(context.Background(), 1)
			start := time.Now()
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					if err := p.Wait(context.Background(), 1<<20); err != nil {
						t.Error(err)
					}
				})
			}
			synctest.Wait()
			if err := p.SetRate(0); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if got := time.Since(start); got != 0 {
				t.Errorf("waiters released after %v, want at once", got)
			}
		})
	})
	t.Run("unlimited to limited starts with a full bucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := mustNew(t, Options{Burst: 100})
			if err := p.SetRate(100); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = p.Wait(context.Background(), 100)
			_ = p.Wait(context.Background(), 100)
			if got, want := time.Since(start), time.Second; !near(got, want) {
				t.Errorf("200 bytes took %v, want %v", got, want)
			}
		})
	})
	t.Run("bad rates are refused", func(t *testing.T) {
		p := mustNew(t, Options{Rate: 5})
		for _, r := range []float64{-1, math.NaN(), math.Inf(1)} {
			if err := p.SetRate(r); err == nil {
				t.Errorf("SetRate(%v) = nil, want an error", r)
			}
		}
		if p.Rate() != 5 {
			t.Errorf("Rate() after refused SetRate = %v, want 5", p.Rate())
		}
	})
}

func TestConcurrentWaitersShareTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			rate    = 1 << 20 // 1 MiB/s
			burst   = 4096
			workers = 16
			each    = 64
			chunk   = 4096
		)
		p := mustNew(t, Options{Rate: rate, Burst: burst})
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					if err := p.Wait(context.Background(), chunk); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		total := workers * each * chunk
		want := time.Duration(float64(total-burst) / rate * float64(time.Second))
		if got := time.Since(start); !near(got, want) {
			t.Errorf("%d bytes by %d workers took %v, want %v", total, workers, got, want)
		}
	})
}

func TestBadInput(t *testing.T) {
	p := mustNew(t, Options{Rate: 10})
	if err := p.Wait(context.Background(), -1); !errors.Is(err, ErrBadSize) {
		t.Errorf("Wait(-1) = %v, want ErrBadSize", err)
	}
	unl := mustNew(t, Options{})
	if err := unl.Wait(context.Background(), -1); !errors.Is(err, ErrBadSize) {
		t.Errorf("unlimited Wait(-1) = %v, want ErrBadSize", err)
	}
	for _, tt := range []struct {
		o     Options
		field string
	}{
		{Options{Rate: -1}, "Options.Rate"},
		{Options{Rate: math.Inf(1)}, "Options.Rate"},
		{Options{Rate: math.NaN()}, "Options.Rate"},
		{Options{Burst: -5}, "Options.Burst"},
	} {
		_, err := New(tt.o)
		if err == nil || !contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tt.o, err, tt.field)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// fakeClock is a manual clock: time moves only when Advance is called.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// armed is signalled whenever a timer is created.
	armed chan struct{}
}

type fakeTimer struct {
	at      time.Time
	c       chan time.Time
	stopped bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() bool {
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	t := &fakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	c.armed <- struct{}{}
	return t
}

// Advance moves time by d and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now) {
			t.stopped = true
			t.c <- c.now
			continue
		}
		keep = append(keep, t)
	}
	c.timers = keep
}

func TestInjectedClock(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0), armed: make(chan struct{}, 16)}
	p := mustNew(t, Options{Rate: 1000, Burst: 1, Clock: clk})
	_ = p.Wait(context.Background(), 1)
	done := make(chan error, 1)
	go func() { done <- p.Wait(context.Background(), 2000) }() // 2 s
	<-clk.armed
	clk.Advance(1999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v after 1.999 s of 2 s", err)
	default:
	}
	clk.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if got := p.Waited(); got != 2*time.Second {
		t.Errorf("Waited() = %v, want 2s", got)
	}
}

func TestSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := NewSet(SetOptions{NetEgress: 100, SSDWrite: 1000, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		wantRates := map[Path]float64{NetEgress: 100, NetIngress: 0, SSDRead: 0, SSDWrite: 1000}
		for _, path := range Paths() {
			if got := s.Pacer(path).Rate(); got != wantRates[path] {
				t.Errorf("%s rate = %v, want %v", path, got, wantRates[path])
			}
		}
		ctx := context.Background()
		_ = s.Pacer(NetEgress).Wait(ctx, 1)
		_ = s.Pacer(NetEgress).Wait(ctx, 200) // 2 s
		_ = s.Pacer(SSDWrite).Wait(ctx, 1)
		_ = s.Pacer(SSDWrite).Wait(ctx, 500) // 0.5 s
		_ = s.Pacer(SSDRead).Wait(ctx, 1<<30)
		w := s.Waited()
		want := [NumPaths]time.Duration{2 * time.Second, 0, 0, 500 * time.Millisecond}
		for i := range w {
			if !near(w[i], want[i]) {
				t.Errorf("Waited()[%s] = %v, want %v", Path(i), w[i], want[i])
			}
		}
	})
	if s, _ := NewSet(SetOptions{}); s.Pacer(NumPaths) != nil || s.Pacer(-1) != nil {
		t.Error("Pacer(out of range) is not nil")
	}
	names := map[Path]string{NetEgress: "net_egress", NetIngress: "net_ingress", SSDRead: "ssd_read", SSDWrite: "ssd_write", 9: "path(9)"}
	for p, want := range names {
		if p.String() != want {
			t.Errorf("Path(%d).String() = %q, want %q", int(p), p.String(), want)
		}
	}
	for _, o := range []SetOptions{{SSDRead: -1}, {NetIngress: math.NaN()}, {Burst: math.Inf(1)}} {
		if _, err := NewSet(o); err == nil {
			t.Errorf("NewSet(%+v) = nil error", o)
		}
	}
}
