package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/nodeserver/nodeservertest"
)

// fixedClock is a master clock that does not move, so no node of a test
// cluster ever misses its TTL.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// masterIndex adapts an in-process master.Master to client.Index.
type masterIndex struct{ m *master.Master }

func (x masterIndex) Lookup(ctx context.Context, tenant string, ids []uint64, lease bool) (int, [][]client.Location, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	var r meta.LookupResult
	if err := x.m.Lookup(tenant, ids, lease, &r); err != nil {
		return 0, nil, err
	}
	out := make([][]client.Location, r.Hit)
	for i := range out {
		for _, rep := range r.Block(i) {
			out[i] = append(out[i], client.Location{Node: string(rep.Node), Tier: client.Tier(rep.Tier), Size: rep.Size, Sum: rep.Sum})
		}
	}
	return r.Hit, out, nil
}

func (x masterIndex) Locate(ctx context.Context, keys []block.Key, lease bool) ([][]client.Location, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var r meta.LookupResult
	if err := x.m.Locate(keys, lease, &r); err != nil {
		return nil, err
	}
	out := make([][]client.Location, r.Hit)
	for i := range out {
		for _, rep := range r.Block(i) {
			out[i] = append(out[i], client.Location{Node: string(rep.Node), Tier: client.Tier(rep.Tier), Size: rep.Size, Sum: rep.Sum})
		}
	}
	return out, nil
}

func (x masterIndex) Exists(ctx context.Context, keys []block.Key) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return x.m.ExistsKeys(keys, nil)
}

func (x masterIndex) Place(ctx context.Context, keys []block.Key, sizes []int64, replicas int, hint string) ([][]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	objs := make([]meta.Object, len(keys))
	for i, k := range keys {
		objs[i] = meta.Object{Key: k, Size: sizes[i]}
	}
	var p meta.Placement
	if err := x.m.PlaceObjects(objs, replicas, meta.NodeID(hint), meta.StrategyDefault, &p); err != nil {
		return nil, err
	}
	out := make([][]string, len(keys))
	for i := range out {
		for _, n := range p.Block(i) {
			out[i] = append(out[i], string(n))
		}
	}
	return out, nil
}

func (x masterIndex) Nodes(ctx context.Context) ([]client.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []client.Node
	for _, n := range x.m.Nodes() {
		out = append(out, client.Node{ID: string(n.Info.ID), Addr: n.Info.Addr, Live: n.Alive, BlockSize: n.Info.BlockSize})
	}
	return out, nil
}

// testBackend is a node's store: an in-memory backend that reports what it
// stores to the master (as a node's heartbeat would), counts block reads,
// and can be made to block reads until released.
type testBackend struct {
	*nodeservertest.Backend
	m       *master.Master
	id      meta.NodeID
	session meta.Session
	reads   atomic.Int64

	gateMu sync.Mutex
	gate   chan struct{} // non-nil: Acquire waits for it to close
}

func (b *testBackend) Acquire(ctx context.Context, k block.Key) (nodeserver.Ref, error) {
	b.reads.Add(1)
	b.gateMu.Lock()
	g := b.gate
	b.gateMu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nodeserver.Ref{}, ctx.Err()
		}
	}
	return b.Backend.Acquire(ctx, k)
}

func (b *testBackend) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	if err := b.Backend.Put(ctx, k, payload, sum); err != nil {
		return err
	}
	_, err := b.m.Heartbeat(b.id, b.session, meta.Delta{Added: []meta.Item{{Key: k, Tier: meta.TierRAM, Size: int64(len(payload)), Sum: sum}}}, meta.NodeUsage{}, nil, nil)
	return err
}

// hold makes reads block until the returned release is called.
func (b *testBackend) hold() (release func()) {
	g := make(chan struct{})
	b.gateMu.Lock()
	b.gate = g
	b.gateMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.gateMu.Lock()
			b.gate = nil
			b.gateMu.Unlock()
			close(g)
		})
	}
}

