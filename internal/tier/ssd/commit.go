package ssd

import (
	"sync"
	"time"
)

// committer is the SyncBatch group commit. Writers call wait after their
// writes completed; one goroutine (owned by the tier, stopped by stop)
// closes the open batch when it has every writers or interval has passed
// since its first writer joined, runs sync, and releases the batch's
// writers with its result. Because the batch is swapped out before sync
// starts, every writer released by a sync had finished writing before it.
type committer struct {
	every    int
	interval time.Duration
	sync     func() error

	mu  sync.Mutex
	cur *batch

	kick chan struct{} // a batch got its first writer
	full chan struct{} // a batch reached every writers
	quit chan struct{}
	done chan struct{}
}

type batch struct {
	n    int
	err  error
	done chan struct{}
}

func newCommitter(every int, interval time.Duration, sync func() error) *committer {
	c := &committer{
		every:    every,
		interval: interval,
		sync:     sync,
		cur:      &batch{done: make(chan struct{})},
		kick:     make(chan struct{}, 1),
		full:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go c.run()
	return c
}

// wait joins the open batch and returns the result of the sync that
// closes it.
func (c *committer) wait() error {
	c.mu.Lock()
	b := c.cur
	b.n++
	n := b.n
	c.mu.Unlock()
	if n == 1 {
		signal(c.kick)
	}
	if n == c.every {
		signal(c.full)
	}
	<-b.done
	return b.err
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *committer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.kick:
		case <-c.quit:
			c.flush()
			return
		}
		t := time.NewTimer(c.interval)
		select {
		case <-c.full:
		case <-t.C:
		case <-c.quit:
		}
		t.Stop()
		c.flush()
	}
}

// flush closes the open batch and syncs for it.
func (c *committer) flush() {
	c.mu.Lock()
	b := c.cur
	c.cur = &batch{done: make(chan struct{})}
	c.mu.Unlock()
	select { // a full signal for the batch just closed is stale
	case <-c.full:
	default:
	}
	if b.n > 0 {
		b.err = c.sync()
	}
	close(b.done)
}

// stop flushes the open batch and ends the goroutine.
func (c *committer) stop() {
	close(c.quit)
	<-c.done
}
