package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// The encoders append one whole frame (or, for the Head and Header
// functions, the front of one) to dst and return the extended slice. They
// never allocate when dst has room. Encoders whose input can fall outside
// what the format expresses return an error and leave dst unchanged; the
// others cannot fail. Encoders do not know the peer's Limits: keeping
// batches and payloads within them (see HelloAck) is the caller's job.

var le = binary.LittleEndian

// AppendHeader appends a frame header. h.Len must be the frame's total
// length; the Append functions for whole frames compute it themselves.
func AppendHeader(dst []byte, h Header) []byte { return frame.AppendHeader(dst, h) }

// AppendBlockHeader appends the fixed part of a block entry; bh.Len payload
// bytes must follow it.
func AppendBlockHeader(dst []byte, bh BlockHeader) []byte {
	dst = le.AppendUint64(dst, bh.ID)
	dst = le.AppendUint16(dst, uint16(bh.Code))
	dst = append(dst, 0, 0)
	dst = le.AppendUint32(dst, bh.Checksum)
	return le.AppendUint32(dst, bh.Len)
}

// AppendHint appends the hint of an ACCESS entry; its block entry must
// follow it. A Depth below 0 is sent as 0 and one above 2^32-1 as 2^32-1.
func AppendHint(dst []byte, h Hint) []byte {
	dst = le.AppendUint64(dst, h.Parent)
	dst = le.AppendUint32(dst, uint32(max(0, min(int64(h.Depth), math.MaxUint32))))
	var flags byte
	if h.Touch {
		flags = hintTouch
	}
	return append(dst, flags, 0, 0, 0)
}

func appendStatus(dst []byte, s Status) []byte {
	dst = le.AppendUint64(dst, s.ID)
	dst = le.AppendUint16(dst, uint16(s.Code))
	return append(dst, 0, 0)
}

// frameLen returns the total length of a frame with a body of body bytes, or
// an error wrapping frame.ErrFrameTooLarge when the u32 length field cannot hold it.
func frameLen(op Op, body uint64) (uint32, error) {
	if body > MaxFrameLen-HeaderLen {
		return 0, fmt.Errorf("wire: encode %v: frame of %d bytes exceeds the format's %d: %w",
			op, body+HeaderLen, uint64(MaxFrameLen), frame.ErrFrameTooLarge)
	}
	return uint32(body + HeaderLen), nil
}

func appendID(dst []byte, op Op, reqID, id uint64) []byte {
	dst = AppendHeader(dst, Header{Len: HeaderLen + idLen, Op: op, ReqID: reqID})
	return le.AppendUint64(dst, id)
}

// AppendGet appends a GET request for key id.
func AppendGet(dst []byte, reqID, id uint64) []byte { return appendID(dst, OpGet, reqID, id) }

// AppendDelete appends a DELETE request for key id.
func AppendDelete(dst []byte, reqID, id uint64) []byte { return appendID(dst, OpDelete, reqID, id) }

// appendEmpty appends a request of op with an empty body.
func appendEmpty(dst []byte, op Op, reqID uint64) []byte {
	return AppendHeader(dst, Header{Len: HeaderLen, Op: op, ReqID: reqID})
}

// AppendStats appends a STATS request.
func AppendStats(dst []byte, reqID uint64) []byte { return appendEmpty(dst, OpStats, reqID) }

// AppendSync appends a SYNC request.
func AppendSync(dst []byte, reqID uint64) []byte { return appendEmpty(dst, OpSync, reqID) }

func appendIDs(dst []byte, op Op, reqID uint64, ids []uint64) ([]byte, error) {
	n, err := frameLen(op, countLen+idLen*uint64(len(ids)))
	if err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, Header{Len: n, Op: op, ReqID: reqID})
	dst = le.AppendUint32(dst, uint32(len(ids)))
	for _, id := range ids {
		dst = le.AppendUint64(dst, id)
	}
	return dst, nil
}

// AppendMGet appends an MGET request for ids.
func AppendMGet(dst []byte, reqID uint64, ids []uint64) ([]byte, error) {
	return appendIDs(dst, OpMGet, reqID, ids)
}

