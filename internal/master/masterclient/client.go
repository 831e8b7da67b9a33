package masterclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
)

// ErrUnavailable: the master could not be reached (refused, reset, closed,
// or the context ran out while connecting or waiting). Calls that fail so
// wrap it; the caller retries later.
var ErrUnavailable = kvpool.ErrUnavailable

// ErrUnauthorized: the master refused the token (Dial fails with it).
var ErrUnauthorized = kvpool.ErrUnauthorized

// ErrClosed: the client was closed. It wraps kvpool.ErrClosed.
var ErrClosed = fmt.Errorf("masterclient: client %w", kvpool.ErrClosed)

// LookupResult receives a Lookup: the prefix found and, per block, its
// replicas with their nodes' data-plane addresses. Reuse one per goroutine:
// its storage is kept from call to call.
type LookupResult = masterproto.LookupResult

// Replica is one copy of a block in a LookupResult.
type Replica = masterproto.Replica

// Placement receives a Place.
type Placement = masterproto.Placement

// Target is a node and its data-plane address.
type Target = masterproto.Target

// ReplicaStatus is one replica as Query shows it.
type ReplicaStatus = masterproto.ReplicaStatus

// Defaults for zero Options fields.
const (
	// DefaultTimeout bounds connecting and the handshake, and every call
	// whose context has no deadline: 5 s, more than a heartbeat interval's
	// worth of retries (1 s) and well under the node TTL's (3 s) multiple
	// that an operator would notice.
	DefaultTimeout = 5 * time.Second
	// DefaultConns is the size of the connection pool: 2. Pipelining keeps
	// one connection busy (BenchmarkLookup32Loopback on 2 cores, 16
	// goroutines: 3.9M keys/s with 1 connection, 3.6M with 2, 3.2M with
	// 4); the second lets the server, which answers a connection on one
	// goroutine, use a second core, and keeps calls flowing while the
	// other reconnects.
	DefaultConns = 2
)

