package resp

import (
	"io"
	"net"
	"strconv"
)

const (
	// flushAt is the buffer size past which Writer flushes by itself:
	// 64 KiB, one loopback segment, so a long pipeline does not grow the
	// buffer.
	flushAt = 64 << 10
	// refMin is the smallest segment BulkSegments keeps by reference
	// rather than copying: 16 KiB, where copying starts to cost more than
	// one more iovec in the writev (Redis copies replies under 16 KiB,
	// PROTO_REPLY_CHUNK_BYTES, into its reply buffer too).
	refMin = 16 << 10
	// refFlushAt is how many referenced bytes make Writer flush by
	// itself: 4 MiB, so a long MGET of large values does not keep the
	// caller's memory pinned, or the client waiting, until the end.
	refFlushAt = 4 << 20
	// writeBufferSize is the buffer's first size; it grows to about
	// flushAt when replies need it.
	writeBufferSize = 4 << 10
)

// Writer writes RESP2 replies to a stream through a buffer, which it writes
// at Flush, or by itself when the buffer passes 64 KiB (or the segments it
// references pass 4 MiB). After the first write error every call is a
// no-op, and Err and Flush return that error.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	dst  io.Writer
	buf  []byte
	refs []ref // segments held by reference, in order
	nref int   // their bytes
	vec  net.Buffers
	err  error
}

// ref is a segment written after buf[:off].
type ref struct {
	off int
	seg []byte
}

// BuffersWriter is an io.Writer that also writes a net.Buffers at once,
// consuming it as net.Buffers.WriteTo does. A Writer whose destination
// has it writes a reply with referenced segments in one call: one writev
// on a TCP connection, where an io.Writer that hides the connection gets
// one write per segment (and the client a packet and a wake-up for each
// bulk's header and trailer).
type BuffersWriter interface {
	io.Writer
	WriteBuffers(v *net.Buffers) (int64, error)
}

// NewWriter returns a Writer to wr.
func NewWriter(wr io.Writer) *Writer {
	return &Writer{dst: wr, buf: make([]byte, 0, writeBufferSize)}
}

// Simple writes a simple string, "+s\r\n". A CR or LF in s becomes a
// space, since a simple string cannot hold one.
func (w *Writer) Simple(s string) { w.line('+', s) }

// Error writes an error, "-s\r\n"; s starts with its code ("ERR unknown
// command"). A CR or LF in s becomes a space, as Redis does.
func (w *Writer) Error(s string) { w.line('-', s) }

func (w *Writer) line(kind byte, s string) {
	if w.err != nil {
		return
	}
	w.buf = append(w.buf, kind)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.buf = append(w.buf, c)
	}
	w.buf = append(w.buf, '\r', '\n')
	w.maybeFlush()
}

// Int writes an integer, ":n\r\n".
func (w *Writer) Int(n int64) { w.header(':', n) }

// Array writes the header of an array of n elements, "*n\r\n"; the
// elements follow as further replies.
func (w *Writer) Array(n int) { w.header('*', int64(n)) }

// Null writes the null bulk string, "$-1\r\n" (GET of a missing key).
func (w *Writer) Null() { w.header('$', -1) }

// NullArray writes the null array, "*-1\r\n".
func (w *Writer) NullArray() { w.header('*', -1) }

func (w *Writer) header(kind byte, n int64) {
	if w.err != nil {
		return
	}
	w.appendHeader(kind, n)
	w.maybeFlush()
}

func (w *Writer) appendHeader(kind byte, n int64) {
	w.buf = append(w.buf, kind)
	w.buf = strconv.AppendInt(w.buf, n, 10)
	w.buf = append(w.buf, '\r', '\n')
}

// Bulk writes a bulk string, "$len\r\n" b "\r\n". Writer does not keep
// b: a large b that does not fit the buffer is written before Bulk
// returns.
func (w *Writer) Bulk(b []byte) {
	if w.err != nil {
		return
	}
	w.appendHeader('$', int64(len(b)))
	if len(b) >= refMin && len(w.buf)+len(b) > flushAt {
		w.reference(b)
		if w.flush(); w.err != nil { // now: b is not ours to keep
			return
		}
	} else {
		w.buf = append(w.buf, b...)
	}
	w.buf = append(w.buf, '\r', '\n')
	w.maybeFlush()
}

// BulkString writes a bulk string, "$len\r\n" s "\r\n".
func (w *Writer) BulkString(s string) {
	if w.err != nil {
		return
	}
	w.appendHeader('$', int64(len(s)))
	for len(s) > 0 && w.err == nil {
		room := max(flushAt-len(w.buf), 0)
		if room == 0 {
			w.flush()
			continue
		}
		n := min(room, len(s))
		w.buf = append(w.buf, s[:n]...)
		s = s[n:]
	}
	if w.err != nil {
		return
	}
	w.buf = append(w.buf, '\r', '\n')
	w.maybeFlush()
}

// BulkSegments writes one bulk string made of segs, in order (its length
// is the sum of theirs). Segments of 16 KiB or more are not copied: they
// are kept by reference and written with net.Buffers (one writev on a
// TCP connection) at the next flush, so the caller must keep them
// unchanged until Flush returns. Smaller ones are copied.
func (w *Writer) BulkSegments(segs [][]byte) {
	if w.err != nil {
		return
	}
	total := 0
	for _, s := range segs {
		total += len(s)
	}
	w.appendHeader('$', int64(total))
	for _, s := range segs {
		if len(s) >= refMin {
			w.reference(s)
		} else {
			w.buf = append(w.buf, s...)
		}
	}
	w.buf = append(w.buf, '\r', '\n')
	w.maybeFlush()
}

func (w *Writer) reference(seg []byte) {
	w.refs = append(w.refs, ref{off: len(w.buf), seg: seg})
	w.nref += len(seg)
}

// Buffered reports how many bytes are not yet written, the referenced
// segments' included.
func (w *Writer) Buffered() int { return len(w.buf) + w.nref }

// Err returns the first write error, or nil.
func (w *Writer) Err() error { return w.err }

// Flush writes everything buffered: one Write, or, when segments are
// referenced, one net.Buffers write (one writev on a TCP connection).
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.flush()
	return w.err
}

func (w *Writer) maybeFlush() {
	if len(w.buf) > flushAt || w.nref > refFlushAt {
		w.flush()
	}
}

func (w *Writer) flush() {
	var err error
	switch {
	case len(w.refs) > 0:
		vec := w.vec[:0]
		off := 0
		for _, r := range w.refs {
			if r.off > off {
				vec = append(vec, w.buf[off:r.off])
			}
			vec = append(vec, r.seg)
			off = r.off
		}
		if off < len(w.buf) {
			vec = append(vec, w.buf[off:])
		}
		w.vec = vec
		if bw, ok := w.dst.(BuffersWriter); ok {
			_, err = bw.WriteBuffers(&w.vec)
		} else {
			_, err = w.vec.WriteTo(w.dst) // consumes w.vec; its array is reused
		}
		w.vec = vec[:0]
		clear(vec)
		clear(w.refs)
		w.refs, w.nref = w.refs[:0], 0
	case len(w.buf) > 0:
		var n int
		n, err = w.dst.Write(w.buf)
		if err == nil && n < len(w.buf) {
			err = io.ErrShortWrite
		}
	}
	w.buf = w.buf[:0]
	if err != nil {
		w.err = err
		w.buf, w.refs, w.vec = nil, nil, nil
	}
}
