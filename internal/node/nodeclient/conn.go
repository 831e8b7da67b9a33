package nodeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// DefaultTimeout bounds dialling plus the handshake, and every call whose
// context has no deadline: 30 s, the node's own per-frame timeouts
// (nodeserver.DefaultReadTimeout), so a client never waits for a node that
// has already given up.
const DefaultTimeout = 30 * time.Second

// ErrClosed is returned by calls on a closed Conn or Pool. It wraps
// kvpool.ErrClosed.
var ErrClosed = fmt.Errorf("nodeclient: %w", kvpool.ErrClosed)

// aLongTimeAgo is a deadline in the past: setting it interrupts blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// DialOptions configure a connection. The zero value of each field means its
// default.
type DialOptions struct {
	// Tenant is the connection's namespace (block.Key.Validate rules); ""
	// is the default tenant.
	Tenant string
	// Token is the auth token the node may require; never logged.
	Token []byte
	// Limits bound what the client accepts from the node. Zero fields mean
	// wire.DefaultLimits, except MaxFrame and MaxPayload, which default to
	// wire.LimitsFor(wire.MaxObjectSize): a client can talk to a node of
	// any max object size, and reads a payload only as its bytes arrive
	// (never allocating what a length field announces). The node's
	// advertised MaxFrame must not exceed Limits.MaxFrame, or Dial fails:
	// its responses could not be read.
	Limits wire.Limits
	// Timeout bounds dialling plus the handshake, and every call whose
	// context has no deadline (DefaultTimeout).
	Timeout time.Duration
	// Dial, when set, opens the TCP connection (network is "tcp") instead
	// of a net.Dialer: a caller's own route to the node, such as a dialer
	// that creates its sockets in another network namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Validate reports the first bad field.
func (o DialOptions) Validate() error {
	_, err := o.resolve()
	return err
}

func (o DialOptions) resolve() (DialOptions, error) {
	if err := (block.Key{Tenant: o.Tenant}).Validate(); err != nil {
		return o, fmt.Errorf("nodeclient: DialOptions.Tenant %q: %w", o.Tenant, err)
	}
	if o.Limits.MaxFrame == 0 && o.Limits.MaxPayload == 0 {
		big := wire.LimitsFor(wire.MaxObjectSize)
		o.Limits.MaxFrame, o.Limits.MaxPayload = big.MaxFrame, big.MaxPayload
	}
	lim, err := o.Limits.Resolve()
	if err != nil {
		return o, fmt.Errorf("nodeclient: DialOptions.Limits: %w", err)
	}
	o.Limits = lim
	if len(o.Token) > wire.MaxTokenLen {
		return o, fmt.Errorf("nodeclient: DialOptions.Token is %d bytes; a hello carries at most %d", len(o.Token), wire.MaxTokenLen)
	}
	switch {
	case o.Timeout < 0:
		return o, fmt.Errorf("nodeclient: DialOptions.Timeout is %v; want >= 0 (0 means the default, %v)", o.Timeout, DefaultTimeout)
	case o.Timeout == 0:
		o.Timeout = DefaultTimeout
	}
	return o, nil
}

// Counters are a client's counters.
type Counters struct {
	// Corruptions counts blocks received that failed verification against
	// the key asked for (reported as kvpool.ErrCorrupt).
	Corruptions uint64
	// Dials counts connections established.
	Dials uint64
	// Retries counts calls a Pool retried on a fresh connection because
	// an idle one had been closed by the node.
	Retries uint64
}

type counters struct {
	corruptions, dials, retries atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{Corruptions: c.corruptions.Load(), Dials: c.dials.Load(), Retries: c.retries.Load()}
}

// Conn is a connection to one node. It serves one request at a time:
// concurrent calls are safe and wait for each other.
type Conn struct {
	addr    string
	tenant  string
	nc      net.Conn
	r       *wire.Reader
	server  wire.Limits // the node's advertised MaxFrame, MaxBatch, MaxPayload
	maxKeys int         // most keys per MGET or EXISTS request
	maxPut  int         // most blocks per MPUT request
	timeout time.Duration
	// noAccess is set once the node answered ACCESS with unsupported op:
	// later MAccess calls go straight to MPUT.
	noAccess atomic.Bool
	ctr      *counters
	closed   atomic.Bool

	mu     sync.Mutex  // held for the whole of a call
	broken error       // why the stream was lost; every later call fails
	stop   func() bool // stops the current call's context watch
	reqID  uint64
	wbuf   []byte
	vec    [][]byte
	out    net.Buffers
	st     []wire.Status
	ids    []uint64
	names  []string
	ends   []int

	idleSince time.Time // set by Pool while the conn is idle
}

// Dial connects to the node at addr (host:port) and performs the handshake.
// A refused hello is a *wire.RemoteError: errors.Is(err,
// kvpool.ErrUnauthorized), frame.ErrVersion, kvpool.ErrUnavailable (the node is at
// its connection limit), and so on.
func Dial(ctx context.Context, addr string, opts DialOptions) (*Conn, error) {
	return dial(ctx, addr, opts, &counters{})
}

func dial(ctx context.Context, addr string, opts DialOptions, ctr *counters) (*Conn, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dialTCP := o.Dial
	if dialTCP == nil {
		dialTCP = new(net.Dialer).DialContext
	}
	nc, err := dialTCP(ctx, "tcp", addr)
	if err != nil {
		if unreachable(err) {
			err = fmt.Errorf("%w: %w", kvpool.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("nodeclient: dial %s: %w", addr, err)
	}
	c := &Conn{addr: addr, tenant: o.Tenant, nc: nc, timeout: o.Timeout, ctr: ctr}
	if err := c.handshake(ctx, o); err != nil {
		nc.Close()
		cerr := ctx.Err()
		if d, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(d) && errors.Is(err, os.ErrDeadlineExceeded) {
			// The connection's deadline is ctx's: it may pass a moment
			// before ctx notices.
			cerr = context.DeadlineExceeded
		}
		if cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		} else if unreachable(err) {
			err = fmt.Errorf("%w: %w", kvpool.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("nodeclient: handshake with %s as tenant %q: %w", addr, o.Tenant, err)
	}
	ctr.dials.Add(1)
	return c, nil
}

func (c *Conn) handshake(ctx context.Context, o DialOptions) error {
	deadline, _ := ctx.Deadline() // set by dial
	if err := c.nc.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	hello, err := wire.AppendHello(nil, &wire.Hello{Tenant: o.Tenant, Token: o.Token})
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(hello); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	// The node sends nothing after the ack until asked, so this reader
	// holds no bytes of later frames and can be replaced.
	hr, err := wire.NewReader(c.nc, o.Limits)
	if err != nil {
		return err
	}
	var ack wire.HelloAck
	if err := hr.ReadHelloAck(&ack); err != nil {
		return err
	}
	if err := ack.Err(); err != nil {
		return err
	}
	c.server = wire.Limits{MaxFrame: int(ack.MaxFrame), MaxBatch: int(ack.MaxBatch), MaxPayload: int(ack.MaxPayload)}
	if c.server.MaxFrame > o.Limits.MaxFrame {
		return fmt.Errorf("the node's frames may reach %d bytes, more than DialOptions.Limits.MaxFrame (%d): %w",
			c.server.MaxFrame, o.Limits.MaxFrame, kvpool.ErrTooLarge)
	}
	if c.server.MaxBatch < 1 || c.server.MaxPayload < 1 || c.server.MaxFrame < wire.HeaderLen+4+wire.BlockHeaderLen {
		return fmt.Errorf("hello-ack advertises unusable limits (frame %d, batch %d, payload %d): %w",
			c.server.MaxFrame, c.server.MaxBatch, c.server.MaxPayload, frame.ErrMalformed)
	}
	batch := min(c.server.MaxBatch, o.Limits.MaxBatch)
	c.maxKeys = max(1, min(batch, (c.server.MaxFrame-wire.HeaderLen-4)/wire.BlockHeaderLen))
	c.maxPut = batch
	c.r, err = wire.NewReader(c.nc, o.Limits)
	return err
}

// Addr returns the node's address.
func (c *Conn) Addr() string { return c.addr }

// Tenant returns the connection's tenant.
func (c *Conn) Tenant() string { return c.tenant }

// ServerLimits returns the limits the node advertised (MaxFrame, MaxBatch,
// MaxPayload).
func (c *Conn) ServerLimits() wire.Limits { return c.server }

// Counters returns the counters of the connection (shared by all of a
// Pool's connections).
func (c *Conn) Counters() Counters { return c.ctr.snapshot() }

// Broken reports whether the connection has been lost or closed; every call
// on a broken connection fails.
func (c *Conn) Broken() bool {
	if c.closed.Load() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken != nil
}

// Close closes the connection, interrupting a call in flight.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.nc.Close()
}

// do runs fn as one call (see begin and end).
func (c *Conn) do(ctx context.Context, fn func() error) error {
	if err := c.begin(ctx); err != nil {
		return err
	}
	return c.end(ctx, fn())
}

// begin starts a call: it takes c.mu (released by end, which must follow
// unless begin fails) and sets the connection's deadline from ctx.
func (c *Conn) begin(ctx context.Context) error {
	c.mu.Lock()
	err := c.closedErr()
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(c.timeout)
		}
		if derr := c.nc.SetDeadline(deadline); derr != nil {
			err = c.lost(derr)
		}
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.stop = nil
	if ctx.Done() != nil { // a context that can be cancelled interrupts the call
		c.stop = context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	}
	return nil
}

// closedErr says why a call cannot start; c.mu is held.
func (c *Conn) closedErr() error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.broken != nil {
		return fmt.Errorf("connection unusable after an earlier failure: %w", c.broken)
	}
	return nil
}

// end finishes the call begin started and returns its error, explained by
// ctx or Close when they interrupted it.
func (c *Conn) end(ctx context.Context, err error) error {
	defer c.mu.Unlock()
	if c.stop != nil && !c.stop() {
		// ctx ended during the call and its deadline may still be landing:
		// the connection cannot be trusted with the next call.
		if c.broken == nil {
			c.lost(context.Cause(ctx))
		}
		if err != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	}
	c.stop = nil
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection's deadline is ctx's: it may pass a moment before
		// ctx notices.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
	}
	if err != nil && c.closed.Load() && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// lost records that the stream is unusable and closes the connection. A
// connection that failed (the node went away) is kvpool.ErrUnavailable.
func (c *Conn) lost(err error) error {
	if unreachable(err) && !c.closed.Load() {
		err = fmt.Errorf("%w: %w", kvpool.ErrUnavailable, err)
	}
	if c.broken == nil {
		c.broken = err
		c.nc.Close()
	}
	return err
}

// decodeErr handles a decode error in a response: when the frame can be
// skipped the connection stays usable and err is returned; otherwise the
// connection is lost.
func (c *Conn) decodeErr(err error) error {
	if c.r.Skip() != nil {
		return c.lost(err)
	}
	return err
}

func (c *Conn) nextID() uint64 {
	c.reqID++
	return c.reqID
}

func (c *Conn) write(b []byte) error {
	if _, err := c.nc.Write(b); err != nil {
		return c.lost(fmt.Errorf("send request: %w", err))
	}
	return nil
}

func (c *Conn) writev(vec [][]byte) error {
	c.out = vec
	_, err := c.out.WriteTo(c.nc)
	c.out = nil
	clear(vec)
	if err != nil {
		return c.lost(fmt.Errorf("send request: %w", err))
	}
	return nil
}

// readHeader reads the header of the response to request reqID, which must
// be want or ERROR. An ERROR is read and returned as a *wire.RemoteError
// (the connection stays usable).
func (c *Conn) readHeader(reqID uint64, want wire.Op) error {
	h, err := c.r.ReadHeader()
	if err != nil {
		if h.ReqID != reqID {
			return c.lost(err)
		}
		return c.decodeErr(err)
	}
	if h.ReqID != reqID {
		return c.lost(fmt.Errorf("%v response to request %d, want request %d: %w", h.Op, h.ReqID, reqID, frame.ErrMalformed))
	}
	switch h.Op {
	case want:
		return nil
	case wire.OpError:
		re := &wire.RemoteError{}
		if err := c.r.ReadError(re); err != nil {
			return c.decodeErr(err)
		}
		return re
	}
	return c.lost(fmt.Errorf("%v frame answering request %d, want %v: %w", h.Op, reqID, want, frame.ErrMalformed))
}

// readBlock reads the next block entry of a response, expected to be key
// k's, into dst. blockErr is the block's own outcome (a status, or
// kvpool.ErrCorrupt when it fails verification against k: its tenant and
// ID or name); err is a failure of the response as a whole.
func (c *Conn) readBlock(k block.Key, dst []byte) (p []byte, sum uint32, blockErr, err error) {
	bh, err := c.r.NextBlock()
	if err != nil {
		return nil, 0, nil, c.decodeErr(err)
	}
	if bh.Code != wire.CodeOK {
		return nil, 0, fmt.Errorf("block %s: %w", k, wire.ErrorFor(bh.Code)), nil
	}
	// The checksum is computed as the payload arrives (wire.ReadPayloadSum),
	// each piece while it is still in the CPU's caches: the same
	// block.Checksum(k, p), without a second pass over p.
	p, got, err := c.r.ReadPayloadSum(dst, block.KeySum(k))
	if err != nil {
		return nil, 0, nil, c.decodeErr(err)
	}
	if bh.ID != k.ID || got != bh.Checksum {
		c.ctr.corruptions.Add(1)
		return nil, 0, fmt.Errorf("block %s: %d bytes received under id %016x with checksum %08x fail verification: %w",
			k, len(p), bh.ID, bh.Checksum, kvpool.ErrCorrupt), nil
	}
	return p, bh.Checksum, nil, nil
}

// idKey returns block id's key in the connection's tenant.
func (c *Conn) idKey(id uint64) block.Key { return block.Key{Tenant: c.tenant, ID: id} }

// get sends one GET (GET named for a named key) and reads its block.
func (c *Conn) get(k block.Key, dst []byte) (p []byte, sum uint32, blockErr, err error) {
	reqID := c.nextID()
	want := wire.OpGetResponse
	if k.IsNamed() {
		if c.wbuf, err = wire.AppendGetNamed(c.wbuf[:0], reqID, k.Name); err != nil {
			return nil, 0, nil, err
		}
		want = wire.OpGetNamedResponse
	} else {
		c.wbuf = wire.AppendGet(c.wbuf[:0], reqID, k.ID)
	}
	if cap(dst) >= frame.ReadBufferSize {
		// A large block is expected: its payload bypasses the read
		// buffer (a copy of up to 64 KiB per GET in the profile).
		c.r.ExpectLargeGet()
	}
	if err := c.write(c.wbuf); err != nil {
		return nil, 0, nil, err
	}
	if err := c.readHeader(reqID, want); err != nil {
		return nil, 0, nil, err
	}
	if _, err := c.r.BeginBlocks(); err != nil {
		return nil, 0, nil, c.decodeErr(err)
	}
	return c.readBlock(k, dst)
}

// Get fetches block id, reading its payload into dst when cap(dst) is large
// enough (otherwise into a new buffer), and returns the payload and its
// checksum. The block is verified: a mismatch is kvpool.ErrCorrupt and no
// bytes (dst's contents are then unspecified).
func (c *Conn) Get(ctx context.Context, id uint64, dst []byte) ([]byte, uint32, error) {
	// begin and end rather than do: no closure, so a Get does not allocate.
	if err := c.begin(ctx); err != nil {
		return nil, 0, fmt.Errorf("nodeclient: get %016x from %s: %w", id, c.addr, err)
	}
	p, sum, berr, err := c.get(c.idKey(id), dst)
	if err == nil {
		err = berr
	}
	if err = c.end(ctx, err); err != nil {
		return nil, 0, fmt.Errorf("nodeclient: get %016x from %s: %w", id, c.addr, err)
	}
	return p, sum, nil
}

// checkName reports why name cannot be an object name: it must be 1 to
// block.MaxNameLen bytes (any bytes). The error wraps block.ErrBadName and
// frame.ErrBadRequest.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("object name is empty (a name is 1 to %d bytes): %w: %w", block.MaxNameLen, block.ErrBadName, frame.ErrBadRequest)
	case len(name) > block.MaxNameLen:
		return fmt.Errorf("object name %s is %d bytes, longer than the %d-byte limit on names (fixed): %w: %w",
			block.Key{Name: name}, len(name), block.MaxNameLen, block.ErrBadName, frame.ErrBadRequest)
	}
	return nil
}

