package wire

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// scratchLen is the Reader's scratch buffer: room for the longest message
// (hello-ack or ERROR), which also holds a hello-ack's fixed part, a hello's
// tenant, an object name, a tier's stats entry (97 + 255 bytes) and 128
// key IDs per read.
const scratchLen = MaxMessageLen

// Compile-time checks that every fixed-size read fits the scratch buffer.
const (
	_ = uint(scratchLen - MaxMessageLen)
	_ = uint(scratchLen - HelloAckLen)
	_ = uint(scratchLen - (tierFixedLen + 255))
	_ = uint(scratchLen - block.MaxTenantLen)
	_ = uint(scratchLen - block.MaxNameLen)
)

// state is where a Reader is in its stream.
type state uint8

const (
	stIdle     state = iota // between frames
	stBody                  // header read, body not started
	stBlocks                // between block entries
	stPayload               // block header read, payload unread
	stSkipOnly              // body reading failed; only Skip is allowed
)

var errMisuse = errors.New("reader used out of sequence")

// Reader decodes a stream of frames (after a hello or hello-ack) from a
// connection, through a frame.Reader it owns. It reads only the bytes the
// frame's length says are there, so it never blocks waiting for bytes that
// belong to a later frame, and it validates every length field against its
// Limits and the frame before reading or allocating for it.
//
// Use ReadFrame to decode whole frames into a reusable Frame, or the
// streaming methods: ReadHeader, then the body method for the op's shape
// (ReadIDs, ReadNames, ReadStatuses, ReadStats, ReadError, or BeginBlocks
// with NextBlock, NextAccess or NextNamed and ReadPayload/SkipPayload per
// block). Each body must be read
// completely, or skipped with Skip, before the next ReadHeader.
//
// Errors: ReadHeader returns a bare io.EOF when the stream ends cleanly
// between frames. Errors that lose the frame boundary (truncation, reported
// as io.ErrUnexpectedEOF, I/O errors and deadlines, a frame length below
// HeaderLen or above Limits.MaxFrame, any hello error) are sticky: every
// later call returns them and the connection must be closed. Any other
// decode error (frame.ErrUnknownOp, frame.ErrMalformed, frame.ErrBatchTooLong,
// frame.ErrPayloadTooLarge, frame.ErrTooLong for a name over
// block.MaxNameLen) leaves the stream in sync: call Skip, answer the
// request with an ERROR frame (AppendError), and go on.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	fr  *frame.Reader[Op]
	lim Limits
	err error // sticky: the frame boundary is lost (also fr.Err())

	st         state
	hdr        Header       // current frame
	start      int64        // stream offset of the current frame
	remain     int          // unread body bytes of the current frame
	nblocks    int          // block entries in the current frame
	blocksLeft int          // block entries not yet started
	entryLen   int          // least bytes of one block entry: BlockHeaderLen (+ HintLen in ACCESS, + a name in a named op)
	payload    int          // unread payload bytes of the current block
	emptyOK    bool         // the last NextBlock had an empty payload, already consumed
	handshake  string       // "hello" or "hello-ack" while reading one, for errors
	sum        uint32       // ReadPayloadSum's running checksum
	sumEach    func([]byte) // r.addSum, made once so a read does not allocate

	scratch [scratchLen]byte
}

// NewReader returns a Reader of rd enforcing lim (zero fields mean the
// defaults), or the error lim.Validate reports.
func NewReader(rd io.Reader, lim Limits) (*Reader, error) {
	l, err := lim.Resolve()
	if err != nil {
		return nil, err
	}
	r := &Reader{fr: frame.NewReader[Op](rd, "wire"), lim: l}
	r.sumEach = r.addSum
	return r, nil
}

func (r *Reader) addSum(p []byte) { r.sum = block.UpdateChecksum(r.sum, p) }

// Reset discards all state, including a sticky error, and makes r read
// from rd, reusing its buffers.
func (r *Reader) Reset(rd io.Reader) {
	r.fr.Reset(rd)
	r.err = nil
	r.resetFrame()
	r.handshake = ""
}

// ExpectLargeGet tells r that the next frame is expected to be a GET or
// GET named response (one block entry, no name in it) whose payload is at least frame.ReadBufferSize: the
// read that fills r's empty buffer then takes only the frame and block
// headers, and the payload goes from the connection straight into
// ReadPayload's slice, not through the buffer and a copy. Any frame is
// still read correctly; only the size of one read changes.
func (r *Reader) ExpectLargeGet() { r.fr.LimitNextFill(HeaderLen + BlockHeaderLen) }

// Limits returns the limits r enforces, defaults filled in.
func (r *Reader) Limits() Limits { return r.lim }

