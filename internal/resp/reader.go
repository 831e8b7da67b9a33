package resp

import (
	"bytes"
	"errors"
	"io"
	"math"
)

const (
	// readBufferSize is the Reader's buffer: 64 KiB, the Linux loopback
	// MTU (one read system call takes a whole segment) and Redis's
	// PROTO_INLINE_MAX_SIZE, so a default-sized line always fits. It
	// grows only when MaxInline is set above it, up to MaxInline.
	readBufferSize = 64 << 10
	// keepMax is the largest buffer kept while the Reader waits for the
	// next command: growFirst and a read buffer's worth, so that a client
	// sending one value of up to 1 MiB after another reuses one buffer (a
	// new one costs a page fault per 4 KiB as it is first written: on the
	// project's VM, 1 MiB SETs ran at a tenth of their speed when every
	// value came in a new buffer). Larger ones (a big argument's) are
	// dropped before it waits, so an idle connection does not pin them; a
	// client sending one 4 MiB value after another without pipelining
	// pays for growing a buffer per value (Redis allocates one per value
	// too).
	keepMax = growFirst + readBufferSize
	// keepArgs is how many argument slots are kept, 1 MiB of them.
	keepArgs = keepMax / ArgOverhead
	// growChunk is the least a big argument's buffer grows by when it
	// fills up before the data does. With doubling from a first buffer
	// of up to growFirst, a peer that declares a large bulk and then
	// stalls makes the Reader hold about twice what it sent plus
	// growFirst.
	growChunk = 64 << 10
	// growFirst is the most a big argument's buffer is made ahead of the
	// data received when it is first grown: 1 MiB (a common KV chunk is
	// 256 KiB to 1 MiB), so a stalled peer holds at most that beyond twice
	// what it sent, charged to Memory first.
	growFirst = 1 << 20
	// wakeSize is the buffer a shrunk Reader waits for input in: 512
	// bytes, room for a small command, so that most wake-ups take one
	// read before the read buffer is allocated.
	wakeSize = 512
	// maxEmptyReads is how many (0, nil) reads in a row the Reader takes
	// before it fails with io.ErrNoProgress, as bufio does.
	maxEmptyReads = 100
)

// ArgOverhead is what one argument costs beyond its bytes: its slice
// header (24 bytes on a 64-bit machine) and where it ends in the arena (8
// bytes). A command of 2^20 empty arguments holds 32 MiB of them, so
// Memory is told of them as of argument bytes.
const ArgOverhead = 32

// FreeHeld is how much a Reader holds for commands (arena and argument
// slots) before it asks its Memory: 64 KiB, the read buffer's size, so a
// small command never touches a budget shared by every connection (that
// memory is bounded per connection, like the read buffer).
const FreeHeld = 64 << 10

// Memory is told by a Reader before it holds more memory for commands and
// after it lets memory go; a server uses it to bound what all its
// connections hold together. Only what a Reader holds beyond FreeHeld is
// reserved. Reserve is called from ReadCommand, before the buffers grow
// by n bytes: an error stops the growth and ReadCommand returns the error
// as is, without losing its place (it is not sticky, as a stream error is
// not). Release gives back n bytes reserved earlier; it is called from
// ReadCommand and Shrink.
type Memory interface {
	Reserve(n int) error
	Release(n int)
}

// The error texts of Redis 7.0 (networking.c), sent as "-ERR <text>".
const (
	msgMultibulkLen  = "Protocol error: invalid multibulk length"
	msgBulkLen       = "Protocol error: invalid bulk length"
	msgExpected      = "Protocol error: expected '$', got '"
	msgInlineTooBig  = "Protocol error: too big inline request"
	msgMbulkTooBig   = "Protocol error: too big mbulk count string"
	msgBulkTooBig    = "Protocol error: too big bulk count string"
	msgUnbalancedQts = "Protocol error: unbalanced quotes in request"
)

// ProtocolError is a request Redis would refuse. Msg is Redis 7's text for
// it; the server replies "-ERR <Msg>\r\n" and closes the connection, as
// Redis does.
type ProtocolError struct {
	// Msg is Redis's error text, "Protocol error: ...". It can hold any
	// byte but NUL (the one of "expected '$', got 'X'"); Writer.Error
	// turns a CR or LF into a space, as Redis does.
	Msg string
}

