// Package quota accounts a node's resident bytes per tenant and enforces
// per-tenant byte quotas (docs/design.md, "Tenants and authentication":
// quotas are per tenant, per node).
//
// A Ledger counts each resident block once, whichever tiers hold it (RAM,
// SSD or both: the tiers are inclusive, so a block in both still uses one
// block of the tenant's data). The store charges a block before storing it
// (Reserve, which refuses a block that would take the tenant over its
// quota), and releases it when the block leaves the last tier that held it
// (Release): a delete, an eviction from SSD, a RAM eviction with nothing
// below. A restart re-derives the usage from the SSD tier's scan (Set).
//
// Concurrency: a Ledger is safe for concurrent use; one mutex guards it.
// The accounting is exact while no operation on a key races another
// operation on the same key; such a race (a Delete between a Put's charge
// and its store) can leave one block's bytes counted or uncounted until
// the key is next stored or removed.
package quota

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// Options configure the quotas. The zero value is "no quota for anyone":
// usage is still accounted (for metrics) but nothing is refused.
type Options struct {
	// DefaultBytes is the quota of every tenant not in Tenants; 0 means
	// unlimited.
	DefaultBytes int64
	// Tenants overrides the quota of the named tenants ("" is the
	// unnamed tenant); 0 means unlimited for that tenant.
	Tenants map[string]int64
}

// Validate reports the first bad field, by name.
func (o Options) Validate() error {
	if o.DefaultBytes < 0 {
		return fmt.Errorf("quota: Options.DefaultBytes: %d is negative (0 means unlimited)", o.DefaultBytes)
	}
	names := make([]string, 0, len(o.Tenants))
	for name := range o.Tenants {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := (block.Key{Tenant: name}).Validate(); err != nil {
			return fmt.Errorf("quota: Options.Tenants[%q]: %w", name, err)
		}
		if v := o.Tenants[name]; v < 0 {
			return fmt.Errorf("quota: Options.Tenants[%q]: %d is negative (0 means unlimited)", name, v)
		}
	}
	return nil
}

// Limit returns tenant's quota in bytes (0: unlimited).
func (o Options) Limit(tenant string) int64 {
	if v, ok := o.Tenants[tenant]; ok {
		return v
	}
	return o.DefaultBytes
}

// TenantStats is one tenant's accounting.
type TenantStats struct {
	Tenant string
	// Bytes and Blocks are resident across all tiers, each block once.
	Bytes  int64
	Blocks int
	// Limit is the tenant's quota (0: unlimited).
	Limit int64
	// Rejections counts Reserves refused for this tenant.
	Rejections uint64
}

type account struct {
	bytes      int64
	blocks     int
	rejections uint64
}

// Ledger is the per-tenant accounting of one node. Build it with New.
type Ledger struct {
	opts Options

	mu       sync.Mutex
	sizes    map[block.Key]int64
	accounts map[string]*account
}

// New returns an empty ledger enforcing opts.
func New(opts Options) (*Ledger, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	tenants := make(map[string]int64, len(opts.Tenants))
	for k, v := range opts.Tenants {
		tenants[k] = v
	}
	opts.Tenants = tenants
	return &Ledger{opts: opts, sizes: make(map[block.Key]int64), accounts: make(map[string]*account)}, nil
}

// Limit returns tenant's quota in bytes (0: unlimited).
func (l *Ledger) Limit(tenant string) int64 { return l.opts.Limit(tenant) }

func (l *Ledger) account(tenant string) *account {
	a := l.accounts[tenant]
	if a == nil {
		a = &account{}
		l.accounts[tenant] = a
	}
	return a
}

// setLocked charges k at size, replacing any earlier charge of k.
func (l *Ledger) setLocked(k block.Key, size int64) {
	a := l.account(k.Tenant)
	if old, ok := l.sizes[k]; ok {
		a.bytes -= old
	} else {
		a.blocks++
	}
	a.bytes += size
	l.sizes[k] = size
}

// Reserve charges k at size bytes to its tenant before it is stored,
// replacing any earlier charge of k (a Put of a present key replaces it).
// If that would take the tenant over its quota it charges nothing and
// returns an error wrapping kvpool.ErrQuota that names the tenant, the quota
// and the usage.
func (l *Ledger) Reserve(k block.Key, size int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.account(k.Tenant)
	limit := l.opts.Limit(k.Tenant)
	after := a.bytes - l.sizes[k] + size
	if limit > 0 && after > limit {
		a.rejections++
		return fmt.Errorf("quota: store %s (%d bytes): tenant %q uses %d of its %d-byte quota, and this block would take it to %d: %w",
			k, size, k.Tenant, a.bytes, limit, after, kvpool.ErrQuota)
	}
	l.setLocked(k, size)
	return nil
}

// Set charges k at size bytes without checking the quota: for blocks
// already resident (found by the SSD scan at restart). A restart may find
// a tenant over a quota lowered since; its Puts are refused until
// deletes and evictions bring it under.
func (l *Ledger) Set(k block.Key, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(k, size)
}

// Release forgets k's charge: it left every tier. Releasing an uncharged
// key does nothing.
func (l *Ledger) Release(k block.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.sizes[k]
	if !ok {
		return
	}
	delete(l.sizes, k)
	a := l.accounts[k.Tenant]
	a.bytes -= old
	a.blocks--
}

// Usage returns the bytes tenant has resident.
func (l *Ledger) Usage(tenant string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.accounts[tenant]; a != nil {
		return a.bytes
	}
	return 0
}

// Stats returns every tenant seen so far (resident blocks or a refused
// Reserve), sorted by name. A tenant whose blocks are all gone stays
// listed with zero bytes, so its counters never go backwards.
func (l *Ledger) Stats() []TenantStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]TenantStats, 0, len(l.accounts))
	for name, a := range l.accounts {
		out = append(out, TenantStats{Tenant: name, Bytes: a.bytes, Blocks: a.blocks, Limit: l.opts.Limit(name), Rejections: a.rejections})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}
