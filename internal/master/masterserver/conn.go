package masterserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/server"
)

// conn is one client connection's state: decode and encode buffers reused
// from request to request, so a LOOKUP allocates nothing in steady state.
type conn struct {
	s     *Server
	sc    *server.Conn // read deadlines the skeleton can take over
	nc    net.Conn     // sc's connection itself
	r     *masterproto.Reader
	out   []byte
	grant auth.Grant // what the HELLO's token allows
	// cluster is the cluster ID the HELLO carried ("" for none).
	cluster string
	// remote is the peer's address, for logs ("" when unknown).
	remote string
	// r is the reign the connection was accepted in; a request in any
	// other, or once it has ended, is refused and closes the connection
	// (quit).
	reign *reign
	quit  bool

	lookup   masterproto.Lookup
	mres     meta.LookupResult
	pres     masterproto.LookupResult
	exists   masterproto.Exists
	bools    []bool
	locate   masterproto.Locate
	keys     []block.Key
	place    masterproto.Place
	objs     []meta.Object
	mplace   meta.Placement
	pplace   masterproto.Placement
	register masterproto.Register
	hb       masterproto.Heartbeat
	keyInfo  masterproto.KeyInfo
	infos    []meta.KeyInfo
	expire   masterproto.Expire
	scan     masterproto.Scan
	names    []string

	// addrCache maps the nodes of recent responses to their addresses
	// while addrGen is unchanged.
	addrCache []masterproto.Target
	addrGen   uint64
}