// Options configure a Client. The zero value of each field means its
// default.
type Options struct {
	// Token is the auth token sent in every HELLO (never logged).
	Token []byte
	// ClusterID, when not empty, is the cluster this client is for (a
	// node's --cluster-id): every HELLO carries it, and Dial fails with
	// an error wrapping ErrUnauthorized when the master answers with
	// another ID or none (or refuses it), so a node never registers with
	// a master of another cluster.
	ClusterID string
	// Timeout bounds connecting and the handshake, and each call whose
	// context has no deadline (DefaultTimeout).
	Timeout time.Duration
	// Conns is the number of pooled connections (DefaultConns).
	Conns int
	// Limits bound what the client decodes (masterproto.DefaultLimits for
	// zero fields).
	Limits masterproto.Limits
	// Follow makes the client follow its cluster's leader even when Dial
	// is given one address: it carries the highest epoch it has seen in
	// every HELLO, goes where a standby sends it, and trusts a
	// heartbeat's orders only within the leader's margin (see
	// Client.Heartbeat). Dial with several addresses, or a Leader, does
	// so anyway.
	Follow bool
	// Leader, when set, names the leader's control address (etcd, package
	// election): asked when no known master answers as leader.
	Leader func(ctx context.Context) (string, error)
	// Dial, when set, opens every TCP connection to a master (network is
	// "tcp"), including the probe that names what answered at a wrong
	// address, instead of a net.Dialer: a caller's own route to the
	// master, such as a dialer that creates its sockets in another network
	// namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

func (o Options) resolve() (Options, error) {
	lim, err := o.Limits.Resolve()
	if err != nil {
		return o, fmt.Errorf("masterclient: limits: %w", err)
	}
	o.Limits = lim
	switch {
	case o.Timeout < 0:
		return o, fmt.Errorf("masterclient: timeout is %v; want >= 0 (0 means the default, %v)", o.Timeout, DefaultTimeout)
	case o.Conns < 0 || o.Conns > 1024:
		return o, fmt.Errorf("masterclient: connections is %d; want 0 (the default, %d) to 1024", o.Conns, DefaultConns)
	case len(o.Token) > masterproto.MaxTokenLen:
		return o, fmt.Errorf("masterclient: token is %d bytes; the HELLO carries at most %d", len(o.Token), masterproto.MaxTokenLen)
	}
	if err := meta.CheckClusterID(o.ClusterID); err != nil {
		return o, fmt.Errorf("masterclient: cluster ID: %w", err)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Conns == 0 {
		o.Conns = DefaultConns
	}
	return o, nil
}

// Client is the master's client stub, used by nodes (Register, Heartbeat),
// by the client library (Lookup, Exists, Place, Nodes, Query) and by the
// Redis front (Locate, KeyInfo, SetExpiry, Scan, CountKeys).
//
// Concurrency: safe for concurrent use. It keeps a pool of Options.Conns
// connections, handed out round-robin; each connection pipelines the
// requests of every goroutine using it (a write under the connection's
// lock) and is read by one demultiplexing goroutine the connection owns,
// which matches the in-order responses to their calls and decodes each
// into its caller's destination. A connection that fails (the master
// restarted, a reset) is dropped, failing its pending calls with
// ErrUnavailable, and the next call on its slot dials again. A call whose
// context ends while it waits closes its connection (a pipelined stream
// cannot skip one response) and returns the context's error, wrapped with
// ErrUnavailable. Close stops every connection and waits for their
// goroutines.
type Client struct {
	addrs   []string // as given to Dial
	follows bool
	leader  atomic.Pointer[string] // the master last connected to
	epoch   atomic.Uint64          // the highest leader epoch seen
	margin  atomic.Int64           // the leader's order margin (ns; 0: none)
	fenced  atomic.Uint64          // orders dropped as too old
	bad     atomic.Pointer[string] // the master whose last dial failed (tried last next time)
	opts    Options
	slots   []slot
	next    atomic.Uint32

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // connection readers
}

// slot holds one pooled connection; lock is a one-token semaphore so a
// caller waiting for a dial can give up when its context ends.
type slot struct {
	lock chan struct{}
	c    *conn
}

// Dial connects to the master at addr (host:port) and runs the handshake
// on the first pooled connection, so a wrong address or token fails here:
// an address that is not a master's fails with an error wrapping
// ErrUnavailable that says what answered (a node's data port, an HTTP or
// Redis server; see identify.go).
// The other connections are dialled on first use.
//
// addr may list several masters of one cluster, comma-separated
// ("10.0.0.1:7470,10.0.0.2:7470"): the client then follows their leader.
// It may be empty when Options.Leader is set.
// It connects to the one it last reached, else to where a standby sends
// it, else to the next on the list or the one Options.Leader names; a
// connection the leader closes (its term ended) is dialled again the same
// way on next use.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	var addrs []string
	if addr != "" || o.Leader == nil {
		if addrs, err = ParseAddrs(addr); err != nil {
			return nil, err
		}
	}
	cl := &Client{addrs: addrs, opts: o, slots: make([]slot, o.Conns)}
	cl.follows = o.Follow || o.Leader != nil || len(addrs) > 1
	first := ""
	if len(addrs) > 0 {
		first = addrs[0]
	}
	cl.leader.Store(&first)
	for i := range cl.slots {
		cl.slots[i].lock = make(chan struct{}, 1)
	}
	if _, err := cl.conn(ctx, &cl.slots[0]); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// ParseAddrs splits a comma-separated list of master addresses, each
// host:port, and says which is wrong when one is.
func ParseAddrs(list string) ([]string, error) {
	var out []string
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			if list == a {
				return nil, fmt.Errorf("masterclient: master address %q: want host:port", a)
			}
			return nil, fmt.Errorf("masterclient: master address %q in %q: want host:port, comma-separated", a, list)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Addr returns the address of the master the client last connected to.
func (cl *Client) Addr() string { return *cl.leader.Load() }

// Epoch returns the highest leader epoch the client has seen (0 for a
// master without an election, or before the first connection).
func (cl *Client) Epoch() uint64 { return cl.epoch.Load() }

// Fenced returns how many orders (heartbeat tasks) the client dropped
// because their answer came later than the leader's margin.
func (cl *Client) Fenced() uint64 { return cl.fenced.Load() }

// sawEpoch records the epoch and margin of a master that accepted a
// HELLO; an epoch older than one seen before is refused.
func (cl *Client) sawEpoch(epoch uint64, margin time.Duration) error {
	for {
		cur := cl.epoch.Load()
		if epoch < cur {
			return fmt.Errorf("the master leads epoch %d, older than epoch %d this client has seen: %w", epoch, cur, meta.ErrNotLeader)
		}
		if cl.epoch.CompareAndSwap(cur, epoch) {
			cl.margin.Store(int64(margin))
			return nil
		}
	}
}

// maxHops bounds the masters one dial tries.
const maxHops = 8

// dial connects to the master (following: to the leader), bounded by ctx
// and Options.Timeout.
func (cl *Client) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cl.opts.Timeout)
	defer cancel()
	if !cl.follows {
		c, _, err := cl.dialAt(ctx, cl.addrs[0])
		return c, err
	}
	// One master that accepts TCP but never answers (a frozen process)
	// must not use up the whole timeout when there are others to try:
	// each try gets a share.
	per := cl.opts.Timeout
	if len(cl.addrs) > 1 || cl.opts.Leader != nil {
		per = max(cl.opts.Timeout/4, 250*time.Millisecond)
	}
	tried := map[string]bool{}
	asked := false
	var errs []error
	next := cl.Addr()
	if bad := cl.bad.Load(); bad != nil && *bad == next {
		next = "" // it failed last time (dead or frozen): the others first
	}
	for hop := 0; hop < maxHops && ctx.Err() == nil; hop++ {
		if next == "" {
			next = cl.candidate(ctx, tried, &asked)
			if next == "" {
				break
			}
		}
		tried[next] = true
		actx, acancel := context.WithTimeout(ctx, per)
		c, redirect, err := cl.dialAt(actx, next)
		acancel()
		if err == nil {
			cl.leader.Store(&next)
			cl.bad.Store(nil)
			return c, nil
		}
		if redirect == "" && !errors.Is(err, meta.ErrNotLeader) {
			failed := next
			cl.bad.Store(&failed)
		}
		errs = append(errs, err)
		next = ""
		if redirect != "" && !tried[redirect] {
			next = redirect
		}
	}
	if len(errs) == 0 {
		errs = append(errs, ctx.Err())
	}
	return nil, fmt.Errorf("masterclient: no leader among masters %s: %w: %w", strings.Join(cl.addrs, ","), ErrUnavailable, errors.Join(errs...))
}

// candidate returns the next master to try: the one Options.Leader names
// (asked once per dial), else the first untried address, else "".
func (cl *Client) candidate(ctx context.Context, tried map[string]bool, asked *bool) string {
	if cl.opts.Leader != nil && !*asked {
		*asked = true
		lctx, cancel := context.WithTimeout(ctx, max(cl.opts.Timeout/4, 250*time.Millisecond))
		a, err := cl.opts.Leader(lctx)
		cancel()
		if err == nil && a != "" && !tried[a] {
			return a
		}
	}
	bad := ""
	if b := cl.bad.Load(); b != nil {
		bad = *b
	}
	for _, a := range cl.addrs {
		if !tried[a] && a != bad {
			return a
		}
	}
	if bad != "" && !tried[bad] {
		return bad // the one that failed last time, last
	}
	return ""
}

// Close closes every connection, failing calls in flight with ErrClosed,
// and waits for the connections' goroutines. Later calls return ErrClosed.
func (cl *Client) Close() error {
	cl.mu.Lock()
	cl.closed = true
	cl.mu.Unlock()
	for i := range cl.slots {
		s := &cl.slots[i]
		s.lock <- struct{}{}
		if s.c != nil {
			s.c.fail(ErrClosed)
			s.c = nil
		}
		<-s.lock
	}
	cl.wg.Wait()
	return nil
}

// conn returns the slot's live connection, dialling one if needed.
func (cl *Client) conn(ctx context.Context, s *slot) (*conn, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("masterclient: connect to %s: %w: %w", cl.Addr(), ErrUnavailable, ctx.Err())
	}
	defer func() { <-s.lock }()
	if c := s.c; c != nil && !c.broken() {
		return c, nil
	}
	cl.mu.Lock()
	closed := cl.closed
	cl.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	c, err := cl.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// do sends req (encoded by enc) on a pooled connection and waits for its
// response, decoded into the call's destination by the connection's
// reader.
func (cl *Client) do(ctx context.Context, what string, cll *call) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cl.opts.Timeout)
		defer cancel()
	}
	for try := 0; ; try++ {
		err := cl.try(ctx, what, cll)
		// A leader refuses a request once its term has ended, without
		// serving it, and closes the connection: the request goes once
		// more, to whoever leads now.
		if err == nil || try > 0 || !cl.follows || !errors.Is(err, meta.ErrNotLeader) || ctx.Err() != nil {
			return err
		}
		cll.err = nil
	}
}