// AppendExists appends an EXISTS request for ids. The server answers it
// without touching recency or leases (see OpExists).
func AppendExists(dst []byte, reqID uint64, ids []uint64) ([]byte, error) {
	return appendIDs(dst, OpExists, reqID, ids)
}

// checkBlock reports why block entry i (ID id, code c, checksum sum, payload
// length n) cannot be encoded in an op frame, or nil.
func checkBlock(op Op, i int, id uint64, c Code, sum uint32, n int) error {
	switch {
	case uint64(n) > MaxFrameLen:
		return fmt.Errorf("wire: encode %v block %d (id %016x): payload of %d bytes exceeds the format's %d: %w",
			op, i, id, n, uint64(MaxFrameLen), frame.ErrFrameTooLarge)
	case op.IsRequest() && c != CodeOK:
		return fmt.Errorf("wire: encode %v block %d (id %016x): status %v in a request (must be ok): %w",
			op, i, id, c, frame.ErrMalformed)
	case c != CodeOK && (n != 0 || sum != 0):
		return fmt.Errorf("wire: encode %v block %d (id %016x): status %v with a %d-byte payload and checksum %08x (must be empty): %w",
			op, i, id, c, n, sum, frame.ErrMalformed)
	}
	return nil
}

// AppendBlockFrameHead appends the front of a block-carrying frame (op is
// OpPut, OpMPut, OpGetResponse, OpMGetResponse or OpAccess): the frame
// header and, for a batch op, the count n. The caller then sends, n times,
// a block header (AppendBlockHeader; for OpAccess preceded by its hint,
// AppendHint) followed by its payload, with payloadBytes the sum of the
// payload lengths. This is the zero-copy path: the payloads can go out by
// writev (net.Buffers) from RAM slots or by sendfile from SSD slots, never
// through this buffer. Single-block ops require n == 1.
func AppendBlockFrameHead(dst []byte, op Op, reqID uint64, n int, payloadBytes uint64) ([]byte, error) {
	var body uint64
	switch op.shape() {
	case shapeBlock:
		if n != 1 {
			return dst, fmt.Errorf("wire: encode %v with %d blocks (must be 1): %w", op, n, frame.ErrMalformed)
		}
	case shapeBlocks, shapeAccess:
		if n < 0 {
			return dst, fmt.Errorf("wire: encode %v with %d blocks: %w", op, n, frame.ErrMalformed)
		}
		body = countLen
		if op.shape() == shapeAccess {
			body += uint64(n) * HintLen
		}
	default:
		return dst, fmt.Errorf("wire: encode block frame head: %v does not carry blocks: %w", op, frame.ErrUnknownOp)
	}
	if uint64(n) > MaxFrameLen || payloadBytes > MaxFrameLen {
		return dst, fmt.Errorf("wire: encode %v of %d blocks, %d payload bytes: exceeds the format's %d-byte frame: %w",
			op, n, payloadBytes, uint64(MaxFrameLen), frame.ErrFrameTooLarge)
	}
	fl, err := frameLen(op, body+uint64(n)*BlockHeaderLen+payloadBytes)
	if err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, Header{Len: fl, Op: op, ReqID: reqID})
	if op.shape() != shapeBlock {
		dst = le.AppendUint32(dst, uint32(n))
	}
	return dst, nil
}

func appendBlocks(dst []byte, op Op, reqID uint64, blocks []Block) ([]byte, error) {
	var total uint64
	for i := range blocks {
		b := &blocks[i]
		if err := checkBlock(op, i, b.ID, b.Code, b.Checksum, len(b.Payload)); err != nil {
			return dst, err
		}
		total += uint64(len(b.Payload))
	}
	out, err := AppendBlockFrameHead(dst, op, reqID, len(blocks), total)
	if err != nil {
		return dst, err
	}
	for i := range blocks {
		b := &blocks[i]
		out = AppendBlockHeader(out, BlockHeader{ID: b.ID, Code: b.Code, Checksum: b.Checksum, Len: uint32(len(b.Payload))})
		out = append(out, b.Payload...)
	}
	return out, nil
}