// GetNamed fetches the object name in the connection's tenant, as Get
// does: into dst when it is large enough, verified against
// block.Named(tenant, name) (a block stored under another name, even one
// with the same ID, is kvpool.ErrCorrupt). A name that is empty or over
// block.MaxNameLen bytes is refused before anything is sent.
func (c *Conn) GetNamed(ctx context.Context, name string, dst []byte) ([]byte, uint32, error) {
	k := block.Named(c.tenant, name)
	if err := checkName(name); err != nil {
		return nil, 0, fmt.Errorf("nodeclient: get from %s: %w", c.addr, err)
	}
	if err := c.begin(ctx); err != nil {
		return nil, 0, fmt.Errorf("nodeclient: get %s from %s: %w", k, c.addr, err)
	}
	p, sum, berr, err := c.get(k, dst)
	if err == nil {
		err = berr
	}
	if err = c.end(ctx, err); err != nil {
		return nil, 0, fmt.Errorf("nodeclient: get %s from %s: %w", k, c.addr, err)
	}
	return p, sum, nil
}

// Result is the outcome of one key of MGet.
type Result struct {
	// Payload is the verified block (nil when Err is set).
	Payload []byte
	// Sum is its checksum.
	Sum uint32
	// Err is the key's outcome: nil, or wrapping kvpool.ErrNotFound,
	// kvpool.ErrCorrupt, kvpool.ErrTooLarge, ...
	Err error
}