// testNode is one node of a test cluster.
type testNode struct {
	id      string
	addr    string
	backend *testBackend
	srv     *nodeserver.Server
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// stop stops the node's server and waits for it.
func (n *testNode) stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	n.cancel()
	err := <-n.done
	if errors.Is(err, nodeserver.ErrClosed) {
		err = nil
	}
	return err
}

// cluster is an in-process master with nodes serving on loopback.
type cluster struct {
	m     *master.Master
	nodes []*testNode
	holes []*blackhole
}

// startCluster starts a master and n nodes named n0, n1, ...
func startCluster(n int) (*cluster, error) {
	m, err := master.New(master.Options{Clock: fixedClock{time.Unix(1_700_000_000, 0)}})
	if err != nil {
		return nil, err
	}
	c := &cluster{m: m}
	for i := range n {
		if err := c.addNode(fmt.Sprintf("n%d", i)); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) addNode(id string) error {
	b := &testBackend{Backend: nodeservertest.NewBackend(""), m: c.m, id: meta.NodeID(id)}
	srv, err := nodeserver.New(nodeserver.Options{Backend: b})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	reply, err := c.m.Register(meta.NodeInfo{ID: meta.NodeID(id), Addr: ln.Addr().String(), RAMBytes: 1 << 30}, nil, meta.NodeUsage{})
	if err != nil {
		ln.Close()
		return err
	}
	b.session = reply.Session
	ctx, cancel := context.WithCancel(context.Background())
	tn := &testNode{id: id, addr: ln.Addr().String(), backend: b, srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { tn.done <- srv.Serve(ctx, ln) }()
	c.nodes = append(c.nodes, tn)
	return nil
}

// close stops every node and black hole.
func (c *cluster) close() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.stop())
		if p := n.backend.Pins(); p != 0 {
			errs = append(errs, fmt.Errorf("node %s: %d blocks still pinned", n.id, p))
		}
	}
	for _, h := range c.holes {
		h.close()
	}
	return errors.Join(errs...)
}

func (c *cluster) client(opts client.Options) (*client.Client, error) {
	opts.Index = masterIndex{c.m}
	return client.New(context.Background(), opts)
}

// blackhole is a node that accepts connections and never answers: a
// machine that died with its socket still open, as the client sees it.
type blackhole struct {
	id      string
	session meta.Session
	ln      net.Listener
	conns   atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	held    []net.Conn
}

// addBlackhole registers a black-hole node id in the master.
func (c *cluster) addBlackhole(id string) (*blackhole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &blackhole{ln: ln}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			h.conns.Add(1)
			h.mu.Lock()
			h.held = append(h.held, nc)
			h.mu.Unlock()
		}
	}()
	c.holes = append(c.holes, h)
	reply, err := c.m.Register(meta.NodeInfo{ID: meta.NodeID(id), Addr: ln.Addr().String(), RAMBytes: 1 << 30}, nil, meta.NodeUsage{})
	if err != nil {
		return nil, err
	}
	h.id, h.session = id, reply.Session
	return h, nil
}

// announce tells the master that node id holds block k (as its heartbeat
// would), without storing anything: a replica the node does not have, or
// one on a black hole.
func (c *cluster) announce(id string, session meta.Session, k block.Key, payload []byte) error {
	_, err := c.m.Heartbeat(meta.NodeID(id), session, meta.Delta{Added: []meta.Item{{Key: k, Tier: meta.TierRAM, Size: int64(len(payload)), Sum: block.Checksum(k, payload)}}}, meta.NodeUsage{}, nil, nil)
	return err
}

func (h *blackhole) close() {
	h.ln.Close()
	h.wg.Wait()
	h.mu.Lock()
	for _, c := range h.held {
		c.Close()
	}
	h.mu.Unlock()
}

// payload returns deterministic bytes for block id.
func payload(id uint64, n int) []byte {
	p := make([]byte, n)
	x := id*0x9e3779b97f4a7c15 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}
