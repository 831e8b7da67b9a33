package respserver

import (
	"errors"
	"sync"
	"time"

	"github.com/kvpool/kvpool/internal/server"
)

// budget bounds the memory all connections hold for commands being read
// and run (MaxArgBytes): each connection's resp.Reader reserves from it
// before its buffers grow past resp.FreeHeld, argument slots included, and
// releases when it drops them (when the connection idles, see conn.go). A
// client that declares a 1 GiB bulk and trickles it holds only what it
// sent, and that is charged as it arrives, not once the command is whole.
//
// The rule that keeps it from deadlocking: a reservation that does not fit
// waits, except the senior holder's, which is always granted. The senior
// is the connection that has held bytes the longest (holders queue in the
// order they began holding; one leaves the queue when it holds nothing).
// Two connections each half-way through a command larger than what is
// left cannot wait on each other: the senior goes on, finishes and lets
// go, and the next becomes senior. So the bytes held never pass the limit
// plus what the senior holds (at most one command: Limits.MaxCommand plus
// resp.ArgOverhead per argument, and one growth step), and a single
// command larger than the whole budget is served alone. A waiting
// reservation ends at the command's read deadline (ReadTimeout from its
// first byte), and the connection is answered OOM and closed.
type budget struct {
	limit int64

	mu         sync.Mutex
	used, peak int64
	head, tail *holder       // holders holding bytes, the senior first
	free       chan struct{} // closed and replaced whenever bytes are released
}

// holder is one connection's share of the budget; its fields are guarded
// by budget.mu.
type holder struct {
	n          int64
	prev, next *holder
	queued     bool
}

func newBudget(limit int64) *budget { return &budget{limit: limit, free: make(chan struct{})} }

// errBudgetTimeout is a reservation that waited until the command's read
// deadline.
var errBudgetTimeout = errors.New("respserver: the memory for commands being read stayed full until the read deadline")

// acquire charges n bytes to h, waiting while they do not fit (see budget)
// until stop is closed (ErrShuttingDown) or the deadline passes.
func (b *budget) acquire(stop <-chan struct{}, h *holder, n int64, deadline time.Time) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.used+n <= b.limit || b.head == nil || b.head == h {
			b.used += n
			b.peak = max(b.peak, b.used)
			h.n += n
			if !h.queued {
				h.queued, h.prev, h.next = true, b.tail, nil
				if b.tail != nil {
					b.tail.next = h
				} else {
					b.head = h
				}
				b.tail = h
			}
			b.mu.Unlock()
			return nil
		}
		ch := b.free
		b.mu.Unlock()
		if timer == nil {
			d := time.Until(deadline)
			if d <= 0 {
				return errBudgetTimeout
			}
			timer = time.NewTimer(d)
		}
		select {
		case <-ch:
		case <-timer.C:
			return errBudgetTimeout
		case <-stop:
			return server.ErrShuttingDown
		}
	}
}

// release gives n bytes of h's back.
func (b *budget) release(h *holder, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	h.n -= n
	if h.n == 0 && h.queued {
		if h.prev != nil {
			h.prev.next = h.next
		} else {
			b.head = h.next
		}
		if h.next != nil {
			h.next.prev = h.prev
		} else {
			b.tail = h.prev
		}
		h.queued, h.prev, h.next = false, nil, nil
	}
	close(b.free)
	b.free = make(chan struct{})
	b.mu.Unlock()
}

// releaseAll gives back everything h holds.
func (b *budget) releaseAll(h *holder) {
	b.mu.Lock()
	n := h.n
	b.mu.Unlock()
	b.release(h, n)
}

// stats reports the bytes charged now and the most ever charged at once.
func (b *budget) stats() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// keyLocks serialises the commands of this front that read then write one
// key (SET NX/XX/GET, SET KEEPTTL, GETSET-like sequences), so that two of
// them cannot interleave. Striped: two keys may share a stripe.
type keyLocks struct {
	stripes [256]sync.Mutex
}

func (k *keyLocks) lock(tenant, name string) func() {
	h := uint32(2166136261)
	for i := 0; i < len(tenant); i++ {
		h = (h ^ uint32(tenant[i])) * 16777619
	}
	h = (h ^ 0xff) * 16777619
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	m := &k.stripes[h%uint32(len(k.stripes))]
	m.Lock()
	return m.Unlock
}
