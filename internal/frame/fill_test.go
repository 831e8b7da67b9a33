package frame

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// sizeRecorder records the length of every Read asked of it.
type sizeRecorder struct {
	r     *bytes.Reader
	asked []int
}

func (s *sizeRecorder) Read(p []byte) (int, error) {
	s.asked = append(s.asked, len(p))
	return s.r.Read(p)
}

// TestLimitNextFill: with LimitNextFill(n) the fill behind the next
// ReadHeader asks the stream for at most n bytes, so a large payload after
// the head is read straight into the caller's slice; the bytes read are
// the same with or without it, and the bound lasts one header.
func TestLimitNextFill(t *testing.T) {
	const bodyLen = 2 * ReadBufferSize
	frameBytes := func() []byte {
		b := make([]byte, HeaderLen, HeaderLen+bodyLen)
		binary.LittleEndian.PutUint32(b, HeaderLen+bodyLen)
		for i := range bodyLen {
			b = append(b, byte(i*13))
		}
		return b
	}
	one := frameBytes()
	stream := append(append([]byte(nil), one...), one...)
	src := &sizeRecorder{r: bytes.NewReader(stream)}
	r := NewReader[op](src, "test")
	for i := range 2 {
		if i == 0 {
			r.LimitNextFill(HeaderLen + 4)
		}
		h, err := r.ReadHeader(1 << 30)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && src.asked[0] != HeaderLen+4 {
			t.Errorf("the limited fill asked for %d bytes, want %d", src.asked[0], HeaderLen+4)
		}
		body, err := r.AppendFull(nil, h.BodyLen(), h.BodyLen())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, one[HeaderLen:]) {
			t.Fatalf("frame %d: body differs", i)
		}
	}
	// The second header's fill was not limited: it asked for a whole buffer.
	limited := 0
	for _, n := range src.asked {
		if n <= HeaderLen+4 {
			limited++
		}
	}
	if limited != 1 {
		t.Errorf("reads asked %v: want exactly one limited to %d bytes", src.asked, HeaderLen+4)
	}
}
