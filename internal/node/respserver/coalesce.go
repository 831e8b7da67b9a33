package respserver

import (
	"context"
	"sync"
	"sync/atomic"
)

// setGroups coalesces plain SETs of one key that arrive while another
// SET of it is being stored (group commit): they wait together, the last
// value to arrive is stored once for all of them, and each is answered
// when it is. This is what a single Redis would show: the SETs were
// concurrent, any order of them is allowed, and the order in which the
// stored value comes last makes every other one overwritten at once, so
// no reader can tell. A SET is answered only once a value that arrived
// no earlier than it is in the pool, so a GET after the answer never sees
// what was there before.
//
// Only SETs without options coalesce (their effect is the value alone);
// an expiry, a condition or GET goes the ordinary way, under the key's
// lock.
type setGroups struct {
	mu sync.Mutex
	m  map[groupKey]*setGroup

	coalesced atomic.Uint64 // SETs answered by another SET's write
}

type groupKey struct{ tenant, name string }

// setGroup is one key's SETs: the one being stored (running) and the
// batch waiting for it to finish.
type setGroup struct {
	running bool
	next    *setBatch
}

// setBatch is the SETs waiting to be stored as one: value is the last to
// arrive, taken by the SET that created the batch when its turn comes.
type setBatch struct {
	value []byte
	n     int           // SETs in the batch
	turn  chan struct{} // closed when the previous store finished
	done  chan struct{} // closed once err is set
	err   error
}

// set stores value as name's through store, coalescing with concurrent
// plain SETs of the same key; it returns store's error for the value
// that answered this SET. value must stay valid until set returns: a
// waiting SET's bytes are read by whichever SET stores the batch.
func (g *setGroups) set(ctx context.Context, tenant, name string, value []byte, store func(ctx context.Context, value []byte) error) error {
	k := groupKey{tenant, name}
	g.mu.Lock()
	if g.m == nil {
		g.m = map[groupKey]*setGroup{}
	}
	grp := g.m[k]
	if grp == nil {
		grp = &setGroup{}
		g.m[k] = grp
	}
	if !grp.running {
		grp.running = true
		g.mu.Unlock()
		err := store(ctx, value)
		g.handoff(k, grp)
		return err
	}
	if b := grp.next; b != nil {
		// Join the waiting batch: its store is of this value or a later
		// one, begun after this SET arrived.
		b.value = value
		b.n++
		g.mu.Unlock()
		<-b.done
		g.coalesced.Add(1)
		return b.err
	}
	b := &setBatch{value: value, n: 1, turn: make(chan struct{}), done: make(chan struct{})}
	grp.next = b
	g.mu.Unlock()
	<-b.turn
	g.mu.Lock()
	grp.next = nil // later SETs start the next batch
	v := b.value
	g.mu.Unlock()
	b.err = store(ctx, v)
	close(b.done)
	g.handoff(k, grp)
	return b.err
}

// handoff passes the key's turn to the waiting batch, or ends the group.
func (g *setGroups) handoff(k groupKey, grp *setGroup) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if grp.next != nil {
		close(grp.next.turn)
		return
	}
	grp.running = false
	delete(g.m, k)
}