// MGet fetches the blocks ids, reading block i into dsts[i] when i <
// len(dsts) and its capacity suffices, and returns one Result per key in
// order. It splits the keys into batches by the node's limits. A non-nil
// error means the call failed as a whole.
func (c *Conn) MGet(ctx context.Context, ids []uint64, dsts [][]byte) ([]Result, error) {
	keys := make([]block.Key, len(ids))
	for i, id := range ids {
		keys[i] = c.idKey(id)
	}
	res := make([]Result, len(ids))
	err := c.do(ctx, func() error { return c.mget(keys, dsts, res, allIndexes(len(keys))) })
	if err != nil {
		return nil, fmt.Errorf("nodeclient: mget %d keys from %s: %w", len(ids), c.addr, err)
	}
	return res, nil
}

// MGetNamed fetches the objects names in the connection's tenant, as MGet
// does, each verified against block.Named(tenant, name). A name that is
// empty or over block.MaxNameLen bytes is not sent; its Result.Err wraps
// block.ErrBadName.
func (c *Conn) MGetNamed(ctx context.Context, names []string, dsts [][]byte) ([]Result, error) {
	keys := make([]block.Key, len(names))
	res := make([]Result, len(names))
	pending := make([]int, 0, len(names))
	for i, n := range names {
		keys[i] = block.Named(c.tenant, n)
		if err := checkName(n); err != nil {
			res[i].Err = err
			continue
		}
		pending = append(pending, i)
	}
	err := c.do(ctx, func() error { return c.mget(keys, dsts, res, pending) })
	if err != nil {
		return nil, fmt.Errorf("nodeclient: mget %d names from %s: %w", len(names), c.addr, err)
	}
	return res, nil
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// keyBatch returns how many of the keys keys[i], i in pending, go in one
// MGET, EXISTS or their named forms: at most c.maxKeys, and for names as
// many as fit the node's frame limit (at least one).
func (c *Conn) keyBatch(keys []block.Key, pending []int) int {
	n := min(len(pending), c.maxKeys)
	if len(pending) == 0 || !keys[pending[0]].IsNamed() {
		return n
	}
	size := wire.HeaderLen + 4
	for j := 0; j < n; j++ {
		need := wire.NameHeaderLen + len(keys[pending[j]].Name)
		if j > 0 && size+need > c.server.MaxFrame {
			return j
		}
		size += need
	}
	return n
}

// mget fetches the keys keys[i], i in pending (all chain keys or all
// named), into res.
func (c *Conn) mget(keys []block.Key, dsts [][]byte, res []Result, pending []int) error {
	dst := func(i int) []byte {
		if i < len(dsts) {
			return dsts[i]
		}
		return nil
	}
	for len(pending) > 0 {
		batch := pending[:c.keyBatch(keys, pending)]
		retry, err := c.mgetBatch(keys, batch, dst, res)
		if err != nil {
			return err
		}
		if len(retry) == len(batch) {
			// Not even the first block fitted an MGET response: ask for
			// it alone; GET's answer is final.
			i := retry[0]
			p, sum, berr, err := c.get(keys[i], dst(i))
			if err != nil {
				return err
			}
			res[i] = Result{Payload: p, Sum: sum, Err: berr}
			retry = retry[1:]
		}
		pending = append(retry, pending[len(batch):]...)
	}
	return nil
}

// batchKeys gathers the keys keys[i], i in batch (all named or all chain
// keys), into c.names (and reports true) or c.ids, for one request.
func (c *Conn) batchKeys(keys []block.Key, batch []int) (named bool) {
	if keys[batch[0]].IsNamed() {
		clear(c.names) // drop the previous batch's names
		c.names = c.names[:0]
		for _, i := range batch {
			c.names = append(c.names, keys[i].Name)
		}
		return true
	}
	c.ids = c.ids[:0]
	for _, i := range batch {
		c.ids = append(c.ids, keys[i].ID)
	}
	return false
}

// mgetBatch sends one MGET (or MGET named) for the keys keys[i], i in
// batch, and fills their results, except those answered CodeTooLarge (the
// response frame was full), which it returns to be asked again.
func (c *Conn) mgetBatch(keys []block.Key, batch []int, dst func(int) []byte, res []Result) (retry []int, err error) {
	reqID := c.nextID()
	want := wire.OpMGetResponse
	if c.batchKeys(keys, batch) {
		c.wbuf, err = wire.AppendMGetNamed(c.wbuf[:0], reqID, c.names)
		want = wire.OpMGetNamedResponse
	} else {
		c.wbuf, err = wire.AppendMGet(c.wbuf[:0], reqID, c.ids)
	}
	if err != nil {
		return nil, err
	}
	if err := c.write(c.wbuf); err != nil {
		return nil, err
	}
	if err := c.readHeader(reqID, want); err != nil {
		return nil, err
	}
	n, err := c.r.BeginBlocks()
	if err != nil {
		return nil, c.decodeErr(err)
	}
	if n != len(batch) {
		return nil, c.lost(fmt.Errorf("%v with %d blocks for %d keys: %w", want, n, len(batch), frame.ErrMalformed))
	}
	for _, i := range batch {
		p, sum, berr, err := c.readBlock(keys[i], dst(i))
		if err != nil {
			return nil, err
		}
		if errors.Is(berr, kvpool.ErrTooLarge) {
			retry = append(retry, i)
			continue
		}
		res[i] = Result{Payload: p, Sum: sum, Err: berr}
	}
	return retry, nil
}

// Put stores payload as block id (its checksum computed with
// block.Checksum). The payload is sent from where it lies (writev).
func (c *Conn) Put(ctx context.Context, id uint64, payload []byte) error {
	errs, err := c.mput(ctx, wire.OpPut, []block.Key{c.idKey(id)}, [][]byte{payload}, nil)
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		return fmt.Errorf("nodeclient: put %016x (%d bytes) to %s: %w", id, len(payload), c.addr, err)
	}
	return nil
}