// AppendAccess appends an ACCESS request: blocks[i] with hints[i], in
// order, copying the payloads. A touch (Hint.Touch) must carry no payload
// and checksum 0; a put carries its block with CodeOK.
func AppendAccess(dst []byte, reqID uint64, hints []Hint, blocks []Block) ([]byte, error) {
	if len(hints) != len(blocks) {
		return dst, fmt.Errorf("wire: encode %v: %d hints for %d blocks: %w", OpAccess, len(hints), len(blocks), frame.ErrMalformed)
	}
	var total uint64
	for i := range blocks {
		b := &blocks[i]
		if err := checkBlock(OpAccess, i, b.ID, b.Code, b.Checksum, len(b.Payload)); err != nil {
			return dst, err
		}
		if hints[i].Touch && (len(b.Payload) != 0 || b.Checksum != 0) {
			return dst, fmt.Errorf("wire: encode %v block %d (id %016x): a touch with a %d-byte payload and checksum %08x (must be empty): %w",
				OpAccess, i, b.ID, len(b.Payload), b.Checksum, frame.ErrMalformed)
		}
		total += uint64(len(b.Payload))
	}
	out, err := AppendBlockFrameHead(dst, OpAccess, reqID, len(blocks), total)
	if err != nil {
		return dst, err
	}
	for i := range blocks {
		b := &blocks[i]
		out = AppendHint(out, hints[i])
		out = AppendBlockHeader(out, BlockHeader{ID: b.ID, Code: b.Code, Checksum: b.Checksum, Len: uint32(len(b.Payload))})
		out = append(out, b.Payload...)
	}
	return out, nil
}

// AppendAccessResponse appends an ACCESS response (statuses in request
// order).
func AppendAccessResponse(dst []byte, reqID uint64, ss []Status) ([]byte, error) {
	return appendStatuses(dst, OpAccessResponse, reqID, ss)
}

// AppendPut appends a PUT request carrying b (b.Code must be CodeOK). It
// copies the payload; to send it by reference use AppendBlockFrameHead or
// Gather.
func AppendPut(dst []byte, reqID uint64, b Block) ([]byte, error) {
	return appendBlocks(dst, OpPut, reqID, []Block{b})
}

// AppendMPut appends an MPUT request carrying blocks (each with CodeOK),
// copying their payloads.
func AppendMPut(dst []byte, reqID uint64, blocks []Block) ([]byte, error) {
	return appendBlocks(dst, OpMPut, reqID, blocks)
}

// AppendGetResponse appends a GET response carrying b, copying its payload.
// A block with a code other than CodeOK must have no payload and checksum 0.
func AppendGetResponse(dst []byte, reqID uint64, b Block) ([]byte, error) {
	return appendBlocks(dst, OpGetResponse, reqID, []Block{b})
}

// AppendMGetResponse appends an MGET response carrying blocks (in request
// order), copying their payloads.
func AppendMGetResponse(dst []byte, reqID uint64, blocks []Block) ([]byte, error) {
	return appendBlocks(dst, OpMGetResponse, reqID, blocks)
}

func appendOneStatus(dst []byte, op Op, reqID uint64, s Status) []byte {
	dst = AppendHeader(dst, Header{Len: HeaderLen + StatusLen, Op: op, ReqID: reqID})
	return appendStatus(dst, s)
}

// AppendPutResponse appends a PUT response.
func AppendPutResponse(dst []byte, reqID uint64, s Status) []byte {
	return appendOneStatus(dst, OpPutResponse, reqID, s)
}

// AppendDeleteResponse appends a DELETE response.
func AppendDeleteResponse(dst []byte, reqID uint64, s Status) []byte {
	return appendOneStatus(dst, OpDeleteResponse, reqID, s)
}

// AppendSyncResponse appends a SYNC response with code c (its status
// entry's key id is 0).
func AppendSyncResponse(dst []byte, reqID uint64, c Code) []byte {
	return appendOneStatus(dst, OpSyncResponse, reqID, Status{Code: c})
}

func appendStatuses(dst []byte, op Op, reqID uint64, ss []Status) ([]byte, error) {
	n, err := frameLen(op, countLen+StatusLen*uint64(len(ss)))
	if err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, Header{Len: n, Op: op, ReqID: reqID})
	dst = le.AppendUint32(dst, uint32(len(ss)))
	for _, s := range ss {
		dst = appendStatus(dst, s)
	}
	return dst, nil
}

