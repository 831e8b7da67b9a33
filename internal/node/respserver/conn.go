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

// noDeadline stands for "no idle timeout": the skeleton's deadlines are
// relative, and a connection left a day idle is as good as kept.
const noDeadline = 24 * time.Hour

// conn is one client connection; its fields are owned by its goroutine.
type conn struct {
	s      *Server
	sc     *server.Conn
	remote string
	id     int64
	r      *resp.Reader
	w      *resp.Writer
	cr     connReader

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
	held    int64 // argument bytes charged to the server's budget

	lower []byte   // the command name, lower-cased
	names []string // reused key lists
}

// connReader counts nothing but arms the command deadline: once the first
// byte of a command arrives, the rest must come within ReadTimeout.
type connReader struct {
	c     *conn
	armed bool
}

func (r *connReader) Read(p []byte) (int, error) {
	n, err := r.c.sc.Read(p)
	if n > 0 && r.armed {
		r.armed = false
		if derr := r.c.sc.SetReadTimeout(r.c.s.opts.ReadTimeout); derr != nil && err == nil {
			err = derr
		}
	}
	return n, err
}

func newConn(s *Server, sc *server.Conn) *conn {
	c := &conn{s: s, sc: sc, remote: sc.RemoteAddr().String(), id: s.ids.Add(1)}
	c.cr.c = c
	c.r = resp.NewReader(&c.cr, s.opts.Limits)
	c.w = resp.NewWriter(writerFunc(c.write))
	// An open server (no token; package listen keeps it on loopback)
	// serves every connection as the default tenant's without AUTH; a
	// server with tokens requires AUTH first, as the node protocol
	// requires a token in its hello.
	if tab := s.srv.Auth(); tab.Open() {
		c.grant, _ = tab.Authenticate(nil)
		c.authed = true
	}
	return c
}

// writerFunc adapts the connection's write method to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// write writes p within WriteTimeout.
func (c *conn) write(p []byte) (int, error) {
	if err := c.sc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout)); err != nil {
		return 0, err
	}
	return c.sc.Write(p)
}

// serve runs the connection until it ends.
func (c *conn) serve(ctx context.Context) {
	defer func() {
		c.release()
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
func (c *conn) next(ctx context.Context) error {
	if c.r.Buffered() == 0 {
		if err := c.w.Flush(); err != nil {
			return err
		}
		idle := c.s.opts.IdleTimeout
		if idle == 0 {
			idle = noDeadline
		}
		if err := c.sc.SetReadTimeout(idle); err != nil {
			return err
		}
		c.cr.armed = true
	}
	args, err := c.r.ReadCommand()
	if err != nil {
		var pe *resp.ProtocolError
		if errors.As(err, &pe) {
			c.s.ctr.protocol.Add(1)
			c.w.Error("ERR " + pe.Msg)
			c.w.Flush()
			return err
		}
		return err
	}
	if err := c.charge(ctx, args); err != nil {
		return err
	}
	c.s.ctr.commands.Add(1)
	c.exec(ctx, args)
	c.release()
	return c.w.Err()
}

// charge charges the command's argument bytes to the server's budget.
func (c *conn) charge(ctx context.Context, args [][]byte) error {
	var n int64
	for _, a := range args {
		n += int64(len(a))
	}
	if n < 64<<10 { // small commands are bounded by the read buffer
		return nil
	}
	if err := c.s.args.acquire(ctx, n); err != nil {
		return err
	}
	c.held = n
	return nil
}

func (c *conn) release() {
	c.s.args.release(c.held)
	c.held = 0
}

// ended logs why the connection ended.
func (c *conn) ended(err error) {
	reason := "closed by peer"
	switch {
	case c.quit:
		reason = "quit"
	case c.sc.Closing() || errors.Is(err, server.ErrShuttingDown):
		reason = "shutdown"
	case err == io.EOF || errors.Is(err, net.ErrClosed):
	case errors.Is(err, os.ErrDeadlineExceeded):
		reason = "timeout"
		c.s.ctr.timeouts.Add(1)
	default:
		reason = "error"
	}
	c.s.log.Debug("respserver: connection ended", "remote", c.remote, "tenant", c.tenant, "reason", reason, "err", err)
}
