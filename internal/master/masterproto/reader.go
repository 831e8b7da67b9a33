package masterproto

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// readBufferSize is the Reader's bufio size: 64 KiB, the Linux loopback
// MTU, so one read system call can take a whole segment (as wire.Reader).
const readBufferSize = 64 << 10

// growChunk is the first step by which a frame buffer grows before the
// bytes it is for have arrived (1 MiB). Later steps double it, so a peer
// that announces a large frame and then stalls makes the Reader allocate
// at most twice what it sent plus growChunk, never the announced length up
// front.
const growChunk = 1 << 20

// Reader reads whole frames from a stream into a buffer it reuses.
//
// ReadFrame returns a bare io.EOF when the stream ends cleanly between
// frames. Every error it returns is fatal for the stream (an I/O error or
// deadline, truncation reported as io.ErrUnexpectedEOF, a length below
// HeaderLen or above Limits.MaxFrame reported as ErrFrameTooLarge or
// ErrMalformed): it sticks, and the connection must be closed. Errors of the
// body decoders (Decode*) are not: the frame was read whole, so the stream
// is in sync and the server answers ERROR and carries on.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	lim Limits
	err error
	buf []byte
	hdr [HeaderLen]byte
	off int64
}

// NewReader returns a Reader of rd enforcing lim (zero fields mean the
// defaults), or the error lim.Validate reports.
func NewReader(rd io.Reader, lim Limits) (*Reader, error) {
	l, err := lim.Resolve()
	if err != nil {
		return nil, err
	}
	return &Reader{br: bufio.NewReaderSize(rd, readBufferSize), lim: l}, nil
}

// Reset discards all state, including a sticky error, and makes r read
// from rd, keeping its buffers.
func (r *Reader) Reset(rd io.Reader) {
	r.br.Reset(rd)
	r.err = nil
	r.off = 0
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
// 1 KiB minimum), so an unauthenticated peer cannot make the server buffer
// a full-size frame.
func HelloLimits(lim Limits) Limits {
	lim = lim.withDefaults()
	lim.MaxFrame = max(HeaderLen+helloLen+lim.MaxToken, 1<<10)
	return lim
}

// Limits returns the limits r enforces, defaults filled in.
func (r *Reader) Limits() Limits { return r.lim }

// Buffered returns the number of bytes read ahead and not yet decoded: a
// server flushes its responses when this is 0 (no more pipelined requests
// are waiting).
func (r *Reader) Buffered() int { return r.br.Buffered() }

// ParseHeader decodes a frame header from the first HeaderLen bytes of b.
func ParseHeader(b []byte) Header {
	return Header{
		Len:      le.Uint32(b),
		Op:       Op(b[4]),
		Flags:    b[5],
		Reserved: le.Uint16(b[6:]),
		ReqID:    le.Uint64(b[8:]),
	}
}

// ReadFrame reads the next frame. The body is valid until the next call.
func (r *Reader) ReadFrame() (Header, []byte, error) {
	if r.err != nil {
		return Header{}, nil, r.err
	}
	n, err := io.ReadFull(r.br, r.hdr[:])
	r.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) && n == 0 {
			r.err = io.EOF
			return Header{}, nil, io.EOF
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, nil, r.fail(fmt.Errorf("masterproto: read frame header at byte %d: got %d of %d bytes: %w", r.off-int64(n), n, HeaderLen, err))
	}
	h := ParseHeader(r.hdr[:])
	switch {
	case h.Len < HeaderLen:
		return h, nil, r.fail(fmt.Errorf("masterproto: %v frame at byte %d: length %d is below the header's %d: %w", h.Op, r.off-HeaderLen, h.Len, HeaderLen, ErrMalformed))
	case uint64(h.Len) > uint64(r.lim.MaxFrame):
		return h, nil, r.fail(fmt.Errorf("masterproto: %v frame at byte %d: length %d, limit %d: %w", h.Op, r.off-HeaderLen, h.Len, r.lim.MaxFrame, ErrFrameTooLarge))
	}
	need := h.BodyLen()
	r.buf = r.buf[:0]
	for len(r.buf) < need {
		if len(r.buf) == cap(r.buf) {
			c := min(need, max(2*cap(r.buf), len(r.buf)+growChunk))
			nb := make([]byte, len(r.buf), c)
			copy(nb, r.buf)
			r.buf = nb
		}
		chunk := min(need, cap(r.buf))
		m, err := io.ReadFull(r.br, r.buf[len(r.buf):chunk])
		r.buf = r.buf[:len(r.buf)+m]
		r.off += int64(m)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return h, nil, r.fail(fmt.Errorf("masterproto: %v frame (request %d): read body: got %d of %d bytes: %w", h.Op, h.ReqID, len(r.buf), need, err))
		}
	}
	return h, r.buf, nil
}

func (r *Reader) fail(err error) error {
	r.err = err
	return err
}