// AppendMPutResponse appends an MPUT response (statuses in request order).
func AppendMPutResponse(dst []byte, reqID uint64, ss []Status) ([]byte, error) {
	return appendStatuses(dst, OpMPutResponse, reqID, ss)
}

// AppendExistsResponse appends an EXISTS response (statuses in request
// order; CodeOK for present, CodeNotFound for absent).
func AppendExistsResponse(dst []byte, reqID uint64, ss []Status) ([]byte, error) {
	return appendStatuses(dst, OpExistsResponse, reqID, ss)
}

// AppendStatsResponse appends a STATS response: at most 255 tiers, each name
// at most 255 bytes.
func AppendStatsResponse(dst []byte, reqID uint64, tiers []TierStats) ([]byte, error) {
	if len(tiers) > math.MaxUint8 {
		return dst, fmt.Errorf("wire: encode STATS response: %d tiers, the format allows %d: %w", len(tiers), math.MaxUint8, frame.ErrMalformed)
	}
	body := uint64(statsCountLen)
	for i := range tiers {
		if len(tiers[i].Name) > math.MaxUint8 {
			return dst, fmt.Errorf("wire: encode STATS response: tier %d name of %d bytes, the format allows %d: %w",
				i, len(tiers[i].Name), math.MaxUint8, frame.ErrMalformed)
		}
		body += tierFixedLen + uint64(len(tiers[i].Name))
	}
	n, err := frameLen(OpStatsResponse, body) // cannot fail: at most 255 × 352 bytes
	if err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, Header{Len: n, Op: OpStatsResponse, ReqID: reqID})
	dst = append(dst, byte(len(tiers)))
	for i := range tiers {
		t := &tiers[i]
		dst = append(dst, byte(len(t.Name)))
		dst = append(dst, t.Name...)
		s := &t.Stats
		for _, v := range [...]uint64{
			uint64(s.Blocks), uint64(s.Bytes), uint64(s.HeldBytes), uint64(s.CapacityBytes),
			s.Hits, s.Misses, s.BytesIn, s.BytesOut,
			s.EvictAttempts, s.Evicted, s.Corruptions, s.IOErrors,
		} {
			dst = le.AppendUint64(dst, v)
		}
	}
	return dst, nil
}

// AppendError appends an ERROR frame answering request reqID with
// CodeOf(err) and err's message (for a *RemoteError, its Message), truncated
// to MaxMessageLen bytes at a UTF-8 boundary. A nil err is sent as
// CodeInternal, since an ERROR frame always reports a failure.
func AppendError(dst []byte, reqID uint64, err error) []byte {
	if err == nil {
		return appendError(dst, reqID, CodeInternal, "wire: ERROR frame for a nil error")
	}
	msg := err.Error()
	if re, ok := errors.AsType[*RemoteError](err); ok {
		msg = re.Message
	}
	code := CodeOf(err)
	if code == CodeOK { // a *RemoteError carrying CodeOK
		code = CodeInternal
	}
	return appendError(dst, reqID, code, msg)
}

func appendError(dst []byte, reqID uint64, c Code, msg string) []byte {
	msg = frame.TruncateMessage(msg)
	dst = AppendHeader(dst, Header{Len: uint32(HeaderLen + errorFixedLen + len(msg)), Op: OpError, ReqID: reqID})
	dst = le.AppendUint16(dst, uint16(c))
	dst = le.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...)
}

// checkName reports why name cannot be sent as an object name: it must be
// 1 to block.MaxNameLen bytes (any bytes).
func checkName(op Op, i int, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("wire: encode %v name %d: empty (an object name is 1 to %d bytes): %w", op, i, block.MaxNameLen, frame.ErrMalformed)
	case len(name) > block.MaxNameLen:
		return fmt.Errorf("wire: encode %v name %d: %d bytes, longer than the %d-byte limit on object names (fixed): %w: %w",
			op, i, len(name), block.MaxNameLen, frame.ErrTooLong, block.ErrBadName)
	}
	return nil
}

