package masterclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/kvpool/kvpool/internal/master/masterproto"
)

// A client pointed at the wrong address gets an answer that is no HELLO
// response, or none at all. Instead of decoding it as a frame ("length
// 1280333387 … frame too large") or timing out, the handshake looks at
// the first bytes and names what it is talking to: a kvpool node's data
// port, an HTTP server or a Redis server (each waits, silent, for the
// end of a line our HELLO never sends: a short HTTP request on a second
// connection finds either out), or something else.
const (
	// probeSilence is how long the handshake waits for the first byte
	// before probing for an HTTP server: 300 ms, hundreds of times a
	// loopback master's answer, and short enough that a user at a shell
	// gets the diagnosis at once. A slow master loses nothing: the wait
	// for its answer goes on.
	probeSilence = 300 * time.Millisecond
	// probeTimeout bounds the HTTP probe: 1 s.
	probeTimeout = time.Second
	// nodeMagic starts every answer of a kvpool node's data plane
	// (internal/node/wire.Magic; not imported, so that the client does
	// not link the node's protocol).
	nodeMagic = "KVPL"
)

// attempt is one connection attempt, to the master at addr; dial is
// Options.Dial (nil: a net.Dialer).
type attempt struct {
	addr string
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// readFirst reads the first bytes of the HELLO answer into buf (16, a
// frame header) and returns them; err is the read's error when nothing
// usable arrived. A peer silent for probeSilence is probed for an HTTP
// server, which is reported as an error.
func (a attempt) readFirst(ctx context.Context, nc net.Conn, buf []byte) ([]byte, error) {
	dl, hasDL := ctx.Deadline()
	if !hasDL || time.Until(dl) > probeSilence {
		nc.SetReadDeadline(time.Now().Add(probeSilence))
		n, err := io.ReadAtLeast(nc, buf, 1)
		var ne net.Error
		if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
			return a.readMore(nc, buf, n, err, dl)
		}
		switch b := a.probeHTTP(ctx); {
		case string(b) == "HTTP/":
			return nil, a.notMaster("it looks like an HTTP server (an admin port?)")
		case isRESP(b):
			// A Redis server waits for the end of an inline command as
			// an HTTP server waits for a request line.
			return nil, a.notMaster("it looks like a Redis server (it answered in RESP)")
		}
		if err := ctx.Err(); err != nil {
			return nil, err // cancelled meanwhile: do not lift dial's cancellation deadline
		}
	}
	if hasDL {
		nc.SetReadDeadline(dl)
	} else {
		nc.SetReadDeadline(time.Time{})
	}
	n, err := io.ReadAtLeast(nc, buf, 1)
	return a.readMore(nc, buf, n, err, dl)
}

// readMore completes a frame header's first 8 bytes when a binary answer
// arrived in pieces; a textual one is judged as it is.
func (a attempt) readMore(nc net.Conn, buf []byte, n int, err error, dl time.Time) ([]byte, error) {
	if n == 0 {
		return nil, err
	}
	if n < 8 && !textual(buf[:n]) {
		nc.SetReadDeadline(dl)
		m, _ := io.ReadAtLeast(nc, buf[n:], 8-n)
		n += m
	}
	return buf[:n], nil
}

// identify returns nil when first starts a master's answer (a HELLO
// response or ERROR frame header), and otherwise an error naming what the
// peer looks like.
func (a attempt) identify(first []byte) error {
	if len(first) >= 8 {
		h := masterproto.ParseHeader(append(first[:len(first):len(first)], make([]byte, max(0, masterproto.HeaderLen-len(first)))...))
		if (h.Op == masterproto.OpHelloResponse || h.Op == masterproto.OpError) && h.Flags == 0 && h.Reserved == 0 {
			return nil
		}
	}
	switch {
	case bytes.HasPrefix(first, []byte(nodeMagic)):
		return a.notMaster("it looks like a kvpool node's data port")
	case bytes.HasPrefix(first, []byte("HTTP/")):
		return a.notMaster("it looks like an HTTP server (an admin port?)")
	case isRESP(first):
		return a.notMaster("it looks like a Redis server (it answered in RESP)")
	}
	return a.notMaster(fmt.Sprintf("first bytes of its answer: %q", first))
}

// notMaster is the error of a peer that is not a kvpool master.
func (a attempt) notMaster(what string) error {
	return fmt.Errorf("masterclient: %s is not a kvpool master: %s (give the master's control-plane address): %w", a.addr, what, ErrUnavailable)
}

// textual reports whether b is printable ASCII text (with tabs and line
// ends): no frame header is, its length's high byte being 0.
func textual(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\r' && c != '\n' && c != '\t' {
			return false
		}
	}
	return true
}

// isRESP reports whether b starts a RESP simple string or error: text
// starting with '+' or '-' (a master's frame header never is text).
func isRESP(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || b[0] == '+') && textual(b)
}

// probeHTTP sends a HEAD request on a second connection to the client's
// address and returns the first 5 bytes of the answer ("HTTP/" from an
// HTTP server), or nil when none came.
func (a attempt) probeHTTP(ctx context.Context) []byte {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	nc, err := dialTCP(ctx, a.dial, a.addr)
	if err != nil {
		return nil
	}
	defer nc.Close()
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	if _, err := io.WriteString(nc, "HEAD / HTTP/1.0\r\nHost: "+a.addr+"\r\n\r\n"); err != nil {
		return nil
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(nc, b); err != nil {
		return nil
	}
	return b
}