// serveConn runs the handshake and then answers requests until the peer
// closes, an I/O error, a lost stream or Close.
func (s *Server) serveConn(sc *server.Conn) {
	nc := sc.Conn
	r, err := masterproto.NewReader(nc, masterproto.HelloLimits(s.opts.Limits))
	if err != nil {
		return // unreachable: the limits were validated by New
	}
	c := &conn{s: s, sc: sc, nc: nc, r: r, out: make([]byte, 0, 4096), remote: nc.RemoteAddr().String()}
	if err := c.handshake(); err != nil {
		s.log.Debug("masterserver: handshake", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	if err := r.SetLimits(s.opts.Limits); err != nil {
		return // unreachable: the limits were validated by New
	}
	if err := c.loop(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("masterserver: connection", "remote", nc.RemoteAddr(), "err", err)
	}
}

func (c *conn) handshake() error {
	s := c.s // the skeleton set the handshake deadline
	h, body, err := c.r.ReadFrame()
	if err != nil {
		if errors.Is(err, frame.ErrFrameTooLarge) || errors.Is(err, frame.ErrMalformed) {
			reply := masterproto.HelloReplyFor(err, s.opts.Limits)
			c.out, _ = masterproto.AppendHelloReply(c.out[:0], h.ReqID, &reply)
			c.flush()
			s.metrics.handshakeFailures.Inc()
		}
		return err
	}
	var hello masterproto.Hello
	err = masterproto.DecodeHello(h, body, s.opts.Limits, &hello)
	switch {
	case err != nil:
	case hello.Version != masterproto.Version:
		err = fmt.Errorf("masterserver: client speaks protocol version %d, server %d: %w", hello.Version, masterproto.Version, frame.ErrVersion)
	default:
		var aerr error
		if c.grant, aerr = s.srv.Auth().Authenticate(hello.Token); aerr != nil {
			if len(hello.Token) == 0 {
				err = fmt.Errorf("masterserver: this master requires an auth token: %w", kvpool.ErrUnauthorized)
			} else {
				err = fmt.Errorf("masterserver: auth token refused: %w", kvpool.ErrUnauthorized)
			}
		} else if hello.ClusterID != "" && hello.ClusterID != s.opts.ClusterID {
			err = fmt.Errorf("masterserver: the peer is for cluster %s, %s: %w", hello.ClusterID, s.clusterText(), kvpool.ErrUnauthorized)
			s.log.Warn("masterserver: refused a peer of another cluster", "remote", c.remote, "peer_cluster", hello.ClusterID, "cluster", s.opts.ClusterID, "err", err)
		}
		c.cluster = hello.ClusterID
	}
	if err == nil {
		c.reign = s.current()
		switch {
		case c.reign == nil || !c.reign.valid():
			s.askLeader()
			err = s.notLeader()
		case hello.Epoch > c.reign.epoch:
			err = fmt.Errorf("masterserver: this master leads epoch %d, the peer has seen epoch %d: %w", c.reign.epoch, hello.Epoch, meta.ErrNotLeader)
		}
		if err != nil {
			s.metrics.notLeader.Inc()
		}
	}
	reply := masterproto.HelloReplyFor(err, s.opts.Limits)
	if err == nil && hello.ClusterID != "" {
		reply.ClusterID = s.opts.ClusterID
	}
	if hello.Follows {
		reply.Term = true
		switch l := s.leaderSeen(); {
		case err == nil && c.reign.term != nil:
			reply.Epoch, reply.Margin, reply.Leader = c.reign.epoch, s.opts.Election.Margin(), s.opts.Advertise
		case !errors.Is(err, meta.ErrNotLeader):
		case l.Value != s.opts.Advertise:
			reply.Epoch, reply.Leader = uint64(l.Epoch), l.Value
		default:
			// The peer has seen a later term than this master's: it
			// knows no better leader than the peer does.
			reply.Epoch = uint64(l.Epoch)
		}
	}
	c.out, _ = masterproto.AppendHelloReply(c.out[:0], h.ReqID, &reply)
	if werr := c.flush(); werr != nil {
		return werr
	}
	if err != nil {
		s.metrics.handshakeFailures.Inc()
	}
	return err
}

func (c *conn) loop() error {
	s := c.s
	c.nc.SetWriteDeadline(time.Time{})
	for {
		if c.r.Buffered() == 0 {
			if err := c.flush(); err != nil {
				return err
			}
			if err := c.sc.SetReadTimeout(s.opts.IdleTimeout); err != nil {
				return err
			}
		}
		h, body, err := c.r.ReadFrame()
		if err != nil {
			if len(c.out) > 0 {
				c.flush()
			}
			if errors.Is(err, frame.ErrFrameTooLarge) || errors.Is(err, frame.ErrMalformed) {
				// Tell the client why before closing.
				c.out = masterproto.AppendError(c.out[:0], h.ReqID, masterproto.CodeOf(err), err.Error())
				c.flush()
			}
			return err
		}
		c.handle(h, body)
		if c.quit {
			c.flush()
			return nil
		}
		if len(c.out) >= flushThreshold {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
}

// flush writes the buffered responses.
func (c *conn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	_, err := c.nc.Write(c.out)
	c.out = c.out[:0]
	return err
}

// handle answers one request, appending the response to c.out.
func (c *conn) handle(h masterproto.Header, body []byte) {
	s := c.s
	start := len(c.out)
	var err error
	if r := c.reign; r.term != nil && (s.current() != r || !r.valid()) {
		err = s.notLeader()
		s.metrics.notLeader.Inc()
		c.quit = true
		s.metrics.request(h.Op, err)
		c.out = masterproto.AppendError(c.out[:start], h.ReqID, masterproto.CodeOf(err), err.Error())
		return
	}
	if !c.reign.complete.Load() && readsIndex(h.Op) {
		err = c.reign.errRebuilding()
		s.metrics.request(h.Op, err)
		c.out = masterproto.AppendError(c.out[:start], h.ReqID, masterproto.CodeOf(err), err.Error())
		return
	}
	switch h.Op {
	case masterproto.OpLookup:
		err = c.handleLookup(h, body)
	case masterproto.OpExists:
		if err = masterproto.DecodeExists(h, body, s.opts.Limits, &c.exists); err == nil {
			err = c.check(h.Op, c.exists.Tenant, false)
		}
		if err == nil {
			if c.exists.Names == nil {
				c.bools, err = c.reign.m.Exists(c.exists.Tenant, c.exists.IDs, c.bools)
			} else {
				c.keys = c.exists.Keys(c.keys)
				c.bools, err = c.reign.m.ExistsKeys(c.keys, c.bools)
			}
			if err == nil {
				c.out, err = masterproto.AppendExistsResult(c.out, h.ReqID, c.bools)
			}
		}
	case masterproto.OpLocate:
		err = c.handleLocate(h, body)
	case masterproto.OpKeyInfo:
		err = c.handleKeyInfo(h, body)
	case masterproto.OpExpire:
		err = c.handleExpire(h, body)
	case masterproto.OpScan:
		err = c.handleScan(h, body)
	case masterproto.OpCount:
		err = c.handleCount(h, body)
	case masterproto.OpHeartbeat:
		err = c.handleHeartbeat(h, body)
	case masterproto.OpRegister:
		err = c.handleRegister(h, body)
	case masterproto.OpPlace:
		err = c.handlePlace(h, body)
	case masterproto.OpNodes:
		if err = masterproto.DecodeNodes(h, body); err == nil {
			c.out, err = masterproto.AppendNodesResult(c.out, h.ReqID, c.reign.m.Nodes())
		}
	case masterproto.OpQuery:
		var k block.Key
		if k, err = masterproto.DecodeQuery(h, body); err == nil {
			err = c.check(h.Op, k.Tenant, false)
		}
		if err == nil {
			reps := c.reign.m.Query(k)
			out := make([]masterproto.ReplicaStatus, len(reps))
			for i := range reps {
				out[i] = masterproto.ReplicaStatus{ReplicaStatus: reps[i], Addr: c.addr(reps[i].Node)}
			}
			c.out, err = masterproto.AppendQueryResult(c.out, h.ReqID, out)
		}
	case masterproto.OpHello:
		err = fmt.Errorf("masterserver: HELLO after the handshake: %w", frame.ErrMalformed)
	default:
		err = fmt.Errorf("masterserver: op %v is not a request this server serves: %w", h.Op, frame.ErrUnknownOp)
	}
	s.metrics.request(h.Op, err)
	if err != nil {
		c.out = masterproto.AppendError(c.out[:start], h.ReqID, masterproto.CodeOf(err), err.Error())
		// "Not leader" is the last answer on a connection: its client
		// sends what it had pipelined behind it to the leader.
		c.quit = c.quit || errors.Is(err, meta.ErrNotLeader)
	}
}

// readsIndex reports whether op reads the index (or, EXPIRE, changes
// what it holds): refused while a new leader's index is being rebuilt.
func readsIndex(op masterproto.Op) bool {
	switch op {
	case masterproto.OpLookup, masterproto.OpLocate, masterproto.OpExists, masterproto.OpQuery,
		masterproto.OpKeyInfo, masterproto.OpScan, masterproto.OpCount, masterproto.OpExpire:
		return true
	}
	return false
}

// check returns nil when the connection's grant may read (write false) or
// write tenant's namespace, and otherwise counts the refusal and returns
// an error wrapping kvpool.ErrUnauthorized (answered with
// CodeUnauthorized; the connection stays usable).
func (c *conn) check(op masterproto.Op, tenant string, write bool) error {
	err := c.grant.Check(tenant, write)
	if err == nil {
		return nil
	}
	c.s.metrics.forbidden(op)
	c.s.log.Debug("masterserver: request refused", "remote", c.remote, "op", op.String(), "grant", c.grant.String(), "err", err)
	return fmt.Errorf("masterserver: %v: %w: %w", op, err, kvpool.ErrUnauthorized)
}

// checkNode returns nil when the connection may act as a node (REGISTER,
// HEARTBEAT): only with the cluster token (or on an open master).
func (c *conn) checkNode(op masterproto.Op) error {
	if c.grant.Cluster() {
		return nil
	}
	c.s.metrics.forbidden(op)
	c.s.log.Debug("masterserver: node request refused", "remote", c.remote, "op", op.String(), "grant", c.grant.String())
	return fmt.Errorf("masterserver: %v needs the cluster token; this connection has a %s token: %w", op, c.grant, kvpool.ErrUnauthorized)
}

// checkCluster returns nil when node may act as a node of this master's
// cluster: its HELLO carried the master's cluster ID, or neither has one
// (a HELLO with another ID was refused already). The refusal is logged as
// a warning: a node started for another cluster is a configuration error
// the operator must see.
func (c *conn) checkCluster(op masterproto.Op, node meta.NodeID) error {
	if c.cluster == c.s.opts.ClusterID {
		return nil
	}
	c.s.metrics.forbidden(op)
	peer := "has no cluster ID"
	if c.cluster != "" {
		peer = "is for cluster " + c.cluster
	}
	err := fmt.Errorf("masterserver: node %s %s, %s: %w", node, peer, c.s.clusterText(), kvpool.ErrUnauthorized)
	c.s.log.Warn("masterserver: refused a node of another cluster", "node", string(node), "remote", c.remote, "op", op.String(), "err", err)
	return err
}

func (c *conn) handleLookup(h masterproto.Header, body []byte) error {
	if err := masterproto.DecodeLookup(h, body, c.s.opts.Limits, &c.lookup); err != nil {
		return err
	}
	if err := c.check(h.Op, c.lookup.Tenant, false); err != nil {
		return err
	}
	if err := c.reign.m.Lookup(c.lookup.Tenant, c.lookup.IDs, c.lookup.Lease, &c.mres); err != nil {
		return err
	}
	var err error
	c.out, err = masterproto.AppendLookupResult(c.out, h.ReqID, c.wireResult())
	return err
}

// wireResult converts c.mres into c.pres, with the nodes' addresses.
func (c *conn) wireResult() *masterproto.LookupResult {
	p := &c.pres
	p.Reset()
	p.Hit = c.mres.Hit
	for _, r := range c.mres.Replicas {
		p.Replicas = append(p.Replicas, masterproto.Replica{Node: r.Node, Addr: c.addr(r.Node), Tier: r.Tier, Size: r.Size, Sum: r.Sum})
	}
	p.Ends = append(p.Ends, c.mres.Ends...)
	return p
}

func (c *conn) handleLocate(h masterproto.Header, body []byte) error {
	if err := masterproto.DecodeLocate(h, body, c.s.opts.Limits, &c.locate); err != nil {
		return err
	}
	if err := c.check(h.Op, c.locate.Tenant, false); err != nil {
		return err
	}
	c.keys = c.locate.Keys(c.keys)
	if err := c.reign.m.Locate(c.keys, c.locate.Lease, &c.mres); err != nil {
		return err
	}
	var err error
	c.out, err = masterproto.AppendLocateResult(c.out, h.ReqID, c.wireResult())
	return err
}

// handleKeyInfo answers KEYINFO: reading the tenant's namespace.
func (c *conn) handleKeyInfo(h masterproto.Header, body []byte) error {
	if err := masterproto.DecodeKeyInfo(h, body, c.s.opts.Limits, &c.keyInfo); err != nil {
		return err
	}
	if err := c.check(h.Op, c.keyInfo.Tenant, false); err != nil {
		return err
	}
	c.keys = c.keyInfo.Keys(c.keys)
	var err error
	if c.infos, err = c.reign.m.KeyInfo(c.keys, c.infos); err != nil {
		return err
	}
	c.out, err = masterproto.AppendKeyInfoResult(c.out, h.ReqID, c.infos)
	return err
}

// handleExpire answers EXPIRE: writing the tenant's namespace (a
// read-only grant may not).
func (c *conn) handleExpire(h masterproto.Header, body []byte) error {
	e := &c.expire
	if err := masterproto.DecodeExpire(h, body, c.s.opts.Limits, e); err != nil {
		return err
	}
	if err := c.check(h.Op, e.Tenant, true); err != nil {
		return err
	}
	c.keys = e.Keys(c.keys)
	var err error
	if c.bools, err = c.reign.m.SetExpiry(c.keys, e.At, e.Force, c.bools); err != nil {
		return err
	}
	c.out, err = masterproto.AppendExpireResult(c.out, h.ReqID, c.bools)
	return err
}

// handleScan answers SCAN: reading the tenant's namespace.
func (c *conn) handleScan(h masterproto.Header, body []byte) error {
	sc := &c.scan
	if err := masterproto.DecodeScan(h, body, c.s.opts.Limits, sc); err != nil {
		return err
	}
	if err := c.check(h.Op, sc.Tenant, false); err != nil {
		return err
	}
	next, names, err := c.reign.m.Scan(sc.Tenant, sc.Cursor, sc.Count, c.names)
	if err != nil {
		return err
	}
	c.out, err = masterproto.AppendScanResult(c.out, h.ReqID, &masterproto.ScanResult{Cursor: next, Names: names})
	clear(names) // do not pin the index's names
	c.names = names[:0]
	return err
}

// handleCount answers COUNT: reading the tenant's namespace.
func (c *conn) handleCount(h masterproto.Header, body []byte) error {
	tenant, err := masterproto.DecodeCount(h, body)
	if err != nil {
		return err
	}
	if err := c.check(h.Op, tenant, false); err != nil {
		return err
	}
	keys, expiring := c.reign.m.KeyCounts(tenant)
	c.out, err = masterproto.AppendCountResult(c.out, h.ReqID, &masterproto.CountResult{Keys: keys, Expiring: expiring})
	return err
}

func (c *conn) handleRegister(h masterproto.Header, body []byte) error {
	rg := &c.register
	if err := c.checkNode(h.Op); err != nil {
		return err
	}
	if err := masterproto.DecodeRegister(h, body, c.s.opts.Limits, rg); err != nil {
		return err
	}
	defer func() { *rg = masterproto.Register{} }() // do not pin a large inventory
	if err := c.checkCluster(h.Op, rg.Info.ID); err != nil {
		return err
	}
	done, err := c.s.recordNode(c.reign, rg.Info.ID, rg.Info.Addr)
	if err != nil {
		return err
	}
	defer done()
	reply, err := c.reign.m.Register(rg.Info, rg.Inventory, rg.Usage)
	if err != nil {
		return err
	}
	c.s.setAddr(rg.Info.ID, rg.Info.Addr)
	if !rg.Usage.Backlog {
		c.s.registered(c.reign, rg.Info.ID)
	}
	c.s.log.Info("masterserver: node registered", "node", rg.Info.ID, "addr", rg.Info.Addr, "blocks", len(rg.Inventory), "remote", c.nc.RemoteAddr())
	c.out, err = masterproto.AppendRegisterReply(c.out, h.ReqID, &reply)
	return err
}

func (c *conn) handleHeartbeat(h masterproto.Header, body []byte) error {
	hb := &c.hb
	if err := c.checkNode(h.Op); err != nil {
		return err
	}
	if err := masterproto.DecodeHeartbeat(h, body, c.s.opts.Limits, hb); err != nil {
		return err
	}
	if err := c.checkCluster(h.Op, hb.Node); err != nil {
		*hb = masterproto.Heartbeat{}
		return err
	}
	reply, err := c.reign.m.Heartbeat(hb.Node, hb.Session, hb.Delta, hb.Usage, hb.SSDHits, hb.Done)
	node, backlog := hb.Node, hb.Usage.Backlog
	*hb = masterproto.Heartbeat{}
	if err != nil {
		return err
	}
	if !backlog {
		c.s.registered(c.reign, node) // its whole inventory is in the index now
	}
	c.out, err = masterproto.AppendHeartbeatReply(c.out, h.ReqID, &reply)
	return err
}

func (c *conn) handlePlace(h masterproto.Header, body []byte) error {
	pl := &c.place
	if err := masterproto.DecodePlace(h, body, c.s.opts.Limits, pl); err != nil {
		return err
	}
	if err := c.check(h.Op, pl.Tenant, true); err != nil {
		return err
	}
	c.objs = pl.Objects(c.objs)
	if err := c.reign.m.PlaceObjects(c.objs, pl.Replicas, pl.Hint, pl.Strategy, &c.mplace); err != nil {
		return err
	}
	p := &c.pplace
	p.PerBlock, p.Degraded, p.Nodes = c.mplace.PerBlock, c.mplace.Degraded, p.Nodes[:0]
	for _, id := range c.mplace.Nodes {
		p.Nodes = append(p.Nodes, masterproto.Target{Node: id, Addr: c.addr(id)})
	}
	var err error
	c.out, err = masterproto.AppendPlacement(c.out, h.ReqID, p)
	return err
}

// addrCacheLen bounds a connection's address cache: 64 nodes, more than a
// LOOKUP of 32 blocks with two replicas each can name.
const addrCacheLen = 64

// addr returns a node's address through the connection's cache.
func (c *conn) addr(id meta.NodeID) string {
	if g := c.s.addrGen.Load(); g != c.addrGen {
		c.addrCache, c.addrGen = c.addrCache[:0], g
	}
	for i := range c.addrCache {
		if c.addrCache[i].Node == id {
			return c.addrCache[i].Addr
		}
	}
	a := c.s.addrOf(id)
	if len(c.addrCache) == addrCacheLen {
		c.addrCache = c.addrCache[:0]
	}
	c.addrCache = append(c.addrCache, masterproto.Target{Node: id, Addr: a})
	return a
}
