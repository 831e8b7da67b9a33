package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/respserver"
	"github.com/kvpool/kvpool/internal/node/store"
	"github.com/kvpool/kvpool/internal/tier"
)

// KeyIndex is the master's index as the Redis front uses it: the
// master-protocol client (*masterclient.Client) implements it.
type KeyIndex interface {
	Locate(ctx context.Context, keys []block.Key, lease bool, dst *masterclient.LookupResult) error
	ExistsKeys(ctx context.Context, keys []block.Key, dst []bool) ([]bool, error)
	PlaceObjects(ctx context.Context, objs []meta.Object, replicas int, hint meta.NodeID, strategy meta.Strategy, dst *masterclient.Placement) error
	Nodes(ctx context.Context) ([]meta.NodeStatus, error)
	KeyInfo(ctx context.Context, keys []block.Key, dst []meta.KeyInfo) ([]meta.KeyInfo, error)
	SetExpiry(ctx context.Context, keys []block.Key, at []int64, force bool, dst []bool) ([]bool, error)
	Scan(ctx context.Context, tenant string, cursor uint64, count int) (uint64, []string, error)
	CountKeys(ctx context.Context, tenant string) (int64, error)
	KeyCounts(ctx context.Context, tenant string) (keys, expiring int64, err error)
}

// respBackend is the pool as the node's Redis front serves it: the
// node's own store for its copies, the other nodes over the node protocol
// for theirs, and the master's index for where every key is, placement
// and expiry.
//
// Read-your-writes across fronts: Set and Delete return only once every
// node they changed has reported the change to the master (the node
// protocol's SYNC, the agent's Sync for this node), so a GET on any node's
// front afterwards finds the new value, and never an old copy: a Set that
// places a key on other nodes than the ones holding it deletes the old
// copies before it returns.
type respBackend struct {
	st       *store.Store
	ag       *agent
	idx      KeyIndex
	self     meta.NodeID
	token    []byte
	replicas int
	policy   string

	mu    sync.Mutex
	pools map[poolKey]*nodeclient.Pool
	addrs map[meta.NodeID]string

	hitsRAM, hitsSSD, hitsRemote, misses, corrupt atomic.Uint64
}

// poolKey is a connection pool's node and tenant: node-protocol
// connections are bound to one tenant by their hello.
type poolKey struct{ addr, tenant string }

var _ respserver.Backend = (*respBackend)(nil)

func (b *respBackend) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, p := range b.pools {
		errs = append(errs, p.Close())
	}
	b.pools = nil
	return errors.Join(errs...)
}

// pool returns the connection pool to node id (at addr when known) for
// tenant.
func (b *respBackend) pool(ctx context.Context, id meta.NodeID, addr, tenant string) (*nodeclient.Pool, error) {
	b.mu.Lock()
	if addr == "" {
		addr = b.addrs[id]
	} else {
		b.addrs[id] = addr
	}
	b.mu.Unlock()
	if addr == "" {
		nodes, err := b.idx.Nodes(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the nodes: %w", err)
		}
		b.mu.Lock()
		for _, n := range nodes {
			b.addrs[n.Info.ID] = n.Info.Addr
		}
		addr = b.addrs[id]
		b.mu.Unlock()
		if addr == "" {
			return nil, fmt.Errorf("node %q: the master does not list it", id)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pools == nil {
		return nil, kvpool.ErrClosed
	}
	k := poolKey{addr, tenant}
	if p := b.pools[k]; p != nil {
		return p, nil
	}
	p, err := nodeclient.NewPool(addr, nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Tenant: tenant, Token: b.token}})
	if err != nil {
		return nil, fmt.Errorf("node %q at %s: %w", id, addr, err)
	}
	b.pools[k] = p
	return p, nil
}

