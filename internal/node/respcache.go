package node

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterclient"
)

// ownWindow is how long the Redis front trusts what it last learnt from
// the master about a key this node holds: within it a GET serves this
// node's own copy without asking the master. It bounds one staleness: an
// EXPIRE, PEXPIRE or PERSIST made through another node's front reaches
// this node's GETs of its own copy within ownWindow. Everything else that
// would make the copy wrong removes or replaces it first (a SET or DEL on
// any front deletes or overwrites every old copy before it answers, and a
// replaced copy has another checksum), so it is seen at once.
const ownWindow = time.Second

// ownShards is the number of locks of an ownCache; ownShardCap bounds the
// entries of one shard (a full shard is emptied: the keys it held are
// asked about again).
const (
	ownShards   = 64
	ownShardCap = 4096
)

// owned is what the master said of a key this node holds.
type owned struct {
	sum      uint32 // the checksum of the copy it was said of
	expireAt int64  // Unix ms; 0 none
	until    time.Duration
}

// ownCache is the front's knowledge of keys this node holds: the copy the
// master listed (by checksum), its expiry, and until when that holds. All
// methods are safe for concurrent use.
type ownCache struct {
	seed  maphash.Seed
	epoch time.Time // monotonic origin of the until fields
	shard [ownShards]struct {
		mu  sync.Mutex
		m   map[block.Key]owned
		gen uint64 // counts drops: a put of what was learnt before one is stale
	}
}

func newOwnCache() *ownCache {
	c := &ownCache{seed: maphash.MakeSeed(), epoch: time.Now()}
	for i := range c.shard {
		c.shard[i].m = map[block.Key]owned{}
	}
	return c
}

func (c *ownCache) of(k block.Key) int {
	return int(maphash.Comparable(c.seed, k) % ownShards)
}

// get returns k's entry if it is still trusted and the key has not
// expired at nowMs.
func (c *ownCache) get(k block.Key, nowMs int64) (owned, bool) {
	s := &c.shard[c.of(k)]
	s.mu.Lock()
	e, ok := s.m[k]
	s.mu.Unlock()
	if !ok || time.Since(c.epoch) >= e.until || e.expireAt != 0 && nowMs >= e.expireAt {
		return owned{}, false
	}
	return e, true
}

// mark returns the generation to pass to put for what is learnt from now
// on.
func (c *ownCache) mark(k block.Key) uint64 {
	s := &c.shard[c.of(k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// put records that the master lists this node's copy of k with checksum
// sum and expiry expireAt, as learnt after mark returned gen; if k (or a
// key of its shard) was dropped since, what was learnt may be older than
// the change that dropped it, and put records nothing.
func (c *ownCache) put(k block.Key, sum uint32, expireAt int64, gen uint64) {
	s := &c.shard[c.of(k)]
	e := owned{sum: sum, expireAt: expireAt, until: time.Since(c.epoch) + ownWindow}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	if len(s.m) >= ownShardCap {
		clear(s.m)
	}
	s.m[k] = e
}

// drop forgets k.
func (c *ownCache) drop(k block.Key) {
	s := &c.shard[c.of(k)]
	s.mu.Lock()
	delete(s.m, k)
	s.gen++
	s.mu.Unlock()
}

// touchEvery is how often the front reports the keys it served from its
// own copies to the master, so that the master's eviction policy counts
// those reads (a leased lookup is an access); touchMax bounds the keys
// one report carries (more wait for the next).
const (
	touchEvery = 100 * time.Millisecond
	touchMax   = 4096
)

// toucher collects the keys served without asking the master and reports
// them as leased lookups in the background.
type toucher struct {
	idx KeyIndex

	mu   sync.Mutex
	keys map[string]map[block.Key]struct{} // by tenant: a lookup is of one tenant
	n    int

	ctx  context.Context // ended by close, so that close never waits on the master
	stop context.CancelFunc
	done chan struct{}
}

func newToucher(idx KeyIndex) *toucher {
	t := &toucher{idx: idx, keys: map[string]map[block.Key]struct{}{}, done: make(chan struct{})}
	t.ctx, t.stop = context.WithCancel(context.Background())
	go t.run()
	return t
}

// add records a read of k; a full batch drops it (the next read of k adds
// it again).
func (t *toucher) add(k block.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n >= touchMax {
		return
	}
	m := t.keys[k.Tenant]
	if m == nil {
		m = map[block.Key]struct{}{}
		t.keys[k.Tenant] = m
	}
	if _, ok := m[k]; !ok {
		m[k] = struct{}{}
		t.n++
	}
}

func (t *toucher) run() {
	defer close(t.done)
	tick := time.NewTicker(touchEvery)
	defer tick.Stop()
	var res masterclient.LookupResult
	var batch []block.Key
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		var taken map[string]map[block.Key]struct{}
		t.mu.Lock()
		if t.n > 0 {
			taken = t.keys
			t.keys, t.n = map[string]map[block.Key]struct{}{}, 0
		}
		t.mu.Unlock()
		for _, m := range taken {
			batch = batch[:0]
			for k := range m {
				batch = append(batch, k)
			}
			// Best effort: a report the master misses only leaves its
			// recency a little older.
			ctx, cancel := context.WithTimeout(t.ctx, touchEvery*10)
			_ = t.idx.Locate(ctx, batch, true, &res)
			cancel()
		}
	}
}

func (t *toucher) close() {
	t.stop()
	<-t.done
}