// Offset returns the number of stream bytes r has consumed (decoded or
// skipped); bytes bufio has read ahead are not counted.
func (r *Reader) Offset() int64 { return r.fr.Offset() }

func (r *Reader) resetFrame() {
	r.st = stIdle
	r.remain, r.nblocks, r.blocksLeft, r.payload, r.entryLen = 0, 0, 0, 0, 0
	r.emptyOK = false
}

// where names the current frame for error messages.
func (r *Reader) where() string {
	if r.handshake != "" {
		return fmt.Sprintf("%s at byte %d", r.handshake, r.start)
	}
	return fmt.Sprintf("%v frame (request %d) at byte %d", r.hdr.Op, r.hdr.ReqID, r.start)
}

// fail records a sticky error.
func (r *Reader) fail(err error) error {
	r.err = r.fr.Fail(err)
	r.resetFrame()
	return err
}

// bad reports a recoverable decode error in the current frame: the frame's
// boundary is known, so Skip resynchronises.
func (r *Reader) bad(sentinel error, format string, a ...any) error {
	r.st = stSkipOnly
	r.emptyOK = false
	return fmt.Errorf("wire: %s: %s: %w", r.where(), fmt.Sprintf(format, a...), sentinel)
}

func (r *Reader) misuse(method string) error {
	names := [...]string{stIdle: "between frames", stBody: "before the body was read", stBlocks: "between blocks",
		stPayload: "with a payload unread", stSkipOnly: "after a decode error (call Skip)"}
	return fmt.Errorf("wire: %s called %s of %s: %w", method, names[r.st], r.where(), errMisuse)
}

// read fills p from the stream; what names it for errors. Any failure is
// sticky, and a stream that ends inside p is io.ErrUnexpectedEOF.
func (r *Reader) read(p []byte, what string) error {
	if err := r.fr.ReadFull(p); err != nil {
		return r.fail(fmt.Errorf("wire: %s: read %s: %w", r.where(), what, err))
	}
	return nil
}

// body reads len(p) bytes of the current frame's body.
func (r *Reader) body(p []byte, what string) error {
	if len(p) > r.remain { // callers validate first; this keeps the decoder inside the frame regardless
		return r.bad(frame.ErrMalformed, "%s needs %d bytes, %d left in the frame", what, len(p), r.remain)
	}
	r.remain -= len(p)
	return r.read(p, what)
}

// appendBody appends n body bytes to dst. When dst must grow, it grows
// to at most len(dst)+n, or, with toFrameEnd, to at most what the rest of
// the frame could fill (so a Frame's arena collecting many payloads grows
// geometrically, not by one payload at a time).
func (r *Reader) appendBody(dst []byte, n int, toFrameEnd bool, what string) ([]byte, error) {
	if n > r.remain {
		return dst, r.bad(frame.ErrMalformed, "%s needs %d bytes, %d left in the frame", what, n, r.remain)
	}
	limit := len(dst) + n
	if toFrameEnd {
		limit = len(dst) + r.remain
	}
	r.remain -= n
	return r.appendRead(dst, n, limit, what)
}

// appendRead appends n stream bytes to dst, growing it as the bytes arrive
// and never beyond limit (>= len(dst)+n) (frame.Reader.AppendFull).
func (r *Reader) appendRead(dst []byte, n, limit int, what string) ([]byte, error) {
	dst, err := r.fr.AppendFull(dst, n, limit)
	if err != nil {
		return dst, r.fail(fmt.Errorf("wire: %s: read %s: %w", r.where(), what, err))
	}
	return dst, nil
}

