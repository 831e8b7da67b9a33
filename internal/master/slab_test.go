package master

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestSlabPool checks that the chunk pool hands out distinct zeroed
// chunks, from allocations that grow with the chunks handed out (a
// sixteenth of them, at most maxSlab) so that few sit unused.
func TestSlabPool(t *testing.T) {
	var p slabPool[entry]
	seen := make(map[*[chunkLen]entry]bool)
	const n = 1200
	for i := range n {
		spare := len(p.rest)
		c := p.chunk()
		if seen[c] {
			t.Fatalf("chunk %d handed out twice", i)
		}
		seen[c] = true
		for j := range c {
			if c[j] != (entry{}) {
				t.Fatalf("chunk %d entry %d not zero: %+v", i, j, c[j])
			}
		}
		c[0].setID(uint64(i) + 1) // later chunks must not overlap it
		c[chunkLen-1].setID(uint64(i) + 1)
		if spare == 0 {
			if want := min(max(1, i/slabDiv), maxSlab); len(p.rest)+1 != want {
				t.Fatalf("chunk %d: allocated %d chunks, want %d", i, len(p.rest)+1, want)
			}
		}
		if len(p.rest) > max(1, i/slabDiv) {
			t.Fatalf("after %d chunks, %d spare: more than a sixteenth", i+1, len(p.rest))
		}
	}
	for c := range seen {
		if c[0].id() == 0 || c[0].id() != c[chunkLen-1].id() {
			t.Fatalf("chunk marks %d, %d: chunks overlap", c[0].id(), c[chunkLen-1].id())
		}
	}
	if p.issued != n {
		t.Fatalf("issued %d, want %d", p.issued, n)
	}
	// A big index allocates maxSlab chunks at a time.
	big := slabPool[overflow]{issued: 100 * maxSlab * slabDiv}
	big.chunk()
	if len(big.rest)+1 != maxSlab {
		t.Fatalf("allocated %d chunks with %d handed out, want maxSlab (%d)", len(big.rest)+1, big.issued-1, maxSlab)
	}
}

// TestNewSlots checks that a hash table is zeroed and exactly its size,
// and that a big one starts on a huge page (Go's large allocations are
// 8 KiB aligned, and the padding makes up the rest).
func TestNewSlots(t *testing.T) {
	for _, size := range []int{minSlots, 1 << 16, alignSlotsFrom / 4, alignSlotsFrom / 2} {
		sl := newSlots(size)
		if len(sl) != size || cap(sl) != size {
			t.Fatalf("newSlots(%d): len %d cap %d", size, len(sl), cap(sl))
		}
		for i, v := range sl {
			if v != 0 {
				t.Fatalf("newSlots(%d)[%d] = %d, want 0", size, i, v)
			}
		}
		if runtime.GOOS == "linux" && size*4 >= alignSlotsFrom {
			if a := uintptr(unsafe.Pointer(&sl[0])) & (hugePage - 1); a != 0 {
				t.Errorf("newSlots(%d) starts %d bytes past a huge page boundary", size, a)
			}
		}
	}
}

// TestHugePagesKeepsContents checks that advising memory onto huge pages
// keeps what it holds and reports only whole huge pages inside it.
func TestHugePagesKeepsContents(t *testing.T) {
	b := make([]uint64, 3*hugePage/8)
	for i := range b {
		b[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	n := hugePages(unsafe.Pointer(&b[0]), uintptr(len(b))*8)
	if n%hugePage != 0 || n > uintptr(len(b))*8 {
		t.Errorf("hugePages reported %d bytes of %d: not whole huge pages inside", n, len(b)*8)
	}
	if runtime.GOOS == "linux" && n < hugePage {
		t.Logf("hugePages advised %d bytes (the kernel may lack transparent huge pages)", n)
	}
	for i := range b {
		if b[i] != uint64(i)*0x9e3779b97f4a7c15 {
			t.Fatalf("word %d changed to %#x", i, b[i])
		}
	}
}

// TestEntryLayout pins the sizes docs/design.md gives.
func TestEntryLayout(t *testing.T) {
	if s := unsafe.Sizeof(entry{}); s != 44 {
		t.Errorf("entry is %d bytes, want 44", s)
	}
	if s := unsafe.Sizeof(overflow{}); s != 32 {
		t.Errorf("overflow is %d bytes, want 32", s)
	}
}