// try sends cll once (see do).
func (cl *Client) try(ctx context.Context, what string, cll *call) error {
	s := &cl.slots[int(cl.next.Add(1))%len(cl.slots)]
	c, err := cl.conn(ctx, s)
	if err != nil {
		return fmt.Errorf("masterclient: %s: %w", what, err)
	}
	if err := c.send(ctx, cll); err != nil {
		return fmt.Errorf("masterclient: %s: %w", what, err)
	}
	select {
	case <-cll.done:
	case <-ctx.Done():
		select {
		case <-cll.done: // answered meanwhile
		default:
			if cl.follows {
				addr := c.addr // silent past the call's deadline: maybe frozen
				cl.bad.Store(&addr)
			}
			c.fail(fmt.Errorf("%w: abandoned by a call: %w", ErrUnavailable, ctx.Err()))
			<-cll.done // the reader releases the call once the connection is down
			if cll.err == nil {
				return nil
			}
			return fmt.Errorf("masterclient: %s: %w: %w", what, ErrUnavailable, ctx.Err())
		}
	}
	if cll.err != nil {
		return fmt.Errorf("masterclient: %s: %w", what, cll.err)
	}
	return nil
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func getCall(want masterproto.Op) *call {
	c := callPool.Get().(*call)
	c.want = want
	return c
}

func putCall(c *call) {
	done := c.done
	*c = call{done: done}
	callPool.Put(c)
}

// Register registers a node with its full inventory (master.Register).
func (cl *Client) Register(ctx context.Context, info meta.NodeInfo, inv meta.Inventory, usage meta.NodeUsage) (meta.RegisterReply, error) {
	c := getCall(masterproto.OpRegisterResponse)
	defer putCall(c)
	var reply meta.RegisterReply
	c.reg = &reply
	c.encode = func(dst []byte, id uint64) ([]byte, error) {
		return masterproto.AppendRegister(dst, id, &masterproto.Register{Info: info, Usage: usage, Inventory: inv})
	}
	err := cl.do(ctx, fmt.Sprintf("register node %q", info.ID), c)
	return reply, err
}

// Heartbeat sends a node's heartbeat (master.Heartbeat). After a master
// restart it fails with an error wrapping meta.ErrUnknownNode: the node
// must Register again.
func (cl *Client) Heartbeat(ctx context.Context, id meta.NodeID, session meta.Session, delta meta.Delta, usage meta.NodeUsage, ssdHits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	c := getCall(masterproto.OpHeartbeatResponse)
	defer putCall(c)
	var reply meta.HeartbeatReply
	c.hb = &reply
	c.encode = func(dst []byte, reqID uint64) ([]byte, error) {
		return masterproto.AppendHeartbeat(dst, reqID, &masterproto.Heartbeat{Node: id, Session: session, Usage: usage, Delta: delta, SSDHits: ssdHits, Done: done})
	}
	err := cl.do(ctx, fmt.Sprintf("heartbeat of node %q", id), c)
	// An order is trusted only if its answer came within the leader's
	// margin of the request: the leader checked its term while serving
	// it, and no other leader can have been elected within the margin
	// of that (package election). A later answer may come from a leader
	// frozen since; its orders are dropped, and expire at the master.
	if m := time.Duration(cl.margin.Load()); err == nil && m > 0 && len(reply.Tasks) > 0 && time.Since(c.sent) > m {
		cl.fenced.Add(uint64(len(reply.Tasks)))
		reply.Tasks = nil
	}
	return reply, err
}

// Lookup finds the longest cached prefix of ids (master.Lookup) and writes
// it, with every replica's node address, into dst. With lease true the
// returned replicas are leased for a Get.
func (cl *Client) Lookup(ctx context.Context, tenant string, ids []uint64, lease bool, dst *LookupResult) error {
	if dst == nil {
		return fmt.Errorf("masterclient: lookup of %d keys: nil result: %w", len(ids), meta.ErrBadRequest)
	}
	c := getCall(masterproto.OpLookupResponse)
	defer putCall(c)
	c.lookup = dst
	c.lookupReq = masterproto.Lookup{Tenant: tenant, IDs: ids, Lease: lease}
	c.encode = nil
	if err := cl.do(ctx, "lookup", c); err != nil {
		dst.Reset()
		return err
	}
	return nil
}

// Exists reports, for each id, whether the block is on a live node
// (master.Exists; no side effects). Answers are appended to dst[:0].
func (cl *Client) Exists(ctx context.Context, tenant string, ids []uint64, dst []bool) ([]bool, error) {
	c := getCall(masterproto.OpExistsResponse)
	defer putCall(c)
	c.bools = dst[:0]
	c.encode = func(b []byte, reqID uint64) ([]byte, error) {
		return masterproto.AppendExists(b, reqID, &masterproto.Exists{Tenant: tenant, IDs: ids})
	}
	err := cl.do(ctx, "exists", c)
	return c.bools, err
}

// Place chooses nodes for new blocks (master.Place) into dst, with their
// addresses.
func (cl *Client) Place(ctx context.Context, tenant string, ids []uint64, replicas int, hint meta.NodeID, strategy meta.Strategy, dst *Placement) error {
	if dst == nil {
		return fmt.Errorf("masterclient: place %d blocks: nil result: %w", len(ids), meta.ErrBadRequest)
	}
	c := getCall(masterproto.OpPlaceResponse)
	defer putCall(c)
	c.place = dst
	c.encode = func(b []byte, reqID uint64) ([]byte, error) {
		return masterproto.AppendPlace(b, reqID, &masterproto.Place{Tenant: tenant, IDs: ids, Replicas: replicas, Hint: hint, Strategy: strategy})
	}
	return cl.do(ctx, "place", c)
}

// batchOf splits keys of one tenant into the ids and names of a request
// (names nil for chain keys). A batch is of one tenant and all chain or
// all named keys, as the protocol carries it.
func batchOf(what string, keys []block.Key) (tenant string, ids []uint64, names []string, err error) {
	if len(keys) == 0 {
		return "", nil, nil, nil
	}
	tenant = keys[0].Tenant
	named := keys[0].Name != ""
	ids = make([]uint64, len(keys))
	if named {
		names = make([]string, len(keys))
	}
	for i, k := range keys {
		switch {
		case k.Tenant != tenant:
			return "", nil, nil, fmt.Errorf("masterclient: %s: key %d (%v) is not of tenant %q like key 0: %w", what, i, k, tenant, meta.ErrBadRequest)
		case (k.Name != "") != named:
			return "", nil, nil, fmt.Errorf("masterclient: %s: key %d (%v): a batch is all chain keys or all named ones: %w", what, i, k, meta.ErrBadRequest)
		}
		ids[i] = k.ID
		if named {
			names[i] = k.Name
		}
	}
	return tenant, ids, names, nil
}

// Locate finds the replicas of each key on its own (master.Locate: point
// lookups, the lookup of named objects) and writes them, with every
// replica's node address, into dst: dst.Hit is len(keys), dst.Block(i)
// empty for an absent key. The keys are of one tenant and all named or
// all chain keys. With lease true the returned replicas are leased.
func (cl *Client) Locate(ctx context.Context, keys []block.Key, lease bool, dst *LookupResult) error {
	if dst == nil {
		return fmt.Errorf("masterclient: locate %d keys: nil result: %w", len(keys), meta.ErrBadRequest)
	}
	dst.Reset()
	tenant, ids, names, err := batchOf("locate", keys)
	if err != nil {
		return err
	}
	c := getCall(masterproto.OpLocateResponse)
	defer putCall(c)
	c.lookup = dst
	req := masterproto.Locate{Tenant: tenant, IDs: ids, Names: names, Lease: lease}
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendLocate(b, reqID, &req) }
	if err := cl.do(ctx, "locate", c); err != nil {
		dst.Reset()
		return err
	}
	if dst.Hit != len(keys) {
		dst.Reset()
		return fmt.Errorf("masterclient: locate: %d answers for %d keys: %w", dst.Hit, len(keys), frame.ErrMalformed)
	}
	return nil
}

