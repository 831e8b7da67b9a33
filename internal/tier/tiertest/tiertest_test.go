package tiertest

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
)

// mapTier is the simplest correct tier: a map with LRU eviction. Running
// the suite against it checks the suite itself asks only for the contract.
type mapTier struct {
	mu     sync.Mutex
	cfg    Config
	closed bool
	m      map[block.Key]*list.Element
	lru    list.List // front = most recent; values are *entry
	stats  tier.Stats
}

type entry struct {
	k block.Key
	p []byte
}

func newMapTier(cfg Config) *mapTier {
	t := &mapTier{cfg: cfg, m: map[block.Key]*list.Element{}}
	t.stats.CapacityBytes = int64(cfg.Blocks) * int64(cfg.BlockSize)
	return t
}

func (t *mapTier) Put(ctx context.Context, k block.Key, p []byte, sum uint32) error {
	if err := k.Validate(); err != nil {
		return err
	}
	limit := t.cfg.BlockSize
	if t.cfg.MaxObjectSize > 0 {
		limit = t.cfg.MaxObjectSize
	}
	if len(p) > limit {
		return fmt.Errorf("put %s: %d bytes, limit %d: %w", k, len(p), limit, kvpool.ErrTooLarge)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return kvpool.ErrClosed
	}
	if e, ok := t.m[k]; ok {
		t.remove(e)
	}
	for t.lru.Len() >= t.cfg.Blocks {
		t.stats.EvictAttempts++
		t.stats.Evicted++
		t.remove(t.lru.Back())
	}
	t.m[k] = t.lru.PushFront(&entry{k, slices.Clone(p)})
	t.stats.Blocks++
	t.stats.Bytes += int64(len(p))
	t.stats.HeldBytes += int64(len(p))
	t.stats.BytesIn += uint64(len(p))
	return nil
}

func (t *mapTier) remove(e *list.Element) {
	en := t.lru.Remove(e).(*entry)
	delete(t.m, en.k)
	t.stats.Blocks--
	t.stats.Bytes -= int64(len(en.p))
	t.stats.HeldBytes -= int64(len(en.p))
}

func (t *mapTier) Get(ctx context.Context, k block.Key, dst []byte) ([]byte, uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return dst[:0], 0, kvpool.ErrClosed
	}
	e, ok := t.m[k]
	if !ok {
		t.stats.Misses++
		return dst[:0], 0, kvpool.ErrNotFound
	}
	t.lru.MoveToFront(e)
	p := e.Value.(*entry).p
	t.stats.Hits++
	t.stats.BytesOut += uint64(len(p))
	return append(dst[:0], p...), block.Checksum(k, p), nil
}

func (t *mapTier) Delete(ctx context.Context, k block.Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return kvpool.ErrClosed
	}
	e, ok := t.m[k]
	if !ok {
		return kvpool.ErrNotFound
	}
	t.remove(e)
	return nil
}

func (t *mapTier) Contains(k block.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[k]
	return ok && !t.closed
}

func (t *mapTier) Stats() tier.Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

func (t *mapTier) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return kvpool.ErrClosed
	}
	t.closed = true
	return nil
}

func TestSuiteOnMapTier(t *testing.T) {
	Run(t, func(t *testing.T, cfg Config) tier.Tier { return newMapTier(cfg) })
}

func TestPayload(t *testing.T) {
	for _, n := range []int{17, 1000} {
		p := Payload(3, 9, n)
		if ver, err := CheckPayload(3, p); err != nil || ver != 9 {
			t.Errorf("CheckPayload(Payload(3, 9, %d)) = %d, %v", n, ver, err)
		}
		if _, err := CheckPayload(4, p); err == nil {
			t.Errorf("payload of block 3 accepted for block 4")
		}
		p[n-1] ^= 1
		if _, err := CheckPayload(3, p); err == nil {
			t.Errorf("flipped payload of %d bytes accepted", n)
		}
	}
	if _, err := CheckPayload(1, make([]byte, 15)); err == nil {
		t.Error("15-byte payload accepted")
	}
}
