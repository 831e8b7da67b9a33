package master

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// Redis key semantics for named keys: per-key expiry, key queries,
// enumeration and counts. The index is the truth about what exists, so it
// holds them too: the expiry of a key sits in its shard's exp map (by
// entry) next to its replicas, under the same lock, and dies with the
// key's last replica.

const (
	// DefaultScanCount is Scan's count hint when the caller gives none
	// (count <= 0): Redis SCAN's default COUNT, 10.
	DefaultScanCount = 10
	// MaxScanCount bounds Scan's count hint (a larger one is clamped to
	// it): 4096, the protocol's batch limit (masterproto.DefaultMaxBatch),
	// so a reply never lists more names than a request may carry keys.
	MaxScanCount = 4096
	// MaxScanBytes bounds the name bytes of one Scan reply: it stops once
	// its names reach 256 KiB (one group of keys sharing a hash may
	// overshoot by its own size). 256 names of the longest
	// (block.MaxNameLen) fit, and a reply stays far below the protocol's
	// smallest useful frame limit for a scanning client
	// (masterproto.DefaultMaxFrame is 64 MiB).
	MaxScanBytes = 256 << 10
	// scanWork is how many index entries one Scan call examines before it
	// stops at the end of a shard: 4096, a shard of a 256k-key index, so a
	// scan of a small index ends in one call while a call on a large one
	// reads one shard (O(keys in one shard) per call).
	scanWork = 4096
)

// unixMs converts unix nanoseconds to unix milliseconds, rounding down.
func unixMs(ns int64) int64 {
	ms := ns / int64(time.Millisecond)
	if ns%int64(time.Millisecond) < 0 {
		ms--
	}
	return ms
}

// expired reports whether the key of entry ei has an expiry at or before
// nowNs (only named keys have one). The shard lock is held.
func (s *shard) expired(ei uint32, nowNs int64) bool {
	if len(s.exp) == 0 {
		return false
	}
	at, ok := s.exp[ei]
	return ok && at <= unixMs(nowNs)
}

// live reports whether readers see the key of entry ei of s: one of its
// replicas is visible and the key has not expired. The shard lock is
// held.
func (m *Master) live(s *shard, ei uint32, nowNs int64) bool {
	for r := range s.replicas(ei) {
		if m.visible(r, nowNs) {
			return !s.expired(ei, nowNs)
		}
	}
	return false
}

// checkNamedBatch validates the keys of SetExpiry and KeyInfo: each valid
// (tenant, name length), named, and of key 0's tenant.
func checkNamedBatch(what string, keys []block.Key) error {
	for i := range keys {
		k := keys[i]
		if err := k.Validate(); err != nil {
			return fmt.Errorf("%w: %s: key %d (%v): %w", meta.ErrBadRequest, what, i, k, err)
		}
		if k.Name == "" {
			return badRequest("%s: key %d (%v) is a chain key; only named keys have Redis semantics", what, i, k)
		}
		if k.Tenant != keys[0].Tenant {
			return badRequest("%s: key %d (%v) is not of tenant %q like key 0 (one tenant per call)", what, i, k, keys[0].Tenant)
		}
	}
	return nil
}

// SetExpiry sets (at[i] > 0, unix milliseconds on the master's clock) or
// clears (at[i] == 0, Redis PERSIST) the expiry of each of keys, named keys
// of one tenant. Without force it applies to a visible key only (present
// on a live node and not expired) and dst[i] says whether it applied; with
// force it applies to any key the index holds, hidden or not (the Redis
// front sets or clears the TTL of a value it has just written), and dst[i]
// says whether the key is present. An expiry at or before now hides the
// key at once (Redis EXPIRE with a past time deletes the key); its
// replicas stay indexed until eviction reclaims them, and the record goes
// with the key's last replica, so a key deleted and written again starts
// without one. The answers are appended to dst[:0]. An invalid key, a
// chain key, a second tenant, len(at) != len(keys) or a negative at[i] is
// an error wrapping ErrBadRequest, and nothing changes.
func (m *Master) SetExpiry(keys []block.Key, at []int64, force bool, dst []bool) ([]bool, error) {
	dst = dst[:0]
	if len(at) != len(keys) {
		return dst, badRequest("expire: %d expiry times for %d keys", len(at), len(keys))
	}
	if err := checkNamedBatch("expire", keys); err != nil {
		return dst, err
	}
	for i, a := range at {
		if a < 0 {
			return dst, badRequest("expire: key %d (%v): expiry %d is negative (want unix milliseconds, or 0 to clear)", i, keys[i], a)
		}
	}
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	for i, k := range keys {
		p := m.keyAt(k, false)
		s := p.s
		s.mu.Lock()
		e1 := p.entryOf(k)
		ok := e1 != 0 && (force || m.live(s, e1-1, nowNs))
		switch {
		case !ok:
		case at[i] == 0:
			delete(s.exp, e1-1)
		default:
			if s.exp == nil {
				s.exp = make(map[uint32]int64)
			}
			s.exp[e1-1] = at[i]
		}
		s.mu.Unlock()
		dst = append(dst, ok)
	}
	return dst, nil
}

