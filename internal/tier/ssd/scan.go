package ssd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kvpool/kvpool/block"
)

// Scan tags: the start-up scan keeps 8 bytes per page (the entry's next
// page and a 32-bit tag of its kind, generation, head page and position),
// not the entries themselves: 256 MiB for a 128 GiB tier instead of 2 GiB.
// A chain is whole when each page's tag is the one its head predicts; a
// tag collision (2^-32 per page) could only join a stale page to a chain,
// which the payload checksum then rejects.
const (
	tagEmpty = 0
	tagBad   = 1
)

func tagOf(kind uint8, gen uint64, head, seq uint32) uint32 {
	x := block.Mix64(gen*block.Golden64 ^ uint64(head)<<32 ^ uint64(seq) ^ uint64(kind)<<62)
	t := uint32(x) ^ uint32(x>>32)
	if t <= tagBad {
		t += 2
	}
	return t
}

// bitset is a set of pages.
type bitset []uint64

func newBitset(n int) bitset       { return make(bitset, (n+63)/64) }
func (b bitset) has(p uint32) bool { return b[p>>6]&(1<<(p&63)) != 0 }
func (b bitset) set(p uint32)      { b[p>>6] |= 1 << (p & 63) }

// scannedRecord is a record the scan found whole.
type scannedRecord struct {
	key   block.Key
	e     entry
	pages []int32
}

// scan reads the side table and rebuilds the index: it finds the records
// that survived, invalidates every entry that belongs to none that can be
// trusted, and loads the survivors.
func (t *Tier) scan(ctx context.Context) error {
	st := &t.openStats
	st.Pages = t.nPages
	n := t.nPages
	tags := make([]uint32, n)
	next := make([]uint32, n)
	var heads []entry
	buf := make([]byte, 1<<20)
	per := len(buf) / entrySize
	for first := 0; first < n; first += per {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scan side table at page %d: %w", first, err)
		}
		m := min(per, n-first)
		if _, err := t.table.f.ReadAt(buf[:m*entrySize], int64(first)*entrySize); err != nil {
			st.IOErrors++
			for i := range m {
				tags[first+i] = tagBad
			}
			continue
		}
		for i := range m {
			p := uint32(first + i)
			e, err := decodeEntry(buf[i*entrySize:(i+1)*entrySize], p)
			switch {
			case errors.Is(err, errEmpty):
				continue
			case err != nil:
				tags[p] = tagBad
				continue
			}
			tags[p] = tagOf(e.kind, e.gen, e.head, e.seq)
			next[p] = e.next
			if e.kind == kindHead {
				heads = append(heads, e)
			}
		}
	}

	claimed := newBitset(n)
	var live []scannedRecord
	byKey := map[block.Key]int{} // key -> index in live
	var payload []byte
	for i, h := range heads {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("scan records: %w", err)
			}
		}
		pages, whole := t.walkChain(h, tags, next, claimed)
		if !whole {
			st.Torn++
			continue
		}
		k, ok := t.checkRecord(h, pages, &payload)
		if !ok {
			continue
		}
		r := scannedRecord{key: k, e: h, pages: pages}
		if j, dup := byKey[k]; dup {
			st.Duplicates++
			if live[j].e.gen < h.gen {
				live[j] = r
			}
			continue
		}
		byKey[k] = len(live)
		live = append(live, r)
	}
	for p := range uint32(n) {
		if claimed.has(p) {
			continue
		}
		switch tags[p] {
		case tagEmpty:
		case tagBad:
			st.Torn++ // a torn head entry, or garbage
		default:
			st.Orphans++
		}
	}

	kept := newBitset(n)
	for _, r := range live {
		for _, p := range r.pages {
			kept.set(uint32(p))
		}
	}
	if err := t.dropEntries(tags, kept); err != nil {
		return err
	}
	t.loadLive(live)
	return nil
}