func (e *ProtocolError) Error() string { return e.Msg }

// errBadRead is the error of an io.Reader that returned an impossible
// count.
var errBadRead = errors.New("resp: the connection's reader returned an invalid count")

// state is where the Reader is in a command.
type state uint8

const (
	stIdle   state = iota // between commands
	stInline              // in an inline line
	stCount               // in a multibulk's `*N` line
	stHeader              // in a bulk string's `$len` line
	stData                // in a bulk string's data
	stSkip                // in the two bytes after a bulk string's data
)

// Reader reads Redis requests from a stream: see ReadCommand. Its memory
// is bounded by what the client sent, never by a length it declared.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	src  io.Reader
	lim  Limits
	buf  []byte // buf[r:w] is read and not yet parsed
	r, w int
	rerr error // an error that came with data, for the next read
	err  error // a *ProtocolError: sticky

	// The command being read.
	st    state
	scan  int  // bytes of the current line searched without finding its end
	nul   bool // the current line has a NUL before its end: it never ends
	left  int  // bulk strings of the multibulk not yet finished
	bulk  int  // data bytes of the current bulk string still to read
	skip  int  // bytes after the current bulk string's data still to skip
	total int  // argument bytes the command declared so far
	arena []byte
	ends  []int    // ends[i] is where argument i ends in arena
	args  [][]byte // as long as ends: command never grows it

	wake     []byte // what a shrunk Reader waits in (wakeUp)
	mem      Memory // nil: nothing is told
	reserved int    // bytes reserved from mem
	free     int    // FreeHeld; tests lower it
}

// NewReader returns a Reader of rd bounded by lim. Zero fields of lim
// take their defaults; so do negative ones (Limits.Validate reports them).
func NewReader(rd io.Reader, lim Limits) *Reader {
	return &Reader{src: rd, lim: lim.resolveOrDefault(), buf: make([]byte, readBufferSize), free: FreeHeld}
}

// SetMemory makes r tell m of the memory it holds for commands (see
// Memory). Call it before the first ReadCommand.
func (r *Reader) SetMemory(m Memory) { r.mem = m }

// Held reports the bytes r holds for commands: the arena of arguments and
// ArgOverhead per argument slot (the read buffer is not counted: it is
// bounded by MaxInline).
func (r *Reader) Held() int { return cap(r.arena) + ArgOverhead*cap(r.ends) }

// Shrink lets go of every buffer r can drop without losing input: the
// arguments of the last command, which must no longer be used, and the
// read buffer when it holds nothing unread. A server calls it on a
// connection idle between commands, so that idle connections hold almost
// nothing; the next command allocates again. Between commands only: in
// the middle of one, it does nothing.
func (r *Reader) Shrink() {
	if r.st != stIdle {
		return
	}
	r.arena, r.ends, r.args = nil, nil, nil
	if r.r == r.w {
		r.buf, r.r, r.w = nil, 0, 0
	}
	r.settle()
}

// reserve tells Memory of the buffers growing to hold held bytes.
func (r *Reader) reserve(held int) error {
	need := max(0, held-r.free)
	if need <= r.reserved {
		return nil
	}
	if r.mem != nil {
		if err := r.mem.Reserve(need - r.reserved); err != nil {
			return err
		}
	}
	r.reserved = need
	return nil
}

// settle gives back what is reserved beyond what the buffers hold now.
func (r *Reader) settle() {
	need := max(0, r.Held()-r.free)
	if need < r.reserved {
		if r.mem != nil {
			r.mem.Release(r.reserved - need)
		}
		r.reserved = need
	}
}

// growArena makes room for n more bytes in the arena, to at least want
// bytes in all (want bounds the doubling).
func (r *Reader) growArena(n, want int) error {
	if cap(r.arena)-len(r.arena) >= n {
		return nil
	}
	size := max(want, len(r.arena)+n)
	if err := r.reserve(size + ArgOverhead*cap(r.ends)); err != nil {
		return err
	}
	arena := make([]byte, len(r.arena), size)
	copy(arena, r.arena)
	r.arena = arena
	return nil
}

