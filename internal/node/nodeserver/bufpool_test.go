package nodeserver

import "testing"

func TestBufPool(t *testing.T) {
	p := newBufPool(1 << 20)
	cases := []struct {
		n, wantCap int
	}{
		{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192}, {65536, 65536}, {65537, 131072},
		{1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1}, // beyond the pool: exact, not pooled
	}
	for _, c := range cases {
		b := p.get(c.n)
		if len(*b) != c.n || cap(*b) != c.wantCap {
			t.Errorf("get(%d): len %d cap %d, want len %d cap %d", c.n, len(*b), cap(*b), c.n, c.wantCap)
		}
		p.put(b)
	}
	if got := len(p.classes); got != 9 { // 4 KiB .. 1 MiB
		t.Errorf("%d classes for 1 MiB, want 9", got)
	}
}
