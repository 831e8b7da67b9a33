package nodeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/kvpool/kvpool/internal/node/wire"
)

// Pool defaults.
const (
	// DefaultPoolSize is the most connections a Pool opens to its node: 8,
	// twice the parallel fetch streams a prefill worker opens to one node
	// in the replayer, and few enough that a cluster of clients stays far
	// below a node's connection limit (nodeserver.DefaultMaxConns).
	DefaultPoolSize = 8
	// DefaultPoolIdleTimeout is how long a Pool keeps an unused connection:
	// 60 s, well under the node's idle timeout
	// (nodeserver.DefaultIdleTimeout, 5 min), so the node rarely closes a
	// connection the pool is about to hand out.
	DefaultPoolIdleTimeout = 60 * time.Second
)

// PoolOptions configure a Pool. The zero value of each field means its
// default.
type PoolOptions struct {
	// Dial configures each connection.
	Dial DialOptions
	// Size is the most connections open at once; a call waits (within its
	// context) for a free one (DefaultPoolSize).
	Size int
	// IdleTimeout is how long an unused connection is kept
	// (DefaultPoolIdleTimeout).
	IdleTimeout time.Duration
}

// Validate reports the first bad field.
func (o PoolOptions) Validate() error {
	_, err := o.resolve()
	return err
}

func (o PoolOptions) resolve() (PoolOptions, error) {
	if _, err := o.Dial.resolve(); err != nil {
		return o, fmt.Errorf("PoolOptions.Dial: %w", err)
	}
	switch {
	case o.Size < 0:
		return o, fmt.Errorf("nodeclient: PoolOptions.Size is %d; want >= 0 (0 means the default, %d)", o.Size, DefaultPoolSize)
	case o.Size == 0:
		o.Size = DefaultPoolSize
	}
	switch {
	case o.IdleTimeout < 0:
		return o, fmt.Errorf("nodeclient: PoolOptions.IdleTimeout is %v; want >= 0 (0 means the default, %v)", o.IdleTimeout, DefaultPoolIdleTimeout)
	case o.IdleTimeout == 0:
		o.IdleTimeout = DefaultPoolIdleTimeout
	}
	return o, nil
}

// Pool is a small set of connections to one node, for concurrent use: each
// call takes a connection (dialling one when none is idle and fewer than
// Size are open), runs on it, and gives it back; a connection that broke is
// closed instead. A call that finds an idle connection closed by the node
// (idle timeout, restart) is retried once on a new connection; the
// protocol's ops are idempotent (except that a retried DELETE may report
// kvpool.ErrNotFound).
type Pool struct {
	addr string
	opts PoolOptions
	ctr  counters
	sem  chan struct{} // one token per open or opening connection

	ctx    context.Context // cancelled by Close: ends dials in progress
	cancel context.CancelFunc

	mu     sync.Mutex
	idle   []*Conn            // most recently used last
	busy   map[*Conn]struct{} // in use by a call
	closed bool
}

// NewPool returns a pool of connections to addr. It does not dial.
func NewPool(addr string, opts PoolOptions) (*Pool, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{addr: addr, opts: o, sem: make(chan struct{}, o.Size), ctx: ctx, cancel: cancel, busy: map[*Conn]struct{}{}}, nil
}

// Addr returns the node's address.
func (p *Pool) Addr() string { return p.addr }

// Counters returns the counters of all the pool's connections.
func (p *Pool) Counters() Counters { return p.ctr.snapshot() }

// Close closes the pool's connections, interrupting the calls in flight
// and the dials in progress (they fail with ErrClosed). Later calls fail
// with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.idle
	p.idle = nil
	for c := range p.busy {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.cancel()
	for _, c := range conns {
		c.Close()
	}
	return nil
}

// acquire returns a connection and whether it was idle in the pool.
func (p *Pool) acquire(ctx context.Context) (*Conn, bool, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("nodeclient: wait for a connection to %s: %w", p.addr, ctx.Err())
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, false, ErrClosed
	}
	var stale []*Conn
	var c *Conn
	for len(p.idle) > 0 {
		last := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(last.idleSince) > p.opts.IdleTimeout || last.Broken() {
			stale = append(stale, last)
			continue
		}
		c = last
		p.busy[c] = struct{}{}
		break
	}
	p.mu.Unlock()
	for _, s := range stale {
		s.Close()
	}
	if c != nil {
		return c, true, nil
	}
	dctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.ctx, cancel)
	c, err := dial(dctx, p.addr, p.opts.Dial, &p.ctr)
	stop()
	cancel()
	p.mu.Lock()
	closed := p.closed
	if err == nil && !closed {
		p.busy[c] = struct{}{}
	}
	p.mu.Unlock()
	switch {
	case err != nil && closed:
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case closed:
		c.Close()
		err = ErrClosed
	}
	if err != nil {
		<-p.sem
		return nil, false, err
	}
	return c, false, nil
}

