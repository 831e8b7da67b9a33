package respserver

import (
	"context"
	"sync"
	"time"
)

// reqCtx is one command's context: its connection's context with a
// deadline, as context.WithDeadline makes it, but armed lazily. Nothing is
// registered with the parent and no timer is started until something asks
// for Done or Value (deriving a context asks for both); a command served
// from memory, a GET of the node's own copy, never asks and costs one
// small allocation instead of a timer, a channel and the parent's
// children map (8 % of the node's CPU under redis-benchmark GET, measured
// with perf).
//
// Before it is armed, Err answers from the parent and the clock, as the
// armed context would: the parent's error, else DeadlineExceeded once the
// deadline has passed. end cancels it, as the CancelFunc of
// context.WithDeadline does.
type reqCtx struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	armed  context.Context // context.WithDeadline(parent, deadline), made by arm
	cancel context.CancelFunc
	ended  bool
}

// newReqCtx returns parent with a deadline d from now; call end when the
// command is done.
func newReqCtx(parent context.Context, d time.Duration) *reqCtx {
	return &reqCtx{parent: parent, deadline: time.Now().Add(d)}
}

// arm returns the real context, making it on the first call.
func (c *reqCtx) arm() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == nil {
		if c.ended {
			// Ended unarmed before its deadline and its parent's end (end
			// arms it otherwise): Canceled for good, values kept.
			c.armed, c.cancel = context.WithCancel(context.WithoutCancel(c.parent))
			c.cancel()
		} else {
			c.armed, c.cancel = context.WithDeadline(c.parent, c.deadline)
		}
	}
	return c.armed
}

// end cancels the context (context.Canceled, unless its deadline or its
// parent's end came first: then that error stays, as Err must not change
// once it is not nil) and releases what arming it took.
func (c *reqCtx) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	if c.cancel == nil {
		if c.parent.Err() == nil && time.Now().Before(c.deadline) {
			return // Err says Canceled from now on, and arm makes a context that does
		}
		c.armed, c.cancel = context.WithDeadline(c.parent, c.deadline)
	}
	c.cancel()
}

func (c *reqCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *reqCtx) Done() <-chan struct{} { return c.arm().Done() }

// Value arms the context, so that what the context package finds through
// it (the cancellation a derived context registers with, Cause) is the
// armed context's.
func (c *reqCtx) Value(key any) any { return c.arm().Value(key) }

func (c *reqCtx) Err() error {
	c.mu.Lock()
	armed, ended := c.armed, c.ended
	c.mu.Unlock()
	switch {
	case armed != nil:
		return armed.Err()
	case ended:
		return context.Canceled
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}