// AppendName appends a name as a named op carries it: its length (u16)
// then its bytes. It fails, leaving dst unchanged, when name is empty or
// longer than block.MaxNameLen.
func AppendName(dst []byte, name string) ([]byte, error) {
	if err := checkName(OpGetNamed, 0, name); err != nil {
		return dst, err
	}
	dst = le.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...), nil
}

func appendName(dst []byte, op Op, reqID uint64, name string) ([]byte, error) {
	if err := checkName(op, 0, name); err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, Header{Len: uint32(HeaderLen + NameHeaderLen + len(name)), Op: op, ReqID: reqID})
	dst = le.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...), nil
}

// AppendGetNamed appends a GET named request for the object name.
func AppendGetNamed(dst []byte, reqID uint64, name string) ([]byte, error) {
	return appendName(dst, OpGetNamed, reqID, name)
}

// AppendDeleteNamed appends a DELETE named request for the object name.
func AppendDeleteNamed(dst []byte, reqID uint64, name string) ([]byte, error) {
	return appendName(dst, OpDeleteNamed, reqID, name)
}

func appendNames(dst []byte, op Op, reqID uint64, names []string) ([]byte, error) {
	body := uint64(countLen)
	for i, name := range names {
		if err := checkName(op, i, name); err != nil {
			return dst, err
		}
		body += NameHeaderLen + uint64(len(name))
	}
	n, err := frameLen(op, body)
	if err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, Header{Len: n, Op: op, ReqID: reqID})
	dst = le.AppendUint32(dst, uint32(len(names)))
	for _, name := range names {
		dst = le.AppendUint16(dst, uint16(len(name)))
		dst = append(dst, name...)
	}
	return dst, nil
}

// AppendMGetNamed appends an MGET named request for names.
func AppendMGetNamed(dst []byte, reqID uint64, names []string) ([]byte, error) {
	return appendNames(dst, OpMGetNamed, reqID, names)
}

// AppendExistsNamed appends an EXISTS named request for names (a pure
// query, as OpExists).
func AppendExistsNamed(dst []byte, reqID uint64, names []string) ([]byte, error) {
	return appendNames(dst, OpExistsNamed, reqID, names)
}

// NamedBlocksLen returns the bytes n named block entries add to a frame
// beyond their payloads, nameBytes being the sum of their names' lengths:
// each entry's name length, name and block header.
func NamedBlocksLen(n int, nameBytes uint64) uint64 {
	return uint64(n)*(NameHeaderLen+BlockHeaderLen) + nameBytes
}

// AppendNamedBlockFrameHead appends the front of a PUT named or MPUT
// named frame (op OpPutNamed or OpMPutNamed): the frame header and, for
// MPUT named, the count n. The caller then sends, n times, the entry's
// name (AppendName) and block header (AppendBlockHeader, ID
// block.NameID(name)) followed by its payload; nameBytes is the sum of
// the names' lengths and payloadBytes of the payloads'. OpPutNamed
// requires n == 1.
func AppendNamedBlockFrameHead(dst []byte, op Op, reqID uint64, n int, nameBytes, payloadBytes uint64) ([]byte, error) {
	var body uint64
	switch op.shape() {
	case shapeNamedBlock:
		if n != 1 {
			return dst, fmt.Errorf("wire: encode %v with %d blocks (must be 1): %w", op, n, frame.ErrMalformed)
		}
	case shapeNamedBlocks:
		if n < 0 {
			return dst, fmt.Errorf("wire: encode %v with %d blocks: %w", op, n, frame.ErrMalformed)
		}
		body = countLen
	default:
		return dst, fmt.Errorf("wire: encode named block frame head: %v does not carry named blocks: %w", op, frame.ErrUnknownOp)
	}
	if uint64(n) > MaxFrameLen || nameBytes > MaxFrameLen || payloadBytes > MaxFrameLen {
		return dst, fmt.Errorf("wire: encode %v of %d blocks, %d name and %d payload bytes: exceeds the format's %d-byte frame: %w",
			op, n, nameBytes, payloadBytes, uint64(MaxFrameLen), frame.ErrFrameTooLarge)
	}
	fl, err := frameLen(op, body+NamedBlocksLen(n, nameBytes)+payloadBytes)
	if err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, Header{Len: fl, Op: op, ReqID: reqID})
	if op.shape() == shapeNamedBlocks {
		dst = le.AppendUint32(dst, uint32(n))
	}
	return dst, nil
}

