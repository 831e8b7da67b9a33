package frame

import (
	"encoding/binary"
	"fmt"
	"math"
)

// HeaderLen is the size of a frame header in bytes.
const HeaderLen = 16

// ResponseBit is set in the op of every response: the response to request
// op o is o|ResponseBit.
const ResponseBit = 0x80

// MaxFrameLen is the largest frame the u32 length field can express.
const MaxFrameLen = math.MaxUint32

var le = binary.LittleEndian

// Op is the constraint on a protocol's op type: a byte that names itself.
type Op interface {
	~uint8
	fmt.Stringer
}

// Header is a frame header with the protocol's op type O.
type Header[O Op] struct {
	// Len is the frame's total length in bytes, these 16 included.
	Len uint32
	// Op is the frame's operation.
	Op O
	// Flags must be zero in version 1.
	Flags uint8
	// Reserved must be zero in version 1.
	Reserved uint16
	// ReqID is chosen by the client; a response carries the ID of the
	// request it answers.
	ReqID uint64
}

// BodyLen returns the length of the body that follows the header.
func (h Header[O]) BodyLen() int { return int(h.Len) - HeaderLen }

// ParseHeader decodes a frame header from the first HeaderLen bytes of b.
func ParseHeader[O Op](b []byte) Header[O] {
	_ = b[HeaderLen-1]
	return Header[O]{Len: le.Uint32(b), Op: O(b[4]), Flags: b[5], Reserved: le.Uint16(b[6:]), ReqID: le.Uint64(b[8:])}
}

// AppendHeader appends the header h. h.Len must be the frame's total
// length (or a placeholder that Finish patches).
func AppendHeader[O Op](dst []byte, h Header[O]) []byte {
	dst = le.AppendUint32(dst, h.Len)
	dst = append(dst, byte(h.Op), h.Flags)
	dst = le.AppendUint16(dst, h.Reserved)
	return le.AppendUint64(dst, h.ReqID)
}

// Begin appends the header of a frame of op answering or numbered reqID,
// with a length that Finish patches once the body is appended, and
// returns the offset of the frame's start.
func Begin[O Op](dst []byte, op O, reqID uint64) ([]byte, int) {
	start := len(dst)
	return AppendHeader(dst, Header[O]{Op: op, ReqID: reqID}), start
}

// Finish patches the length of the frame of op that Begin started at
// start. When the frame is longer than the length field can express it
// returns dst cut back to start and an error wrapping ErrFrameTooLarge;
// prefix names the protocol in the error.
func Finish[O Op](dst []byte, start int, prefix string, op O) ([]byte, error) {
	n := uint64(len(dst) - start)
	if n > MaxFrameLen {
		return dst[:start], fmt.Errorf("%s: encode %v: frame of %d bytes exceeds the format's %d: %w", prefix, op, n, uint64(MaxFrameLen), ErrFrameTooLarge)
	}
	le.PutUint32(dst[start:], uint32(n))
	return dst, nil
}
