package ssd

import "math/bits"

// pageRun is a run of adjacent pages: [start, start+n).
type pageRun struct{ start, n int32 }

// pageAlloc is the free-page bitmap with a next-fit cursor. take prefers
// one run of adjacent pages (so a payload reads back in one pread and can
// be sent with one sendfile) and falls back to the free pages in address
// order from the cursor, which is what keeps a log-like fill adjacent:
// pages freed by eviction are reused in the order the cursor meets them.
// Not safe for concurrent use: the tier drives it under its lock.
type pageAlloc struct {
	used   []uint64 // bit p%64 of word p/64: page p is held
	n      int      // pages
	free   int      // pages not held
	cursor int      // where the next search starts
}

func newPageAlloc(n int) pageAlloc {
	return pageAlloc{used: make([]uint64, (n+63)/64), n: n, free: n}
}

func (a *pageAlloc) isUsed(p int) bool { return a.used[p>>6]&(1<<(p&63)) != 0 }

// mark sets pages [p, p+n) held (on) or free.
func (a *pageAlloc) mark(p, n int, on bool) {
	for i := p; i < p+n; i++ {
		w, b := i>>6, uint64(1)<<(i&63)
		if (a.used[w]&b != 0) == on {
			continue
		}
		a.used[w] ^= b
		if on {
			a.free--
		} else {
			a.free++
		}
	}
}

func (a *pageAlloc) markRuns(runs []pageRun, on bool) {
	for _, r := range runs {
		a.mark(int(r.start), int(r.n), on)
	}
}

// nextFree returns the first free page in [p, end), or end.
func (a *pageAlloc) nextFree(p, end int) int {
	for p < end {
		w := p >> 6
		if x := ^a.used[w] >> (p & 63); x != 0 {
			return min(p+bits.TrailingZeros64(x), end)
		}
		p = (w + 1) << 6
	}
	return end
}

// nextUsed returns the first held page in [p, end), or end.
func (a *pageAlloc) nextUsed(p, end int) int {
	for p < end {
		w := p >> 6
		if x := a.used[w] >> (p & 63); x != 0 {
			return min(p+bits.TrailingZeros64(x), end)
		}
		p = (w + 1) << 6
	}
	return end
}

// take holds need pages and returns them as runs in chain order, or nil
// when fewer than need are free.
func (a *pageAlloc) take(need int) []pageRun {
	if need <= 0 || need > a.free {
		return nil
	}
	// Next-fit for one run of need adjacent pages: from the cursor to the
	// end, then from the start to the cursor.
	for _, seg := range [2][2]int{{a.cursor, a.n}, {0, a.cursor}} {
		for p := seg[0]; p < seg[1]; {
			s := a.nextFree(p, seg[1])
			if s >= seg[1] {
				break
			}
			e := a.nextUsed(s, seg[1])
			if e-s >= need {
				a.mark(s, need, true)
				a.cursor = (s + need) % a.n
				return []pageRun{{int32(s), int32(need)}}
			}
			p = e
		}
	}
	// No run is long enough: the free pages from the cursor on.
	var runs []pageRun
	left := need
	for _, seg := range [2][2]int{{a.cursor, a.n}, {0, a.cursor}} {
		for p := seg[0]; p < seg[1] && left > 0; {
			s := a.nextFree(p, seg[1])
			if s >= seg[1] {
				break
			}
			e := min(a.nextUsed(s, seg[1]), s+left)
			runs = append(runs, pageRun{int32(s), int32(e - s)})
			left -= e - s
			p = e
			a.cursor = e % a.n
		}
	}
	a.markRuns(runs, true)
	return runs
}