// ReadHeader reads the next frame's header and checks it: the length against
// HeaderLen and Limits.MaxFrame (sticky errors), then the op, flags, reserved
// field and, for fixed-size bodies, the body length (recoverable errors; the
// returned Header is valid for the ERROR reply). It returns a bare io.EOF
// when the stream ends before the first byte of a frame.
func (r *Reader) ReadHeader() (Header, error) {
	if r.err != nil {
		return Header{}, r.err
	}
	if r.st != stIdle {
		return Header{}, r.misuse("ReadHeader")
	}
	r.emptyOK = false
	r.start = r.fr.Offset()
	h, err := r.fr.ReadHeader(r.lim.MaxFrame)
	r.hdr = h
	if err != nil {
		return h, r.fail(err)
	}
	r.st, r.remain = stBody, h.BodyLen()
	if !h.Op.Valid() {
		return h, r.bad(frame.ErrUnknownOp, "op 0x%02x is not defined in protocol version %d", uint8(h.Op), Version)
	}
	if h.Flags != 0 {
		return h, r.bad(frame.ErrMalformed, "flags %#02x set; version %d defines none", h.Flags, Version)
	}
	if h.Reserved != 0 {
		return h, r.bad(frame.ErrMalformed, "reserved field is %#04x, want 0", h.Reserved)
	}
	exact, least := -1, 0
	switch h.Op.shape() {
	case shapeEmpty:
		exact = 0
	case shapeID:
		exact = idLen
	case shapeStatus:
		exact = StatusLen
	case shapeIDs, shapeStatuses, shapeBlocks, shapeAccess, shapeNames, shapeNamedBlocks:
		least = countLen
	case shapeBlock:
		least = BlockHeaderLen
	case shapeName:
		least = minNameEntry
	case shapeNamedBlock:
		least = minNameEntry + BlockHeaderLen
	case shapeStats:
		least = statsCountLen
	case shapeError:
		least = errorFixedLen
	}
	switch {
	case exact >= 0 && r.remain != exact:
		return h, r.bad(frame.ErrMalformed, "body of %d bytes, want exactly %d", r.remain, exact)
	case r.remain < least:
		return h, r.bad(frame.ErrMalformed, "body of %d bytes, want at least %d", r.remain, least)
	}
	if r.remain == 0 {
		r.st = stIdle
	}
	return h, nil
}

// Skip discards the unread rest of the current frame (after a recoverable
// decode error, or for a frame the caller does not want), leaving r between
// frames. It reads exactly the frame's remaining bytes.
func (r *Reader) Skip() error {
	if r.err != nil {
		return r.err
	}
	n := r.remain
	r.resetFrame()
	if n == 0 {
		return nil
	}
	if err := r.fr.Discard(n); err != nil {
		return r.fail(fmt.Errorf("wire: %s: skip body: %w", r.where(), err))
	}
	return nil
}

// beginBody checks that a body method matching the frame's shape is called
// right after ReadHeader.
func (r *Reader) beginBody(method string, shapes ...shape) error {
	if r.err != nil {
		return r.err
	}
	if r.st != stBody || !slices.Contains(shapes, r.hdr.Op.shape()) {
		return r.misuse(method)
	}
	return nil
}

// readCount reads a batch count and checks it against Limits.MaxBatch and
// against the body bytes left (each entry needs at least entryLen).
func (r *Reader) readCount(entryLen int) (int, error) {
	b := r.scratch[:countLen]
	if err := r.body(b, "count"); err != nil {
		return 0, err
	}
	n := le.Uint32(b)
	if uint64(n) > uint64(r.lim.MaxBatch) {
		return 0, r.bad(frame.ErrBatchTooLong, "count %d exceeds limit %d", n, r.lim.MaxBatch)
	}
	if uint64(n)*uint64(entryLen) > uint64(r.remain) {
		return 0, r.bad(frame.ErrMalformed, "count %d needs at least %d bytes, the frame has %d left", n, uint64(n)*uint64(entryLen), r.remain)
	}
	return int(n), nil
}

// finishBody ends a body that must have been consumed exactly.
func (r *Reader) finishBody() error {
	if r.remain != 0 {
		return r.bad(frame.ErrMalformed, "%d trailing bytes after the body", r.remain)
	}
	r.st = stIdle
	return nil
}

// ReadIDs reads the key IDs of a GET or DELETE (one ID) or an MGET or
// EXISTS request, appending them to dst[:0]. It checks the count against
// Limits.MaxBatch and the frame length before growing dst.
func (r *Reader) ReadIDs(dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	if err := r.beginBody("ReadIDs", shapeID, shapeIDs); err != nil {
		return dst, err
	}
	n := 1
	if r.hdr.Op.shape() == shapeIDs {
		var err error
		if n, err = r.readCount(idLen); err != nil {
			return dst, err
		}
		if n*idLen != r.remain {
			return dst, r.bad(frame.ErrMalformed, "count %d needs %d bytes of IDs, the frame has %d", n, n*idLen, r.remain)
		}
	}
	dst = slices.Grow(dst, n)
	for n > 0 {
		k := min(n, scratchLen/idLen)
		b := r.scratch[:k*idLen]
		if err := r.body(b, "key IDs"); err != nil {
			return dst, err
		}
		for i := 0; i < k; i++ {
			dst = append(dst, le.Uint64(b[i*idLen:]))
		}
		n -= k
	}
	return dst, r.finishBody()
}

// minNameEntry is the least bytes of a name entry: its length and one
// byte.
const minNameEntry = NameHeaderLen + 1

