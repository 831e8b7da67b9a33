package nodeclient_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/nodeserver/nodeservertest"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// syncBackend is a backend with an index to wait for (nodeserver.Syncer):
// sync answers each call.
type syncBackend struct {
	*nodeservertest.Backend
	calls atomic.Int64
	sync  func(ctx context.Context) error
}

func (b *syncBackend) Sync(ctx context.Context) error {
	b.calls.Add(1)
	return b.sync(ctx)
}

var _ nodeserver.Syncer = (*syncBackend)(nil)

// TestSync: SYNC reaches a Syncer backend and answers its outcome; a wait
// the backend does not finish within the server's SyncTimeout is
// answered unavailable; the connection serves on after either; a backend
// without Syncer answers OK at once; a server that predates the op
// answers unsupported op.
func TestSync(t *testing.T) {
	ctx := ctxT(t)
	t.Run("syncer", func(t *testing.T) {
		b := &syncBackend{Backend: nodeservertest.NewBackend(""), sync: func(context.Context) error { return nil }}
		srv, addr := nodeservertest.Start(t, nodeserver.Options{Backend: b})
		c := dial(t, addr, nodeclient.DialOptions{Tenant: "t1"})
		for i := range 3 {
			if err := c.Sync(ctx); err != nil {
				t.Fatalf("sync %d: %v", i, err)
			}
		}
		if got := b.calls.Load(); got != 3 {
			t.Errorf("the backend's Sync ran %d times, want 3", got)
		}
		if got := srv.Stats().RequestCount(wire.OpSync, wire.CodeOK); got != 3 {
			t.Errorf("the server counted %d SYNCs answered ok, want 3", got)
		}
		p, err := nodeclient.NewPool(addr, nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Tenant: "t1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Sync(ctx); err != nil || b.calls.Load() != 4 {
			t.Fatalf("Pool.Sync: %v (backend called %d times, want 4)", err, b.calls.Load())
		}
	})
	t.Run("backend error", func(t *testing.T) {
		b := &syncBackend{Backend: nodeservertest.NewBackend(""), sync: func(context.Context) error {
			return fmt.Errorf("test: the index is closed: %w", kvpool.ErrClosed)
		}}
		_, addr := nodeservertest.Start(t, nodeserver.Options{Backend: b})
		c := dial(t, addr, nodeclient.DialOptions{Tenant: "t1"})
		if err := c.Sync(ctx); !errors.Is(err, kvpool.ErrUnavailable) {
			t.Fatalf("sync: %v, want unavailable (CodeUnavailable for kvpool.ErrClosed)", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		// The backend never finishes: its master is down.
		b := &syncBackend{Backend: nodeservertest.NewBackend(""), sync: func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("test: sync: %w", ctx.Err())
		}}
		srv, addr := nodeservertest.Start(t, nodeserver.Options{Backend: b, SyncTimeout: 20 * time.Millisecond})
		c := dial(t, addr, nodeclient.DialOptions{Tenant: "t1"})
		if err := c.Sync(ctx); !errors.Is(err, kvpool.ErrUnavailable) {
			t.Fatalf("sync: %v, want unavailable", err)
		}
		if c.Broken() {
			t.Fatal("the connection broke on an unavailable SYNC")
		}
		if _, err := c.Exists(ctx, []uint64{1}); err != nil {
			t.Fatalf("the connection after the SYNC: %v", err)
		}
		if got := srv.Stats().RequestCount(wire.OpSync, wire.CodeUnavailable); got != 1 {
			t.Errorf("the server counted %d SYNCs answered unavailable, want 1", got)
		}
	})
	t.Run("no syncer", func(t *testing.T) {
		n := startNode(t, nodeserver.Options{}) // nodeservertest.Backend: no index
		c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t1"})
		if err := c.Sync(ctx); err != nil {
			t.Fatalf("sync without a Syncer: %v, want nil", err)
		}
		if got := n.srv.Stats().RequestCount(wire.OpSync, wire.CodeOK); got != 1 {
			t.Errorf("the server counted %d SYNCs, want 1", got)
		}
	})
	t.Run("old server", func(t *testing.T) {
		addr := fakeNode(t, func(req *wire.Frame) []byte {
			// As a server of protocol version 2 before SYNC answers it.
			return wire.AppendError(nil, req.Header.ReqID, fmt.Errorf("op 0x0e is not defined: %w", frame.ErrUnknownOp))
		}, false)
		c := dial(t, addr, nodeclient.DialOptions{Tenant: "t1"})
		err := c.Sync(ctx)
		if re, ok := errors.AsType[*wire.RemoteError](err); !ok || re.Code != wire.CodeUnsupportedOp || !errors.Is(err, frame.ErrUnknownOp) {
			t.Fatalf("sync against an old server: %v, want ERROR unsupported op", err)
		}
		if c.Broken() {
			t.Fatal("the connection broke on an unsupported SYNC")
		}
	})
}
