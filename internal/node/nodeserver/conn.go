package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/server"
)

// lingerDrain is the most bytes read and discarded from a refused
// connection before it is closed (so the peer reads the refusal instead of
// a reset): 128 KiB holds the largest hello the format allows (12 + 64 +
// 65,535 bytes).
const lingerDrain = 128 << 10

// refusedDrain is the most bytes of a frame over the frame limit read and
// discarded after its ERROR is sent, so that a client still writing the
// frame finishes and reads the refusal instead of a connection reset. A
// longer frame's connection is closed at once.
const refusedDrain = 64 << 20

// copyChunk is the most bytes of a file block read into a buffer at once
// when sendfile is not available: 1 MiB keeps the per-call overhead small
// next to the copy and bounds the buffer a connection holds.
const copyChunk = 1 << 20

// conn is one client connection. Its fields are owned by its goroutine;
// the server skeleton interrupts it through sc.
type conn struct {
	s      *Server
	sc     *server.Conn // deadlines the skeleton can take over
	nc     net.Conn     // sc's connection itself (for writev and sendfile)
	remote string
	r      *wire.Reader
	cr     connReader
	sf     sendfiler
	tenant string
	// putHeld is the PUT budget bytes the connection holds (one payload
	// at most), given back by putBack, or when the connection ends (a
	// panic in the backend's Put must not leak them).
	putHeld int64
	// denyWrite, when not nil, is why the connection's grant may not
	// write its tenant's namespace (a shared namespace it only reads):
	// PUT, MPUT and DELETE are answered with it.
	denyWrite error

	// The request being served, counted (Stats.Requests) once, when its
	// answer starts going out, so a client that has its answer sees it
	// counted.
	reqOp      wire.Op
	reqCounted bool

	// Reused buffers.
	ids      []uint64
	names    []string
	keys     []block.Key
	statuses []wire.Status
	ents     []entry
	head     []byte // a block response's frame head and block headers
	wbuf     []byte // small responses
	vec      [][]byte
	out      net.Buffers // writev cursor (a field so writing does not allocate)
}

// entry is one block of a GET or MGET (named) response being sent.
type entry struct {
	id   uint64 // the key's ID (block.NameID of a name)
	code wire.Code
	ref  Ref
	held bool // ref is pinned and must be released
}

// connReader is what a connection's wire.Reader reads from: it counts the
// bytes and, while armed (waiting for the next frame), replaces the idle
// deadline with the frame deadline as soon as the frame's first bytes
// arrive, so a peer that sends part of a header and stalls is cut off after
// ReadTimeout, not IdleTimeout.
type connReader struct {
	c     *conn
	armed bool
	total int64 // bytes read from the connection
}

func (r *connReader) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	r.total += int64(n)
	r.c.s.ctr.bytesIn.Add(uint64(n))
	if n > 0 && r.armed {
		r.armed = false
		if derr := r.c.setReadDeadline(r.c.s.opts.ReadTimeout); derr != nil && err == nil {
			err = derr
		}
	}
	return n, err
}

func newConn(s *Server, sc *server.Conn) *conn {
	return &conn{s: s, sc: sc, nc: sc.Conn, remote: sc.RemoteAddr().String(), reqCounted: true}
}

// count counts the request being served with code, unless already counted.
func (c *conn) count(code wire.Code) {
	if !c.reqCounted {
		c.reqCounted = true
		c.s.ctr.request(c.reqOp, code)
	}
}

// setReadDeadline sets the read deadline d from now, unless the server is
// shutting down (server.ErrShuttingDown).
func (c *conn) setReadDeadline(d time.Duration) error { return c.sc.SetReadTimeout(d) }