// readName reads one name entry of the current frame (entry i) and checks
// its length: 1 to block.MaxNameLen bytes, within the frame.
func (r *Reader) readName(i int) (string, error) {
	b := r.scratch[:NameHeaderLen]
	if err := r.body(b, "name length"); err != nil {
		return "", err
	}
	n := int(le.Uint16(b))
	switch {
	case n == 0:
		return "", r.bad(frame.ErrMalformed, "name %d is empty (an object name is 1 to %d bytes)", i, block.MaxNameLen)
	case n > block.MaxNameLen:
		return "", r.bad(frame.ErrTooLong, "name %d of %d bytes is longer than the %d-byte limit on object names (fixed)", i, n, block.MaxNameLen)
	case n > r.remain:
		return "", r.bad(frame.ErrMalformed, "name %d of %d bytes, the frame has %d left", i, n, r.remain)
	}
	name := r.scratch[:n]
	if err := r.body(name, "name"); err != nil {
		return "", err
	}
	return string(name), nil
}

// ReadNames reads the names of a GET named or DELETE named (one name) or
// an MGET named or EXISTS named request, appending them to dst[:0]. It
// checks the count against Limits.MaxBatch and the frame length before
// growing dst, and each name's length (1 to block.MaxNameLen bytes).
func (r *Reader) ReadNames(dst []string) ([]string, error) {
	clear(dst)
	dst = dst[:0]
	if err := r.beginBody("ReadNames", shapeName, shapeNames); err != nil {
		return dst, err
	}
	n := 1
	if r.hdr.Op.shape() == shapeNames {
		var err error
		if n, err = r.readCount(minNameEntry); err != nil {
			return dst, err
		}
	}
	dst = slices.Grow(dst, n)
	for i := 0; i < n; i++ {
		name, err := r.readName(i)
		if err != nil {
			return dst, err
		}
		dst = append(dst, name)
	}
	return dst, r.finishBody()
}

// ReadStatuses reads the status entries of a PUT, DELETE or SYNC response
// (one entry) or an MPUT or EXISTS response, appending them to dst[:0].
func (r *Reader) ReadStatuses(dst []Status) ([]Status, error) {
	dst = dst[:0]
	if err := r.beginBody("ReadStatuses", shapeStatus, shapeStatuses); err != nil {
		return dst, err
	}
	n := 1
	if r.hdr.Op.shape() == shapeStatuses {
		var err error
		if n, err = r.readCount(StatusLen); err != nil {
			return dst, err
		}
		if n*StatusLen != r.remain {
			return dst, r.bad(frame.ErrMalformed, "count %d needs %d bytes of statuses, the frame has %d", n, n*StatusLen, r.remain)
		}
	}
	dst = slices.Grow(dst, n)
	for i := 0; i < n; i++ {
		b := r.scratch[:StatusLen]
		if err := r.body(b, "status entry"); err != nil {
			return dst, err
		}
		if res := le.Uint16(b[10:]); res != 0 {
			return dst, r.bad(frame.ErrMalformed, "status entry %d: reserved field is %#04x, want 0", i, res)
		}
		dst = append(dst, Status{ID: le.Uint64(b), Code: Code(le.Uint16(b[8:]))})
	}
	return dst, r.finishBody()
}

// ReadError reads the body of an ERROR frame into e.
func (r *Reader) ReadError(e *RemoteError) error {
	if err := r.beginBody("ReadError", shapeError); err != nil {
		return err
	}
	b := r.scratch[:errorFixedLen]
	if err := r.body(b, "error code"); err != nil {
		return err
	}
	c, n := Code(le.Uint16(b)), int(le.Uint16(b[2:]))
	switch {
	case c == CodeOK:
		return r.bad(frame.ErrMalformed, "ERROR with code ok")
	case n > MaxMessageLen:
		return r.bad(frame.ErrMalformed, "message of %d bytes exceeds limit %d", n, MaxMessageLen)
	case n != r.remain:
		return r.bad(frame.ErrMalformed, "message of %d bytes, the frame has %d left", n, r.remain)
	}
	msg := r.scratch[:n]
	if err := r.body(msg, "message"); err != nil {
		return err
	}
	e.Code = c
	if e.Message != string(msg) {
		e.Message = string(msg)
	}
	return r.finishBody()
}