// walkChain follows head h's chain through the scan tags, claiming every
// page whose entry is h's continuation (or torn), and reports whether the chain is whole: every page's
// entry is h's continuation at its position, and it ends where h says.
func (t *Tier) walkChain(h entry, tags, next []uint32, claimed bitset) ([]int32, bool) {
	n := uint32(len(tags))
	claimed.set(h.head)
	pages := make([]int32, 1, h.pages)
	pages[0] = int32(h.head)
	p := h.next
	for seq := uint32(1); seq < h.pages; seq++ {
		if p >= n || claimed.has(p) {
			return pages, false
		}
		// A page whose entry is another record's is not claimed: a stale
		// head (an invalidation lost in a crash, or one that failed) may
		// point into pages a newer record holds now, and claiming one
		// here would make that record's own walk find it taken and drop
		// it as torn. A torn entry is claimed (no record can hold it), so
		// it is counted with this chain, not again as garbage.
		if tags[p] != tagOf(kindCont, h.gen, h.head, seq) {
			if tags[p] == tagBad {
				claimed.set(p)
			}
			return pages, false
		}
		claimed.set(p)
		pages = append(pages, int32(p))
		p = next[p]
	}
	return pages, p == noPage
}

// checkRecord reads back the tenant and name of a whole chain (and,
// verifying, its payload against the head's checksum) and returns the
// record's key. It counts what it finds wrong in t.openStats.
func (t *Tier) checkRecord(h entry, pages []int32, payload *[]byte) (block.Key, bool) {
	st := &t.openStats
	var preArr [block.MaxTenantLen + block.MaxNameLen]byte
	pre := preArr[:h.prefixLen()]
	runs := runsOf(pages)
	var err error
	verify := !t.opts.SkipScanVerify
	switch {
	case verify:
		*payload = slices.Grow((*payload)[:0], int(h.n))[:h.n]
		err = t.readRecord(runs, pre, *payload)
	case len(pre) > 0:
		err = t.readRecord(runsOf(pages[:1]), pre, nil) // the name fits in the head page
	}
	if err != nil {
		st.IOErrors++
		return block.Key{}, false
	}
	var k block.Key
	if h.inKey {
		k = block.Key{Tenant: h.key[:h.tl], ID: h.id, Name: h.key[h.tl:]}
	} else {
		k = block.Key{Tenant: string(pre[:h.tl]), ID: h.id, Name: string(pre[h.tl:])}
	}
	if !h.inKey && block.KeySum(k) != h.keySum || keyInEntry(k, int(h.n)) != h.inKey || k.Validate() != nil {
		st.Corrupt++
		return block.Key{}, false
	}
	if verify && !block.Verify(k, *payload, h.sum) {
		st.Corrupt++
		return block.Key{}, false
	}
	return k, true
}

// dropEntries zeroes every non-empty entry of a page no kept record holds,
// and makes that durable.
func (t *Tier) dropEntries(tags []uint32, kept bitset) error {
	dropped := false
	for p := 0; p < len(tags); {
		if tags[p] == tagEmpty || kept.has(uint32(p)) {
			p++
			continue
		}
		q := p + 1
		for q < len(tags) && q-p < len(t.zero)/entrySize && tags[q] != tagEmpty && !kept.has(uint32(q)) {
			q++
		}
		if _, err := t.table.f.WriteAt(t.zero[:(q-p)*entrySize], int64(p)*entrySize); err != nil {
			return fmt.Errorf("drop entries of pages %d..%d: %w", p, q-1, err)
		}
		dropped = true
		p = q
	}
	if dropped {
		if err := t.table.f.Sync(); err != nil {
			return fmt.Errorf("sync %s after dropping entries: %w", tableFile, err)
		}
	}
	return nil
}

// loadLive puts the records scan kept into the index and the policy, in
// write order so that recency policies start from it, and holds their
// pages.
func (t *Tier) loadLive(live []scannedRecord) {
	slices.SortFunc(live, func(a, b scannedRecord) int { return cmp.Compare(a.e.gen, b.e.gen) })
	for _, r := range live {
		id := t.newObjLocked()
		runs := runsOf(r.pages)
		t.objs[id] = object{key: r.key, n: r.e.n, sum: r.e.sum, gen: r.e.gen, runs: runs, pages: int32(len(r.pages)), state: objLive}
		t.alloc.markRuns(runs, true)
		t.index[r.key] = id
		t.insertLocked(id)
		t.stats.Blocks++
		t.stats.Bytes += int64(r.e.n)
		t.livePages += int64(len(r.pages))
		t.gen = max(t.gen, r.e.gen)
	}
	t.openStats.Recovered = len(live)
	if len(live) > 0 {
		last := live[len(live)-1].pages
		t.alloc.cursor = int(last[len(last)-1]+1) % t.nPages
	}
}