// PutNamed stores payload as the object name in the connection's tenant
// (checksum block.Checksum(block.Named(tenant, name), payload)), sent from
// where it lies. A payload over the node's max object size (its
// MaxPayload) or a name that is empty or over block.MaxNameLen bytes is
// refused before anything is sent, with an error that gives the size and
// the limit (kvpool.ErrTooLarge; block.ErrBadName).
func (c *Conn) PutNamed(ctx context.Context, name string, payload []byte) error {
	errs, err := c.mput(ctx, wire.OpPutNamed, []block.Key{block.Named(c.tenant, name)}, [][]byte{payload}, nil)
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		return fmt.Errorf("nodeclient: put %s (%d bytes) to %s: %w", block.Key{Name: name}, len(payload), c.addr, err)
	}
	return nil
}

// MPut stores payloads[i] as block ids[i] and returns one error per block
// (nil when stored). It splits the blocks into batches by the node's
// limits; a payload larger than the node's MaxPayload is not sent and gets
// kvpool.ErrTooLarge. A non-nil error means the call failed as a whole (some
// blocks may have been stored).
func (c *Conn) MPut(ctx context.Context, ids []uint64, payloads [][]byte) ([]error, error) {
	if len(ids) != len(payloads) {
		return nil, fmt.Errorf("nodeclient: mput to %s: %d ids but %d payloads", c.addr, len(ids), len(payloads))
	}
	keys := make([]block.Key, len(ids))
	for i, id := range ids {
		keys[i] = c.idKey(id)
	}
	errs, err := c.mput(ctx, wire.OpMPut, keys, payloads, nil)
	if err != nil {
		return nil, fmt.Errorf("nodeclient: mput %d blocks to %s: %w", len(ids), c.addr, err)
	}
	return errs, nil
}