// ExistsKeys reports, for each key, whether it is on a live node
// (master.ExistsKeys; no side effects). The keys are of one tenant and all
// named or all chain keys. Answers are appended to dst[:0].
func (cl *Client) ExistsKeys(ctx context.Context, keys []block.Key, dst []bool) ([]bool, error) {
	tenant, ids, names, err := batchOf("exists", keys)
	if err != nil {
		return dst[:0], err
	}
	c := getCall(masterproto.OpExistsResponse)
	defer putCall(c)
	c.bools = dst[:0]
	c.encode = func(b []byte, reqID uint64) ([]byte, error) {
		return masterproto.AppendExists(b, reqID, &masterproto.Exists{Tenant: tenant, IDs: ids, Names: names})
	}
	err = cl.do(ctx, "exists", c)
	if err == nil && len(c.bools) != len(keys) {
		err = fmt.Errorf("masterclient: exists: %d answers for %d keys: %w", len(c.bools), len(keys), frame.ErrMalformed)
	}
	return c.bools, err
}

// PlaceObjects chooses nodes for new objects of any size
// (master.PlaceObjects: placement by bytes) into dst, with their
// addresses. The objects are of one tenant and all named or all chain
// keys.
func (cl *Client) PlaceObjects(ctx context.Context, objs []meta.Object, replicas int, hint meta.NodeID, strategy meta.Strategy, dst *Placement) error {
	if dst == nil {
		return fmt.Errorf("masterclient: place %d objects: nil result: %w", len(objs), meta.ErrBadRequest)
	}
	keys := make([]block.Key, len(objs))
	sizes := make([]int64, len(objs))
	for i := range objs {
		keys[i], sizes[i] = objs[i].Key, objs[i].Size
	}
	tenant, ids, names, err := batchOf("place", keys)
	if err != nil {
		return err
	}
	c := getCall(masterproto.OpPlaceResponse)
	defer putCall(c)
	c.place = dst
	req := masterproto.Place{Tenant: tenant, IDs: ids, Names: names, Sizes: sizes, Replicas: replicas, Hint: hint, Strategy: strategy}
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendPlace(b, reqID, &req) }
	return cl.do(ctx, "place", c)
}

