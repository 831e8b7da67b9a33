package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

	// own is what the master last said of keys this node holds, so that
	// a GET of one serves it without a round trip (ownWindow); touch
	// reports those reads to the master's eviction policy.
	own   *ownCache
	touch *toucher

	mu    sync.Mutex
	pools map[poolKey]*nodeclient.Pool
	addrs map[meta.NodeID]string

	hitsRAM, hitsSSD, hitsRemote, misses, corrupt atomic.Uint64
	// ownReads counts GETs served from this node's copy without asking
	// the master; ownSets the SETs that overwrote this node's only copy
	// in place (one master round trip instead of three).
	ownReads, ownSets atomic.Uint64
}

// newRespBackend returns the front's backend; close stops it.
func newRespBackend(st *store.Store, ag *agent, idx KeyIndex, self meta.NodeID, token []byte, replicas int, policy string) *respBackend {
	return &respBackend{
		st: st, ag: ag, idx: idx, self: self, token: token, replicas: replicas, policy: policy,
		own: newOwnCache(), touch: newToucher(idx),
		pools: map[poolKey]*nodeclient.Pool{}, addrs: map[meta.NodeID]string{},
	}
}

// poolKey is a connection pool's node and tenant: node-protocol
// connections are bound to one tenant by their hello.
type poolKey struct{ addr, tenant string }

var _ respserver.Backend = (*respBackend)(nil)