// ReadStats reads the body of a STATS response, appending the tiers to
// dst[:0] (a name equal to the one already in dst's array is reused, so a
// client polling stats does not allocate).
func (r *Reader) ReadStats(dst []TierStats) ([]TierStats, error) {
	dst = dst[:0]
	if err := r.beginBody("ReadStats", shapeStats); err != nil {
		return dst, err
	}
	b := r.scratch[:statsCountLen]
	if err := r.body(b, "tier count"); err != nil {
		return dst, err
	}
	n := int(b[0])
	if n*tierFixedLen > r.remain {
		return dst, r.bad(frame.ErrMalformed, "%d tiers need at least %d bytes, the frame has %d", n, n*tierFixedLen, r.remain)
	}
	dst = slices.Grow(dst, n)
	for i := 0; i < n; i++ {
		if err := r.body(r.scratch[:1], "tier name length"); err != nil {
			return dst, err
		}
		nl := int(r.scratch[0])
		if rest := tierFixedLen - 1 + nl; rest > r.remain {
			return dst, r.bad(frame.ErrMalformed, "tier %d with a %d-byte name needs %d bytes, the frame has %d", i, nl, rest, r.remain)
		}
		b := r.scratch[:nl+tierFixedLen-1]
		if err := r.body(b, "tier stats"); err != nil {
			return dst, err
		}
		dst = dst[:i+1]
		t := &dst[i]
		if name := b[:nl]; t.Name != string(name) {
			t.Name = string(name)
		}
		v := func(k int) uint64 { return le.Uint64(b[nl+8*k:]) }
		t.Stats.Blocks = int(v(0))
		t.Stats.Bytes = int64(v(1))
		t.Stats.HeldBytes = int64(v(2))
		t.Stats.CapacityBytes = int64(v(3))
		t.Stats.Hits = v(4)
		t.Stats.Misses = v(5)
		t.Stats.BytesIn = v(6)
		t.Stats.BytesOut = v(7)
		t.Stats.EvictAttempts = v(8)
		t.Stats.Evicted = v(9)
		t.Stats.Corruptions = v(10)
		t.Stats.IOErrors = v(11)
	}
	return dst, r.finishBody()
}

// BeginBlocks starts reading the block entries of a PUT, PUT named or GET
// response (one block) or an MPUT, MPUT named, MGET response or ACCESS,
// and returns how many follow. Then, for each, call NextBlock (NextAccess
// in an ACCESS, NextNamed in a PUT or MPUT named) and consume its payload
// with ReadPayload or SkipPayload (a block with an empty payload needs
// neither).
func (r *Reader) BeginBlocks() (int, error) {
	if err := r.beginBody("BeginBlocks", shapeBlock, shapeBlocks, shapeAccess, shapeNamedBlock, shapeNamedBlocks); err != nil {
		return 0, err
	}
	n := 1
	r.entryLen = BlockHeaderLen
	switch r.hdr.Op.shape() {
	case shapeAccess:
		r.entryLen += HintLen
	case shapeNamedBlock, shapeNamedBlocks:
		r.entryLen += minNameEntry
	}
	if sh := r.hdr.Op.shape(); sh == shapeBlocks || sh == shapeAccess || sh == shapeNamedBlocks {
		var err error
		if n, err = r.readCount(r.entryLen); err != nil {
			return 0, err
		}
	}
	r.nblocks, r.blocksLeft = n, n
	r.st = stBlocks
	if n == 0 {
		return 0, r.finishBody()
	}
	return n, nil
}

// NextBlock reads the next block entry's header and checks it: reserved
// field zero, code ok in requests, empty payload and zero checksum for a
// failed block, payload length within Limits.MaxPayload and within the
// frame.
func (r *Reader) NextBlock() (BlockHeader, error) {
	if r.err != nil {
		return BlockHeader{}, r.err
	}
	if sh := r.hdr.Op.shape(); r.st != stBlocks || r.blocksLeft == 0 || sh == shapeAccess || sh.named() {
		return BlockHeader{}, r.misuse("NextBlock")
	}
	return r.nextBlock(nil, "")
}

// NextNamed reads the next entry of a PUT named or MPUT named request: its
// name (1 to block.MaxNameLen bytes; a longer one is frame.ErrTooLong),
// then its block header, checked as NextBlock checks it and for the key id
// block.NameID(name) (frame.ErrMalformed otherwise).
func (r *Reader) NextNamed() (string, BlockHeader, error) {
	if r.err != nil {
		return "", BlockHeader{}, r.err
	}
	if sh := r.hdr.Op.shape(); r.st != stBlocks || r.blocksLeft == 0 || (sh != shapeNamedBlock && sh != shapeNamedBlocks) {
		return "", BlockHeader{}, r.misuse("NextNamed")
	}
	name, err := r.readName(r.nblocks - r.blocksLeft)
	if err != nil {
		r.blocksLeft-- // the entry is lost: only Skip is left
		return "", BlockHeader{}, err
	}
	bh, err := r.nextBlock(nil, name)
	return name, bh, err
}

