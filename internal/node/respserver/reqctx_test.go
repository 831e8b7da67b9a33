package respserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestReqCtx: the lazily armed context behaves as context.WithTimeout's,
// armed or not.
func TestReqCtx(t *testing.T) {
	t.Run("unarmed", func(t *testing.T) {
		parent := context.WithValue(context.Background(), ctxKey{}, "v")
		c := newReqCtx(parent, time.Hour)
		if dl, ok := c.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
			t.Fatalf("Deadline() = %v, %v; want about an hour from now", dl, ok)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("Err() = %v before the deadline; want nil", err)
		}
		c.end()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err() after end = %v; want context.Canceled", err)
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done() armed after end is not closed")
		}
		if v := c.Value(ctxKey{}); v != "v" {
			t.Fatalf("Value = %v; want the parent's", v)
		}
	})
	t.Run("deadline passed, never armed", func(t *testing.T) {
		c := newReqCtx(context.Background(), -time.Second)
		defer c.end()
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err() = %v; want DeadlineExceeded", err)
		}
		<-c.Done() // closed at once when armed late
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err() armed = %v; want DeadlineExceeded", err)
		}
	})
	t.Run("deadline fires when armed", func(t *testing.T) {
		c := newReqCtx(context.Background(), 20*time.Millisecond)
		defer c.end()
		select {
		case <-c.Done():
		case <-time.After(time.Minute):
			t.Fatal("Done not closed a minute after a 20 ms deadline")
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err() = %v; want DeadlineExceeded", err)
		}
	})
	t.Run("parent canceled", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c := newReqCtx(parent, time.Hour)
		defer c.end()
		cancel()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err() unarmed = %v; want the parent's Canceled", err)
		}
		<-c.Done()
	})
	t.Run("derived contexts", func(t *testing.T) {
		c := newReqCtx(context.Background(), time.Hour)
		child, cancel := context.WithCancel(c)
		defer cancel()
		later := context.AfterFunc(c, func() {})
		defer later()
		c.end()
		select {
		case <-child.Done():
		case <-time.After(time.Minute):
			t.Fatal("a context derived from the command's is not canceled a minute after end")
		}
		if got := context.Cause(child); !errors.Is(got, context.Canceled) {
			t.Fatalf("Cause(child) = %v; want Canceled", got)
		}
	})
}

// TestReqCtxErrStable: Err does not change once it is not nil, whatever
// the order of the deadline, the parent's end, end and arming (a review
// found all three cases changing).
func TestReqCtxErrStable(t *testing.T) {
	// The deadline passed, unarmed, then end.
	c := newReqCtx(context.Background(), -time.Second)
	if e1 := c.Err(); !errors.Is(e1, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v; want DeadlineExceeded", e1)
	}
	c.end()
	if e2 := c.Err(); !errors.Is(e2, context.DeadlineExceeded) {
		t.Fatalf("after end: Err() = %v; want DeadlineExceeded still", e2)
	}
	// Ended before the deadline, armed after it.
	c = newReqCtx(context.Background(), 10*time.Millisecond)
	c.end()
	for time.Until(c.deadline) > 0 {
		time.Sleep(time.Millisecond)
	}
	<-c.Done()
	if e := c.Err(); !errors.Is(e, context.Canceled) {
		t.Fatalf("ended, then armed past the deadline: Err() = %v; want Canceled still", e)
	}
	// The parent's deadline passed before end.
	p, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	c = newReqCtx(p, time.Hour)
	c.end()
	if e := c.Err(); !errors.Is(e, context.DeadlineExceeded) {
		t.Fatalf("parent expired, then end: Err() = %v; want the parent's DeadlineExceeded", e)
	}
}
