package node

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/kvpool/kvpool/block"
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