// serve runs the connection until it ends.
func (c *conn) serve(ctx context.Context) {
	defer func() {
		if c.putHeld > 0 {
			c.s.puts.release(c.putHeld)
			c.putHeld = 0
		}
		if v := recover(); v != nil {
			c.s.ctr.panics.Add(1)
			c.s.log.Error("nodeserver: panic serving a connection (a bug); connection closed",
				"remote", c.remote, "tenant", c.tenant, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	c.cr.c = c
	c.sf.init(c.nc)
	r, err := wire.NewReader(&c.cr, c.s.lim)
	if err != nil { // cannot happen: New validated the limits
		c.s.log.Error("nodeserver: connection reader", "err", err)
		return
	}
	c.r = r
	err = c.handshake()
	for err == nil {
		err = c.serveFrame(ctx)
	}
	c.ended(err)
}

// ended counts and logs why the connection ended.
func (c *conn) ended(err error) {
	reason := "error"
	switch {
	case c.sc.Closing() || errors.Is(err, server.ErrShuttingDown):
		reason = "shutdown"
	case err == io.EOF || errors.Is(err, net.ErrClosed):
		reason = "closed by peer"
	case errors.Is(err, os.ErrDeadlineExceeded):
		reason = "timeout"
		c.s.ctr.timeouts.Add(1)
	}
	c.s.log.Debug("nodeserver: connection ended", "remote", c.remote, "tenant", c.tenant, "reason", reason, "err", err)
}

// handshake reads the hello and answers it, within the handshake deadline
// the skeleton set.
func (c *conn) handshake() error {
	var h wire.Hello
	err := c.r.ReadHello(&h)
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed)) {
		return err // the peer left or stalled: nobody to answer
	}
	var g auth.Grant
	if err == nil {
		g, err = c.s.authorize(&h)
	}
	if err != nil {
		c.s.ctr.handshakesRef.Add(1)
		ack := wire.HelloAckFor(err, c.s.lim)
		c.s.ctr.bytesOut.Add(uint64(linger(c.nc, wire.AppendHelloAck(nil, &ack), c.s.opts.HandshakeTimeout)))
		c.s.log.Debug("nodeserver: hello refused", "remote", c.remote, "code", ack.Code.String(), "err", err)
		return fmt.Errorf("nodeserver: hello from %s refused: %w", c.remote, err)
	}
	c.tenant = h.Tenant
	if werr := g.Check(h.Tenant, true); werr != nil {
		c.denyWrite = fmt.Errorf("nodeserver: %w: %w", werr, kvpool.ErrUnauthorized)
	}
	ack := wire.HelloAckFor(nil, c.s.lim)
	c.wbuf = wire.AppendHelloAck(c.wbuf[:0], &ack)
	return c.write(c.wbuf)
}

// authorize checks a well-formed hello's token and tenant: the token must
// authenticate, and its grant must allow reading the tenant's namespace
// (the hello's tenant is the namespace the connection wants). It returns
// the grant.
func (s *Server) authorize(h *wire.Hello) (auth.Grant, error) {
	g, err := s.srv.Auth().Authenticate(h.Token)
	if err != nil {
		return g, fmt.Errorf("tenant %q: %w: %w", h.Tenant, err, kvpool.ErrUnauthorized)
	}
	if err := g.Check(h.Tenant, false); err != nil {
		return g, fmt.Errorf("%w: %w", err, kvpool.ErrUnauthorized)
	}
	if s.opts.TenantPolicy != nil {
		if err := s.opts.TenantPolicy(h.Tenant); err != nil {
			return g, fmt.Errorf("tenant %q refused: %v: %w", h.Tenant, err, kvpool.ErrUnauthorized)
		}
	}
	return g, nil
}

// linger writes b to nc, half-closes it, and reads until the peer closes
// (at most lingerDrain bytes, within timeout) before closing nc, so the
// peer reads b rather than a connection reset. It returns the bytes
// written.
func linger(nc net.Conn, b []byte, timeout time.Duration) int {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(timeout))
	n, err := nc.Write(b)
	if err != nil {
		return n
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(nc, lingerDrain))
	return n
}