// NextAccess reads the next entry of an ACCESS request: its hint, then its
// block header, checked as NextBlock checks it and, for a touch, for an
// empty payload and a zero checksum. Unknown hint flags and a nonzero
// reserved field are frame.ErrMalformed.
func (r *Reader) NextAccess() (Hint, BlockHeader, error) {
	if r.err != nil {
		return Hint{}, BlockHeader{}, r.err
	}
	if r.st != stBlocks || r.blocksLeft == 0 || r.hdr.Op.shape() != shapeAccess {
		return Hint{}, BlockHeader{}, r.misuse("NextAccess")
	}
	b := r.scratch[:HintLen]
	if err := r.body(b, "hint"); err != nil {
		return Hint{}, BlockHeader{}, err
	}
	h := Hint{Hint: block.Hint{Depth: int(le.Uint32(b[8:])), Parent: le.Uint64(b)}, Touch: b[12]&hintTouch != 0}
	i := r.nblocks - r.blocksLeft
	switch {
	case b[12]&^hintTouch != 0:
		r.blocksLeft-- // the entry is lost: only Skip is left
		return h, BlockHeader{}, r.bad(frame.ErrMalformed, "entry %d: hint flags %#02x; only %#02x (touch) is defined", i, b[12], hintTouch)
	case b[13] != 0 || b[14] != 0 || b[15] != 0:
		r.blocksLeft--
		return h, BlockHeader{}, r.bad(frame.ErrMalformed, "entry %d: hint reserved bytes %x, want 0", i, b[13:16])
	}
	bh, err := r.nextBlock(&h, "")
	return h, bh, err
}

// nextBlock reads and checks a block header; h is its ACCESS hint, or
// nil; name is its name in a named op, or "".
func (r *Reader) nextBlock(h *Hint, name string) (BlockHeader, error) {
	r.emptyOK = false
	b := r.scratch[:BlockHeaderLen]
	if err := r.body(b, "block header"); err != nil {
		return BlockHeader{}, err
	}
	bh := BlockHeader{ID: le.Uint64(b), Code: Code(le.Uint16(b[8:])), Checksum: le.Uint32(b[12:]), Len: le.Uint32(b[16:])}
	r.blocksLeft--
	i := r.nblocks - r.blocksLeft - 1
	room := max(0, r.remain-r.blocksLeft*r.entryLen) // bytes left for this payload
	switch res := le.Uint16(b[10:]); {
	case res != 0:
		return bh, r.bad(frame.ErrMalformed, "block %d (id %016x): reserved field is %#04x, want 0", i, bh.ID, res)
	case r.hdr.Op.IsRequest() && bh.Code != CodeOK:
		return bh, r.bad(frame.ErrMalformed, "block %d (id %016x): status %v in a request (must be ok)", i, bh.ID, bh.Code)
	case bh.Code != CodeOK && (bh.Len != 0 || bh.Checksum != 0):
		return bh, r.bad(frame.ErrMalformed, "block %d (id %016x): status %v with a %d-byte payload and checksum %08x (must be empty)",
			i, bh.ID, bh.Code, bh.Len, bh.Checksum)
	case uint64(bh.Len) > uint64(r.lim.MaxPayload):
		return bh, r.bad(frame.ErrPayloadTooLarge, "block %d (id %016x): payload of %d bytes exceeds limit %d", i, bh.ID, bh.Len, r.lim.MaxPayload)
	case uint64(bh.Len) > uint64(room):
		return bh, r.bad(frame.ErrMalformed, "block %d (id %016x): payload of %d bytes, the frame has room for %d",
			i, bh.ID, bh.Len, room)
	case h != nil && h.Touch && (bh.Len != 0 || bh.Checksum != 0):
		return bh, r.bad(frame.ErrMalformed, "block %d (id %016x): a touch with a %d-byte payload and checksum %08x (must be empty)",
			i, bh.ID, bh.Len, bh.Checksum)
	case name != "" && bh.ID != block.NameID(name):
		return bh, r.bad(frame.ErrMalformed, "block %d: id %016x, but its name (%d bytes) has id %016x", i, bh.ID, len(name), block.NameID(name))
	}
	r.payload = int(bh.Len)
	r.st = stPayload
	if r.payload == 0 {
		r.emptyOK = true
		return bh, r.endBlock()
	}
	return bh, nil
}

// endBlock finishes the current block: on to the next one, or the frame's
// end, which must coincide with the body's end.
func (r *Reader) endBlock() error {
	r.payload = 0
	if r.blocksLeft > 0 {
		r.st = stBlocks
		return nil
	}
	return r.finishBody()
}

// ReadPayload reads the current block's payload into dst[:0] and returns it.
// When cap(dst) is at least the block's length the bytes land in dst's array
// (payloads of 64 KiB or more are read from the connection straight into
// it); otherwise a larger array is allocated, growing as bytes arrive (see
// frame.GrowChunk), never beyond the payload's length.
// Verify the checksum with block.Verify against the connection's tenant.
func (r *Reader) ReadPayload(dst []byte) ([]byte, error) {
	return r.appendPayload(dst[:0], false)
}