func (b *respBackend) close() error {
	b.touch.close()
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

// Get reads name from this node's own copy when it may (ownWindow: the
// master listed this copy a moment ago), else from the replicas the
// master lists, this node's first (RAM before SSD, then the others in the
// master's order), verifying every copy before a byte of it reaches fn.
func (b *respBackend) Get(ctx context.Context, tenant, name string, fn func([][]byte) error) error {
	k := block.Named(tenant, name)
	if e, ok := b.own.get(k, time.Now().UnixMilli()); ok {
		_, err := b.getLocal(ctx, k, int64(e.sum), fn)
		if err == nil {
			b.ownReads.Add(1)
			b.touch.add(k)
			return nil
		}
		b.own.drop(k)
		if !errors.Is(err, errNotOwn) && !errors.Is(err, kvpool.ErrNotFound) && !errors.Is(err, errLocalCorrupt) {
			return err
		}
	} else if b.st.Contains(k) {
		// This node holds a copy: one question to the master (is it the
		// key's current value, and until when) serves it, and the next
		// reads within ownWindow need none.
		served, err := b.getOwn(ctx, k, fn)
		if served || err != nil {
			return err
		}
	}
	return b.getListed(ctx, k, fn)
}

// getOwn serves k from this node's copy if the master lists this node
// among k's holders, and records what the master said. served false (and
// no error) leaves the read to getListed.
func (b *respBackend) getOwn(ctx context.Context, k block.Key, fn func([][]byte) error) (served bool, err error) {
	gen := b.own.mark(k)
	info, err := b.idx.KeyInfo(ctx, []block.Key{k}, nil)
	if err != nil {
		return false, fmt.Errorf("key info of %q: %w", k.Name, err)
	}
	if !info[0].Visible {
		b.misses.Add(1)
		return false, fmt.Errorf("get %q: %w", k.Name, kvpool.ErrNotFound)
	}
	if !slices.Contains(info[0].Holders, b.self) {
		return false, nil
	}
	sum, err := b.getLocal(ctx, k, anySum, fn)
	if errors.Is(err, errLocalCorrupt) || errors.Is(err, kvpool.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	b.own.put(k, sum, info[0].ExpireAt, gen)
	b.touch.add(k)
	return true, nil
}

// getListed reads k from the replicas the master lists.
func (b *respBackend) getListed(ctx context.Context, k block.Key, fn func([][]byte) error) error {
	tenant, name := k.Tenant, k.Name
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
		_, err := b.getLocal(ctx, k, anySum, fn)
		if errors.Is(err, errLocalCorrupt) {
			// The RAM copy was dropped; an SSD copy (verified by the
			// store) may remain.
			_, err = b.getLocal(ctx, k, anySum, fn)
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

// anySum tells getLocal to serve whatever copy this node holds.
const anySum = -1

// getLocal serves k from this node's store, verified: a RAM copy is
// checked in place (zero copy), an SSD copy was checked by the store.
// With want >= 0 it serves only the copy whose checksum is want
// (errNotOwn otherwise: the copy was replaced). It returns the checksum
// of the copy served.
func (b *respBackend) getLocal(ctx context.Context, k block.Key, want int64, fn func([][]byte) error) (uint32, error) {
	var from store.Location
	var served uint32
	corrupt := false
	err := b.st.View(ctx, k, func(p tier.Segments, sum uint32, loc store.Location) error {
		if want >= 0 && sum != uint32(want) {
			return errNotOwn
		}
		if block.ChecksumSegments(k, p) != sum {
			corrupt = true
			return kvpool.ErrCorrupt
		}
		from, served = loc, sum
		return fn(p)
	})
	if corrupt {
		// Drop the bad copy so that nobody reads it again; its loss
		// reaches the master with the next report.
		b.corrupt.Add(1)
		b.st.DropRAM(ctx, k)
		return 0, errLocalCorrupt
	}
	if err != nil {
		if errors.Is(err, kvpool.ErrCorrupt) {
			// The SSD copy failed the store's verification (dropped
			// there, reported as a miss): a corrupt copy this front met.
			b.corrupt.Add(1)
		}
		return 0, err
	}
	if from == store.InSSD {
		b.hitsSSD.Add(1)
	} else {
		b.hitsRAM.Add(1)
	}
	return served, nil
}

// errNotOwn: this node's copy is not the one the front last learnt of.
var errNotOwn = errors.New("this node's copy was replaced")

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
// copies of an older value on other nodes, and sets the expiry. A value
// that replaces this node's only copy with one of the same size and no
// expiry on either is written in place: the master's index already says
// all it would learn.
func (b *respBackend) Set(ctx context.Context, tenant, name string, value []byte, o respserver.SetOptions) error {
	k := block.Named(tenant, name)
	b.own.drop(k)
	gen := b.own.mark(k)
	keys := []block.Key{k}
	obj := []meta.Object{{Key: k, Size: int64(len(value))}}
	sum := block.Checksum(k, value)
	var (
		info     []meta.KeyInfo
		pl       masterclient.Placement
		infoErr  error
		placeErr error
		placed   bool
	)
	if b.st.Contains(k) {
		// Maybe an overwrite in place: ask first, place only if not.
		info, infoErr = b.idx.KeyInfo(ctx, keys, nil)
	} else {
		// A new key here: both questions at once.
		var wg sync.WaitGroup
		wg.Go(func() { placeErr = b.idx.PlaceObjects(ctx, obj, b.replicas, b.self, meta.LocalFirst, &pl) })
		info, infoErr = b.idx.KeyInfo(ctx, keys, nil)
		wg.Wait()
		placed = true
	}
	if infoErr != nil {
		return fmt.Errorf("set %q: key info: %w", name, infoErr)
	}
	ki := info[0]
	at := o.ExpireAt
	if o.KeepTTL && ki.Visible {
		at = ki.ExpireAt
	}
	if !placed {
		done, err := b.overwriteOwn(ctx, k, ki, value, sum, at, gen)
		if done || err != nil {
			return err
		}
		placeErr = b.idx.PlaceObjects(ctx, obj, b.replicas, b.self, meta.LocalFirst, &pl)
	}
	if placeErr != nil {
		return fmt.Errorf("set %q: placement: %w", name, placeErr)
	}
	targets := pl.Block(0)
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
	// Old copies must go before the new value is answered, or a reader
	// could meet them: on the nodes not placed on, and on a target whose
	// put failed (it may still hold the old value).
	var stale []meta.NodeID
	for _, h := range ki.Holders {
		i := slices.IndexFunc(targets, func(t masterclient.Target) bool { return t.Node == h })
		if i < 0 || errs[i] != nil {
			stale = append(stale, h)
		}
	}
	if err := b.deleteOn(ctx, tenant, k, stale); err != nil {
		return fmt.Errorf("set %q: remove the old value's copies: %w", name, err)
	}
	if at != 0 || ki.ExpireAt != 0 {
		if _, err := b.idx.SetExpiry(ctx, keys, []int64{at}, true, nil); err != nil {
			return fmt.Errorf("set %q: expiry: %w", name, err)
		}
		// A GET meanwhile may have learnt the old expiry of an unchanged
		// value (same checksum): what it learnt must not stick.
		b.own.drop(k)
		gen = b.own.mark(k)
	}
	if i := slices.IndexFunc(targets, func(t masterclient.Target) bool { return t.Node == b.self }); i >= 0 && errs[i] == nil {
		b.own.put(k, sum, at, gen)
	}
	return nil
}

// overwriteOwn writes value over this node's copy of k when the master
// lists that copy as k's only one (and the front writes one replica), the
// sizes match and neither the old value nor the new one expires: then the
// master's index stays right as it is, and no placement or report is
// needed. done false (and no error) leaves the write to Set.
func (b *respBackend) overwriteOwn(ctx context.Context, k block.Key, ki meta.KeyInfo, value []byte, sum uint32, at int64, gen uint64) (done bool, err error) {
	if b.replicas != 1 || at != 0 || ki.ExpireAt != 0 || len(ki.Holders) != 1 || ki.Holders[0] != b.self {
		return false, nil
	}
	if b.st.Locate([]block.Key{k})[0]&store.InRAM == 0 {
		return false, nil // an SSD copy: reading its size costs a read
	}
	size := -1
	_ = b.st.View(ctx, k, func(p tier.Segments, _ uint32, _ store.Location) error {
		size = p.Len()
		return nil
	})
	if size != len(value) {
		return false, nil
	}
	if _, err := b.st.Put(ctx, k, value, sum); err != nil {
		return true, fmt.Errorf("set %q (%d bytes): store on this node: %w", k.Name, len(value), err)
	}
	b.own.put(k, sum, 0, gen)
	b.ownSets.Add(1)
	return true, nil
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
				b.own.drop(k)
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
		b.own.drop(k)
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
	k := block.Named(tenant, name)
	b.own.drop(k)
	ok, err := b.idx.SetExpiry(ctx, []block.Key{k}, []int64{at}, false, nil)
	b.own.drop(k) // a GET may have learnt the old expiry meanwhile
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
		OwnReads:      b.ownReads.Load(),
		InPlaceSets:   b.ownSets.Load(),
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