// Nodes lists the nodes the master knows, with their data-plane addresses
// (NodeStatus.Info.Addr).
func (cl *Client) Nodes(ctx context.Context) ([]meta.NodeStatus, error) {
	c := getCall(masterproto.OpNodesResponse)
	defer putCall(c)
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendNodes(b, reqID), nil }
	err := cl.do(ctx, "nodes", c)
	return c.nodes, err
}

// Query shows every indexed replica of k with its state (master.Query).
func (cl *Client) Query(ctx context.Context, k block.Key) ([]ReplicaStatus, error) {
	c := getCall(masterproto.OpQueryResponse)
	defer putCall(c)
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendQuery(b, reqID, k) }
	err := cl.do(ctx, fmt.Sprintf("query %v", k), c)
	return c.query, err
}

// KeyInfo reports what the master knows of each key (master.KeyInfo:
// present, visible, expiry in unix ms, holders; no side effects). The keys
// are named keys of one tenant. Answers are appended to dst[:0], reusing
// the Holders slices of dst's elements.
func (cl *Client) KeyInfo(ctx context.Context, keys []block.Key, dst []meta.KeyInfo) ([]meta.KeyInfo, error) {
	tenant, ids, names, err := batchOf("key info", keys)
	if err != nil {
		return dst[:0], err
	}
	c := getCall(masterproto.OpKeyInfoResponse)
	defer putCall(c)
	c.infos = dst[:0]
	req := masterproto.KeyInfo{Tenant: tenant, IDs: ids, Names: names}
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendKeyInfo(b, reqID, &req) }
	err = cl.do(ctx, "key info", c)
	if err == nil && len(c.infos) != len(keys) {
		err = fmt.Errorf("masterclient: key info: %d answers for %d keys: %w", len(c.infos), len(keys), frame.ErrMalformed)
	}
	return c.infos, err
}

