package masterclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
)

// call is one request in flight: what to send, where its response goes,
// and how the connection's reader tells the caller it is done.
type call struct {
	id   uint64
	want masterproto.Op // the response op
	done chan struct{}  // buffered (1): signalled exactly once per use
	err  error

	// encode appends the request; nil for LOOKUP, which is encoded from
	// lookupReq without a closure (the hot path allocates nothing).
	encode    func(dst []byte, reqID uint64) ([]byte, error)
	lookupReq masterproto.Lookup
	sent      time.Time // when a HEARTBEAT was written

	lookup *LookupResult
	bools  []bool
	place  *Placement
	reg    *meta.RegisterReply
	hb     *meta.HeartbeatReply
	nodes  []meta.NodeStatus
	query  []ReplicaStatus
	infos  []meta.KeyInfo
	scan   *masterproto.ScanResult
	count  *masterproto.CountResult
}

// conn is one pooled connection. Writers append requests under mu; the
// reader goroutine (readLoop, owned by the conn and counted in the
// client's wait group) pops the oldest pending call for each response.
type conn struct {
	cl       *Client
	addr     string // the master's
	nc       net.Conn
	r        *masterproto.Reader
	lim      masterproto.Limits // decode limits
	maxBatch int                // keys per LOOKUP/EXISTS/PLACE the server takes

	mu      sync.Mutex
	wbuf    []byte
	nextID  uint64
	pending []*call
	head    int
	dead    bool
	deadErr error
	gone    atomic.Bool // dead, readable without mu
}

func (c *conn) broken() bool { return c.gone.Load() }

// dialAt connects to the master at addr and runs the handshake, bounded
// by ctx. A master that refuses because it does not lead names the leader
// it knows in redirect (when the client follows leaders).
func (cl *Client) dialAt(ctx context.Context, addr string) (c *conn, redirect string, err error) {
	nc, err := dialTCP(ctx, cl.opts.Dial, addr)
	if err != nil {
		return nil, "", fmt.Errorf("masterclient: connect to %s: %w: %w", addr, ErrUnavailable, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) }) // unblock on cancel
	c, redirect, err = cl.handshake(ctx, nc, addr)
	stop()
	if err != nil {
		nc.Close()
		return nil, redirect, err
	}
	nc.SetDeadline(time.Time{})
	cl.wg.Add(1)
	go c.readLoop()
	return c, "", nil
}

