package respserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/resp"
	"github.com/kvpool/kvpool/internal/server"
)

// Idle connections: see conn.next.
const (
	// idleRelease is how long a connection waits idle between commands
	// before it lets go of its buffers (resp.Reader.Shrink) and of what
	// they hold of the budget: 200 ms, thousands of times the gap between
	// one command and the next of a client sending value after value
	// (redis-benchmark, an engine offloading blocks: microseconds on a
	// LAN), so those keep their buffers, and short beside ReadTimeout, so
	// memory idle connections hold is back well before a reservation
	// waiting for it gives up.
	idleRelease = 200 * time.Millisecond
	// idleRecheck is how long an idle wait lasts before it is re-armed when
	// no IdleTimeout applies: an hour, any long period works (an expiry
	// while idle only re-arms it); it keeps the deadline a real one.
	idleRecheck = time.Hour
)

// conn is one client connection; its fields are owned by its goroutine.
type conn struct {
	s      *Server
	sc     *server.Conn
	remote string
	id     int64
	r      *resp.Reader
	w      *resp.Writer
	cr     connReader
	stop   <-chan struct{} // the serving context's Done

	// The connection's identity: authed is false until AUTH succeeded on
	// a server that requires it; tenant is the namespace its commands act
	// on; grant what its token allows.
	authed  bool
	tenant  string
	grant   auth.Grant
	name    string // CLIENT SETNAME
	libName string // CLIENT SETINFO
	libVer  string
	quit    bool

	// Deadlines (see next): handshakeEnd bounds an unauthenticated
	// connection's life on a server with tokens; cmdDeadline is the read
	// deadline of the command being read; idleSince is when the current
	// idle wait began; shrunk that the buffers were let go since.
	handshakeEnd time.Time
	cmdDeadline  time.Time
	idleSince    time.Time
	shrunk       bool
	// idleArmed is the read deadline an idle wait last set on the
	// connection, zero once a command's deadline replaced it; writeArmed
	// the write deadline last set. Each is kept while it still bounds
	// what it should (armIdle, armWrite): a deadline change costs about
	// as much as the command a GET from memory is.
	idleArmed  time.Time
	writeArmed time.Time

	hold holder // this connection's share of the server's budget

	lower []byte   // the command name, lower-cased
	names []string // reused key lists
}

// connReader arms the command deadline: a command must arrive whole
// within ReadTimeout of its first byte. idle is set while the connection
// waits for the first byte of a command under the idle deadline; stale
// when a command has begun (in the Reader's buffer, or with the read that
// ended the idle wait), so that its deadline is set on the connection
// before the next read it needs: a command that arrived whole needs none,
// and pipelined small commands and one-read commands cost no deadline
// change.
type connReader struct {
	c     *conn
	idle  bool
	stale bool
}

func (r *connReader) Read(p []byte) (int, error) {
	// Replies go out before the connection waits for input: a client
	// that sends a command and the start of the next, then waits for the
	// first reply, gets it (the Reader holding a partial command is not
	// "no more input buffered").
	if r.c.w.Buffered() > 0 {
		if err := r.c.w.Flush(); err != nil {
			return 0, err
		}
	}
	if r.stale {
		r.stale = false
		if err := r.c.armCommand(time.Now()); err != nil {
			return 0, err
		}
	}
	n, err := r.c.sc.Read(p)
	if n > 0 && r.idle {
		r.idle = false
		r.stale = true
		r.c.beginCommand(time.Now())
	}
	return n, err
}

// beginCommand sets the deadline of a command that began at now:
// ReadTimeout, or the end of the handshake for a connection not yet
// authenticated. armCommand sets it on the connection.
func (c *conn) beginCommand(now time.Time) {
	c.cmdDeadline = now.Add(c.s.opts.ReadTimeout)
	if !c.authed && c.handshakeEnd.Before(c.cmdDeadline) {
		c.cmdDeadline = c.handshakeEnd
	}
}

// armCommand sets the command's deadline (beginCommand) as the
// connection's read deadline, before a read the command needs.
func (c *conn) armCommand(now time.Time) error {
	c.idleArmed = time.Time{}
	return c.sc.SetReadTimeout(c.cmdDeadline.Sub(now))
}