// MPutNamed stores payloads[i] as the object names[i] in the connection's
// tenant and returns one error per object, as MPut does; an object too
// large for the node or with a bad name is not sent and gets its error
// (kvpool.ErrTooLarge, block.ErrBadName).
func (c *Conn) MPutNamed(ctx context.Context, names []string, payloads [][]byte) ([]error, error) {
	if len(names) != len(payloads) {
		return nil, fmt.Errorf("nodeclient: mput to %s: %d names but %d payloads", c.addr, len(names), len(payloads))
	}
	keys := make([]block.Key, len(names))
	for i, n := range names {
		keys[i] = block.Named(c.tenant, n)
	}
	errs, err := c.mput(ctx, wire.OpMPutNamed, keys, payloads, nil)
	if err != nil {
		return nil, fmt.Errorf("nodeclient: mput %d named objects to %s: %w", len(names), c.addr, err)
	}
	return errs, nil
}

// MAccess reports one request's accesses to the node's blocks, in order
// (the ACCESS op): entry i is a touch of block ids[i] when hints[i].Touch
// (payloads[i] must be empty), else a put of payloads[i]; hints[i] gives
// the block's chain position to the node's eviction policy. It returns
// one error per entry: nil, kvpool.ErrNotFound for a touch of a block the
// node does not hold in memory, or a put's error. Batches are split as
// MPut splits them, so a long request's entries may arrive in several
// frames, in order.
//
// A node that predates ACCESS answers it with unsupported op; MAccess
// then stores the put entries with MPut, gives each touch an error
// matching frame.ErrUnknownOp, and skips the attempt on later calls.
func (c *Conn) MAccess(ctx context.Context, ids []uint64, hints []wire.Hint, payloads [][]byte) ([]error, error) {
	if len(ids) != len(payloads) || len(ids) != len(hints) {
		return nil, fmt.Errorf("nodeclient: access to %s: %d ids, %d hints and %d payloads", c.addr, len(ids), len(hints), len(payloads))
	}
	for i, h := range hints {
		if h.Touch && len(payloads[i]) > 0 {
			return nil, fmt.Errorf("nodeclient: access to %s: entry %d (id %016x) is a touch with a %d-byte payload", c.addr, i, ids[i], len(payloads[i]))
		}
	}
	keys := make([]block.Key, len(ids))
	for i, id := range ids {
		keys[i] = c.idKey(id)
	}
	if !c.noAccess.Load() {
		errs, err := c.mput(ctx, wire.OpAccess, keys, payloads, hints)
		if err == nil {
			return errs, nil
		}
		if re, ok := errors.AsType[*wire.RemoteError](err); !ok || re.Code != wire.CodeUnsupportedOp {
			return nil, fmt.Errorf("nodeclient: access %d blocks on %s: %w", len(ids), c.addr, err)
		}
		c.noAccess.Store(true)
	}
	errs := make([]error, len(ids))
	var putKeys []block.Key
	var putPayloads [][]byte
	var at []int
	for i, h := range hints {
		if h.Touch {
			errs[i] = fmt.Errorf("block %s: the node takes no touches (ACCESS): %w", keys[i], frame.ErrUnknownOp)
			continue
		}
		putKeys, putPayloads, at = append(putKeys, keys[i]), append(putPayloads, payloads[i]), append(at, i)
	}
	if len(putKeys) == 0 {
		return errs, nil
	}
	perr, err := c.mput(ctx, wire.OpMPut, putKeys, putPayloads, nil)
	if err != nil {
		return nil, fmt.Errorf("nodeclient: access %d blocks on %s (as MPUT): %w", len(ids), c.addr, err)
	}
	for j, i := range at {
		errs[i] = perr[j]
	}
	return errs, nil
}

