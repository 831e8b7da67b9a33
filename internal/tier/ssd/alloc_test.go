package ssd

import (
	"slices"
	"testing"
)

// TestPageAlloc: take prefers one run of adjacent pages (next-fit from the
// cursor, wrapping), falls back to the free pages in order, refuses what
// is not free, and keeps the free count with the bitmap.
func TestPageAlloc(t *testing.T) {
	a := newPageAlloc(130) // three bitmap words, the last partial
	if got := a.take(10); !slices.Equal(got, []pageRun{{0, 10}}) {
		t.Fatalf("first take: %v", got)
	}
	if got := a.take(60); !slices.Equal(got, []pageRun{{10, 60}}) {
		t.Fatalf("second take: %v", got)
	}
	a.mark(2, 3, false) // holes at 2..4 and 20..29
	a.mark(20, 10, false)
	// A run of 8 fits after the cursor (70..): next-fit takes it there,
	// not in the hole at 20.
	if got := a.take(8); !slices.Equal(got, []pageRun{{70, 8}}) {
		t.Fatalf("next-fit: %v", got)
	}
	a.mark(78, 52, true) // the end is full: only the holes are free
	if got := a.take(10); !slices.Equal(got, []pageRun{{20, 10}}) {
		t.Fatalf("wrapping to the hole that fits: %v", got)
	}
	a.mark(20, 10, false)
	// 12 pages: no run is long enough, so the free pages from the cursor
	// on: the cursor is at 30 and 30.. is full, so the scan wraps to 2..4,
	// then takes 20..28.
	got := a.take(12)
	if !slices.Equal(got, []pageRun{{2, 3}, {20, 9}}) {
		t.Fatalf("fragmented take: %v", got)
	}
	if a.free != 1 || a.take(2) != nil {
		t.Fatalf("free %d, and a take of 2 must fail", a.free)
	}
	held := 0
	for p := range a.n {
		if a.isUsed(p) {
			held++
		}
	}
	if held != a.n-a.free {
		t.Errorf("bitmap holds %d, free count says %d", held, a.n-a.free)
	}
}