// Get reads name from the replicas the master lists, this node's first
// (RAM before SSD, then the others in the master's order), verifying
// every copy before a byte of it reaches fn.
func (b *respBackend) Get(ctx context.Context, tenant, name string, fn func([][]byte) error) error {
	k := block.Named(tenant, name)
	var res masterclient.LookupResult
	if err := b.idx.Locate(ctx, []block.Key{k}, true, &res); err != nil {
		return fmt.Errorf("locate %q: %w", name, err)
	}
	var reps []masterclient.Replica
	if res.Hit > 0 || len(res.Ends) > 0 {
		reps = res.Block(0)
	}
	// This node's copy first: no network hop.
	local := slices.IndexFunc(reps, func(r masterclient.Replica) bool { return r.Node == b.self })
	if local >= 0 {
		err := b.getLocal(ctx, k, fn)
		if errors.Is(err, errLocalCorrupt) {
			// The RAM copy was dropped; an SSD copy (verified by the
			// store) may remain.
			err = b.getLocal(ctx, k, fn)
		}
		if err == nil || !errors.Is(err, kvpool.ErrNotFound) && !errors.Is(err, errLocalCorrupt) {
			return err
		}
	}
	var firstErr error
	var buf []byte
	for _, r := range reps {
		if r.Node == b.self {
			continue
		}
		p, err := b.pool(ctx, r.Node, r.Addr, tenant)
		if err != nil {
			firstErr = cmpOr(firstErr, err)
			continue
		}
		payload, _, err := p.GetNamed(ctx, name, buf)
		switch {
		case err == nil:
			b.hitsRemote.Add(1)
			return fn([][]byte{payload})
		case errors.Is(err, kvpool.ErrCorrupt):
			// nodeclient verified it against the key: none of it is sent.
			b.corrupt.Add(1)
		case errors.Is(err, kvpool.ErrNotFound):
		default:
			firstErr = cmpOr(firstErr, fmt.Errorf("read %q from node %q: %w", name, r.Node, err))
		}
		buf = payload[:0]
	}
	if firstErr != nil && ctx.Err() != nil {
		return firstErr
	}
	b.misses.Add(1)
	return fmt.Errorf("get %q: %w", name, kvpool.ErrNotFound)
}

// getLocal serves k from this node's store, verified: a RAM copy is
// checked in place (zero copy), an SSD copy was checked by the store.
func (b *respBackend) getLocal(ctx context.Context, k block.Key, fn func([][]byte) error) error {
	var from store.Location
	corrupt := false
	err := b.st.View(ctx, k, func(p tier.Segments, sum uint32, loc store.Location) error {
		if block.ChecksumSegments(k, p) != sum {
			corrupt = true
			return kvpool.ErrCorrupt
		}
		from = loc
		return fn(p)
	})
	if corrupt {
		// Drop the bad copy so that nobody reads it again; its loss
		// reaches the master with the next report.
		b.corrupt.Add(1)
		b.st.DropRAM(ctx, k)
		return errLocalCorrupt
	}
	if err != nil {
		if errors.Is(err, kvpool.ErrCorrupt) {
			// The SSD copy failed the store's verification (dropped
			// there, reported as a miss): a corrupt copy this front met.
			b.corrupt.Add(1)
		}
		return err
	}
	if from == store.InSSD {
		b.hitsSSD.Add(1)
	} else {
		b.hitsRAM.Add(1)
	}
	return nil
}