// entryLen returns the bytes block entry i of an op request takes beyond
// its payload: the block header, and the hint (ACCESS) or name (named
// ops).
func entryLen(op wire.Op, k block.Key, hints []wire.Hint) int {
	n := wire.BlockHeaderLen
	if hints != nil {
		n += wire.HintLen
	}
	if op.Named() {
		n += wire.NameHeaderLen + len(k.Name)
	}
	return n
}

// refuse returns why block k with payload p cannot be sent in an op
// request, or nil: a payload over the node's MaxPayload (its max object
// size), a bad name, or (for a name) a frame over the node's MaxFrame.
func (c *Conn) refuse(op wire.Op, k block.Key, p []byte) error {
	if op.Named() {
		if err := checkName(k.Name); err != nil {
			return err
		}
	}
	if len(p) > c.server.MaxPayload {
		noun := "block"
		if k.Name != "" {
			noun = "object"
		}
		return fmt.Errorf("%s %s: %d bytes, larger than the node's max object size of %d bytes "+
			"(node flag --max-object-bytes, config max_object_bytes, less on a node whose RAM keeps less: --ram-bytes): %w",
			noun, k, len(p), c.server.MaxPayload, kvpool.ErrTooLarge)
	}
	if op.Named() {
		if need := wire.HeaderLen + 4 + entryLen(op, k, nil) + len(p); need > c.server.MaxFrame {
			return fmt.Errorf("block %s: %d bytes with a %d-byte name need a %d-byte frame, more than the node's frame limit of %d bytes: %w",
				k, len(p), len(k.Name), need, c.server.MaxFrame, kvpool.ErrTooLarge)
		}
	}
	return nil
}

// mput sends PUT, MPUT, their named forms or (with hints) ACCESS requests
// for the blocks keys[i] (chain keys, or named keys for a named op).
func (c *Conn) mput(ctx context.Context, op wire.Op, keys []block.Key, payloads [][]byte, hints []wire.Hint) ([]error, error) {
	errs := make([]error, len(keys))
	var send []int // indexes to send
	for i, p := range payloads {
		if errs[i] = c.refuse(op, keys[i], p); errs[i] != nil {
			continue
		}
		send = append(send, i)
	}
	err := c.do(ctx, func() error {
		for len(send) > 0 {
			// As many blocks as fit the node's batch and frame limits (at
			// least one: refuse checked that each fits alone).
			n, size := 0, wire.HeaderLen+4
			for n < len(send) && n < c.maxPut {
				i := send[n]
				need := entryLen(op, keys[i], hints) + len(payloads[i])
				if n > 0 && size+need > c.server.MaxFrame {
					break
				}
				size += need
				n++
			}
			if err := c.mputBatch(op, keys, payloads, hints, send[:n], errs); err != nil {
				return err
			}
			send = send[n:]
		}
		return nil
	})
	return errs, err
}