// growEnds makes room for n more arguments.
func (r *Reader) growEnds(n int) error {
	if cap(r.ends)-len(r.ends) >= n {
		return nil
	}
	size := max(2*cap(r.ends), len(r.ends)+n, 8)
	size = max(min(size, r.lim.MaxArgs), len(r.ends)+n)
	if err := r.reserve(cap(r.arena) + ArgOverhead*size); err != nil {
		return err
	}
	ends := make([]int, len(r.ends), size)
	copy(ends, r.ends)
	r.ends, r.args = ends, make([][]byte, 0, size)
	return nil
}

// Buffered reports how many bytes of later input the Reader has already
// read from the stream. A server flushes its replies when it is 0: then
// the replies to pipelined commands go out in one write.
func (r *Reader) Buffered() int { return r.w - r.r }

// ReadCommand reads the next non-empty command, a multibulk
// (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or an inline one (`GET k\r\n`), and
// returns its arguments, at least one, each within the Limits. The slices
// alias the Reader's buffers and are valid until the next call. Empty
// commands (`*0\r\n`, `*-1\r\n`, an empty or blank line) are skipped, as
// Redis skips them.
//
// Errors: a request Redis would refuse is a *ProtocolError with Redis's
// text; it is sticky (every later call returns it) and the connection must
// be closed after replying it. An error of the stream is returned as is
// (io.EOF between commands, io.ErrUnexpectedEOF inside one, a deadline's
// error), and is not sticky: after a deadline, ReadCommand may be called
// again and goes on from where it was.
func (r *Reader) ReadCommand() ([][]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		var more bool
		var err error
		switch r.st {
		case stIdle:
			r.begin()
			if r.r == r.w {
				if err := r.fill(); err != nil {
					return nil, err
				}
			}
			// Redis's processInputBuffer: '*' starts a multibulk,
			// anything else is inline.
			if r.buf[r.r] == '*' {
				r.st = stCount
			} else {
				r.st = stInline
			}
			continue
		case stInline:
			more, err = r.readInline()
		case stCount:
			more, err = r.readCount()
		case stHeader:
			more, err = r.readHeader()
		case stData:
			more, err = r.readData()
		case stSkip:
			more, err = r.skipTrailer()
		}
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				r.err = err
			}
			return nil, unexpected(err)
		}
		if more {
			if err := r.fill(); err != nil {
				return nil, unexpected(err)
			}
			continue
		}
		if r.st == stIdle && len(r.ends) > 0 {
			return r.command(), nil
		}
	}
}

// unexpected turns an io.EOF inside a command into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func protoErr(msg string) error { return &ProtocolError{Msg: msg} }

// begin starts a command: it forgets the last one's arguments and, when
// no more input is buffered (the Reader is about to wait for the client),
// drops the buffers a big command left behind. While pipelined input is
// buffered it keeps them, for the next command is already arriving.
func (r *Reader) begin() {
	if idle := r.r == r.w; idle {
		if cap(r.arena) > keepMax {
			r.arena = nil
		}
		if cap(r.ends) > keepArgs {
			r.args, r.ends = nil, nil
		}
	}
	r.arena = r.arena[:0]
	r.args, r.ends = r.args[:0], r.ends[:0]
	r.settle()
	if len(r.buf) > readBufferSize && r.w-r.r <= readBufferSize {
		buf := make([]byte, readBufferSize)
		r.w = copy(buf, r.buf[r.r:r.w])
		r.r, r.buf = 0, buf
	}
	r.total = 0
}

// command returns the arguments of the command just read.
func (r *Reader) command() [][]byte {
	start := 0
	for _, end := range r.ends {
		r.args = append(r.args, r.arena[start:end:end])
		start = end
	}
	return r.args
}