func newConn(s *Server, sc *server.Conn, stop <-chan struct{}) *conn {
	c := &conn{s: s, sc: sc, remote: sc.RemoteAddr().String(), id: s.ids.Add(1), stop: stop}
	c.cr.c = c
	c.r = resp.NewReader(&c.cr, s.opts.Limits)
	c.r.SetMemory(c)
	c.w = resp.NewWriter(connWriter{c})
	// An open server (no token; package listen keeps it on loopback)
	// serves every connection as the default tenant's without AUTH; a
	// server with tokens requires AUTH first, within HandshakeTimeout of
	// connecting, as the node protocol requires a token in its hello.
	if tab := s.srv.Auth(); tab.Open() {
		c.grant, _ = tab.Authenticate(nil)
		c.authed = true
	}
	c.handshakeEnd = time.Now().Add(s.opts.HandshakeTimeout)
	return c
}

// Reserve and Release are the connection's resp.Memory: its Reader's
// buffers are charged to the server's budget before they grow (see
// budget). A reservation waits at most until the command's read deadline.
func (c *conn) Reserve(n int) error {
	return c.s.args.acquire(c.stop, &c.hold, int64(n), c.cmdDeadline)
}

func (c *conn) Release(n int) { c.s.args.release(&c.hold, int64(n)) }

// connWriter is what the connection's resp.Writer writes to: the
// connection, within WriteTimeout of each write.
type connWriter struct{ c *conn }

var _ resp.BuffersWriter = connWriter{}

func (w connWriter) Write(p []byte) (int, error) {
	if err := w.c.armWrite(); err != nil {
		return 0, err
	}
	return w.c.sc.Write(p)
}

// WriteBuffers writes v with one writev (the net.Conn under server.Conn
// is a *net.TCPConn; server.Conn itself would hide that).
func (w connWriter) WriteBuffers(v *net.Buffers) (int64, error) {
	if err := w.c.armWrite(); err != nil {
		return 0, err
	}
	return v.WriteTo(w.c.sc.Conn)
}

// armWrite sets the write deadline WriteTimeout from now, unless the one
// set last leaves at least 15/16 of WriteTimeout: a write may take
// between 15/16 of WriteTimeout and WriteTimeout before it fails, and a
// connection writing replies without pause sets its deadline 16 times per
// WriteTimeout rather than at every reply.
func (c *conn) armWrite() error {
	now := time.Now()
	t := c.s.opts.WriteTimeout
	if c.writeArmed.Sub(now) >= t-t/16 {
		return nil
	}
	c.writeArmed = now.Add(t)
	return c.sc.SetWriteDeadline(c.writeArmed)
}