// dialTCP opens a TCP connection to addr with dial (Options.Dial), or with
// a net.Dialer when dial is nil.
func dialTCP(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (net.Conn, error) {
	if dial == nil {
		dial = new(net.Dialer).DialContext
	}
	return dial(ctx, "tcp", addr)
}

func (cl *Client) handshake(ctx context.Context, nc net.Conn, addr string) (*conn, string, error) {
	a := attempt{addr: addr, dial: cl.opts.Dial}
	hello := masterproto.Hello{Token: cl.opts.Token, ClusterID: cl.opts.ClusterID}
	if cl.follows {
		hello.Follows, hello.Epoch = true, cl.epoch.Load()
	}
	b, err := masterproto.AppendHello(nil, 0, &hello)
	if err != nil {
		return nil, "", fmt.Errorf("masterclient: hello to %s: %w", addr, err)
	}
	if _, err := nc.Write(b); err != nil {
		return nil, "", fmt.Errorf("masterclient: hello to %s: %w: %w", addr, ErrUnavailable, err)
	}
	first, err := a.readFirst(ctx, nc, make([]byte, masterproto.HeaderLen))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("masterclient: hello to %s: %w: %w", addr, ErrUnavailable, err)
	}
	if err := a.identify(first); err != nil {
		return nil, "", err
	}
	r, err := masterproto.NewReader(io.MultiReader(bytes.NewReader(first), nc), cl.opts.Limits)
	if err != nil {
		return nil, "", err
	}
	h, body, err := r.ReadFrame()
	if err != nil {
		return nil, "", fmt.Errorf("masterclient: hello to %s: %w: %w", addr, ErrUnavailable, err)
	}
	var reply masterproto.HelloReply
	if err := masterproto.DecodeHelloReply(h, body, cl.opts.Limits, &reply); err != nil {
		return nil, "", fmt.Errorf("masterclient: hello to %s: %w", addr, err)
	}
	if err := reply.Err(); err != nil {
		redirect := ""
		if errors.Is(err, meta.ErrNotLeader) && reply.Term && reply.Leader != addr {
			redirect = reply.Leader
		}
		return nil, redirect, fmt.Errorf("masterclient: hello to %s: %w", addr, err)
	}
	if want := cl.opts.ClusterID; want != "" && reply.ClusterID != want {
		got := "has no cluster ID"
		if reply.ClusterID != "" {
			got = "is cluster " + reply.ClusterID
		}
		return nil, "", fmt.Errorf("masterclient: hello to %s: this peer is for cluster %s, the master there %s: %w", addr, want, got, ErrUnauthorized)
	}
	if cl.follows {
		if !reply.Term {
			return nil, "", fmt.Errorf("masterclient: hello to %s: the master answered without its term (an older build?): %w", addr, ErrUnavailable)
		}
		if err := cl.sawEpoch(reply.Epoch, reply.Margin); err != nil {
			return nil, "", fmt.Errorf("masterclient: hello to %s: %w", addr, err)
		}
	}
	maxBatch := cl.opts.Limits.MaxBatch
	if reply.MaxBatch > 0 && int(reply.MaxBatch) < maxBatch {
		maxBatch = int(reply.MaxBatch)
	}
	return &conn{cl: cl, addr: addr, nc: nc, r: r, lim: cl.opts.Limits, maxBatch: maxBatch, nextID: 1}, "", nil
}

// send writes cll's request. On success cll is pending and will be
// signalled by the reader (or by fail). An error means it was not sent.
func (c *conn) send(ctx context.Context, cll *call) error {
	c.mu.Lock()
	if c.dead {
		err := c.deadErr
		c.mu.Unlock()
		return err
	}
	id := c.nextID
	c.nextID++
	var err error
	if cll.encode == nil {
		if n := len(cll.lookupReq.IDs); n > c.maxBatch {
			c.mu.Unlock()
			return fmt.Errorf("%d keys, the master takes at most %d per request: %w: %w", n, c.maxBatch, meta.ErrBadRequest, frame.ErrBatchTooLong)
		}
		c.wbuf, err = masterproto.AppendLookup(c.wbuf[:0], id, &cll.lookupReq)
	} else {
		c.wbuf, err = cll.encode(c.wbuf[:0], id)
	}
	if err != nil {
		c.mu.Unlock()
		if !errors.Is(err, meta.ErrBadRequest) {
			err = fmt.Errorf("%w: %w", meta.ErrBadRequest, err)
		}
		return err
	}
	cll.id = id
	if cll.hb != nil {
		cll.sent = time.Now() // orders in the answer are trusted for the margin from here
	}
	c.pending = append(c.pending, cll)
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetWriteDeadline(dl)
	}
	_, werr := c.nc.Write(c.wbuf)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // do not pin a large REGISTER
	}
	c.mu.Unlock()
	if werr != nil {
		c.fail(fmt.Errorf("%w: write to %s: %w", ErrUnavailable, c.addr, werr))
	}
	return nil
}

// fail marks the connection dead, closes it and fails its pending calls
// with err. Only the first call has an effect.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead, c.deadErr = true, err
	c.gone.Store(true)
	calls := c.pending[c.head:]
	c.pending, c.head = nil, 0
	c.mu.Unlock()
	c.nc.Close()
	for _, cll := range calls {
		cll.err = err
		cll.done <- struct{}{}
	}
}