// errLocalCorrupt: this node's RAM copy failed verification and was
// dropped.
var errLocalCorrupt = errors.New("this node's copy failed verification")

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Set stores value on the nodes the master places it on (this node
// preferred), waits until the master's index has every copy, deletes the
// copies of an older value on other nodes, and sets the expiry.
func (b *respBackend) Set(ctx context.Context, tenant, name string, value []byte, o respserver.SetOptions) error {
	k := block.Named(tenant, name)
	keys := []block.Key{k}
	info, err := b.idx.KeyInfo(ctx, keys, nil)
	if err != nil {
		return fmt.Errorf("set %q: key info: %w", name, err)
	}
	var pl masterclient.Placement
	if err := b.idx.PlaceObjects(ctx, []meta.Object{{Key: k, Size: int64(len(value))}}, b.replicas, b.self, meta.LocalFirst, &pl); err != nil {
		return fmt.Errorf("set %q: placement: %w", name, err)
	}
	targets := pl.Block(0)
	sum := block.Checksum(k, value)
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { errs[i] = b.putOn(ctx, t, tenant, k, value, sum) })
	}
	wg.Wait()
	stored := 0
	for _, err := range errs {
		if err == nil {
			stored++
		}
	}
	if stored == 0 {
		return fmt.Errorf("set %q (%d bytes): %w", name, len(value), errors.Join(errs...))
	}
	// Old copies elsewhere must go before the new value is answered, or a
	// reader could meet them.
	var stale []meta.NodeID
	for _, h := range info[0].Holders {
		if !slices.ContainsFunc(targets, func(t masterclient.Target) bool { return t.Node == h }) {
			stale = append(stale, h)
		}
	}
	if err := b.deleteOn(ctx, tenant, k, stale); err != nil {
		return fmt.Errorf("set %q: remove the old value's copies: %w", name, err)
	}
	at := o.ExpireAt
	if o.KeepTTL && info[0].Visible {
		at = info[0].ExpireAt
	}
	if at != 0 || info[0].ExpireAt != 0 {
		if _, err := b.idx.SetExpiry(ctx, keys, []int64{at}, true, nil); err != nil {
			return fmt.Errorf("set %q: expiry: %w", name, err)
		}
	}
	return nil
}

// putOn stores one copy on node t and waits until the master has it.
func (b *respBackend) putOn(ctx context.Context, t masterclient.Target, tenant string, k block.Key, value []byte, sum uint32) error {
	n := t.Node
	if n == b.self {
		if _, err := b.st.Put(ctx, k, value, sum); err != nil {
			return fmt.Errorf("store on this node: %w", err)
		}
		return b.syncSelf(ctx)
	}
	p, err := b.pool(ctx, n, t.Addr, tenant)
	if err != nil {
		return err
	}
	if err := p.PutNamed(ctx, k.Name, value); err != nil {
		return fmt.Errorf("store on node %q: %w", n, err)
	}
	if err := p.Sync(ctx); err != nil {
		return fmt.Errorf("node %q: wait for the master's index: %w", n, err)
	}
	return nil
}

func (b *respBackend) syncSelf(ctx context.Context) error {
	if b.ag == nil {
		return nil
	}
	return b.ag.Sync(ctx)
}