// SetExpiry sets (at[i] > 0, unix milliseconds on the master's clock) or
// clears (at[i] == 0) the expiry of each key (master.SetExpiry): without
// force only of a visible key, and dst[i] says whether it applied; with
// force of any key the master indexes, and dst[i] says whether it is
// present. The keys are named keys of one tenant; the connection's token
// must allow writing it. Answers are appended to dst[:0].
func (cl *Client) SetExpiry(ctx context.Context, keys []block.Key, at []int64, force bool, dst []bool) ([]bool, error) {
	if len(at) != len(keys) {
		return dst[:0], fmt.Errorf("masterclient: expire: %d expiry times for %d keys: %w", len(at), len(keys), meta.ErrBadRequest)
	}
	tenant, ids, names, err := batchOf("expire", keys)
	if err != nil {
		return dst[:0], err
	}
	c := getCall(masterproto.OpExpireResponse)
	defer putCall(c)
	c.bools = dst[:0]
	req := masterproto.Expire{Tenant: tenant, IDs: ids, Names: names, At: at, Force: force}
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendExpire(b, reqID, &req) }
	err = cl.do(ctx, "expire", c)
	if err == nil && len(c.bools) != len(keys) {
		err = fmt.Errorf("masterclient: expire: %d answers for %d keys: %w", len(c.bools), len(keys), frame.ErrMalformed)
	}
	return c.bools, err
}