// release gives c back, or closes it when it broke or the pool is closed.
func (p *Pool) release(c *Conn) {
	defer func() { <-p.sem }()
	p.mu.Lock()
	delete(p.busy, c)
	if p.closed || c.Broken() {
		p.mu.Unlock()
		c.Close()
		return
	}
	c.idleSince = time.Now()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// do runs fn on a pooled connection, retrying once on a new connection when
// an idle one turns out to have been closed by the node.
func (p *Pool) do(ctx context.Context, fn func(c *Conn) error) error {
	for attempt := 0; ; attempt++ {
		c, reused, err := p.acquire(ctx)
		if err != nil {
			return err
		}
		err = fn(c)
		p.release(c)
		if err != nil && reused && attempt == 0 && c.Broken() && closedByPeer(err) && ctx.Err() == nil {
			p.ctr.retries.Add(1)
			continue
		}
		return err
	}
}

// closedByPeer reports whether err shows the node had closed the
// connection before the call.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Get is Conn.Get on a pooled connection.
func (p *Pool) Get(ctx context.Context, id uint64, dst []byte) (payload []byte, sum uint32, err error) {
	err = p.do(ctx, func(c *Conn) error {
		payload, sum, err = c.Get(ctx, id, dst)
		return err
	})
	return payload, sum, err
}

// MGet is Conn.MGet on a pooled connection.
func (p *Pool) MGet(ctx context.Context, ids []uint64, dsts [][]byte) (res []Result, err error) {
	err = p.do(ctx, func(c *Conn) error {
		res, err = c.MGet(ctx, ids, dsts)
		return err
	})
	return res, err
}

// Put is Conn.Put on a pooled connection.
func (p *Pool) Put(ctx context.Context, id uint64, payload []byte) error {
	return p.do(ctx, func(c *Conn) error { return c.Put(ctx, id, payload) })
}

// MPut is Conn.MPut on a pooled connection.
func (p *Pool) MPut(ctx context.Context, ids []uint64, payloads [][]byte) (errs []error, err error) {
	err = p.do(ctx, func(c *Conn) error {
		errs, err = c.MPut(ctx, ids, payloads)
		return err
	})
	return errs, err
}

// MAccess is Conn.MAccess on a pooled connection.
func (p *Pool) MAccess(ctx context.Context, ids []uint64, hints []wire.Hint, payloads [][]byte) (errs []error, err error) {
	err = p.do(ctx, func(c *Conn) error {
		errs, err = c.MAccess(ctx, ids, hints, payloads)
		return err
	})
	return errs, err
}

// Exists is Conn.Exists on a pooled connection.
func (p *Pool) Exists(ctx context.Context, ids []uint64) (present []bool, err error) {
	err = p.do(ctx, func(c *Conn) error {
		present, err = c.Exists(ctx, ids)
		return err
	})
	return present, err
}

// Delete is Conn.Delete on a pooled connection.
func (p *Pool) Delete(ctx context.Context, id uint64) error {
	return p.do(ctx, func(c *Conn) error { return c.Delete(ctx, id) })
}

// Sync is Conn.Sync on a pooled connection.
func (p *Pool) Sync(ctx context.Context) error {
	return p.do(ctx, func(c *Conn) error { return c.Sync(ctx) })
}

// Stats is Conn.Stats on a pooled connection.
func (p *Pool) Stats(ctx context.Context) (tiers []wire.TierStats, err error) {
	err = p.do(ctx, func(c *Conn) error {
		tiers, err = c.Stats(ctx)
		return err
	})
	return tiers, err
}

// GetNamed is Conn.GetNamed on a pooled connection.
func (p *Pool) GetNamed(ctx context.Context, name string, dst []byte) (payload []byte, sum uint32, err error) {
	err = p.do(ctx, func(c *Conn) error {
		payload, sum, err = c.GetNamed(ctx, name, dst)
		return err
	})
	return payload, sum, err
}

// MGetNamed is Conn.MGetNamed on a pooled connection.
func (p *Pool) MGetNamed(ctx context.Context, names []string, dsts [][]byte) (res []Result, err error) {
	err = p.do(ctx, func(c *Conn) error {
		res, err = c.MGetNamed(ctx, names, dsts)
		return err
	})
	return res, err
}

// PutNamed is Conn.PutNamed on a pooled connection.
func (p *Pool) PutNamed(ctx context.Context, name string, payload []byte) error {
	return p.do(ctx, func(c *Conn) error { return c.PutNamed(ctx, name, payload) })
}

// MPutNamed is Conn.MPutNamed on a pooled connection.
func (p *Pool) MPutNamed(ctx context.Context, names []string, payloads [][]byte) (errs []error, err error) {
	err = p.do(ctx, func(c *Conn) error {
		errs, err = c.MPutNamed(ctx, names, payloads)
		return err
	})
	return errs, err
}

// ExistsNamed is Conn.ExistsNamed on a pooled connection.
func (p *Pool) ExistsNamed(ctx context.Context, names []string) (present []bool, err error) {
	err = p.do(ctx, func(c *Conn) error {
		present, err = c.ExistsNamed(ctx, names)
		return err
	})
	return present, err
}

// DeleteNamed is Conn.DeleteNamed on a pooled connection.
func (p *Pool) DeleteNamed(ctx context.Context, name string) error {
	return p.do(ctx, func(c *Conn) error { return c.DeleteNamed(ctx, name) })
}