// fill reads more of the stream into the buffer, after what it holds.
func (r *Reader) fill() error {
	if err := r.rerr; err != nil {
		r.rerr = nil
		return err
	}
	if r.buf == nil {
		return r.wakeUp()
	}
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	if r.w == len(r.buf) {
		// Only a line longer than the buffer gets here, and only when
		// MaxInline allows it (findLine fails it otherwise).
		n := min(2*len(r.buf), r.lim.MaxInline)
		if n <= len(r.buf) {
			return errors.New("resp: internal error: read buffer full")
		}
		buf := make([]byte, n)
		copy(buf, r.buf[:r.w])
		r.buf = buf
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			return errBadRead
		}
		r.w += n
		if n > 0 {
			r.rerr = err
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// wakeUp waits for input after Shrink in a small buffer, and takes a
// whole read buffer once some arrives: an idle connection does not hold
// one while it waits.
func (r *Reader) wakeUp() error {
	if r.wake == nil {
		r.wake = make([]byte, wakeSize)
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.wake)
		if n < 0 || n > len(r.wake) {
			return errBadRead
		}
		if n > 0 {
			r.buf = make([]byte, readBufferSize)
			r.r, r.w = 0, copy(r.buf, r.wake[:n])
			r.rerr = err
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// findLine looks for the end of the line at the start of the buffer: its
// first end byte (LF for an inline line, CR for a header line), after
// which after more bytes belong to the line (the LF Redis takes after a
// CR without looking at it). It returns the end byte's index, or ok false
// when more input is needed. Like Redis's strchr, the search stops at a
// NUL: such a line never ends. A line that has not ended within MaxInline
// bytes, those after its end byte included, fails with tooBig; Redis fails
// it once more than 64 KiB wait, which is the same for every way the
// bytes can arrive but the one where the end comes within the same read
// as the 64 KiB.
func (r *Reader) findLine(end byte, after int, tooBig string) (i int, ok bool, err error) {
	data := r.buf[r.r:r.w]
	lim := min(len(data), r.lim.MaxInline)
	if !r.nul && r.scan < lim {
		seg := data[r.scan:lim]
		i = bytes.IndexByte(seg, end)
		upto := i
		if i < 0 {
			upto = len(seg)
		}
		switch {
		case bytes.IndexByte(seg[:upto], 0) >= 0:
			r.nul = true
		case i >= 0:
			i += r.scan
			r.scan = i
			if i+1+after > r.lim.MaxInline {
				return 0, false, protoErr(tooBig)
			}
			return i, i+1+after <= len(data), nil
		default:
			r.scan = lim
		}
	}
	if len(data) >= r.lim.MaxInline {
		return 0, false, protoErr(tooBig)
	}
	return 0, false, nil
}

// consumeLine moves past a line of n bytes that findLine found.
func (r *Reader) consumeLine(n int) {
	r.r += n
	r.scan, r.nul = 0, false
}

// readInline reads an inline command: Redis's processInlineBuffer.
func (r *Reader) readInline() (more bool, err error) {
	i, ok, err := r.findLine('\n', 0, msgInlineTooBig)
	if !ok || err != nil {
		return !ok && err == nil, err
	}
	line := r.buf[r.r : r.r+i]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	// The words take at most the line's bytes, so the arena is sized
	// before; their slots grow as they are found. The line is consumed
	// only once split, so that a Memory error leaves it to be read again.
	if err := r.growArena(len(line), 0); err != nil {
		return false, err
	}
	if err := r.split(line); err != nil {
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			r.arena, r.ends = r.arena[:0], r.ends[:0]
		}
		return false, err
	}
	r.consumeLine(i + 1)
	// kvpool bounds (see the package comment): unreachable at the
	// defaults, since a 64 KiB line cannot exceed them.
	if len(r.ends) > r.lim.MaxArgs || len(r.arena) > r.lim.MaxCommand {
		return false, protoErr(msgInlineTooBig)
	}
	start := 0
	for _, end := range r.ends {
		if end-start > r.lim.MaxBulk {
			return false, protoErr(msgInlineTooBig)
		}
		start = end
	}
	r.st = stIdle
	return false, nil
}

// readCount reads a multibulk's `*N` line.
func (r *Reader) readCount() (more bool, err error) {
	i, ok, err := r.findLine('\r', 1, msgMbulkTooBig)
	if !ok || err != nil {
		return !ok && err == nil, err
	}
	n, valid := parseInt(r.buf[r.r+1 : r.r+i]) // after the '*'
	if !valid || n > int64(r.lim.MaxArgs) {
		return false, protoErr(msgMultibulkLen)
	}
	r.consumeLine(i + 2)
	if n <= 0 {
		r.st = stIdle // an empty command: skipped
		return false, nil
	}
	r.left = int(n)
	r.st = stHeader
	return false, nil
}

// readHeader reads a bulk string's `$len` line.
func (r *Reader) readHeader() (more bool, err error) {
	i, ok, err := r.findLine('\r', 1, msgBulkTooBig)
	if !ok || err != nil {
		return !ok && err == nil, err
	}
	if c := r.buf[r.r]; c != '$' {
		return false, protoErr(msgExpected + string([]byte{c}) + "'")
	}
	n, valid := parseInt(r.buf[r.r+1 : r.r+i])
	if !valid || n < 0 || n > int64(r.lim.MaxBulk) {
		return false, protoErr(msgBulkLen)
	}
	// MaxCommand is kvpool's: Redis bounds each argument but not their
	// sum, so one command of 2^31 arguments of 512 MiB would be legal.
	// Over it a client gets the error Redis gives an argument too long.
	if n > int64(r.lim.MaxCommand-r.total) {
		return false, protoErr(msgBulkLen)
	}
	r.consumeLine(i + 2)
	r.total += int(n)
	r.bulk = int(n)
	r.st = stData
	return false, nil
}

// readData reads a bulk string's data into the arena, as it arrives.
func (r *Reader) readData() (more bool, err error) {
	for r.bulk > 0 {
		if r.r < r.w {
			n := min(r.bulk, r.w-r.r)
			if err := r.growArena(n, 2*cap(r.arena)); err != nil {
				return false, err
			}
			r.arena = append(r.arena, r.buf[r.r:r.r+n]...)
			r.r += n
			r.bulk -= n
			continue
		}
		if r.bulk < len(r.buf) {
			return true, nil // the buffer holds the rest, and what follows
		}
		if err := r.readDirect(); err != nil {
			return false, err
		}
	}
	r.st, r.skip = stSkip, 2
	return false, nil
}

// readDirect reads part of a big bulk string's data from the stream
// straight into the arena, growing it geometrically when full but never
// beyond the data still declared.
func (r *Reader) readDirect() error {
	if err := r.rerr; err != nil {
		r.rerr = nil
		return err
	}
	want := min(r.bulk, growChunk)
	// Grow by doubling, but at least to growFirst of the data declared:
	// a value up to that size is read into one buffer, never copied.
	target := max(2*cap(r.arena), len(r.arena)+min(r.bulk, growFirst))
	if err := r.growArena(want, min(target, len(r.arena)+r.bulk)); err != nil {
		return err
	}
	p := r.arena[len(r.arena):cap(r.arena)]
	p = p[:min(len(p), r.bulk)]
	for range maxEmptyReads {
		n, err := r.src.Read(p)
		if n < 0 || n > len(p) {
			return errBadRead
		}
		r.arena = r.arena[:len(r.arena)+n]
		r.bulk -= n
		if n > 0 {
			r.rerr = err
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// skipTrailer skips the two bytes after a bulk string's data. Redis does
// not look at them (they should be CRLF), and neither does Reader.
func (r *Reader) skipTrailer() (more bool, err error) {
	n := min(r.skip, r.w-r.r)
	r.r += n
	r.skip -= n
	if r.skip > 0 {
		return true, nil
	}
	if err := r.growEnds(1); err != nil {
		return false, err
	}
	r.ends = append(r.ends, len(r.arena))
	r.left--
	if r.left == 0 {
		r.st = stIdle
	} else {
		r.st = stHeader
	}
	return false, nil
}

// parseInt parses b as Redis's string2ll does: 1 to 20 bytes, "0" or an
// optional '-', a digit 1-9 and digits, within int64.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > math.MaxUint64/10 || v*10 > math.MaxUint64-d {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}