// isDecodeError reports whether err is the peer's malformed input.
func isDecodeError(err error) bool {
	for _, e := range [...]error{frame.ErrMalformed, frame.ErrFrameTooLarge, frame.ErrUnknownOp,
		frame.ErrBatchTooLong, frame.ErrPayloadTooLarge, frame.ErrTooLong, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// codeOf returns the status code sent for a backend error.
func codeOf(err error) wire.Code {
	if err == nil {
		return wire.CodeOK
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return wire.CodeUnavailable // the server is shutting down
	}
	if c := wire.CodeOf(err); c != wire.CodeOK {
		return c
	}
	return wire.CodeInternal
}

// serveFrame reads one request and answers it. A non-nil error ends the
// connection.
func (c *conn) serveFrame(ctx context.Context) error {
	// Idle until the next frame's first byte; if some of it has been read
	// ahead already, the frame has begun.
	wait := c.s.opts.IdleTimeout
	if c.cr.total > c.r.Offset() {
		wait = c.s.opts.ReadTimeout
	}
	if err := c.setReadDeadline(wait); err != nil {
		return err
	}
	c.cr.armed = true
	start := c.r.Offset()
	h, err := c.r.ReadHeader()
	c.cr.armed = false
	if derr := c.setReadDeadline(c.s.opts.ReadTimeout); derr != nil {
		return derr
	}
	c.reqOp, c.reqCounted = h.Op, false
	if err != nil {
		err = c.headerError(h, start, err)
		c.reqCounted = true // a header that failed to decode is counted once, as a decode error
		return err
	}
	code, err := c.dispatch(ctx, h)
	c.count(code) // when no answer was written
	return err
}

// headerError handles a failed ReadHeader of the frame at byte start: a
// recoverable decode error is answered with ERROR; any other ends the
// connection.
func (c *conn) headerError(h wire.Header, start int64, err error) error {
	if serr := c.r.Skip(); serr != nil { // the stream is lost
		if isDecodeError(err) {
			c.s.ctr.decodeErrors.Add(1)
			c.count(wire.CodeOf(err))
			if serr == err && !errors.Is(err, io.ErrUnexpectedEOF) {
				// The header itself lost the stream (a bad length): say
				// why, best effort, before closing.
				if c.writeError(h.ReqID, c.frameTooLarge(err)) == nil && errors.Is(err, frame.ErrFrameTooLarge) {
					c.drainRefused(start + int64(h.Len) - c.cr.total)
				}
			}
		}
		return err
	}
	c.s.ctr.decodeErrors.Add(1)
	return c.writeError(h.ReqID, err)
}

// drainRefused reads and discards the n bytes of a refused frame not yet
// read, within the read timeout, when there are at most refusedDrain.
// Closing a connection with unread bytes resets it, and a client still
// writing the frame would see the reset rather than the ERROR before it.
func (c *conn) drainRefused(n int64) {
	if n <= 0 || n > refusedDrain || c.setReadDeadline(c.s.opts.ReadTimeout) != nil {
		return
	}
	io.CopyN(io.Discard, &c.cr, n)
}

// frameTooLarge explains a frame over Limits.MaxFrame in the node's
// settings: a PUT of an object far over the max object size ends there.
func (c *conn) frameTooLarge(err error) error {
	if !errors.Is(err, frame.ErrFrameTooLarge) {
		return err
	}
	return fmt.Errorf("%w; frames are bounded by this node's max object size, %d bytes, plus %d "+
		"(node flag --max-object-bytes, config max_object_bytes, at most %d)", err, c.s.lim.MaxPayload, c.s.lim.MaxFrame-c.s.lim.MaxPayload, wire.MaxObjectSize)
}

// bodyError handles a failed body read: it skips the rest of the frame and
// answers ERROR, or, when the stream is lost, returns the error that ends
// the connection. It returns the code counted for the request.
func (c *conn) bodyError(h wire.Header, err error) (wire.Code, error) {
	code := wire.CodeOf(err)
	if isDecodeError(err) {
		c.s.ctr.decodeErrors.Add(1)
	}
	if serr := c.r.Skip(); serr != nil {
		return code, err
	}
	return code, c.writeError(h.ReqID, err)
}

// dispatch serves one request whose header has been read. It returns the
// code counted for the request and an error that ends the connection.
func (c *conn) dispatch(ctx context.Context, h wire.Header) (wire.Code, error) {
	switch h.Op {
	case wire.OpGet, wire.OpMGet:
		ids, err := c.r.ReadIDs(c.ids)
		c.ids = ids
		if err != nil {
			return c.bodyError(h, err)
		}
		return wire.CodeOK, c.get(ctx, h, c.idKeys(ids))
	case wire.OpGetNamed, wire.OpMGetNamed:
		keys, err := c.readNames(h)
		if err != nil {
			return c.bodyError(h, err)
		}
		return wire.CodeOK, c.get(ctx, h, keys)
	case wire.OpExistsNamed:
		keys, err := c.readNames(h)
		if err != nil {
			return c.bodyError(h, err)
		}
		return c.exists(h, keys)
	case wire.OpDeleteNamed:
		if c.denyWrite != nil {
			return c.refuse(h)
		}
		keys, err := c.readNames(h)
		if err != nil {
			return c.bodyError(h, err)
		}
		return c.delete(ctx, h, keys[0])
	case wire.OpPut, wire.OpMPut, wire.OpPutNamed, wire.OpMPutNamed:
		if c.denyWrite != nil {
			return c.refuse(h)
		}
		return c.put(ctx, h)
	case wire.OpAccess:
		if c.denyWrite != nil {
			return c.refuse(h)
		}
		return c.access(ctx, h)
	case wire.OpExists:
		ids, err := c.r.ReadIDs(c.ids)
		c.ids = ids
		if err != nil {
			return c.bodyError(h, err)
		}
		return c.exists(h, c.idKeys(ids))
	case wire.OpDelete:
		if c.denyWrite != nil {
			return c.refuse(h)
		}
		ids, err := c.r.ReadIDs(c.ids)
		c.ids = ids
		if err != nil {
			return c.bodyError(h, err)
		}
		return c.delete(ctx, h, block.Key{Tenant: c.tenant, ID: ids[0]})
	case wire.OpSync:
		return c.sync(ctx, h) // any connection: it reveals and changes nothing
	case wire.OpStats:
		resp, err := wire.AppendStatsResponse(c.wbuf[:0], h.ReqID, c.s.opts.Backend.Stats())
		if err != nil {
			return c.internal(h, err)
		}
		c.wbuf = resp
		return wire.CodeOK, c.write(resp)
	}
	// A valid op that is not a request: a response or ERROR frame.
	err := fmt.Errorf("nodeserver: %v frame (request %d) from %s: not a request: %w", h.Op, h.ReqID, c.remote, frame.ErrUnknownOp)
	return c.bodyError(h, err)
}

// idKeys returns the keys of ids in the connection's tenant (in a buffer
// reused by the next request).
func (c *conn) idKeys(ids []uint64) []block.Key {
	keys := c.keys[:0]
	for _, id := range ids {
		keys = append(keys, block.Key{Tenant: c.tenant, ID: id})
	}
	c.keys = keys
	return keys
}

// readNames reads a named request's names and returns their keys in the
// connection's tenant, block.Named(tenant, name) (in a buffer reused by
// the next request).
func (c *conn) readNames(h wire.Header) ([]block.Key, error) {
	names, err := c.r.ReadNames(c.names)
	c.names = names
	if err != nil {
		return nil, nameError(h, err)
	}
	keys := c.keys[:0]
	for _, n := range names {
		keys = append(keys, block.Named(c.tenant, n))
	}
	c.keys = keys
	return keys, nil
}

// nameError explains a name the decoder refused as too long.
func nameError(h wire.Header, err error) error {
	if errors.Is(err, frame.ErrTooLong) {
		return fmt.Errorf("nodeserver: %v (request %d): an object name is at most %d bytes (a fixed limit): %w", h.Op, h.ReqID, block.MaxNameLen, err)
	}
	return err
}

// exists answers EXISTS and EXISTS named for keys.
func (c *conn) exists(h wire.Header, keys []block.Key) (wire.Code, error) {
	st := c.statuses[:0]
	for _, k := range keys {
		code := wire.CodeNotFound
		if c.s.opts.Backend.Exists(k) {
			code = wire.CodeOK
		}
		st = append(st, wire.Status{ID: k.ID, Code: code})
	}
	c.statuses = st
	resp, err := wire.AppendStatusResponse(c.wbuf[:0], h.Op.Response(), h.ReqID, st)
	if err != nil {
		return c.internal(h, err)
	}
	c.wbuf = resp
	return wire.CodeOK, c.write(resp)
}

// delete answers DELETE and DELETE named for k.
func (c *conn) delete(ctx context.Context, h wire.Header, k block.Key) (wire.Code, error) {
	code := c.backendCode("delete", k, c.s.opts.Backend.Delete(ctx, k))
	resp, err := wire.AppendStatusResponse(c.wbuf[:0], h.Op.Response(), h.ReqID, []wire.Status{{ID: k.ID, Code: code}})
	if err != nil {
		return c.internal(h, err)
	}
	c.wbuf = resp
	return wire.CodeOK, c.write(c.wbuf)
}

// sync answers SYNC: CodeOK once the backend's index has its earlier
// changes (at once without a Syncer), or the code of why it has not
// within Options.SyncTimeout (CodeUnavailable when the wait ran out).
func (c *conn) sync(ctx context.Context, h wire.Header) (wire.Code, error) {
	code := wire.CodeOK
	if sb, ok := c.s.opts.Backend.(Syncer); ok {
		sctx, cancel := context.WithTimeout(ctx, c.s.opts.SyncTimeout)
		err := sb.Sync(sctx)
		cancel()
		if code = codeOf(err); code != wire.CodeOK {
			c.s.log.Debug("nodeserver: sync not done", "remote", c.remote, "tenant", c.tenant, "code", code.String(), "err", err)
		}
	}
	c.count(code)
	c.wbuf = wire.AppendSyncResponse(c.wbuf[:0], h.ReqID, code)
	return code, c.write(c.wbuf)
}

// tooLarge explains a payload the decoder refused as larger than the
// node's MaxPayload, in the node's settings.
func (c *conn) tooLarge(h wire.Header, bh wire.BlockHeader, err error) error {
	if !errors.Is(err, frame.ErrPayloadTooLarge) {
		return err
	}
	return fmt.Errorf("nodeserver: %v (request %d): an object of %d bytes is larger than this node's max object size, %d bytes "+
		"(node flag --max-object-bytes, config max_object_bytes, at most %d; less on a node whose RAM keeps less: --ram-bytes): %w",
		h.Op, h.ReqID, bh.Len, c.s.lim.MaxPayload, wire.MaxObjectSize, err)
}

// refuse answers a write the connection's grant does not allow with an
// ERROR frame (CodeUnauthorized, counted in Stats.Requests under the op),
// skipping the request's body unread; the connection stays usable.
func (c *conn) refuse(h wire.Header) (wire.Code, error) {
	c.s.log.Debug("nodeserver: write refused", "remote", c.remote, "tenant", c.tenant, "op", h.Op.String())
	if err := c.r.Skip(); err != nil {
		return wire.CodeUnauthorized, err
	}
	return wire.CodeUnauthorized, c.writeError(h.ReqID, fmt.Errorf("%v (request %d): %w", h.Op, h.ReqID, c.denyWrite))
}

// internal answers a request the server failed to serve.
func (c *conn) internal(h wire.Header, err error) (wire.Code, error) {
	c.s.log.Warn("nodeserver: request failed", "remote", c.remote, "tenant", c.tenant, "op", h.Op.String(), "err", err)
	return wire.CodeInternal, c.writeError(h.ReqID, fmt.Errorf("nodeserver: %v: %v: %w", h.Op, err, frame.ErrInternal))
}

// backendCode returns the status sent for a backend call's result, logging
// failures that are not part of the tier vocabulary.
func (c *conn) backendCode(what string, k block.Key, err error) wire.Code {
	code := codeOf(err)
	if code == wire.CodeInternal {
		c.s.log.Warn("nodeserver: backend "+what+" failed", "key", k.String(), "err", err)
	}
	return code
}

// put serves PUT, MPUT and their named forms: each payload is read into a
// pooled buffer and handed to the backend.
func (c *conn) put(ctx context.Context, h wire.Header) (wire.Code, error) {
	n, err := c.r.BeginBlocks()
	if err != nil {
		return c.bodyError(h, err)
	}
	named := h.Op.Named()
	st := c.statuses[:0]
	defer func() { c.statuses = st }()
	for range n {
		var k block.Key
		var bh wire.BlockHeader
		if named {
			var name string
			name, bh, err = c.r.NextNamed()
			k = block.Key{Tenant: c.tenant, ID: bh.ID, Name: name} // the decoder checked bh.ID == block.NameID(name)
			err = nameError(h, err)
		} else {
			bh, err = c.r.NextBlock()
			k = block.Key{Tenant: c.tenant, ID: bh.ID}
		}
		if err != nil {
			return c.bodyError(h, c.tooLarge(h, bh, err))
		}
		payload, buf, ok, code, err := c.readPayload(ctx, h, bh)
		if !ok {
			return code, err
		}
		code = c.stored(buf, c.backendCode("put", k, c.s.opts.Backend.Put(ctx, k, payload, bh.Checksum)))
		st = append(st, wire.Status{ID: bh.ID, Code: code})
	}
	resp, err := wire.AppendStatusResponse(c.wbuf[:0], h.Op.Response(), h.ReqID, st)
	if err != nil {
		return c.internal(h, err)
	}
	c.wbuf = resp
	return wire.CodeOK, c.write(c.wbuf)
}

// get serves GET, MGET and their named forms (keys in request order): it
// pins the blocks that fit in one frame, writes the frame, and releases
// them.
func (c *conn) get(ctx context.Context, h wire.Header, keys []block.Key) error {
	batch := h.Op == wire.OpMGet || h.Op == wire.OpMGetNamed
	headLen := wire.HeaderLen
	if batch {
		headLen += 4 // count
	}
	fixed := headLen + wire.BlockHeaderLen*len(keys)
	if fixed > c.s.lim.MaxFrame {
		err := fmt.Errorf("nodeserver: %v of %d keys (request %d): the response's headers alone need %d bytes, more than the frame limit %d: %w",
			h.Op, len(keys), h.ReqID, fixed, c.s.lim.MaxFrame, frame.ErrFrameTooLarge)
		return c.writeError(h.ReqID, err)
	}
	room := c.s.lim.MaxFrame - fixed
	ents := c.ents[:0]
	defer func() {
		for i := range ents {
			if ents[i].held {
				ents[i].ref.release()
			}
		}
		clear(ents) // drop references to payloads and files
		c.ents = ents[:0]
	}()
	full := false // the frame is full: the rest of the batch is CodeTooLarge
	var total uint64
	for _, k := range keys {
		e := entry{id: k.ID, code: wire.CodeTooLarge}
		if !full {
			ref, err := c.s.opts.Backend.Acquire(ctx, k)
			n := ref.size()
			switch {
			case err != nil:
				e.code = c.backendCode("acquire", k, err)
			case n > c.s.lim.MaxPayload:
				ref.release()
				c.s.log.Warn("nodeserver: backend block larger than Limits.MaxPayload; answered too large",
					"key", k.String(), "bytes", n, "max_payload", c.s.lim.MaxPayload)
			case n > room:
				ref.release()
				full = batch
			default:
				e.code, e.ref, e.held = wire.CodeOK, ref, true
				room -= n
				total += uint64(n)
			}
		}
		ents = append(ents, e)
	}
	head, err := wire.AppendBlockFrameHead(c.head[:0], h.Op.Response(), h.ReqID, len(ents), total)
	if err != nil { // cannot happen: the frame fits MaxFrame
		_, err = c.internal(h, err)
		return err
	}
	for i := range ents {
		e := &ents[i]
		bh := wire.BlockHeader{ID: e.id, Code: e.code}
		if e.code == wire.CodeOK {
			bh.Checksum, bh.Len = e.ref.Sum, uint32(e.ref.size())
		}
		head = wire.AppendBlockHeader(head, bh)
	}
	c.head = head
	return c.writeBlocks(ctx, ents, headLen)
}

// writeBlocks sends the frame whose headers are in c.head (headLen bytes of
// frame head, then one block header per entry) with the entries' payloads:
// memory payloads by writev, file payloads by sendfile (or a copy).
func (c *conn) writeBlocks(ctx context.Context, ents []entry, headLen int) error {
	paced := c.s.opts.Egress != nil
	vec := c.vec[:0]
	defer func() {
		clear(vec)
		c.vec = vec[:0]
	}()
	var vecPayload uint64 // payload bytes queued in vec
	pos, end := 0, headLen
	for i := range ents {
		e := &ents[i]
		end += wire.BlockHeaderLen
		n := e.ref.size()
		if e.code != wire.CodeOK || n == 0 {
			continue
		}
		if paced {
			if err := c.s.opts.Egress.Wait(ctx, n); err != nil {
				return fmt.Errorf("nodeserver: send to %s: egress pacer: %w", c.remote, err)
			}
		}
		c.s.ctr.blocksOut.Add(1)
		vec = append(vec, c.head[pos:end])
		pos = end
		if e.ref.File == nil {
			vec = append(vec, e.ref.Payload...)
			vecPayload += uint64(n)
			if !paced {
				continue
			}
		}
		if err := c.writev(vec, vecPayload); err != nil {
			return err
		}
		vec, vecPayload = vec[:0], 0
		if e.ref.File != nil {
			if err := c.sendFile(&e.ref, e.id); err != nil {
				return err
			}
		}
	}
	if pos < len(c.head) {
		vec = append(vec, c.head[pos:])
	}
	if len(vec) == 0 {
		return nil
	}
	return c.writev(vec, vecPayload)
}

// writev writes vec, whose memory payloads total payload bytes.
func (c *conn) writev(vec [][]byte, payload uint64) error {
	c.count(wire.CodeOK)
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout)); err != nil {
		return err
	}
	c.out = vec
	n, err := c.out.WriteTo(c.nc) // writev on a *net.TCPConn; consumes c.out
	c.out = nil
	c.s.ctr.bytesOut.Add(uint64(n))
	if err != nil {
		return fmt.Errorf("nodeserver: write response to %s: %w", c.remote, err)
	}
	c.s.ctr.writevBytes.Add(payload)
	return nil
}