// mputBatch sends one PUT, MPUT, named PUT or MPUT, or ACCESS (hints not
// nil) for the blocks i in batch and records their statuses in errs.
func (c *Conn) mputBatch(op wire.Op, keys []block.Key, payloads [][]byte, hints []wire.Hint, batch []int, errs []error) error {
	var total, nameBytes uint64
	for _, i := range batch {
		total += uint64(len(payloads[i]))
		nameBytes += uint64(len(keys[i].Name))
	}
	reqID := c.nextID()
	var head []byte
	var err error
	if op.Named() {
		head, err = wire.AppendNamedBlockFrameHead(c.wbuf[:0], op, reqID, len(batch), nameBytes, total)
	} else {
		head, err = wire.AppendBlockFrameHead(c.wbuf[:0], op, reqID, len(batch), total)
	}
	if err != nil {
		return err
	}
	ends := c.ends[:0] // where each entry's headers end in head
	for _, i := range batch {
		p, k := payloads[i], keys[i]
		bh := wire.BlockHeader{ID: k.ID, Code: wire.CodeOK, Len: uint32(len(p))}
		if hints != nil {
			head = wire.AppendHint(head, hints[i])
		}
		if op.Named() {
			if head, err = wire.AppendName(head, k.Name); err != nil {
				return err // cannot happen: refuse checked the name
			}
		}
		if hints == nil || !hints[i].Touch {
			bh.Checksum = block.Checksum(k, p)
		}
		head = wire.AppendBlockHeader(head, bh)
		ends = append(ends, len(head))
	}
	c.wbuf, c.ends = head, ends
	vec := c.vec[:0]
	pos := 0
	for j, i := range batch {
		vec = append(vec, head[pos:ends[j]])
		if len(payloads[i]) > 0 {
			vec = append(vec, payloads[i])
		}
		pos = ends[j]
	}
	c.vec = vec
	if err := c.writev(vec); err != nil {
		return err
	}
	if err := c.readHeader(reqID, op.Response()); err != nil {
		return err
	}
	st, err := c.r.ReadStatuses(c.st)
	c.st = st
	if err != nil {
		return c.decodeErr(err)
	}
	if len(st) != len(batch) {
		return c.lost(fmt.Errorf("%v response with %d statuses for %d blocks: %w", op, len(st), len(batch), frame.ErrMalformed))
	}
	for j, i := range batch {
		if st[j].ID != keys[i].ID {
			return c.lost(fmt.Errorf("%v response status %d is for id %016x, want %016x: %w", op, j, st[j].ID, keys[i].ID, frame.ErrMalformed))
		}
		if e := wire.ErrorFor(st[j].Code); e != nil {
			if st[j].Code == wire.CodeTooLarge {
				e = fmt.Errorf("%d bytes, the node's max object size is %d bytes (node flag --max-object-bytes, config max_object_bytes): %w",
					len(payloads[i]), c.server.MaxPayload, e)
			}
			errs[i] = fmt.Errorf("block %s: %w", keys[i], e)
		}
	}
	return nil
}

// Exists reports, for each key, whether the node holds it. The node
// answers without touching recency or read leases.
func (c *Conn) Exists(ctx context.Context, ids []uint64) ([]bool, error) {
	keys := make([]block.Key, len(ids))
	for i, id := range ids {
		keys[i] = c.idKey(id)
	}
	out, err := c.exists(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("nodeclient: exists %d keys on %s: %w", len(ids), c.addr, err)
	}
	return out, nil
}

// ExistsNamed reports, for each name in the connection's tenant, whether
// the node holds it, as Exists does. A name that is empty or over
// block.MaxNameLen bytes fails the call before anything is sent.
func (c *Conn) ExistsNamed(ctx context.Context, names []string) ([]bool, error) {
	keys := make([]block.Key, len(names))
	for i, n := range names {
		if err := checkName(n); err != nil {
			return nil, fmt.Errorf("nodeclient: exists %d names on %s: name %d: %w", len(names), c.addr, i, err)
		}
		keys[i] = block.Named(c.tenant, n)
	}
	out, err := c.exists(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("nodeclient: exists %d names on %s: %w", len(names), c.addr, err)
	}
	return out, nil
}

