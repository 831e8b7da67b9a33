package node

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
)

// ClosableMaster is a MasterClient that holds connections to release
// (masterclient.Client).
type ClosableMaster interface {
	MasterClient
	io.Closer
}

// LazyMaster is a MasterClient that connects on first use: a node whose
// master is not up yet still starts and serves, and its agent retries the
// connection with backoff (a client that has connected once redials by
// itself). It is safe for concurrent use.
type LazyMaster struct {
	dial func(ctx context.Context) (ClosableMaster, error)

	mu     sync.Mutex
	c      ClosableMaster
	closed bool
}

var _ MasterClient = (*LazyMaster)(nil)

// NewLazyMaster returns a LazyMaster that connects with dial.
func NewLazyMaster(dial func(ctx context.Context) (ClosableMaster, error)) *LazyMaster {
	return &LazyMaster{dial: dial}
}

// client returns the connected client, dialling it if needed.
func (l *LazyMaster) client(ctx context.Context) (MasterClient, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errLazyClosed
	}
	if l.c == nil {
		c, err := l.dial(ctx)
		if err != nil {
			return nil, err
		}
		l.c = c
	}
	return l.c, nil
}

// errLazyClosed is returned by calls after Close.
var errLazyClosed = errors.New("node: master client closed")

// Register connects if needed and registers.
func (l *LazyMaster) Register(ctx context.Context, info meta.NodeInfo, inv meta.Inventory, usage meta.NodeUsage) (meta.RegisterReply, error) {
	c, err := l.client(ctx)
	if err != nil {
		return meta.RegisterReply{}, err
	}
	return c.Register(ctx, info, inv, usage)
}

// Heartbeat connects if needed and heartbeats.
func (l *LazyMaster) Heartbeat(ctx context.Context, id meta.NodeID, s meta.Session, d meta.Delta, u meta.NodeUsage, ssdHits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	c, err := l.client(ctx)
	if err != nil {
		return meta.HeartbeatReply{}, err
	}
	return c.Heartbeat(ctx, id, s, d, u, ssdHits, done)
}

// Close closes the client if it was connected; later calls fail.
func (l *LazyMaster) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.c == nil {
		return nil
	}
	return l.c.Close()
}

// keys returns the connected client as a KeyIndex (the master-protocol
// client is one), dialling it if needed.
func (l *LazyMaster) keys(ctx context.Context) (KeyIndex, error) {
	c, err := l.client(ctx)
	if err != nil {
		return nil, err
	}
	k, ok := c.(KeyIndex)
	if !ok {
		return nil, errors.New("node: the master client does not serve key queries (the Redis front needs the master protocol client)")
	}
	return k, nil
}

var _ KeyIndex = (*LazyMaster)(nil)

// Locate connects if needed and locates keys.
func (l *LazyMaster) Locate(ctx context.Context, keys []block.Key, lease bool, dst *masterclient.LookupResult) error {
	k, err := l.keys(ctx)
	if err != nil {
		return err
	}
	return k.Locate(ctx, keys, lease, dst)
}

// ExistsKeys connects if needed and asks which keys exist.
func (l *LazyMaster) ExistsKeys(ctx context.Context, keys []block.Key, dst []bool) ([]bool, error) {
	k, err := l.keys(ctx)
	if err != nil {
		return nil, err
	}
	return k.ExistsKeys(ctx, keys, dst)
}

// PlaceObjects connects if needed and places objects.
func (l *LazyMaster) PlaceObjects(ctx context.Context, objs []meta.Object, replicas int, hint meta.NodeID, strategy meta.Strategy, dst *masterclient.Placement) error {
	k, err := l.keys(ctx)
	if err != nil {
		return err
	}
	return k.PlaceObjects(ctx, objs, replicas, hint, strategy, dst)
}

// Nodes connects if needed and lists the nodes.
func (l *LazyMaster) Nodes(ctx context.Context) ([]meta.NodeStatus, error) {
	k, err := l.keys(ctx)
	if err != nil {
		return nil, err
	}
	return k.Nodes(ctx)
}

// KeyInfo connects if needed and asks about keys.
func (l *LazyMaster) KeyInfo(ctx context.Context, keys []block.Key, dst []meta.KeyInfo) ([]meta.KeyInfo, error) {
	k, err := l.keys(ctx)
	if err != nil {
		return nil, err
	}
	return k.KeyInfo(ctx, keys, dst)
}

// SetExpiry connects if needed and sets expiries.
func (l *LazyMaster) SetExpiry(ctx context.Context, keys []block.Key, at []int64, force bool, dst []bool) ([]bool, error) {
	k, err := l.keys(ctx)
	if err != nil {
		return nil, err
	}
	return k.SetExpiry(ctx, keys, at, force, dst)
}

// Scan connects if needed and scans a tenant's names.
func (l *LazyMaster) Scan(ctx context.Context, tenant string, cursor uint64, count int) (uint64, []string, error) {
	k, err := l.keys(ctx)
	if err != nil {
		return 0, nil, err
	}
	return k.Scan(ctx, tenant, cursor, count)
}

// CountKeys connects if needed and counts a tenant's names.
func (l *LazyMaster) CountKeys(ctx context.Context, tenant string) (int64, error) {
	k, err := l.keys(ctx)
	if err != nil {
		return 0, err
	}
	return k.CountKeys(ctx, tenant)
}

// KeyCounts connects if needed and counts a tenant's names and those with
// an expiry.
func (l *LazyMaster) KeyCounts(ctx context.Context, tenant string) (int64, int64, error) {
	k, err := l.keys(ctx)
	if err != nil {
		return 0, 0, err
	}
	return k.KeyCounts(ctx, tenant)
}

// Terms is what a master client that follows a cluster's leader tells of
// it (masterclient.Client).
type Terms interface {
	// Epoch is the highest leader epoch seen (0: none, or no election).
	Epoch() uint64
	// Fenced counts orders dropped as answered too late to trust.
	Fenced() uint64
}

// Epoch returns the connected client's highest leader epoch seen (0 when
// not connected or not following a leader).
func (l *LazyMaster) Epoch() uint64 {
	if t := l.terms(); t != nil {
		return t.Epoch()
	}
	return 0
}

// Fenced returns the connected client's orders dropped as too late.
func (l *LazyMaster) Fenced() uint64 {
	if t := l.terms(); t != nil {
		return t.Fenced()
	}
	return 0
}

// terms returns the connected client as Terms, or nil.
func (l *LazyMaster) terms() Terms {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, _ := l.c.(Terms)
	return t
}
