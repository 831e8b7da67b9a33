package masterproto

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// decodeErrors are the errors a decoder may return for bad input; anything
// else is a bug.
var decodeErrors = []error{
	io.EOF, io.ErrUnexpectedEOF, frame.ErrMalformed, frame.ErrFrameTooLarge, frame.ErrBatchTooLong, frame.ErrTooLong,
	frame.ErrUnknownOp, frame.ErrBadMagic, block.ErrBadTenant,
}

func classified(err error) bool {
	return slices.ContainsFunc(decodeErrors, func(e error) bool { return errors.Is(err, e) })
}

// FuzzDecode feeds arbitrary bytes to the Reader as a stream of frames and
// decodes each frame with the decoder of its op, as a server or client
// does. Nothing may panic; every error is a known one; the Reader never
// buffers more than the frame limit; and every frame that decodes
// re-encodes to exactly the bytes it came from (strict decoding: one
// encoding per message). Seeds: testdata/fuzz/FuzzDecode (TestSeedCorpus
// writes them).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), smallLimits)
		if err != nil {
			t.Fatal(err)
		}
		off := 0
		for {
			h, body, err := r.ReadFrame()
			if err == io.EOF {
				if off != len(data) {
					t.Fatalf("io.EOF at byte %d of %d", off, len(data))
				}
				return
			}
			if err != nil {
				if !classified(err) {
					t.Fatalf("unclassified stream error: %v", err)
				}
				return // the stream is lost: the peer closes
			}
			if cap(r.buf) > smallLimits.MaxFrame {
				t.Fatalf("buffer of %d bytes exceeds the frame limit", cap(r.buf))
			}
			frame := data[off : off+int(h.Len)]
			off += int(h.Len)
			msg, err := decode(h, body, smallLimits)
			if err != nil {
				if !classified(err) {
					t.Fatalf("unclassified decode error: %v", err)
				}
				continue
			}
			again, err := encode(nil, sample{op: h.Op, reqID: h.ReqID, msg: msg})
			if err != nil {
				t.Fatalf("decoded %v frame does not re-encode: %v", h.Op, err)
			}
			if !bytes.Equal(again, frame) {
				t.Fatalf("%v frame re-encodes differently:\n got %x\nwant %x", h.Op, again, frame)
			}
		}
	})
}
