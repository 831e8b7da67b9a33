package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// namedOps are the node client's named forms. nodeclient.Conn has them;
// nodeclient.Pool may not (yet): named reaches them through the pool when
// it has them, and otherwise through one connection per node address that
// the client keeps for named calls (namedConns), redialled when it breaks.
type namedOps interface {
	MGetNamed(ctx context.Context, names []string, dsts [][]byte) ([]nodeclient.Result, error)
	MPutNamed(ctx context.Context, names []string, payloads [][]byte) ([]error, error)
	DeleteNamed(ctx context.Context, name string) error
}

// namedConns holds the connections of named calls, by node address.
type namedConns struct {
	mu sync.Mutex
	m  map[string]*nodeclient.Conn
}

// named returns the named forms for the node of pool p.
func (c *Client) named(p *nodeclient.Pool) namedOps {
	if n, ok := any(p).(namedOps); ok {
		return n
	}
	return namedConn{c: c, addr: p.Addr()}
}

// namedConn runs named calls on the client's connection to addr.
type namedConn struct {
	c    *Client
	addr string
}

// conn returns the client's named-call connection to addr, dialling it
// when there is none or it broke. A Conn serves one call at a time;
// concurrent named calls to one node wait for each other.
func (n namedConn) conn(ctx context.Context) (*nodeclient.Conn, error) {
	nc := &n.c.namedConns
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if n.c.check() != nil {
		return nil, ErrClosed
	}
	if cn := nc.m[n.addr]; cn != nil && !cn.Broken() {
		return cn, nil
	} else if cn != nil {
		cn.Close()
	}
	o := n.c.opts
	cn, err := nodeclient.Dial(ctx, n.addr, nodeclient.DialOptions{Tenant: o.Tenant, Token: []byte(o.Token), Timeout: o.DialTimeout})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", n.addr, err)
	}
	if nc.m == nil {
		nc.m = map[string]*nodeclient.Conn{}
	}
	nc.m[n.addr] = cn
	return cn, nil
}

func (n namedConn) MGetNamed(ctx context.Context, names []string, dsts [][]byte) ([]nodeclient.Result, error) {
	cn, err := n.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.MGetNamed(ctx, names, dsts)
}

func (n namedConn) MPutNamed(ctx context.Context, names []string, payloads [][]byte) ([]error, error) {
	cn, err := n.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.MPutNamed(ctx, names, payloads)
}

func (n namedConn) DeleteNamed(ctx context.Context, name string) error {
	cn, err := n.conn(ctx)
	if err != nil {
		return err
	}
	return cn.DeleteNamed(ctx, name)
}

// close closes the named-call connections.
func (nc *namedConns) close() []error {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	var errs []error
	for _, cn := range nc.m {
		errs = append(errs, cn.Close())
	}
	nc.m = nil
	return errs
}
