package wire

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/kvpool/kvpool/block"
)

// TestAppendHintDepthRange: the wire's depth is a u32; a block.Hint depth
// outside it is clamped, never wrapped.
func TestAppendHintDepthRange(t *testing.T) {
	for _, c := range []struct {
		depth int
		want  uint32
	}{
		{0, 0},
		{7, 7},
		{math.MaxUint32, math.MaxUint32},
		{-1, 0},
		{math.MaxUint32 + 1, math.MaxUint32},
		{math.MaxInt, math.MaxUint32},
	} {
		b := AppendHint(nil, Hint{Hint: block.Hint{Depth: c.depth, Parent: 9}, Touch: true})
		if len(b) != HintLen {
			t.Fatalf("hint is %d bytes, want %d", len(b), HintLen)
		}
		if got := binary.LittleEndian.Uint32(b[8:]); got != c.want {
			t.Errorf("depth %d sent as %d, want %d", c.depth, got, c.want)
		}
		if got := binary.LittleEndian.Uint64(b); got != 9 || b[12] != hintTouch {
			t.Errorf("depth %d: parent %d, flags %#x", c.depth, got, b[12])
		}
	}
}