// deleteOn deletes k from nodes and waits until the master knows.
func (b *respBackend) deleteOn(ctx context.Context, tenant string, k block.Key, nodes []meta.NodeID) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			if n == b.self {
				if err := b.st.Delete(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
					errs[i] = fmt.Errorf("delete on this node: %w", err)
					return
				}
				errs[i] = b.syncSelf(ctx)
				return
			}
			p, err := b.pool(ctx, n, "", tenant)
			if err != nil {
				errs[i] = err
				return
			}
			if err := p.DeleteNamed(ctx, k.Name); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
				errs[i] = fmt.Errorf("delete on node %q: %w", n, err)
				return
			}
			if err := p.Sync(ctx); err != nil {
				errs[i] = fmt.Errorf("node %q: wait for the master's index: %w", n, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (b *respBackend) keys(tenant string, names []string) []block.Key {
	ks := make([]block.Key, len(names))
	for i, n := range names {
		ks[i] = block.Named(tenant, n)
	}
	return ks
}

func (b *respBackend) Exists(ctx context.Context, tenant string, names []string) ([]bool, error) {
	out, err := b.idx.ExistsKeys(ctx, b.keys(tenant, names), nil)
	if err != nil {
		return nil, fmt.Errorf("exists of %d keys: %w", len(names), err)
	}
	return out, nil
}

func (b *respBackend) Delete(ctx context.Context, tenant string, names []string) (int, error) {
	keys := b.keys(tenant, names)
	info, err := b.idx.KeyInfo(ctx, keys, nil)
	if err != nil {
		return 0, fmt.Errorf("delete %d keys: key info: %w", len(names), err)
	}
	n := 0
	var errs []error
	for i, k := range keys {
		if info[i].Visible {
			n++
		}
		if len(info[i].Holders) == 0 {
			continue
		}
		if err := b.deleteOn(ctx, tenant, k, info[i].Holders); err != nil {
			errs = append(errs, fmt.Errorf("delete %q: %w", names[i], err))
		}
	}
	return n, errors.Join(errs...)
}

func (b *respBackend) Len(ctx context.Context, tenant, name string) (int64, error) {
	var res masterclient.LookupResult
	if err := b.idx.Locate(ctx, []block.Key{block.Named(tenant, name)}, false, &res); err != nil {
		return 0, fmt.Errorf("locate %q: %w", name, err)
	}
	if len(res.Ends) == 0 {
		return 0, kvpool.ErrNotFound
	}
	reps := res.Block(0)
	if len(reps) == 0 {
		return 0, kvpool.ErrNotFound
	}
	return reps[0].Size, nil
}

func (b *respBackend) ExpireAt(ctx context.Context, tenant, name string) (int64, error) {
	info, err := b.idx.KeyInfo(ctx, []block.Key{block.Named(tenant, name)}, nil)
	if err != nil {
		return 0, fmt.Errorf("key info of %q: %w", name, err)
	}
	if !info[0].Visible {
		return 0, kvpool.ErrNotFound
	}
	return info[0].ExpireAt, nil
}

func (b *respBackend) SetExpireAt(ctx context.Context, tenant, name string, at int64) (bool, error) {
	ok, err := b.idx.SetExpiry(ctx, []block.Key{block.Named(tenant, name)}, []int64{at}, false, nil)
	if err != nil {
		return false, fmt.Errorf("expiry of %q: %w", name, err)
	}
	return ok[0], nil
}

func (b *respBackend) Scan(ctx context.Context, tenant string, cursor uint64, count int) (uint64, []string, error) {
	next, names, err := b.idx.Scan(ctx, tenant, cursor, count)
	if err != nil {
		return 0, nil, fmt.Errorf("scan from cursor %d: %w", cursor, err)
	}
	return next, names, nil
}

func (b *respBackend) Count(ctx context.Context, tenant string) (int64, error) {
	n, err := b.idx.CountKeys(ctx, tenant)
	if err != nil {
		return 0, fmt.Errorf("count keys: %w", err)
	}
	return n, nil
}

func (b *respBackend) Info(ctx context.Context, tenant string) (respserver.Info, error) {
	s := b.st.Stats()
	inf := respserver.Info{
		Node:          string(b.self),
		UsedBytes:     s.RAM.HeldBytes,
		MaxBytes:      s.RAM.CapacityBytes,
		Policy:        "allkeys-" + b.policy,
		PolicyKvpool:  b.policy,
		HitsLocalRAM:  b.hitsRAM.Load(),
		HitsLocalSSD:  b.hitsSSD.Load(),
		HitsRemote:    b.hitsRemote.Load(),
		Misses:        b.misses.Load(),
		CorruptCopies: b.corrupt.Load(), // the front's own, as /metrics shows it; the tiers' are in Tiers
		Promotions:    s.Promotion.Completed,
	}
	tiers := []struct {
		name string
		t    tier.Stats
		on   bool
	}{{"ram", s.RAM, true}, {"ssd", s.SSD, s.SSDOn}}
	for _, t := range tiers {
		if t.on {
			inf.Tiers = append(inf.Tiers, respserver.TierInfo{Name: t.name, Objects: int64(t.t.Blocks), Bytes: t.t.Bytes,
				Capacity: t.t.CapacityBytes, Hits: t.t.Hits, Misses: t.t.Misses, Evictions: t.t.Evicted, Corruptions: t.t.Corruptions})
		}
	}
	keys, expiring, err := b.idx.KeyCounts(ctx, tenant)
	if err != nil {
		return inf, fmt.Errorf("count keys: %w", err)
	}
	inf.Keys, inf.Expires = keys, expiring
	nodes, err := b.idx.Nodes(ctx)
	if err != nil {
		return inf, fmt.Errorf("list nodes: %w", err)
	}
	for _, nd := range nodes {
		if nd.Alive {
			inf.Nodes++
		}
	}
	return inf, nil
}