// exists sends EXISTS (or EXISTS named) requests for keys, all chain keys
// or all named.
func (c *Conn) exists(ctx context.Context, keys []block.Key) ([]bool, error) {
	out := make([]bool, len(keys))
	pending := allIndexes(len(keys))
	err := c.do(ctx, func() error {
		for len(pending) > 0 {
			batch := pending[:c.keyBatch(keys, pending)]
			pending = pending[len(batch):]
			reqID := c.nextID()
			want := wire.OpExistsResponse
			var err error
			if c.batchKeys(keys, batch) {
				c.wbuf, err = wire.AppendExistsNamed(c.wbuf[:0], reqID, c.names)
				want = wire.OpExistsNamedResponse
			} else {
				c.wbuf, err = wire.AppendExists(c.wbuf[:0], reqID, c.ids)
			}
			if err != nil {
				return err
			}
			if err := c.write(c.wbuf); err != nil {
				return err
			}
			if err := c.readHeader(reqID, want); err != nil {
				return err
			}
			st, err := c.r.ReadStatuses(c.st)
			c.st = st
			if err != nil {
				return c.decodeErr(err)
			}
			if len(st) != len(batch) {
				return c.lost(fmt.Errorf("%v with %d statuses for %d keys: %w", want, len(st), len(batch), frame.ErrMalformed))
			}
			for j, s := range st {
				k := keys[batch[j]]
				switch {
				case s.ID != k.ID:
					return c.lost(fmt.Errorf("%v status %d is for id %016x, want %016x: %w", want, j, s.ID, k.ID, frame.ErrMalformed))
				case s.Code == wire.CodeOK:
					out[batch[j]] = true
				case s.Code != wire.CodeNotFound:
					return fmt.Errorf("block %s: %w", k, wire.ErrorFor(s.Code))
				}
			}
		}
		return nil
	})
	return out, err
}

// Delete removes block id; it returns an error wrapping kvpool.ErrNotFound
// when the node does not hold it.
func (c *Conn) Delete(ctx context.Context, id uint64) error {
	if err := c.delete(ctx, c.idKey(id)); err != nil {
		return fmt.Errorf("nodeclient: delete %016x on %s: %w", id, c.addr, err)
	}
	return nil
}

// DeleteNamed removes the object name from the connection's tenant; it
// returns an error wrapping kvpool.ErrNotFound when the node does not hold
// it. A bad name is refused before anything is sent.
func (c *Conn) DeleteNamed(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("nodeclient: delete on %s: %w", c.addr, err)
	}
	k := block.Named(c.tenant, name)
	if err := c.delete(ctx, k); err != nil {
		return fmt.Errorf("nodeclient: delete %s on %s: %w", k, c.addr, err)
	}
	return nil
}

func (c *Conn) delete(ctx context.Context, k block.Key) error {
	return c.do(ctx, func() error {
		reqID := c.nextID()
		want := wire.OpDeleteResponse
		if k.IsNamed() {
			var err error
			if c.wbuf, err = wire.AppendDeleteNamed(c.wbuf[:0], reqID, k.Name); err != nil {
				return err
			}
			want = wire.OpDeleteNamedResponse
		} else {
			c.wbuf = wire.AppendDelete(c.wbuf[:0], reqID, k.ID)
		}
		if err := c.write(c.wbuf); err != nil {
			return err
		}
		if err := c.readHeader(reqID, want); err != nil {
			return err
		}
		st, err := c.r.ReadStatuses(c.st)
		c.st = st
		if err != nil {
			return c.decodeErr(err)
		}
		if st[0].ID != k.ID {
			return c.lost(fmt.Errorf("%v for id %016x, want %016x: %w", want, st[0].ID, k.ID, frame.ErrMalformed))
		}
		return wire.ErrorFor(st[0].Code)
	})
}

// Sync waits until the node's master has indexed every change the node
// made before the call (puts and deletes on any connection), so that
// lookups through the master see them; at once for a node without a
// master. The node bounds its wait (nodeserver.Options.SyncTimeout) and
// then answers with an error wrapping kvpool.ErrUnavailable; a node that
// predates SYNC answers with a *wire.RemoteError of CodeUnsupportedOp
// (frame.ErrUnknownOp), and the connection stays usable.
func (c *Conn) Sync(ctx context.Context) error {
	err := c.do(ctx, func() error {
		reqID := c.nextID()
		c.wbuf = wire.AppendSync(c.wbuf[:0], reqID)
		if err := c.write(c.wbuf); err != nil {
			return err
		}
		if err := c.readHeader(reqID, wire.OpSyncResponse); err != nil {
			return err
		}
		st, err := c.r.ReadStatuses(c.st)
		c.st = st
		if err != nil {
			return c.decodeErr(err)
		}
		if st[0].ID != 0 {
			return c.lost(fmt.Errorf("%v with key id %016x, want 0: %w", wire.OpSyncResponse, st[0].ID, frame.ErrMalformed))
		}
		return wire.ErrorFor(st[0].Code)
	})
	if err != nil {
		return fmt.Errorf("nodeclient: sync %s with its master: %w", c.addr, err)
	}
	return nil
}

// Stats returns the node's per-tier counters.
func (c *Conn) Stats(ctx context.Context) ([]wire.TierStats, error) {
	var tiers []wire.TierStats
	err := c.do(ctx, func() error {
		reqID := c.nextID()
		c.wbuf = wire.AppendStats(c.wbuf[:0], reqID)
		if err := c.write(c.wbuf); err != nil {
			return err
		}
		if err := c.readHeader(reqID, wire.OpStatsResponse); err != nil {
			return err
		}
		var err error
		if tiers, err = c.r.ReadStats(nil); err != nil {
			return c.decodeErr(err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nodeclient: stats of %s: %w", c.addr, err)
	}
	return tiers, nil
}

// unreachable reports whether err is the connection failing (refused,
// reset, closed by the node, timed out) rather than the node's answer, a
// protocol error or the caller's context ending.
func unreachable(err error) bool {
	if errors.Is(err, kvpool.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	_, isNet := errors.AsType[net.Error](err)
	return isNet || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
