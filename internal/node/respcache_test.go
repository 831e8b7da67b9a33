package node

import (
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
)

// TestOwnCache: an entry is trusted until it expires with the key or is
// dropped; what was learnt before a drop is not recorded after it.
func TestOwnCache(t *testing.T) {
	c := newOwnCache()
	k := block.Named("t", "k")
	now := time.Now().UnixMilli()
	if _, ok := c.get(k, now); ok {
		t.Fatal("empty cache trusts k")
	}
	c.put(k, 7, 0, c.mark(k))
	if e, ok := c.get(k, now); !ok || e.sum != 7 {
		t.Fatalf("get after put = %+v, %v; want sum 7, trusted", e, ok)
	}
	c.drop(k)
	if _, ok := c.get(k, now); ok {
		t.Fatal("k trusted after drop")
	}

	// A reader marks, a writer drops (the key changed), then the reader
	// records what it learnt before the change: it must not stick.
	gen := c.mark(k)
	c.drop(k)
	c.put(k, 8, 0, gen)
	if _, ok := c.get(k, now); ok {
		t.Fatal("a put of what was learnt before a drop was recorded")
	}

	// An entry of a key with an expiry is not trusted from its deadline.
	c.put(k, 9, now+1000, c.mark(k))
	if _, ok := c.get(k, now+999); !ok {
		t.Fatal("k not trusted before its expiry")
	}
	if _, ok := c.get(k, now+1000); ok {
		t.Fatal("k trusted at its expiry")
	}

	// A full shard is emptied, never grown past its cap.
	for i := range ownShardCap * ownShards * 2 {
		kk := block.Named("t", string(rune(i)))
		c.put(kk, 1, 0, c.mark(kk))
	}
	for i := range c.shard {
		if n := len(c.shard[i].m); n > ownShardCap {
			t.Fatalf("shard %d holds %d entries; cap %d", i, n, ownShardCap)
		}
	}
}
