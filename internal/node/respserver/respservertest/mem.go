// Package respservertest provides an in-memory respserver.Backend, the
// pool a Redis front serves in tests of the front itself: Redis semantics
// with none of the cluster.
package respservertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/node/respserver"
)

// Mem is an in-memory Backend: a map per tenant, expiries against Now. It
// is safe for concurrent use. Its zero value is not usable; call New.
type Mem struct {
	// Now is the clock expiries are judged by (time.Now when nil); set it
	// before use.
	Now func() time.Time

	mu      sync.Mutex
	tenants map[string]map[string]*entry
	// Fail, when not nil, is returned by every call (a pool that is down).
	fail error
}

type entry struct {
	value    []byte
	expireAt int64
}

var _ respserver.Backend = (*Mem)(nil)

// New returns an empty Mem.
func New() *Mem { return &Mem{tenants: map[string]map[string]*entry{}} }

// SetFail makes every later call fail with err (nil: succeed again).
func (m *Mem) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *Mem) now() int64 {
	if m.Now != nil {
		return m.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// live returns name's entry when present and not expired. Called with mu
// held.
func (m *Mem) live(tenant, name string) *entry {
	e := m.tenants[tenant][name]
	if e == nil {
		return nil
	}
	if e.expireAt != 0 && e.expireAt <= m.now() {
		delete(m.tenants[tenant], name)
		return nil
	}
	return e
}

func (m *Mem) Get(_ context.Context, tenant, name string, fn func([][]byte) error) error {
	m.mu.Lock()
	if m.fail != nil {
		m.mu.Unlock()
		return m.fail
	}
	e := m.live(tenant, name)
	var v []byte
	if e != nil {
		v = e.value
	}
	m.mu.Unlock()
	if e == nil {
		return fmt.Errorf("get %q: %w", name, kvpool.ErrNotFound)
	}
	// Two pieces when it can, as a RAM tier's chunks would be.
	if len(v) > 1 {
		return fn([][]byte{v[:len(v)/2], v[len(v)/2:]})
	}
	return fn([][]byte{v})
}

func (m *Mem) Set(_ context.Context, tenant, name string, value []byte, o respserver.SetOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	t := m.tenants[tenant]
	if t == nil {
		t = map[string]*entry{}
		m.tenants[tenant] = t
	}
	at := o.ExpireAt
	if o.KeepTTL {
		if old := m.live(tenant, name); old != nil {
			at = old.expireAt
		}
	}
	t[name] = &entry{value: slices.Clone(value), expireAt: at}
	return nil
}

func (m *Mem) Exists(_ context.Context, tenant string, names []string) ([]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	out := make([]bool, len(names))
	for i, n := range names {
		out[i] = m.live(tenant, n) != nil
	}
	return out, nil
}

func (m *Mem) Delete(_ context.Context, tenant string, names []string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	n := 0
	for _, name := range names {
		if m.live(tenant, name) != nil {
			n++
		}
		delete(m.tenants[tenant], name)
	}
	return n, nil
}

func (m *Mem) Len(_ context.Context, tenant, name string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	e := m.live(tenant, name)
	if e == nil {
		return 0, kvpool.ErrNotFound
	}
	return int64(len(e.value)), nil
}

func (m *Mem) ExpireAt(_ context.Context, tenant, name string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	e := m.live(tenant, name)
	if e == nil {
		return 0, kvpool.ErrNotFound
	}
	return e.expireAt, nil
}

func (m *Mem) SetExpireAt(_ context.Context, tenant, name string, at int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return false, m.fail
	}
	e := m.live(tenant, name)
	if e == nil {
		return false, nil
	}
	e.expireAt = at
	m.live(tenant, name) // a past time expires it now
	return true, nil
}

// Scan returns the names in sorted order, count at a time; the cursor is
// the index of the next name.
func (m *Mem) Scan(_ context.Context, tenant string, cursor uint64, count int) (uint64, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, nil, m.fail
	}
	var names []string
	for n := range m.tenants[tenant] {
		if m.live(tenant, n) != nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if cursor >= uint64(len(names)) {
		return 0, nil, nil
	}
	end := min(int(cursor)+count, len(names))
	next := uint64(end)
	if end == len(names) {
		next = 0
	}
	return next, names[cursor:end], nil
}

func (m *Mem) Count(_ context.Context, tenant string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	n := int64(0)
	for name := range m.tenants[tenant] {
		if m.live(tenant, name) != nil {
			n++
		}
	}
	return n, nil
}

func (m *Mem) Info(_ context.Context, tenant string) (respserver.Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return respserver.Info{}, m.fail
	}
	var keys, bytes int64
	for name, e := range m.tenants[tenant] {
		if m.live(tenant, name) != nil {
			keys++
			bytes += int64(len(e.value))
		}
	}
	return respserver.Info{Node: "mem", UsedBytes: bytes, MaxBytes: 1 << 30, Policy: "allkeys-lru", PolicyKvpool: "lru",
		Keys: keys, Tiers: []respserver.TierInfo{{Name: "ram", Objects: keys, Bytes: bytes, Capacity: 1 << 30}}}, nil
}
