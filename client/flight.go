package client

import (
	"sync"

	"github.com/kvpool/kvpool/block"
)

// flights coalesces concurrent fetches of the same block: the first Get to
// need a block leads its flight and fetches it (batched with its other
// blocks into one MGET per node); Gets that need it meanwhile wait for the
// flight and copy its result. (golang.org/x/sync/singleflight runs one
// function per key; here a leader fetches many keys in one batch, so the
// flights are kept by hand.)
type flights struct {
	mu sync.Mutex
	m  map[block.Key]*flight
}

// flight is one block being fetched. Its result fields are written by the
// leader before done is closed and only read after.
type flight struct {
	done    chan struct{}
	waiters int // guarded by flights.mu until the flight leaves the map

	status  Status
	payload []byte // a private copy, made only when there are waiters
	from    Location
}

// join returns k's flight and whether the caller leads it.
func (fs *flights) join(k block.Key) (*flight, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[k]; f != nil {
		f.waiters++
		return f, false
	}
	f := &flight{done: make(chan struct{})}
	fs.m[k] = f
	return f, true
}

// land ends the flight of k led by the caller with its result: no later
// Get joins it, and its waiters get a private copy of payload (the leader's
// payload belongs to the leader's caller).
func (fs *flights) land(k block.Key, f *flight, status Status, payload []byte, from Location) {
	fs.mu.Lock()
	delete(fs.m, k)
	waiters := f.waiters
	fs.mu.Unlock()
	f.status, f.from = status, from
	if waiters > 0 && status == Loaded {
		f.payload = append([]byte(nil), payload...)
	}
	close(f.done)
}
