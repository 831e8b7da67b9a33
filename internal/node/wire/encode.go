package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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

// AppendStats appends a STATS request.
func AppendStats(dst []byte, reqID uint64) []byte {
	return AppendHeader(dst, Header{Len: HeaderLen, Op: OpStats, ReqID: reqID})
}

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
	n, err := frameLen(OpStatsResponse, body) // cannot fail: at most 255 × 344 bytes
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
			uint64(s.Blocks), uint64(s.Bytes), uint64(s.CapacityBytes),
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