func appendNamedBlocks(dst []byte, op Op, reqID uint64, names []string, blocks []Block) ([]byte, error) {
	if len(names) != len(blocks) {
		return dst, fmt.Errorf("wire: encode %v: %d names for %d blocks: %w", op, len(names), len(blocks), frame.ErrMalformed)
	}
	var nameBytes, total uint64
	for i := range blocks {
		b := &blocks[i]
		if err := checkName(op, i, names[i]); err != nil {
			return dst, err
		}
		if err := checkBlock(op, i, b.ID, b.Code, b.Checksum, len(b.Payload)); err != nil {
			return dst, err
		}
		if want := block.NameID(names[i]); b.ID != want {
			return dst, fmt.Errorf("wire: encode %v block %d: id %016x, but name %q has id %016x: %w", op, i, b.ID, names[i], want, frame.ErrMalformed)
		}
		nameBytes += uint64(len(names[i]))
		total += uint64(len(b.Payload))
	}
	out, err := AppendNamedBlockFrameHead(dst, op, reqID, len(blocks), nameBytes, total)
	if err != nil {
		return dst, err
	}
	for i := range blocks {
		b := &blocks[i]
		out = le.AppendUint16(out, uint16(len(names[i])))
		out = append(out, names[i]...)
		out = AppendBlockHeader(out, BlockHeader{ID: b.ID, Code: b.Code, Checksum: b.Checksum, Len: uint32(len(b.Payload))})
		out = append(out, b.Payload...)
	}
	return out, nil
}

// AppendPutNamed appends a PUT named request storing b under name (b.ID
// must be block.NameID(name), b.Code CodeOK), copying the payload; to send
// it by reference use AppendNamedBlockFrameHead.
func AppendPutNamed(dst []byte, reqID uint64, name string, b Block) ([]byte, error) {
	return appendNamedBlocks(dst, OpPutNamed, reqID, []string{name}, []Block{b})
}

// AppendMPutNamed appends an MPUT named request storing blocks[i] under
// names[i], copying the payloads.
func AppendMPutNamed(dst []byte, reqID uint64, names []string, blocks []Block) ([]byte, error) {
	return appendNamedBlocks(dst, OpMPutNamed, reqID, names, blocks)
}

// AppendStatusResponse appends a response of statuses (in request order)
// to any op answered by status entries: op is its response op (PUT,
// DELETE, their named forms and SYNC take exactly one status; MPUT,
// EXISTS, ACCESS and the named batches any number).
func AppendStatusResponse(dst []byte, op Op, reqID uint64, ss []Status) ([]byte, error) {
	switch op.shape() {
	case shapeStatus:
		if len(ss) != 1 {
			return dst, fmt.Errorf("wire: encode %v with %d statuses (must be 1): %w", op, len(ss), frame.ErrMalformed)
		}
		return appendOneStatus(dst, op, reqID, ss[0]), nil
	case shapeStatuses:
		return appendStatuses(dst, op, reqID, ss)
	}
	return dst, fmt.Errorf("wire: encode status response: %v is not answered by statuses: %w", op, frame.ErrUnknownOp)
}

// AppendBlockResponse appends a response carrying blocks (in request
// order), copying their payloads: op is OpGetResponse or
// OpGetNamedResponse (exactly one block), OpMGetResponse or
// OpMGetNamedResponse.
func AppendBlockResponse(dst []byte, op Op, reqID uint64, blocks []Block) ([]byte, error) {
	if sh := op.shape(); op.IsRequest() || (sh != shapeBlock && sh != shapeBlocks) {
		return dst, fmt.Errorf("wire: encode block response: %v is not a response carrying blocks: %w", op, frame.ErrUnknownOp)
	}
	if op.shape() == shapeBlock && len(blocks) != 1 {
		return dst, fmt.Errorf("wire: encode %v with %d blocks (must be 1): %w", op, len(blocks), frame.ErrMalformed)
	}
	return appendBlocks(dst, op, reqID, blocks)
}
