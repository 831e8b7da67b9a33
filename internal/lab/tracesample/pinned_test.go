package tracesample

import (
	"math"
	"testing"
)

// TestKeepFamilyPinned pins the sampling hash: a fraction and a seed must
// keep the same families on every commit, or subsampled runs stop being
// comparable. Each case's threshold is the family's hash mapped onto
// [0, 1): kept at any fraction above it, dropped at it.
func TestKeepFamilyPinned(t *testing.T) {
	for _, c := range []struct {
		seed, first uint64
		hash53      uint64 // the hash's top 53 bits
	}{
		{0, 0, 0x48218226ff3cd4bf >> 11},
		{1, 12345, 0xc75b8f4d089f17e2 >> 11},
		{7, 1 << 40, 0xd8197cab759bcc3e >> 11},
	} {
		u := float64(c.hash53) / (1 << 53)
		if KeepFamily(c.seed, c.first, u) || !KeepFamily(c.seed, c.first, math.Nextafter(u, 2)) {
			t.Errorf("KeepFamily(%d, %d): threshold is not %v", c.seed, c.first, u)
		}
	}
}
