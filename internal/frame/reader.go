package frame

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ReadBufferSize is a Reader's bufio size: 64 KiB, the Linux loopback MTU,
// so one read system call can take a whole segment. Reads at least this
// long (a block's payload) bypass the buffer and land directly in the
// caller's slice.
const ReadBufferSize = 64 << 10

// GrowChunk is the first step by which AppendFull grows a buffer before
// the bytes it is for have arrived (1 MiB, sixteen loopback segments).
// Later steps double the buffer, so a peer that announces a large frame or
// payload and then stalls makes the reader allocate at most twice what it
// actually sent plus GrowChunk, never the announced length up front.
const GrowChunk = 1 << 20

// Reader reads frames of a protocol with op type O from a stream, through a
// bufio.Reader it owns. It is the part of a protocol's reader that knows
// only the header: the protocol decodes bodies with ReadFull, AppendFull
// and Discard, which never read beyond what they are asked for.
//
// Errors: ReadHeader returns a bare io.EOF when the stream ends cleanly
// between frames. A stream that ends inside a read is
// io.ErrUnexpectedEOF. ReadHeader's errors, and every error passed to
// Fail, are sticky: Err and every later ReadHeader return them, and the
// connection must be closed.
//
// A Reader is not safe for concurrent use.
type Reader[O Op] struct {
	br     *bufio.Reader
	src    *cappedReader // br's source
	ahead  int           // LimitNextFill's bound, 0 when none
	prefix string
	err    error
	off    int64
	hdr    [HeaderLen]byte
}

// cappedReader reads from rd, at most max bytes per Read while max > 0.
type cappedReader struct {
	rd  io.Reader
	max int
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.max > 0 && len(p) > c.max {
		p = p[:c.max]
	}
	return c.rd.Read(p)
}

// NewReader returns a Reader of rd whose errors are prefixed with prefix
// ("wire").
func NewReader[O Op](rd io.Reader, prefix string) *Reader[O] {
	src := &cappedReader{rd: rd}
	return &Reader[O]{br: bufio.NewReaderSize(src, ReadBufferSize), src: src, prefix: prefix}
}

// Reset discards all state, including a sticky error, and makes r read
// from rd, keeping its buffer.
func (r *Reader[O]) Reset(rd io.Reader) {
	r.src.rd, r.src.max, r.ahead = rd, 0, 0
	r.br.Reset(r.src)
	r.err = nil
	r.off = 0
}

// LimitNextFill bounds the read that fills the empty buffer for the next
// ReadHeader to n bytes (n > 0): a caller expecting a frame whose head is
// n bytes and whose payload is at least ReadBufferSize reads the head
// alone, so that the payload lands straight in its slice instead of
// partly through the buffer and a copy. It changes only how many bytes
// one system call reads, never what is read; a frame that turns out
// otherwise is read as usual.
func (r *Reader[O]) LimitNextFill(n int) { r.ahead = max(n, 0) }

// Offset returns the number of stream bytes r has consumed; bytes bufio
// has read ahead are not counted.
func (r *Reader[O]) Offset() int64 { return r.off }

// Buffered returns the number of bytes read ahead and not yet consumed: a
// server flushes its responses when this is 0 (no more pipelined requests
// are waiting).
func (r *Reader[O]) Buffered() int { return r.br.Buffered() }

// Err returns the sticky error, or nil.
func (r *Reader[O]) Err() error { return r.err }

// Fail records err as the sticky error and returns it.
func (r *Reader[O]) Fail(err error) error {
	r.err = err
	return err
}

// ReadHeader reads the next frame's header and checks its length: below
// HeaderLen is ErrMalformed, above maxFrame ErrFrameTooLarge (both sticky,
// with the header returned for the ERROR reply). A clean end of the stream
// before the header's first byte is a bare io.EOF. Op, flags and reserved
// field are the protocol's to check.
func (r *Reader[O]) ReadHeader(maxFrame int) (Header[O], error) {
	if r.err != nil {
		return Header[O]{}, r.err
	}
	start := r.off
	if r.ahead > 0 && r.br.Buffered() == 0 {
		r.src.max = max(r.ahead, HeaderLen)
	}
	n, err := io.ReadFull(r.br, r.hdr[:])
	r.src.max, r.ahead = 0, 0
	r.off += int64(n)
	if err != nil {
		if n == 0 && err == io.EOF {
			return Header[O]{}, r.Fail(io.EOF)
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Header[O]{}, r.Fail(fmt.Errorf("%s: frame header at byte %d: got %d of %d bytes: %w", r.prefix, start, n, HeaderLen, err))
	}
	h := ParseHeader[O](r.hdr[:])
	switch {
	case h.Len < HeaderLen:
		return h, r.Fail(fmt.Errorf("%s: %v frame (request %d) at byte %d: length %d is shorter than the %d-byte header: %w",
			r.prefix, h.Op, h.ReqID, start, h.Len, HeaderLen, ErrMalformed))
	case uint64(h.Len) > uint64(maxFrame):
		return h, r.Fail(fmt.Errorf("%s: %v frame (request %d) at byte %d: length %d exceeds limit %d: %w",
			r.prefix, h.Op, h.ReqID, start, h.Len, maxFrame, ErrFrameTooLarge))
	}
	return h, nil
}

// ReadFull fills p from the stream. A stream that ends inside p is
// io.ErrUnexpectedEOF. The error says how much arrived; it is not sticky
// (wrap it with what was read and pass it to Fail).
func (r *Reader[O]) ReadFull(p []byte) error {
	n, err := io.ReadFull(r.br, p)
	r.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("got %d of %d bytes: %w", n, len(p), err)
	}
	return nil
}

// AppendFull appends n stream bytes to dst. It grows dst only when full,
// to twice its capacity or by GrowChunk, whichever is more, and never
// beyond limit (raised to len(dst)+n when below it): memory follows the
// bytes received. On error it returns dst with what was read.
func (r *Reader[O]) AppendFull(dst []byte, n, limit int) ([]byte, error) {
	return r.AppendFullFunc(dst, n, limit, nil)
}

// AppendFullFunc is AppendFull that also calls each (unless nil) with
// every piece of dst as it arrives, in order, while the piece is still in
// the CPU's caches (one call per read from the stream or copy out of the
// buffer): a checksum fused with the read rather than a second pass over
// the bytes. each must not keep the piece. On error, each has seen exactly
// the bytes of the returned dst.
func (r *Reader[O]) AppendFullFunc(dst []byte, n, limit int, each func([]byte)) ([]byte, error) {
	need := len(dst) + n
	limit = max(limit, need) // a full dst below it would never grow
	for len(dst) < need {
		if len(dst) == cap(dst) {
			c := min(limit, max(2*cap(dst), len(dst)+GrowChunk))
			dst = append(make([]byte, 0, c), dst...)
		}
		start := len(dst)
		end := min(need, cap(dst))
		for start < end {
			m, err := r.br.Read(dst[start:end])
			r.off += int64(m)
			if m > 0 && each != nil {
				each(dst[start : start+m])
			}
			start += m
			if err != nil && start < end {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return dst[:start], fmt.Errorf("got %d of %d bytes: %w", start-(need-n), n, err)
			}
			if m == 0 && err == nil {
				return dst[:start], fmt.Errorf("got %d of %d bytes: %w", start-(need-n), n, io.ErrNoProgress)
			}
		}
		dst = dst[:end]
	}
	return dst, nil
}

// Discard skips n stream bytes.
func (r *Reader[O]) Discard(n int) error {
	d, err := r.br.Discard(n)
	r.off += int64(d)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("got %d of %d bytes: %w", d, n, err)
	}
	return nil
}