// KeyInfo reports what the index knows of each of keys, named keys of one
// tenant (meta.KeyInfo: present, visible, expiry, holders). It changes
// nothing: no lease, no recency. The answers are appended to dst[:0],
// reusing the Holders slices of dst's elements. An invalid key, a chain
// key or a second tenant is an error wrapping ErrBadRequest.
func (m *Master) KeyInfo(keys []block.Key, dst []meta.KeyInfo) ([]meta.KeyInfo, error) {
	dst = dst[:0]
	if err := checkNamedBatch("key info", keys); err != nil {
		return dst, err
	}
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	for _, k := range keys {
		var holders []meta.NodeID
		if len(dst) < cap(dst) {
			holders = dst[: len(dst)+1 : len(dst)+1][len(dst)].Holders[:0]
		}
		p := m.keyAt(k, false)
		s := p.s
		s.mu.RLock()
		e1 := p.entryOf(k)
		var ki meta.KeyInfo
		if e1 != 0 {
			ki = meta.KeyInfo{Present: true, ExpireAt: s.exp[e1-1]}
			ki.Visible = m.live(s, e1-1, nowNs)
			for r := range s.replicas(e1 - 1) {
				holders = append(holders, m.nodeAt(r.node).id)
			}
		}
		s.mu.RUnlock()
		if len(holders) > 0 {
			slices.Sort(holders)
			ki.Holders = slices.Compact(holders)
		}
		dst = append(dst, ki)
	}
	return dst, nil
}

// scanEntry is a Scan candidate: its key's hash above the shard bits, and
// its name.
type scanEntry struct {
	h    uint64
	name string
}

// Scan enumerates the visible named keys of tenant with Redis SCAN
// semantics: start with cursor 0 and call again with the cursor returned
// until it is 0. Every key visible for the whole scan is returned at least
// once; a key may be returned more than once (never within one reply),
// and a key added or removed meanwhile may or may not be. count is a hint
// (DefaultScanCount when <= 0, at most MaxScanCount): a reply holds at
// most max(count, one group of keys sharing a hash) names, and stops once
// its names reach MaxScanBytes; it may hold none while the cursor is not
// 0. The names are appended to dst[:0], in the order of their keys'
// hashes.
//
// The cursor encodes a position in the index: its low 6 bits are a shard
// index (the low bits of a key's hash), its high 58 bits a lower bound on
// the high 58 bits of the hash of the shard's keys still to return. The
// keys of a shard come in hash order, so a key present throughout is
// passed exactly once, and the cursor stays valid whatever changes
// meanwhile (the shards never change). Every uint64 is a valid cursor.
// One call reads one shard, and the next ones while it has found fewer
// than count names and examined fewer than scanWork entries: O(keys of
// one shard), never of the whole index.
//
// An invalid tenant is an error wrapping ErrBadRequest.
func (m *Master) Scan(tenant string, cursor uint64, count int, dst []string) (next uint64, names []string, err error) {
	names = dst[:0]
	if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
		return 0, names, fmt.Errorf("%w: scan: tenant: %w", meta.ErrBadRequest, err)
	}
	if count <= 0 {
		count = DefaultScanCount
	}
	count = min(count, MaxScanCount)
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	th := block.FNV1a(tenant)
	tid := m.tenants.id(tenant)
	if tid == 0 {
		return 0, names, nil // the index never held a key of tenant
	}
	si, lb := int(cursor&(numShards-1)), cursor>>shardBits
	examined, size := 0, 0
	var cand []scanEntry
	for {
		s := &m.shards[si]
		cand = cand[:0]
		s.mu.RLock()
		examined += s.keys
		for ei := range s.entries() {
			e := s.ent(ei)
			if e.name == 0 || e.tenant != tid {
				continue
			}
			if h := keyHash(th, e.id()) >> shardBits; h >= lb && m.live(s, ei, nowNs) {
				cand = append(cand, scanEntry{h, s.nameOf(e)})
			}
		}
		s.mu.RUnlock()
		slices.SortFunc(cand, func(a, b scanEntry) int { return cmp.Or(cmp.Compare(a.h, b.h), cmp.Compare(a.name, b.name)) })
		i := 0
		for ; i < len(cand); i++ {
			full := len(names) >= count || size >= MaxScanBytes
			if full && (i == 0 || cand[i].h != cand[i-1].h) {
				break // never split a group of one hash: the cursor could not resume inside it
			}
			names = append(names, cand[i].name)
			size += len(cand[i].name)
		}
		if i < len(cand) {
			// i > 0: a shard is entered only with room for a name.
			return (cand[i-1].h+1)<<shardBits | uint64(si), names, nil
		}
		si++
		if si == numShards {
			return 0, names, nil
		}
		lb = 0
		if len(names) >= count || size >= MaxScanBytes || examined >= scanWork {
			return uint64(si), names, nil
		}
	}
}

// CountKeys returns the number of visible named keys of tenant (0 for an
// invalid tenant, which no key has): Redis DBSIZE. It scans the whole
// index, O(keys), under each shard's read lock in turn.
func (m *Master) CountKeys(tenant string) int64 {
	keys, _ := m.KeyCounts(tenant)
	return keys
}

// KeyCounts returns the number of visible named keys of tenant and how
// many of them have an expiry: Redis INFO keyspace's keys= and expires=
// for one tenant. Like CountKeys it scans the whole index.
func (m *Master) KeyCounts(tenant string) (keys, expiring int64) {
	_, nowNs := m.now()
	m.maybeExpire(nowNs)
	tid := m.tenants.id(tenant)
	if tid == 0 {
		return 0, 0
	}
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		for ei := range s.entries() {
			e := s.ent(ei)
			if e.name == 0 || e.tenant != tid || !m.live(s, ei, nowNs) {
				continue
			}
			keys++
			if s.exp[ei] > 0 {
				expiring++
			}
		}
		s.mu.RUnlock()
	}
	return keys, expiring
}
