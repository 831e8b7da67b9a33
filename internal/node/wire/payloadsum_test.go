package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/kvpool/kvpool/block"
)

// TestReadPayloadSum: the checksum computed as the payload arrives equals
// block.Checksum of the payload, whatever pieces the stream delivers it
// in (one byte at a time, half reads, the buffered part first and the
// rest straight into dst), for every block of an MGET response, empty
// ones included; a stream cut inside a payload is a sticky
// io.ErrUnexpectedEOF.
func TestReadPayloadSum(t *testing.T) {
	k := func(id uint64) block.Key { return block.Key{Tenant: "t", ID: id} }
	var blks []Block
	for i, n := range []int{0, 1, 4095, 64 << 10, 200 << 10} {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(j*7 + i)
		}
		blks = append(blks, Block{ID: uint64(i), Code: CodeOK, Checksum: block.Checksum(k(uint64(i)), p), Payload: p})
	}
	f, err := AppendMGetResponse(nil, 9, blks)
	if err != nil {
		t.Fatal(err)
	}
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	} {
		t.Run(name, func(t *testing.T) {
			r, err := NewReader(wrap(bytes.NewReader(f)), LimitsFor(1<<20))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.ReadHeader(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.BeginBlocks(); err != nil {
				t.Fatal(err)
			}
			for _, b := range blks {
				bh, err := r.NextBlock()
				if err != nil {
					t.Fatal(err)
				}
				p, sum, err := r.ReadPayloadSum(make([]byte, 0, 16), block.KeySum(k(bh.ID)))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p, b.Payload) || sum != b.Checksum || sum != bh.Checksum {
					t.Errorf("block %d: %d bytes, sum %08x, want %d bytes, sum %08x", b.ID, len(p), sum, len(b.Payload), b.Checksum)
				}
			}
		})
	}
	// Cut inside the last payload.
	r, err := NewReader(bytes.NewReader(f[:len(f)-100]), LimitsFor(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadHeader(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.BeginBlocks(); err != nil {
		t.Fatal(err)
	}
	for i := range blks {
		if _, err := r.NextBlock(); err != nil {
			t.Fatal(err)
		}
		_, _, err := r.ReadPayloadSum(nil, 0)
		if i < len(blks)-1 && err != nil {
			t.Fatal(err)
		}
		if i == len(blks)-1 && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated payload: %v, want io.ErrUnexpectedEOF", err)
		}
	}
	if _, err := r.ReadHeader(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("after a truncated payload ReadHeader says %v, want the sticky io.ErrUnexpectedEOF", err)
	}
	// Out of sequence.
	r, _ = NewReader(bytes.NewReader(f), Limits{})
	if _, _, err := r.ReadPayloadSum(nil, 0); !errors.Is(err, errMisuse) {
		t.Errorf("ReadPayloadSum before a block: %v", err)
	}
}
