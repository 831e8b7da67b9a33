package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// Errors returned by the client, checked with errors.Is.
var (
	// ErrClosed: the client has been closed. It wraps kvpool.ErrClosed.
	ErrClosed = fmt.Errorf("client: %w", kvpool.ErrClosed)
	// ErrNodeDown: the node failed a recent call and is skipped until the
	// index reports it live again (see the package documentation).
	ErrNodeDown = errors.New("client: node down")
	// ErrUnknownNode: the index named a node it does not list.
	ErrUnknownNode = errors.New("client: unknown node")
	// ErrBadIndex: the index answered something inconsistent (a prefix
	// longer than the request, too few replica lists).
	ErrBadIndex = errors.New("client: inconsistent index answer")
)

// Client is a kvpool client bound to one tenant. It is safe for concurrent
// use; Close releases its connections.
type Client struct {
	opts     Options
	idx      Index
	closeIdx func() error
	fl       flights
	ctr      counters

	refresh sync.Mutex // serialises Index.Nodes refreshes

	mu     sync.Mutex
	nodes  map[string]*nodeState
	pools  map[string]*nodeclient.Pool // by address
	closed bool
}

// nodeState is what the client knows of one node.
type nodeState struct {
	addr string
	live bool
	// down is set when the node failed a call; it is cleared when the
	// index shows the node come back (deadSeen, then live), its address
	// change, or DownRetry pass after downAt.
	down     bool
	downAt   time.Time
	deadSeen bool
}

// New returns a client configured by opts. With opts.Index nil it dials
// the master at opts.Master. It does not contact the nodes.
func New(ctx context.Context, opts Options) (*Client, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, idx: o.Index, nodes: map[string]*nodeState{}, pools: map[string]*nodeclient.Pool{}}
	c.fl.m = map[block.Key]*flight{}
	if c.idx == nil {
		idx, closeFn, err := dialMaster(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("client: connect to master %s: %w", o.Master, err)
		}
		c.idx, c.closeIdx = idx, closeFn
	}
	return c, nil
}

// Tenant returns the client's tenant.
func (c *Client) Tenant() string { return c.opts.Tenant }

// Close closes the client's connections. Calls in progress fail; later
// calls return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	pools := c.pools
	c.pools = map[string]*nodeclient.Pool{}
	c.mu.Unlock()
	var errs []error
	for _, p := range pools {
		errs = append(errs, p.Close())
	}
	if c.closeIdx != nil {
		errs = append(errs, c.closeIdx())
	}
	return errors.Join(errs...)
}

// Stats are a client's counters since New.
type Stats struct {
	// Gets counts Get calls; BlocksLoaded, BlocksMissing, BlocksCorrupt
	// and BlocksTimedOut count their blocks by final status.
	Gets                                                       uint64
	BlocksLoaded, BlocksMissing, BlocksCorrupt, BlocksTimedOut uint64
	// Corruptions counts copies received that failed verification (a
	// block can fail on one replica and load from another).
	Corruptions uint64
	// Coalesced counts blocks a Get took from another Get's fetch instead
	// of fetching them itself.
	Coalesced uint64
	// NodeFetches counts MGET calls sent to nodes (Get and Prefetch).
	NodeFetches uint64
	// NodeFailures counts calls to a node that failed as a whole (the node
	// was then marked down); Skipped counts replicas passed over because
	// their node was down.
	NodeFailures, Skipped uint64
	// BlocksStored counts block copies stored by Put and Prefetch;
	// PutFailures the copies that failed.
	BlocksStored, PutFailures uint64
}

type counters struct {
	gets, loaded, missing, corrupt, timedOut atomic.Uint64
	corruptions, coalesced, fetches          atomic.Uint64
	nodeFailures, skipped, stored, putFailed atomic.Uint64
}

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() Stats {
	t := &c.ctr
	return Stats{
		Gets: t.gets.Load(), BlocksLoaded: t.loaded.Load(), BlocksMissing: t.missing.Load(),
		BlocksCorrupt: t.corrupt.Load(), BlocksTimedOut: t.timedOut.Load(),
		Corruptions: t.corruptions.Load(), Coalesced: t.coalesced.Load(), NodeFetches: t.fetches.Load(),
		NodeFailures: t.nodeFailures.Load(), Skipped: t.skipped.Load(),
		BlocksStored: t.stored.Load(), PutFailures: t.putFailed.Load(),
	}
}

// Exists reports which of ids are cached, with no side effects on the
// master (no lease, no recency) and without contacting the nodes.
func (c *Client) Exists(ctx context.Context, ids []uint64) ([]bool, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	present, err := c.idx.Exists(ctx, idBatch(ids).keys(c.opts.Tenant))
	if err != nil {
		return nil, fmt.Errorf("client: exists of %d blocks of tenant %q: %w", len(ids), c.opts.Tenant, err)
	}
	if len(present) != len(ids) {
		return nil, fmt.Errorf("client: exists of %d blocks: index answered %d flags: %w", len(ids), len(present), ErrBadIndex)
	}
	return present, nil
}

// Prefix is the longest cached prefix of a request, as Lookup found it.
type Prefix struct {
	// Len is the number of leading blocks cached.
	Len int
	// Replicas holds, for each of the Len prefix blocks, its replicas (RAM
	// before SSD).
	Replicas [][]Location
}