// ReadPayloadSum is ReadPayload that also returns the checksum state sum
// (block.KeySum of the key the block should be) carried over the payload
// with block.UpdateChecksum, computed piece by piece as the bytes arrive
// rather than in a second pass: the block verifies when the result equals
// its header's Checksum. On error the checksum is meaningless.
func (r *Reader) ReadPayloadSum(dst []byte, sum uint32) ([]byte, uint32, error) {
	if r.err != nil {
		return dst[:0], 0, r.err
	}
	if r.emptyOK {
		r.emptyOK = false
		return dst[:0], sum, nil
	}
	if r.st != stPayload {
		return dst[:0], 0, r.misuse("ReadPayloadSum")
	}
	n := r.payload
	if n > r.remain {
		return dst[:0], 0, r.bad(frame.ErrMalformed, "payload needs %d bytes, %d left in the frame", n, r.remain)
	}
	r.remain -= n
	r.sum = sum
	dst, err := r.fr.AppendFullFunc(dst[:0], n, n, r.sumEach)
	if err != nil {
		return dst, 0, r.fail(fmt.Errorf("wire: %s: read payload: %w", r.where(), err))
	}
	return dst, r.sum, r.endBlock()
}

// appendPayload appends the current block's payload to dst; toFrameEnd as
// for appendBody.
func (r *Reader) appendPayload(dst []byte, toFrameEnd bool) ([]byte, error) {
	if r.err != nil {
		return dst, r.err
	}
	if r.emptyOK {
		r.emptyOK = false
		return dst, nil
	}
	if r.st != stPayload {
		return dst, r.misuse("ReadPayload")
	}
	dst, err := r.appendBody(dst, r.payload, toFrameEnd, "payload")
	if err != nil {
		return dst, err
	}
	return dst, r.endBlock()
}

// SkipPayload discards the current block's payload.
func (r *Reader) SkipPayload() error {
	if r.err != nil {
		return r.err
	}
	if r.emptyOK {
		r.emptyOK = false
		return nil
	}
	if r.st != stPayload {
		return r.misuse("SkipPayload")
	}
	n := r.payload
	r.remain -= n
	if err := r.fr.Discard(n); err != nil {
		return r.fail(fmt.Errorf("wire: %s: skip payload: %w", r.where(), err))
	}
	return r.endBlock()
}

// ReadFrame reads a whole frame into f, reusing its slices; payloads are
// stored in a buffer f owns and stay valid until the next ReadFrame into f.
// Errors are those of ReadHeader and the body methods; after a recoverable
// one, f.Header is set (for the ERROR reply) and the caller calls Skip.
func (r *Reader) ReadFrame(f *Frame) error {
	h, err := r.ReadHeader()
	f.reset(h)
	if err != nil {
		return err
	}
	switch h.Op.shape() {
	case shapeID, shapeIDs:
		f.IDs, err = r.ReadIDs(f.IDs)
	case shapeName, shapeNames:
		f.Names, err = r.ReadNames(f.Names)
	case shapeStatus, shapeStatuses:
		f.Statuses, err = r.ReadStatuses(f.Statuses)
	case shapeStats:
		f.Tiers, err = r.ReadStats(f.Tiers)
	case shapeError:
		e := RemoteError{}
		err = r.ReadError(&e)
		f.Code, f.Message = e.Code, e.Message
	case shapeBlock, shapeBlocks, shapeAccess, shapeNamedBlock, shapeNamedBlocks:
		err = r.readBlocks(f)
	}
	return err
}

func (r *Reader) readBlocks(f *Frame) error {
	n, err := r.BeginBlocks()
	if err != nil {
		return err
	}
	f.Blocks = slices.Grow(f.Blocks, n)
	sh := r.hdr.Op.shape()
	for i := 0; i < n; i++ {
		var bh BlockHeader
		switch {
		case sh == shapeAccess:
			var h Hint
			h, bh, err = r.NextAccess()
			f.Hints = append(f.Hints, h)
		case sh.named():
			var name string
			name, bh, err = r.NextNamed()
			f.Names = append(f.Names, name)
		default:
			bh, err = r.NextBlock()
		}
		if err != nil {
			return err
		}
		f.offs = append(f.offs, len(f.arena))
		if f.arena, err = r.appendPayload(f.arena, true); err != nil {
			return err
		}
		f.Blocks = append(f.Blocks, Block{ID: bh.ID, Code: bh.Code, Checksum: bh.Checksum})
	}
	for i := range f.Blocks {
		end := len(f.arena)
		if i+1 < len(f.offs) {
			end = f.offs[i+1]
		}
		if off := f.offs[i]; end > off {
			f.Blocks[i].Payload = f.arena[off:end:end]
		}
	}
	return nil
}