// pop removes and returns the oldest pending call (nil if none).
func (c *conn) pop() *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.head == len(c.pending) {
		return nil
	}
	cll := c.pending[c.head]
	c.pending[c.head] = nil
	c.head++
	if c.head == len(c.pending) {
		c.pending, c.head = c.pending[:0], 0
	}
	return cll
}

// readLoop matches responses to calls until the connection fails.
func (c *conn) readLoop() {
	defer c.cl.wg.Done()
	for {
		h, body, err := c.r.ReadFrame()
		if err != nil {
			c.fail(fmt.Errorf("%w: connection to %s: %w", ErrUnavailable, c.addr, err))
			return
		}
		cll := c.pop()
		if cll == nil || cll.id != h.ReqID {
			err := fmt.Errorf("%w: %s answered request %d with %v, expected %v: %w", ErrUnavailable, c.addr, h.ReqID, h.Op, cll, frame.ErrMalformed)
			if cll != nil {
				err = fmt.Errorf("%w: %s answered request %d with %v, expected request %d: %w", ErrUnavailable, c.addr, h.ReqID, h.Op, cll.id, frame.ErrMalformed)
				cll.err = err
				cll.done <- struct{}{}
			}
			c.fail(err)
			return
		}
		cll.err = c.decode(cll, h, body)
		if errors.Is(cll.err, meta.ErrNotLeader) {
			// The master refused a request as no longer leading and
			// closes the connection: the requests behind it were not
			// served either, and may go again (Client.do), so they fail
			// as it did, not with the EOF that follows. The connection
			// is marked dead before the refused call wakes, or its
			// second try could find it still live and be sent on it.
			c.fail(fmt.Errorf("%w: %s no longer leads: %w", ErrUnavailable, c.addr, meta.ErrNotLeader))
			cll.done <- struct{}{}
			return
		}
		cll.done <- struct{}{}
	}
}

// decode decodes a response into cll's destination.
func (c *conn) decode(cll *call, h masterproto.Header, body []byte) error {
	if h.Op == masterproto.OpError {
		re, err := masterproto.DecodeError(h, body)
		if err != nil {
			return err
		}
		return re
	}
	if h.Op != cll.want {
		return fmt.Errorf("%s answered request %d with %v, expected %v: %w", c.addr, h.ReqID, h.Op, cll.want, frame.ErrMalformed)
	}
	var err error
	switch cll.want {
	case masterproto.OpLookupResponse:
		err = masterproto.DecodeLookupResult(h, body, c.lim, cll.lookup)
	case masterproto.OpLocateResponse:
		err = masterproto.DecodeLocateResult(h, body, c.lim, cll.lookup)
	case masterproto.OpExistsResponse:
		cll.bools, err = masterproto.DecodeExistsResult(h, body, c.lim, cll.bools)
	case masterproto.OpPlaceResponse:
		err = masterproto.DecodePlacement(h, body, c.lim, cll.place)
	case masterproto.OpRegisterResponse:
		err = masterproto.DecodeRegisterReply(h, body, cll.reg)
	case masterproto.OpHeartbeatResponse:
		err = masterproto.DecodeHeartbeatReply(h, body, c.lim, cll.hb)
	case masterproto.OpNodesResponse:
		cll.nodes, err = masterproto.DecodeNodesResult(h, body, c.lim, nil)
	case masterproto.OpQueryResponse:
		cll.query, err = masterproto.DecodeQueryResult(h, body, c.lim)
	case masterproto.OpKeyInfoResponse:
		cll.infos, err = masterproto.DecodeKeyInfoResult(h, body, c.lim, cll.infos)
	case masterproto.OpExpireResponse:
		cll.bools, err = masterproto.DecodeExpireResult(h, body, c.lim, cll.bools)
	case masterproto.OpScanResponse:
		err = masterproto.DecodeScanResult(h, body, c.lim, cll.scan)
	case masterproto.OpCountResponse:
		err = masterproto.DecodeCountResult(h, body, cll.count)
	default:
		err = fmt.Errorf("no decoder for %v: %w", cll.want, frame.ErrUnknownOp)
	}
	return err
}
