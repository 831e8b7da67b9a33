package respserver

import (
	"context"
	"sync"
)

// budget bounds the argument bytes all connections hold at once: a
// command's arguments are charged when read and released when it is done,
// and a command that would pass the limit waits for others to finish. A
// single command larger than the whole budget is let through alone, so
// that no command is refused for its size below the bulk limit.
type budget struct {
	limit int64

	mu   sync.Mutex
	used int64
	free chan struct{} // closed and replaced whenever bytes are released
}

func newBudget(limit int64) *budget { return &budget{limit: limit, free: make(chan struct{})} }

// acquire charges n bytes, waiting while they do not fit.
func (b *budget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.limit || b.used == 0 {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		ch := b.free
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives n bytes back.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.free)
	b.free = make(chan struct{})
	b.mu.Unlock()
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