// serve runs the connection until it ends.
func (c *conn) serve(ctx context.Context) {
	defer func() {
		c.s.args.releaseAll(&c.hold)
		if v := recover(); v != nil {
			c.s.log.Error("respserver: panic serving a connection (a bug); connection closed",
				"remote", c.remote, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	var err error
	for err == nil && !c.quit {
		err = c.next(ctx)
	}
	if err == nil || c.quit {
		c.w.Flush()
	}
	c.ended(err)
}

// next reads one command, runs it, and flushes the replies when no more
// input is buffered (a pipeline gets one write).
//
// Deadlines: waiting for a command's first byte, the connection is idle;
// from that byte the command must arrive whole within ReadTimeout
// (connReader), however long the connection has been sending. Idle, it
// waits idleRelease, then lets go of its buffers and waits on: until
// IdleTimeout from the start of the wait when one is set, for ever
// otherwise (the deadline is re-armed every idleRecheck). A connection
// not authenticated on a server with tokens is closed HandshakeTimeout
// after it connected, idle or not.
func (c *conn) next(ctx context.Context) error {
	if c.r.Buffered() == 0 {
		if err := c.w.Flush(); err != nil {
			return err
		}
		c.idleSince, c.shrunk = time.Now(), false
		if err := c.armIdle(c.idleSince, true); err != nil {
			return err
		}
	} else {
		// The command began in the buffer: its deadline counts from now,
		// set by the first read it needs.
		c.cr.idle, c.cr.stale = false, true
		c.beginCommand(time.Now())
	}
	args, err := c.read()
	c.cr.stale = false
	if err != nil {
		var pe *resp.ProtocolError
		switch {
		case errors.As(err, &pe):
			c.s.ctr.protocol.Add(1)
			c.w.Error("ERR " + pe.Msg)
			c.w.Flush()
		case errors.Is(err, errBudgetTimeout):
			c.s.ctr.timeouts.Add(1)
			c.fail(fmt.Sprintf("OOM command not allowed: the memory of this node for commands being received (%d bytes) stayed full until the read timeout", c.s.opts.MaxArgBytes))
			c.w.Flush()
		}
		return err
	}
	c.s.ctr.commands.Add(1)
	c.exec(ctx, args)
	return c.w.Err()
}

// read reads a command, handling the expiries of the idle wait.
func (c *conn) read() ([][]byte, error) {
	for {
		args, err := c.r.ReadCommand()
		if err == nil || !c.cr.idle || !errors.Is(err, os.ErrDeadlineExceeded) {
			return args, err
		}
		// The idle deadline passed with no byte of a command.
		now := time.Now()
		if t := c.s.opts.IdleTimeout; t > 0 && !now.Before(c.idleSince.Add(t)) {
			return nil, err
		}
		if !c.authed && !now.Before(c.handshakeEnd) {
			return nil, err
		}
		switch {
		case c.shrunk:
			c.s.ctr.rearms.Add(1)
		case now.Sub(c.idleSince) < idleRelease:
			// A deadline an earlier wait set (armIdle keeps them) passed
			// early in this one: wait out this one's idleRelease.
		default:
			c.r.Shrink()
			c.shrunk = true
		}
		if err := c.armIdle(now, false); err != nil {
			return nil, err
		}
	}
}

// armIdle sets the deadline of the idle wait from now (see next). With
// keep, a deadline an earlier idle wait set is kept when it has not passed
// and comes no later than this one's: a wait it ends early is re-armed
// for the rest of its time (read), and a GET from memory costs about as
// much as a deadline change. A wait that ended by its deadline re-arms
// without keep, so that a connection the server is stopping learns it
// (SetReadTimeout fails).
func (c *conn) armIdle(now time.Time, keep bool) error {
	c.cr.idle = true
	d := c.s.idleRecheck
	if !c.shrunk {
		d = c.idleSince.Add(idleRelease).Sub(now)
	}
	if t := c.s.opts.IdleTimeout; t > 0 {
		d = min(d, c.idleSince.Add(t).Sub(now))
	}
	if !c.authed {
		d = min(d, c.handshakeEnd.Sub(now))
	}
	// A deadline for the command's first byte, in case Reserve runs
	// before connReader sees it (it cannot: a buffer grows for bytes
	// read).
	c.cmdDeadline = now.Add(d)
	if keep && c.idleArmed.After(now) && !c.idleArmed.After(c.cmdDeadline) {
		return nil
	}
	c.idleArmed = c.cmdDeadline
	return c.sc.SetReadTimeout(d)
}

// ended logs why the connection ended.
func (c *conn) ended(err error) {
	reason := "closed by peer"
	switch {
	case c.quit:
		reason = "quit"
	case c.sc.Closing() || errors.Is(err, server.ErrShuttingDown):
		reason = "shutdown"
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(c.w.Err(), os.ErrDeadlineExceeded):
		// (a reply whose write timed out while the Reader read reaches it
		// as a read error, which it may report as a cut-off command)
		reason = "timeout"
		c.s.ctr.timeouts.Add(1)
	case err == io.EOF || errors.Is(err, net.ErrClosed):
	case errors.Is(err, errBudgetTimeout):
		reason = "memory"
	default:
		reason = "error"
	}
	c.s.log.Debug("respserver: connection ended", "remote", c.remote, "tenant", c.tenant, "reason", reason, "err", err)
}