// sendFile sends a file block's payload with sendfile, or by copying where
// sendfile is not available.
func (c *conn) sendFile(r *Ref, id uint64) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout)); err != nil {
		return err
	}
	var sent int64
	if fd := r.File.Fd(); fd != 0 {
		n, handled, err := c.sf.send(fd, r.Off, r.Len)
		sent = n
		c.s.ctr.bytesOut.Add(uint64(n))
		c.s.ctr.sendfileBytes.Add(uint64(n))
		if err != nil {
			c.s.log.Warn("nodeserver: sendfile failed; connection closed", "remote", c.remote,
				"id", fmt.Sprintf("%016x", id), "sent", n, "of", r.Len, "err", err)
			return fmt.Errorf("nodeserver: sendfile block %016x to %s: sent %d of %d bytes: %w", id, c.remote, n, r.Len, err)
		}
		if handled {
			return nil
		}
	}
	return c.copyFile(r, id, sent)
}

// copyFile sends a file block's payload from byte from on through a pooled
// buffer.
func (c *conn) copyFile(r *Ref, id uint64, from int64) error {
	buf := c.s.bufs.get(int(min(int64(r.Len)-from, copyChunk)))
	defer c.s.bufs.put(buf)
	for off := from; off < int64(r.Len); {
		b := (*buf)[:min(int64(r.Len)-off, int64(len(*buf)))]
		m, err := r.File.ReadAt(b, r.Off+off)
		if m < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			c.s.log.Warn("nodeserver: reading a file block failed; connection closed", "remote", c.remote,
				"id", fmt.Sprintf("%016x", id), "err", err)
			return fmt.Errorf("nodeserver: read block %016x: %d bytes at offset %d: got %d: %w", id, len(b), r.Off+off, m, err)
		}
		if err := c.write(b); err != nil {
			return err
		}
		c.s.ctr.copiedBytes.Add(uint64(m))
		off += int64(m)
	}
	return nil
}