// Scan returns a page of the visible named keys of tenant and the cursor
// of the next page (master.Scan, Redis SCAN semantics): start with cursor
// 0 and stop when next is 0. count is a hint (0 or less: the master's
// default, 10).
func (cl *Client) Scan(ctx context.Context, tenant string, cursor uint64, count int) (next uint64, names []string, err error) {
	count = min(max(count, 0), 1<<32-1)
	c := getCall(masterproto.OpScanResponse)
	defer putCall(c)
	var res masterproto.ScanResult
	c.scan = &res
	req := masterproto.Scan{Tenant: tenant, Cursor: cursor, Count: count}
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendScan(b, reqID, &req) }
	if err := cl.do(ctx, fmt.Sprintf("scan tenant %q", tenant), c); err != nil {
		return 0, nil, err
	}
	return res.Cursor, res.Names, nil
}

// CountKeys returns the number of visible named keys of tenant
// (master.CountKeys: Redis DBSIZE).
func (cl *Client) CountKeys(ctx context.Context, tenant string) (int64, error) {
	keys, _, err := cl.KeyCounts(ctx, tenant)
	return keys, err
}

// KeyCounts returns the number of visible named keys of tenant and how
// many of them have an expiry (master.KeyCounts: Redis INFO keyspace's
// keys= and expires=).
func (cl *Client) KeyCounts(ctx context.Context, tenant string) (keys, expiring int64, err error) {
	c := getCall(masterproto.OpCountResponse)
	defer putCall(c)
	var res masterproto.CountResult
	c.count = &res
	c.encode = func(b []byte, reqID uint64) ([]byte, error) { return masterproto.AppendCount(b, reqID, tenant) }
	if err := cl.do(ctx, fmt.Sprintf("count keys of tenant %q", tenant), c); err != nil {
		return 0, 0, err
	}
	return res.Keys, res.Expiring, nil
}
