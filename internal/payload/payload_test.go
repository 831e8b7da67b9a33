package payload

import (
	"bytes"
	"testing"
)

func TestFillDeterministic(t *testing.T) {
	tests := []struct {
		name      string
		tenantA   string
		idA       uint64
		tenantB   string
		idB       uint64
		size      int
		wantEqual bool
	}{
		{"same block", "t", 7, "t", 7, 4096, true},
		{"same block odd size", "", 1, "", 1, 1001, true},
		{"other id", "t", 7, "t", 8, 4096, false},
		{"other tenant", "a", 7, "b", 7, 4096, false},
		{"empty vs nul tenant", "", 7, "\x00", 7, 64, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.size, tt.tenantA, tt.idA)
			b := make([]byte, tt.size)
			Fill(b, tt.tenantB, tt.idB)
			if got := bytes.Equal(a, b); got != tt.wantEqual {
				t.Fatalf("equal = %v, want %v", got, tt.wantEqual)
			}
			if err := Check(a, tt.size, tt.tenantA, tt.idA); err != nil {
				t.Fatalf("Check of a fresh payload: %v", err)
			}
		})
	}
}

func TestFillPrefixStable(t *testing.T) {
	long := New(1000, "t", 3)
	for _, n := range []int{0, 1, 7, 8, 9, 999} {
		if short := New(n, "t", 3); !bytes.Equal(short, long[:n]) {
			t.Errorf("fill of %d bytes is not a prefix of the 1000-byte fill", n)
		}
	}
}

func TestCheckDetects(t *testing.T) {
	tests := []struct {
		name  string
		mut   func([]byte) []byte
		size  int
		wantE bool
	}{
		{"intact", func(b []byte) []byte { return b }, 100, false},
		{"flipped first byte", func(b []byte) []byte { b[0] ^= 1; return b }, 100, true},
		{"flipped last byte", func(b []byte) []byte { b[99] ^= 0x80; return b }, 100, true},
		{"short", func(b []byte) []byte { return b[:99] }, 100, true},
		{"long", func(b []byte) []byte { return append(b, 0) }, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mut(New(100, "x", 42))
			if err := Check(b, tt.size, "x", 42); (err != nil) != tt.wantE {
				t.Fatalf("Check = %v, want error %v", err, tt.wantE)
			}
		})
	}
}

func BenchmarkFill(b *testing.B) {
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for i := 0; b.Loop(); i++ {
		Fill(buf, "bench", uint64(i))
	}
	b.ReportMetric(float64(b.N)*float64(len(buf))/b.Elapsed().Seconds()/1e9, "GB/s")
}
