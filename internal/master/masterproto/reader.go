package masterproto

import (
	"fmt"
	"io"

	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/meta"
)

// Reader reads whole frames from a stream into a buffer it reuses.
//
// ReadFrame returns a bare io.EOF when the stream ends cleanly between
// frames. Every error it returns is fatal for the stream (an I/O error or
// deadline, truncation reported as io.ErrUnexpectedEOF, a length below
// HeaderLen or above Limits.MaxFrame reported as frame.ErrFrameTooLarge or
// frame.ErrMalformed): it sticks, and the connection must be closed. Errors of the
// body decoders (Decode*) are not: the frame was read whole, so the stream
// is in sync and the server answers ERROR and carries on.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	fr  *frame.Reader[Op]
	lim Limits
	buf []byte
}

// NewReader returns a Reader of rd enforcing lim (zero fields mean the
// defaults), or the error lim.Validate reports.
func NewReader(rd io.Reader, lim Limits) (*Reader, error) {
	l, err := lim.Resolve()
	if err != nil {
		return nil, err
	}
	return &Reader{fr: frame.NewReader[Op](rd, "masterproto"), lim: l}, nil
}

// Reset discards all state, including a sticky error, and makes r read
// from rd, keeping its buffers.
func (r *Reader) Reset(rd io.Reader) {
	r.fr.Reset(rd)
}

// SetLimits changes the limits r enforces from the next frame on (a
// server reads the HELLO under HelloLimits, then switches to its own).
func (r *Reader) SetLimits(lim Limits) error {
	l, err := lim.Resolve()
	if err != nil {
		return err
	}
	r.lim = l
	return nil
}

// HelloLimits returns lim with MaxFrame cut to the largest HELLO a server
// accepts under lim (header, fixed part and a MaxToken token, at least the
// 1 KiB minimum), plus the cluster ID trailer, so an unauthenticated peer cannot make the server buffer
// a full-size frame.
func HelloLimits(lim Limits) Limits {
	lim = lim.withDefaults()
	lim.MaxFrame = max(HeaderLen+helloLen+lim.MaxToken+1+meta.MaxClusterIDLen+1+8, 1<<10)
	return lim
}

// Limits returns the limits r enforces, defaults filled in.
func (r *Reader) Limits() Limits { return r.lim }

// Buffered returns the number of bytes read ahead and not yet decoded: a
// server flushes its responses when this is 0 (no more pipelined requests
// are waiting).
func (r *Reader) Buffered() int { return r.fr.Buffered() }

// ParseHeader decodes a frame header from the first HeaderLen bytes of b.
func ParseHeader(b []byte) Header { return frame.ParseHeader[Op](b) }

// ReadFrame reads the next frame. The body is valid until the next call.
func (r *Reader) ReadFrame() (Header, []byte, error) {
	h, err := r.fr.ReadHeader(r.lim.MaxFrame)
	if err != nil {
		return h, nil, err
	}
	r.buf, err = r.fr.AppendFull(r.buf[:0], h.BodyLen(), h.BodyLen())
	if err != nil {
		return h, nil, r.fr.Fail(fmt.Errorf("masterproto: %v frame (request %d): read body: %w", h.Op, h.ReqID, err))
	}
	return h, r.buf, nil
}