// ReadHello reads a client's hello into h (reusing h.Token's array). It
// checks, in order: the magic, the version (frame.ErrVersion: answer with
// CodeVersionMismatch), the reserved fields, the tenant and token lengths
// against Limits, and the tenant's characters (block.ErrBadTenant). Every
// hello error is sticky: answer with a refusing HelloAck and close.
func (r *Reader) ReadHello(h *Hello) error {
	return r.readHandshake("hello", func(b []byte) error {
		v := le.Uint16(b[4:])
		h.Version = v
		if v != Version {
			return fmt.Errorf("client speaks protocol version %d, this side %d: %w", v, Version, frame.ErrVersion)
		}
		if err := r.read(b[6:HelloLen], "hello"); err != nil {
			return err
		}
		tl, kl := int(b[6]), int(le.Uint16(b[8:]))
		switch {
		case b[7] != 0 || le.Uint16(b[10:]) != 0:
			return fmt.Errorf("reserved fields are %#02x and %#04x, want 0: %w", b[7], le.Uint16(b[10:]), frame.ErrMalformed)
		case tl > r.lim.MaxTenant:
			return fmt.Errorf("tenant of %d bytes exceeds limit %d: %w", tl, r.lim.MaxTenant, frame.ErrTenantTooLong)
		case kl > r.lim.MaxToken:
			return fmt.Errorf("token of %d bytes exceeds limit %d: %w", kl, r.lim.MaxToken, frame.ErrTokenTooLong)
		}
		t := b[:tl]
		if err := r.read(t, "tenant"); err != nil {
			return err
		}
		if h.Tenant != string(t) {
			h.Tenant = string(t)
		}
		if err := (block.Key{Tenant: h.Tenant}).Validate(); err != nil {
			return fmt.Errorf("tenant %q: %w", h.Tenant, err)
		}
		var err error
		h.Token, err = r.appendRead(h.Token[:0], kl, kl, "token")
		return err
	})
}

// ReadHelloAck reads a server's hello-ack into a. A nil error means the ack
// was well formed, not that the server accepted: check a.Err(). Decode
// errors are sticky.
func (r *Reader) ReadHelloAck(a *HelloAck) error {
	return r.readHandshake("hello-ack", func(b []byte) error {
		if err := r.read(b[6:HelloAckLen], "hello-ack"); err != nil {
			return err
		}
		a.Version = le.Uint16(b[4:])
		a.Code = Code(le.Uint16(b[6:]))
		n := int(le.Uint16(b[8:]))
		a.MaxFrame, a.MaxBatch, a.MaxPayload = le.Uint32(b[12:]), le.Uint32(b[16:]), le.Uint32(b[20:])
		switch res := le.Uint16(b[10:]); {
		case a.Version == 0:
			return fmt.Errorf("version 0 is not a protocol version: %w", frame.ErrMalformed)
		case res != 0:
			return fmt.Errorf("reserved field is %#04x, want 0: %w", res, frame.ErrMalformed)
		case n > MaxMessageLen:
			return fmt.Errorf("message of %d bytes exceeds limit %d: %w", n, MaxMessageLen, frame.ErrMalformed)
		}
		m := b[:n]
		if err := r.read(m, "message"); err != nil {
			return err
		}
		if a.Message != string(m) {
			a.Message = string(m)
		}
		return nil
	})
}

// readHandshake reads and checks the magic, then runs rest on the scratch
// buffer (magic in b[:4]). Any error is sticky.
func (r *Reader) readHandshake(what string, rest func(b []byte) error) error {
	if r.err != nil {
		return r.err
	}
	if r.st != stIdle {
		return r.misuse("Read" + what)
	}
	r.start = r.fr.Offset()
	r.hdr = Header{}
	r.handshake = what
	defer func() { r.handshake = "" }()
	b := r.scratch[:]
	if err := r.fr.ReadMagic(b, Magic); err == io.EOF {
		return r.fail(io.EOF)
	} else if err != nil {
		return r.fail(fmt.Errorf("wire: %s: %w", r.where(), err))
	}
	if err := r.read(b[4:6], "version"); err != nil {
		return err
	}
	if err := rest(b); err != nil {
		if r.err == nil { // read already wrapped and recorded its own errors
			err = r.fail(fmt.Errorf("wire: %s: %w", r.where(), err))
		}
		return err
	}
	return nil
}