// Lookup finds the longest cached prefix of ids and where each of its
// blocks lives. It takes no lease and changes nothing on the master.
func (c *Client) Lookup(ctx context.Context, ids []uint64) (Prefix, error) {
	if err := c.check(); err != nil {
		return Prefix{}, err
	}
	n, reps, err := c.lookup(ctx, ids, false)
	if err != nil {
		return Prefix{}, err
	}
	return Prefix{Len: n, Replicas: reps}, nil
}

// lookup asks the index and checks its answer.
func (c *Client) lookup(ctx context.Context, ids []uint64, lease bool) (int, [][]Location, error) {
	n, reps, err := c.idx.Lookup(ctx, c.opts.Tenant, ids, lease)
	if err != nil {
		return 0, nil, fmt.Errorf("client: lookup of %d blocks of tenant %q: %w", len(ids), c.opts.Tenant, err)
	}
	if n < 0 || n > len(ids) || len(reps) < n {
		return 0, nil, fmt.Errorf("client: lookup of %d blocks: index answered prefix %d with %d replica lists: %w", len(ids), n, len(reps), ErrBadIndex)
	}
	return n, reps[:n], nil
}

func (c *Client) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

// usable reports whether node id may be contacted now, or why not.
func (c *Client) usable(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := c.nodes[id]
	if ns == nil || !ns.down {
		return true
	}
	if time.Since(ns.downAt) >= c.opts.DownRetry {
		ns.down = false
		c.opts.Logger.Info("client: retrying node after DownRetry", "node", id, "addr", ns.addr)
		return true
	}
	return false
}

// markDown records that node id failed a call.
func (c *Client) markDown(id string, err error) {
	c.ctr.nodeFailures.Add(1)
	c.mu.Lock()
	ns := c.nodes[id]
	if ns == nil {
		ns = &nodeState{}
		c.nodes[id] = ns
	}
	ns.down, ns.downAt, ns.deadSeen = true, time.Now(), false
	addr := ns.addr
	c.mu.Unlock()
	c.opts.Logger.Warn("client: node down", "node", id, "addr", addr, "err", err)
}

// refreshNodes reloads the node list from the index.
func (c *Client) refreshNodes(ctx context.Context) error {
	c.refresh.Lock()
	defer c.refresh.Unlock()
	list, err := c.idx.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("client: list nodes: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool, len(list))
	for _, n := range list {
		seen[n.ID] = true
		ns := c.nodes[n.ID]
		if ns == nil {
			c.nodes[n.ID] = &nodeState{addr: n.Addr, live: n.Live}
			continue
		}
		if ns.down {
			switch {
			case ns.addr != "" && n.Addr != ns.addr:
				ns.down = false
			case !n.Live:
				ns.deadSeen = true
			case ns.deadSeen:
				ns.down = false
			}
			if !ns.down {
				c.opts.Logger.Info("client: node back", "node", n.ID, "addr", n.Addr)
			}
		}
		ns.addr, ns.live = n.Addr, n.Live
	}
	for id, ns := range c.nodes {
		if !seen[id] {
			ns.live = false
			if ns.down {
				ns.deadSeen = true
			}
		}
	}
	return nil
}

// pool returns the connection pool of node id, resolving its address
// through the index when neither addr nor the node list has it.
func (c *Client) pool(ctx context.Context, id, addr string) (*nodeclient.Pool, error) {
	if addr == "" {
		c.mu.Lock()
		if ns := c.nodes[id]; ns != nil {
			addr = ns.addr
		}
		c.mu.Unlock()
		if addr == "" {
			if err := c.refreshNodes(ctx); err != nil {
				return nil, err
			}
			c.mu.Lock()
			if ns := c.nodes[id]; ns != nil {
				addr = ns.addr
			}
			c.mu.Unlock()
			if addr == "" {
				return nil, fmt.Errorf("client: node %q: %w", id, ErrUnknownNode)
			}
		}
	} else {
		c.mu.Lock()
		ns := c.nodes[id]
		switch {
		case ns == nil:
			c.nodes[id] = &nodeState{addr: addr, live: true}
		case ns.addr != addr:
			ns.addr, ns.down = addr, false
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if p := c.pools[addr]; p != nil {
		return p, nil
	}
	p, err := nodeclient.NewPool(addr, nodeclient.PoolOptions{
		Dial: c.nodeDialOptions(),
		Size: c.opts.PoolSize,
	})
	if err != nil {
		return nil, fmt.Errorf("client: pool for node %q at %s: %w", id, addr, err)
	}
	c.pools[addr] = p
	return p, nil
}

// nodeDialOptions are the options of every connection to a node.
func (c *Client) nodeDialOptions() nodeclient.DialOptions {
	return nodeclient.DialOptions{Tenant: c.opts.Tenant, Token: []byte(c.opts.Token), Timeout: c.opts.DialTimeout, Dial: c.opts.Dial}
}

// Nodes returns the index's node list (and refreshes the client's view of
// which nodes are back).
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	list, err := c.idx.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: list nodes: %w", err)
	}
	return list, nil
}