// write writes b within the write timeout.
func (c *conn) write(b []byte) error {
	c.count(wire.CodeOK)
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout)); err != nil {
		return err
	}
	n, err := c.nc.Write(b)
	c.s.ctr.bytesOut.Add(uint64(n))
	if err != nil {
		return fmt.Errorf("nodeserver: write %d bytes to %s: %w", len(b), c.remote, err)
	}
	return nil
}

// writeError answers request reqID with an ERROR frame for err.
func (c *conn) writeError(reqID uint64, err error) error {
	code := wire.CodeOf(err)
	if code == wire.CodeOK {
		code = wire.CodeInternal // as AppendError sends it
	}
	c.count(code)
	c.wbuf = wire.AppendError(c.wbuf[:0], reqID, err)
	return c.write(c.wbuf)
}

// readPayload reads the payload of block bh of request h into a pooled
// buffer, after the ingress pacer admits its bytes. It returns the payload
// and its buffer (nil for an empty payload; hand it to stored) with ok
// set, or, with ok false, the code and error that end the request.
func (c *conn) readPayload(ctx context.Context, h wire.Header, bh wire.BlockHeader) (payload []byte, buf *[]byte, ok bool, code wire.Code, err error) {
	if bh.Len == 0 {
		return nil, nil, true, wire.CodeOK, nil
	}
	if p := c.s.opts.Ingress; p != nil {
		if err := p.Wait(ctx, int(bh.Len)); err != nil {
			return nil, nil, false, codeOf(err), fmt.Errorf("nodeserver: %v from %s: ingress pacer: %w", h.Op, c.remote, err)
		}
	}
	if err := c.s.puts.acquire(ctx, int64(bh.Len)); err != nil {
		return nil, nil, false, codeOf(err), fmt.Errorf("nodeserver: %v from %s: waiting for PUT buffer space (Options.MaxPutBytes): %w", h.Op, c.remote, err)
	}
	c.putHeld = int64(bh.Len)
	if err := c.setReadDeadline(c.s.opts.ReadTimeout); err != nil {
		c.s.puts.release(c.putHeld)
		c.putHeld = 0
		return nil, nil, false, wire.CodeUnavailable, err
	}
	buf = c.s.bufs.get(int(bh.Len))
	payload, err = c.r.ReadPayload((*buf)[:0])
	if err != nil {
		c.putBack(buf)
		code, err = c.bodyError(h, err)
		return nil, nil, false, code, err
	}
	return payload, buf, true, wire.CodeOK, nil
}

// putBack returns a PUT payload's buffer to the pool and its bytes to the
// server's PUT budget.
func (c *conn) putBack(buf *[]byte) {
	c.s.puts.release(c.putHeld)
	c.putHeld = 0
	c.s.bufs.put(buf)
}

// stored returns a stored block's payload buffer to the pool and counts the
// block in when the backend took it (code is the backend's answer).
func (c *conn) stored(buf *[]byte, code wire.Code) wire.Code {
	if buf != nil {
		c.putBack(buf)
	}
	if code == wire.CodeOK {
		c.s.ctr.blocksIn.Add(1)
	}
	return code
}
