// Package ssd is the SSD tier of a node: objects of any size from 0 bytes
// to MaxObjectSize, each a record [tenant][name][payload] laid over a
// chain of fixed 4 KiB pages in preallocated page files, with one 64-byte
// entry per page in a side table (generation, head page, next page, and
// on the head: length, checksum, key id, tenant and name lengths, entry
// CRC). It implements tier.Tier.
//
// Why pages and a side table: fixed pages make allocation a bitmap (no
// compaction, no fragmentation beyond the last page of each object) and
// keep every page 4 KiB-aligned for O_DIRECT. Any header inline with the
// payload would cost a whole extra page for page-multiple payloads (a
// 32 KiB block would take 36 KiB, 12.5% waste); 64 bytes per page in a
// side table is 1.6%, and the tail page of an object wastes at most
// 4 KiB, so a tier of 32 KiB blocks or of MiB objects holds at ~1.02×
// its payload (TestSpace, after 10× churn: 1.016 for 32 KiB blocks, 1.017
// for the LMCache mix of 28-byte and 1–8 MiB objects). An object's pages need
// not be adjacent; allocation is next-fit over a free bitmap preferring
// one adjacent run, which under eviction churn keeps most objects in one
// run (read in one pread per run, sent with one sendfile).
//
// Durability and visibility:
//   - A Put writes the data pages, then the continuation entries, then
//     the head entry (the commit record), then syncs per the SyncMode
//     (page files and side table), and only then makes the object visible.
//     Payload I/O is O_DIRECT with DirectIO; the side table is written
//     buffered and synced with the pages.
//   - An object that leaves the index (Delete, eviction, replacement, a
//     failed check) has its head entry invalidated (then its other
//     entries) before its pages are reused or freed, so a deleted object
//     does not come back at restart. A Delete or replacement of an object
//     readers hold invalidates its head entry at once (a reader then gets
//     a miss) and the rest when the last reader lets go, so neither a
//     deleted object nor a replaced copy outlives a Delete that a crash
//     follows. A put that replaces a copy makes the old copy's
//     invalidation durable (per the mode) before it returns, so the old
//     bytes cannot come back when a crash takes the new copy (cut while
//     being evicted or deleted). Under SyncAlways a Delete syncs that
//     invalidation; under SyncBatch it waits for the group commit; under
//     SyncNone a crash may resurrect a deleted or evicted object (with its
//     correct bytes: never a corrupt one). The newer copy's higher
//     generation wins over an older one at the next Open anyway.
//   - At Open the side table is scanned and every chain rebuilt: a record
//     counts only if every page's entry has the head's generation, head
//     page and position, and its tenant, name and (unless SkipScanVerify)
//     payload checksum read back. Torn, corrupt and orphaned records are
//     dropped and counted in OpenStats; of two records of one key the
//     higher generation wins.
//   - Every Get reads the head entry and the record, compares the stored
//     tenant and name with the key asked for and verifies the checksum.
//
// Space accounting: Stats.Bytes is the payload sum; Stats.HeldBytes is
// the pages the resident objects hold times (PageSize + 64): their pages,
// names and tail padding included, and their side-table entries.
//
// Concurrency: a Tier is safe for concurrent use. One mutex guards the
// index, the object table, the page bitmap and the eviction policy; it is
// never held during disk I/O. An object being read (by Get, or through a
// Section) is pinned and its pages cannot be reused until unpinned.
package ssd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/vfs"
)

// OpenStats describe what Open found in the side table and the pages.
type OpenStats struct {
	Pages      int // pages in the tier
	Recovered  int // valid records put back in the index
	Torn       int // records dropped for a damaged head entry or a broken chain (an entry torn, absent or of another record)
	Corrupt    int // records whose chain is whole but whose tenant, name or payload failed its check
	Orphans    int // continuation entries no valid head claims (a put cut before its head entry, or a chain left after a break)
	Duplicates int // valid records of a key another record holds at a higher generation
	IOErrors   int // records or table chunks that could not be read
}

// ErrFragmented is returned by Section for an object whose pages are not
// one run of adjacent pages in one file: it cannot be sent as one file
// section. The caller reads it with Get instead.
var ErrFragmented = errors.New("ssd: object is not in one run of adjacent pages")

type objState uint8

const (
	objFree     objState = iota // on the free list of object numbers
	objWriting                  // reserved by a Put in progress
	objLive                     // in the index
	objDropping                 // out of the index; waits for its pins, then is invalidated and freed
)

// object is the in-memory view of one record.
type object struct {
	key   block.Key
	n     uint32
	sum   uint32
	gen   uint64
	runs  []pageRun // the chain, in order; never modified once set (readers share it)
	pages int32
	state objState
	pins  int32
}

// pageFile is one preallocated file (a page file or the side table).
type pageFile struct {
	f     vfs.File
	name  string
	dirty atomic.Bool // written since its last sync
}

// Tier is the SSD tier. Build it with Open.
type Tier struct {
	opts      Options // with defaults
	dir       string
	fs        vfs.FS
	files     []*pageFile
	table     *pageFile
	nPages    int
	highPages int // a put that would take the held pages past this evicts...
	lowPages  int // ...down to this many
	zero      []byte
	bufs      [bufClasses]sync.Pool // aligned buffers of PageSize<<class bytes
	commit    *committer
	openStats OpenStats

	ops sync.WaitGroup // operations in flight; Close waits for them

	mu        sync.Mutex
	closed    bool
	objs      []object
	freeObjs  []int32
	index     map[block.Key]int32
	alloc     pageAlloc
	pol       policy.Eviction
	clock     int64
	gen       uint64
	livePages int64 // pages of the objects in the index
	stats     tier.Stats
}

var _ tier.Tier = (*Tier)(nil)

// I/O buffers: a record's pages are read and written through aligned
// buffers of up to maxIO bytes, one pread or pwrite per run of adjacent
// pages (split at maxIO: 4 MiB is past where NVMe throughput flattens,
// and bounds the memory one request holds).
const (
	maxIO      = 4 << 20
	bufClasses = 11 // PageSize<<0 .. PageSize<<10 = 4 MiB
)

// Open opens (creating if needed) the SSD tier in opts.Dir, scanning the
// side table to rebuild the index.
func Open(ctx context.Context, opts Options) (*Tier, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	t := &Tier{
		opts:  o,
		dir:   o.Dir,
		fs:    o.FS,
		index: map[block.Key]int32{},
	}
	t.nPages = int(pagesOf(o.CapacityBytes))
	// The epsilon keeps 0.95*20 from rounding to 20 or 0.9*10 to 8.
	t.highPages = min(max(int(math.Ceil(o.HighWatermark*float64(t.nPages)-1e-9)), 1), t.nPages)
	t.lowPages = min(max(int(math.Floor(o.LowWatermark*float64(t.nPages)+1e-9)), 0), t.highPages-1)
	t.zero = make([]byte, 1<<16)
	for c := range t.bufs {
		size := PageSize << c
		t.bufs[c].New = func() any { b := alignedBuf(size); return &b }
	}
	t.alloc = newPageAlloc(t.nPages)
	capObjs := max(1, int(int64(t.highPages)*pageCost/SlotSize(o.BlockSize)))
	if o.MaxObjects > 0 {
		capObjs = min(capObjs, o.MaxObjects)
	}
	t.pol = o.NewEviction(capObjs)
	t.stats.CapacityBytes = o.CapacityBytes

	if err := t.openFiles(); err != nil {
		t.closeFiles()
		return nil, fmt.Errorf("ssd: open %s: %w", o.Dir, err)
	}
	if err := t.scan(ctx); err != nil {
		t.closeFiles()
		return nil, fmt.Errorf("ssd: open %s: %w", o.Dir, err)
	}
	if o.Sync == SyncBatch {
		t.commit = newCommitter(o.SyncEvery, o.SyncInterval, t.syncDirty)
	}
	return t, nil
}

// openFiles checks the geometry and opens, creates and sizes the page
// files and the side table, removing page files beyond the capacity.
func (t *Tier) openFiles() error {
	if err := t.fs.MkdirAll(t.dir, 0o755); err != nil {
		return fmt.Errorf("create dir: %w", err)
	}
	names, err := t.fs.ReadDir(t.dir)
	if err != nil {
		return fmt.Errorf("list dir: %w", err)
	}
	if err := checkGeometry(t.fs, t.dir, geometry{formatVersion, PageSize, t.opts.PagesPerFile}, names); err != nil {
		return err
	}
	per := t.opts.PagesPerFile
	nFiles := (t.nPages + per - 1) / per
	flag := os.O_RDWR | os.O_CREATE
	if t.opts.DirectIO {
		flag |= vfs.ODirect
	}
	created := false
	open := func(base string, flag int, want int64) (*pageFile, error) {
		name := filepath.Join(t.dir, base)
		size, err := t.fs.Stat(name)
		if errors.Is(err, os.ErrNotExist) {
			created, size = true, 0
		} else if err != nil {
			return nil, fmt.Errorf("stat %s: %w", name, err)
		}
		f, err := t.fs.OpenFile(name, flag, 0o644)
		if err != nil {
			if flag&vfs.ODirect != 0 && vfs.ODirect != 0 && errors.Is(err, syscall.EINVAL) {
				return nil, fmt.Errorf("open %s with O_DIRECT: %w: the filesystem refuses it (%w); set DirectIO off", name, ErrNoDirectIO, err)
			}
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		pf := &pageFile{f: f, name: base}
		if size != want {
			// Truncate preallocates (sparse on most filesystems, so a full
			// device shows up as ENOSPC on a later Put, which reports ErrFull).
			if err := f.Truncate(want); err != nil {
				f.Close()
				return nil, fmt.Errorf("size %s to %d bytes: %w", name, want, err)
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return nil, fmt.Errorf("sync %s: %w", name, err)
			}
		}
		return pf, nil
	}
	for i := range nFiles {
		pf, err := open(pageFileName(i), flag, int64(min(per, t.nPages-i*per))*PageSize)
		if err != nil {
			return err
		}
		t.files = append(t.files, pf)
	}
	if t.table, err = open(tableFile, os.O_RDWR|os.O_CREATE, int64(t.nPages)*entrySize); err != nil {
		return err
	}
	for _, n := range names {
		if i, ok := parsePageFileName(n); ok && i >= nFiles {
			if err := t.fs.Remove(filepath.Join(t.dir, n)); err != nil {
				return fmt.Errorf("remove %s beyond the capacity: %w", n, err)
			}
			created = true
		}
	}
	if created {
		if err := t.fs.SyncDir(t.dir); err != nil {
			return fmt.Errorf("sync dir: %w", err)
		}
	}
	return nil
}

func (t *Tier) closeFiles() error {
	var errs []error
	for _, pf := range t.files {
		if err := pf.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if t.table != nil {
		if err := t.table.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// locate returns the file of page p and the page's offset in it.
func (t *Tier) locate(p int32) (*pageFile, int64) {
	per := int32(t.opts.PagesPerFile)
	return t.files[p/per], int64(p%per) * PageSize
}

// getBuf returns a pooled aligned buffer of at least n (≤ maxIO) bytes.
func (t *Tier) getBuf(n int) (*[]byte, int) {
	c := 0
	for PageSize<<c < n && c < bufClasses-1 {
		c++
	}
	return t.bufs[c].Get().(*[]byte), c
}

func (t *Tier) putBuf(b *[]byte, c int) { t.bufs[c].Put(b) }

// extent is a piece of a record's I/O: pages [page, page+n) in one file,
// holding the record's bytes from rec on.
type extent struct {
	page int32
	n    int
	rec  int
}

// extents splits runs into pieces of at most maxIO bytes that do not
// cross a file boundary, in chain order: for e, ok := it.next(); ok; ...
// (an iterator rather than a callback, so the read path allocates
// nothing).
type extents struct {
	runs []pageRun
	per  int32
	p    int32 // next page of runs[0]
	left int32 // pages left in runs[0]
	rec  int
}

func (t *Tier) extents(runs []pageRun) extents {
	it := extents{runs: runs, per: int32(t.opts.PagesPerFile)}
	if len(runs) > 0 {
		it.p, it.left = runs[0].start, runs[0].n
	}
	return it
}

func (it *extents) next() (extent, bool) {
	for it.left == 0 {
		if len(it.runs) <= 1 {
			return extent{}, false
		}
		it.runs = it.runs[1:]
		it.p, it.left = it.runs[0].start, it.runs[0].n
	}
	n := min(it.left, it.per-it.p%it.per, maxIO/PageSize)
	e := extent{page: it.p, n: int(n), rec: it.rec}
	it.p += n
	it.left -= n
	it.rec += int(n) * PageSize
	return e, true
}

// chainPages returns the pages of runs in chain order.
func chainPages(runs []pageRun) []int32 {
	var out []int32
	for _, r := range runs {
		for p := r.start; p < r.start+r.n; p++ {
			out = append(out, p)
		}
	}
	return out
}

// runsOf merges a chain of pages into runs.
func runsOf(pages []int32) []pageRun {
	var runs []pageRun
	for _, p := range pages {
		if l := len(runs); l > 0 && runs[l-1].start+runs[l-1].n == p {
			runs[l-1].n++
			continue
		}
		runs = append(runs, pageRun{p, 1})
	}
	return runs
}

// newObjLocked returns a free object number.
func (t *Tier) newObjLocked() int32 {
	if n := len(t.freeObjs); n > 0 {
		id := t.freeObjs[n-1]
		t.freeObjs = t.freeObjs[:n-1]
		return id
	}
	t.objs = append(t.objs, object{})
	return int32(len(t.objs) - 1)
}

// freeLocked frees object id and its pages.
func (t *Tier) freeLocked(id int32) {
	t.alloc.markRuns(t.objs[id].runs, false)
	t.objs[id] = object{}
	t.freeObjs = append(t.freeObjs, id)
}

// insertLocked makes object id resident in the policy.
func (t *Tier) insertLocked(id int32) {
	t.clock++
	t.pol.Insert(policy.Access{Key: policy.Key(id), Time: t.clock})
}

// invalidate zeroes the side-table entries of runs, the head's first, so
// that the record is gone whatever else reaches the disk.
func (t *Tier) invalidate(runs []pageRun) error {
	if len(runs) == 0 {
		return nil
	}
	t.table.dirty.Store(true)
	head := int64(runs[0].start)
	if _, err := t.table.f.WriteAt(t.zero[:entrySize], head*entrySize); err != nil {
		return fmt.Errorf("invalidate head entry of page %d: %w", head, err)
	}
	for _, r := range runs {
		from, to := int64(r.start)*entrySize, int64(r.start+r.n)*entrySize
		if int64(r.start) == head {
			from += entrySize
		}
		for from < to {
			n := min(to-from, int64(len(t.zero)))
			if _, err := t.table.f.WriteAt(t.zero[:n], from); err != nil {
				return fmt.Errorf("invalidate entries of pages %d..%d: %w", r.start, r.start+r.n-1, err)
			}
			from += n
		}
	}
	return nil
}

// syncDirty syncs every file written since its last sync: the page files
// first, then the side table.
func (t *Tier) syncDirty() error {
	var errs []error
	for _, pf := range append(slices.Clip(t.files), t.table) {
		if !pf.dirty.Swap(false) {
			continue
		}
		if err := pf.f.Sync(); err != nil {
			pf.dirty.Store(true)
			errs = append(errs, fmt.Errorf("sync %s: %w", pf.name, err))
		}
	}
	return errors.Join(errs...)
}

// syncFor makes the writes an operation did to files durable per the sync
// mode: the files (page files first, the side table last) are synced
// under SyncAlways; SyncBatch waits for the group commit; SyncNone does
// nothing.
func (t *Tier) syncFor(files ...*pageFile) error {
	switch t.opts.Sync {
	case SyncAlways:
		var errs []error
		for i, pf := range files {
			if pf == nil || pf == t.table || slices.Contains(files[:i], pf) {
				continue
			}
			if err := pf.f.Sync(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := t.table.f.Sync(); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	case SyncBatch:
		return t.commit.wait()
	}
	return nil
}

// beginLocked registers an operation; it fails once the tier is closed.
// The caller holds t.mu and calls t.ops.Done when the operation ends.
func (t *Tier) beginLocked(what string, k block.Key) error {
	if t.closed {
		return fmt.Errorf("ssd: %s %s: %w", what, k, kvpool.ErrClosed)
	}
	t.ops.Add(1)
	return nil
}

// victim is an object a put evicted: its chain as it was (all of it is
// invalidated before the put writes) and the pages it still holds once
// the put took what it needed (freed after the invalidation).
type victim struct {
	id   int32
	all  []pageRun
	rest []pageRun
}

// Put stores payload under k (see tier.Tier). It claims pages under t.mu,
// writes the record without the lock, and publishes it under t.mu again;
// only then is the object visible to Get.
func (t *Tier) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	return t.put(ctx, k, tier.Segments{payload}, len(payload), sum)
}

// PutSegments is Put of a payload held in pieces (a RAM tier's chunks, as
// a demotion hands them over): the pieces are copied straight into the
// aligned write buffers, never joined first.
func (t *Tier) PutSegments(ctx context.Context, k block.Key, payload tier.Segments, sum uint32) error {
	return t.put(ctx, k, payload, payload.Len(), sum)
}

func (t *Tier) put(ctx context.Context, k block.Key, payload tier.Segments, n int, sum uint32) error {
	if err := t.checkPut(ctx, k, payload, n, sum); err != nil {
		return err
	}
	need := pagesFor(recordLen(k, n))

	t.mu.Lock()
	if err := t.beginLocked("put", k); err != nil {
		t.mu.Unlock()
		return err
	}
	defer t.ops.Done()
	_, replacing := t.index[k]
	victims := t.makeRoomLocked(need, replacing)
	if t.opts.OnRemove != nil && len(victims) > 0 {
		// Every return below unlocks t.mu first, so the deferred call
		// runs without the lock, once the victims have left the index.
		keys := make([]block.Key, len(victims))
		for i, v := range victims {
			keys[i] = t.objs[v.id].key
		}
		defer t.notifyRemoved(keys, RemovedEvicted)
	}
	runs := t.claimLocked(need, victims)
	if runs == nil {
		free := t.alloc.free
		t.mu.Unlock()
		t.retireVictims(victims)
		return fmt.Errorf("ssd: put %s: %d pages needed, %d free and the rest being written or read: %w", k, need, free, kvpool.ErrFull)
	}
	t.gen++
	id := t.newObjLocked()
	o := object{key: k, n: uint32(n), sum: sum, gen: t.gen, runs: runs, pages: int32(need), state: objWriting}
	t.objs[id] = o
	t.mu.Unlock()

	ioErrs, werr := t.writeClaimed(o, victims, payload)

	t.mu.Lock()
	retire, held, err := t.publishLocked(id, victims, ioErrs, werr)
	heldHead := int32(0)
	if held >= 0 {
		t.objs[held].pins++ // for invalidateHeld
		heldHead = t.objs[held].runs[0].start
		// Our copy stays pinned, so not evicted, until the old copy's
		// head entry is invalidated durably: were ours evicted (and its
		// invalidation on disk) before that, a crash would bring the old
		// copy back as the key's.
		t.objs[id].pins++
	}
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if retire >= 0 {
		// Synced per the mode before the put returns, SyncBatch too: the
		// copy we replaced must not outlive ours on disk, or a crash that
		// takes ours (its eviction or a Delete of it in progress) would
		// bring the older bytes back as the key's.
		t.retire(retire, true)
	}
	if held >= 0 {
		// Errors are counted; ours is stored and newer, and the old copy
		// loses to it at Open while ours is there.
		if t.invalidateHeld(held, heldHead) == nil && t.syncFor(t.table) != nil {
			t.mu.Lock()
			t.stats.IOErrors++
			t.mu.Unlock()
		}
		t.unpin(id)
	}
	return nil
}

// checkPut rejects a put that must not reach the disk: a done context, an
// invalid key, a payload over MaxObjectSize or over what the tier can
// free, or a checksum that does not match the payload.
func (t *Tier) checkPut(ctx context.Context, k block.Key, payload tier.Segments, n int, sum uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ssd: put %s: %w", k, err)
	}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("ssd: put %s: %w", k, err)
	}
	if n > t.opts.MaxObjectSize {
		return fmt.Errorf("ssd: put %s: %d bytes over the SSD tier's object size limit of %d bytes (SSD tier option MaxObjectSize; a node's --max-object-bytes, or what its --ssd-bytes holds): %w", k, n, t.opts.MaxObjectSize, kvpool.ErrTooLarge)
	}
	if need := pagesFor(recordLen(k, n)); need > t.highPages {
		return fmt.Errorf("ssd: put %s: %d bytes need %d pages of %d bytes; the tier holds at most %d under its high watermark (a node's --ssd-bytes, --ssd-high-watermark): %w", k, n, need, PageSize, t.highPages, kvpool.ErrTooLarge)
	}
	if got := payload.Checksum(k); got != sum {
		return fmt.Errorf("ssd: put %s: checksum %08x given, payload has %08x: %w", k, sum, got, kvpool.ErrCorrupt)
	}
	return nil
}

// makeRoomLocked evicts per the watermarks (and MaxObjects, counting one
// object more unless the put replaces one) when need more pages would take
// the held pages past highPages. It returns the
// evicted objects, which the caller invalidates and frees (or takes pages
// from); pinned victims are skipped and made most recently used, as they
// are being read.
func (t *Tier) makeRoomLocked(need int, replacing bool) []victim {
	used := t.nPages - t.alloc.free
	freePages := 0
	if used+need > t.highPages {
		freePages = max(used-t.lowPages, used+need-t.highPages)
	}
	freeObjs := 0
	if m, n := t.opts.MaxObjects, len(t.index); m > 0 && !replacing && n+1 > m {
		freeObjs = n + 1 - m
	}
	if freePages <= 0 && freeObjs <= 0 {
		return nil
	}
	var victims []victim
	var pinned []int32
	freed := 0
	for tries := t.pol.Len(); (freed < freePages || len(victims) < freeObjs) && tries > 0; tries-- {
		k, ok := t.pol.Victim()
		if !ok {
			break
		}
		v := int32(k)
		t.stats.EvictAttempts++
		t.pol.Remove(k)
		if t.objs[v].pins > 0 {
			pinned = append(pinned, v)
			continue
		}
		m := &t.objs[v]
		delete(t.index, m.key)
		t.stats.Blocks--
		t.stats.Bytes -= int64(m.n)
		t.livePages -= int64(m.pages)
		t.stats.Evicted++
		m.state = objDropping
		freed += int(m.pages)
		victims = append(victims, victim{id: v, all: m.runs, rest: m.runs})
	}
	for _, v := range pinned {
		t.insertLocked(v)
	}
	return victims
}

// claimLocked takes need pages for a put: the victims' pages join the free
// ones for the search (they are invalidated before the put writes), and
// those it does not take stay with their victim until it is retired. It
// returns nil when there are not enough pages (the rest are being written
// or read). Called with t.mu held.
func (t *Tier) claimLocked(need int, victims []victim) []pageRun {
	for _, v := range victims {
		t.alloc.markRuns(v.all, false)
	}
	runs := t.alloc.take(need)
	for i := range victims {
		v := &victims[i]
		var rest []int32
		for _, p := range chainPages(v.all) {
			if !t.alloc.isUsed(int(p)) {
				rest = append(rest, p)
			}
		}
		v.rest = runsOf(rest)
		t.alloc.markRuns(v.rest, true)
		t.objs[v.id].runs = v.rest // what freeLocked releases
	}
	return runs
}

// retireVictims invalidates and frees the victims of a put that wrote
// nothing.
func (t *Tier) retireVictims(victims []victim) {
	var ioErrs uint64
	for _, v := range victims {
		if err := t.invalidate(v.all); err != nil {
			ioErrs++
		}
	}
	t.mu.Lock()
	t.stats.IOErrors += ioErrs
	for _, v := range victims {
		t.freeLocked(v.id)
	}
	t.mu.Unlock()
}

// writeClaimed invalidates the victims a put evicted, so they stay gone
// (and the pages it takes from them hold no record while rewritten), then
// writes object o and syncs the files it touched per the sync mode. If the
// write or the sync fails, o's entries are invalidated again. It returns
// the number of I/O errors to count and the write's error. Called without
// t.mu: o is objWriting, so no one else touches its pages.
func (t *Tier) writeClaimed(o object, victims []victim, payload tier.Segments) (ioErrs uint64, werr error) {
	for _, v := range victims {
		if err := t.invalidate(v.all); err != nil {
			ioErrs++ // a stale head fails its chain or checksum once the pages are rewritten
		}
	}
	var touched []*pageFile
	touched, werr = t.writeRecord(o, payload)
	if werr == nil {
		if err := t.syncFor(touched...); err != nil {
			werr = fmt.Errorf("sync: %w", err)
		}
	}
	if werr != nil {
		ioErrs++
		if err := t.invalidate(o.runs); err != nil {
			ioErrs++
		}
	}
	return ioErrs, werr
}

// recordSource hands out a record's bytes in order: the tenant, the name,
// then the payload's pieces.
type recordSource struct {
	parts [][]byte
}

// fill copies the next len(b) bytes of the record (or what is left) into
// b and returns how many it copied.
func (s *recordSource) fill(b []byte) int {
	n := 0
	for n < len(b) && len(s.parts) > 0 {
		c := copy(b[n:], s.parts[0])
		n += c
		if s.parts[0] = s.parts[0][c:]; len(s.parts[0]) == 0 {
			s.parts = s.parts[1:]
		}
	}
	return n
}

// writeRecord writes o's data pages, one pwrite per extent, then its
// continuation entries, then its head entry. It returns the files it
// wrote.
func (t *Tier) writeRecord(o object, payload tier.Segments) ([]*pageFile, error) {
	inKey := keyInEntry(o.key, int(o.n))
	parts := make([][]byte, 0, 2+len(payload))
	if !inKey {
		parts = append(parts, []byte(o.key.Tenant), []byte(o.key.Name))
	}
	parts = append(parts, payload...)
	src := recordSource{parts: parts}
	recLen := recordLen(o.key, int(o.n))
	bp, c := t.getBuf(min(roundUp(recLen, PageSize), maxIO))
	defer t.putBuf(bp, c)
	touched := []*pageFile{t.table}
	for it := t.extents(o.runs); ; {
		e, ok := it.next()
		if !ok {
			break
		}
		b := (*bp)[:e.n*PageSize]
		m := src.fill(b)
		clear(b[m:])
		pf, off := t.locate(e.page)
		if len(touched) == 1 || touched[len(touched)-1] != pf {
			touched = append(touched, pf)
		}
		pf.dirty.Store(true)
		if _, err := pf.f.WriteAt(b, off); err != nil {
			return touched, fmt.Errorf("write pages %d..%d: %w", e.page, int(e.page)+e.n-1, err)
		}
	}
	// The entries: one write per run (a run's entries are adjacent in the
	// table), the head's last.
	pages := chainPages(o.runs)
	head := entry{
		kind: kindHead, tl: uint8(len(o.key.Tenant)), nl: uint16(len(o.key.Name)),
		gen: o.gen, head: uint32(pages[0]), next: noPage, n: o.n, sum: o.sum, id: o.key.ID,
		page: uint32(pages[0]), inKey: inKey,
	}
	if inKey {
		head.key = keyBytes(o.key)
	} else {
		head.keySum = block.KeySum(o.key)
	}
	if len(pages) > 1 {
		head.next = uint32(pages[1])
	}
	eb := (*bp)[:0]
	seq := 1
	t.table.dirty.Store(true)
	for ri, r := range o.runs {
		from := r.start
		if ri == 0 {
			from++ // the head's entry goes last
		}
		eb = eb[:0]
		for p := from; p < r.start+r.n; p++ {
			e := entry{kind: kindCont, gen: o.gen, head: uint32(pages[0]), next: noPage, seq: uint32(seq), page: uint32(p)}
			if seq+1 < len(pages) {
				e.next = uint32(pages[seq+1])
			}
			seq++
			eb = eb[:len(eb)+entrySize]
			e.encode(eb[len(eb)-entrySize:])
			if len(eb)+entrySize > cap(eb) || p+1 == r.start+r.n {
				if _, err := t.table.f.WriteAt(eb, int64(p+1)*entrySize-int64(len(eb))); err != nil {
					return touched, fmt.Errorf("write entries of pages %d..%d: %w", p+1-int32(len(eb)/entrySize), p, err)
				}
				eb = eb[:0]
			}
		}
	}
	hb := (*bp)[:entrySize]
	head.encode(hb)
	if _, err := t.table.f.WriteAt(hb, int64(pages[0])*entrySize); err != nil {
		return touched, fmt.Errorf("write head entry of page %d: %w", pages[0], err)
	}
	return touched, nil
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// publishLocked ends a put of object id: it counts the I/O errors, frees
// the victims, and, if the write succeeded, makes id the copy of its key
// in the index. It returns the object the caller must retire once t.mu is
// released (-1 for none): the copy id replaced, or id itself when a
// concurrent put of the key committed a newer copy (so ours loses); and
// held, the copy id replaced when readers hold it (-1 for none), whose
// head entry the caller invalidates (invalidateHeld). On a failed write
// it frees id and returns the put's error. Called with t.mu held.
func (t *Tier) publishLocked(id int32, victims []victim, ioErrs uint64, werr error) (retire, held int32, err error) {
	o := &t.objs[id]
	k := o.key
	t.stats.IOErrors += ioErrs
	for _, v := range victims {
		t.freeLocked(v.id)
	}
	if werr != nil {
		pages := o.pages
		t.freeLocked(id)
		if errors.Is(werr, syscall.ENOSPC) {
			return -1, -1, fmt.Errorf("ssd: put %s (%d pages): device full: %w: %w", k, pages, kvpool.ErrFull, werr)
		}
		return -1, -1, fmt.Errorf("ssd: put %s (%d pages): %w", k, pages, werr)
	}
	retire, held = -1, -1
	t.stats.BytesIn += uint64(o.n)
	if old, ok := t.index[k]; ok {
		if t.objs[old].gen > o.gen {
			o.state = objDropping
			return id, -1, nil
		}
		if t.dropLocked(old) {
			retire = old
		} else {
			held = old
		}
	}
	o.state = objLive
	t.index[k] = id
	t.insertLocked(id)
	t.stats.Blocks++
	t.stats.Bytes += int64(o.n)
	t.livePages += int64(o.pages)
	return retire, held, nil
}

// dropLocked takes live object id out of the index and the policy. It
// reports whether the caller must retire it now (it is not pinned);
// otherwise the last unpin retires it.
func (t *Tier) dropLocked(id int32) bool {
	m := &t.objs[id]
	delete(t.index, m.key)
	t.pol.Remove(policy.Key(id))
	t.stats.Blocks--
	t.stats.Bytes -= int64(m.n)
	t.livePages -= int64(m.pages)
	m.state = objDropping
	return m.pins == 0
}

// retire invalidates a dropped, unpinned object and frees it; with sync
// set it makes the invalidation durable per the sync mode first.
func (t *Tier) retire(id int32, sync bool) error {
	t.mu.Lock()
	runs := t.objs[id].runs
	t.mu.Unlock()
	err := t.invalidate(runs)
	if err == nil && sync {
		err = t.syncFor(t.table)
	}
	t.mu.Lock()
	if err != nil {
		t.stats.IOErrors++
	}
	t.freeLocked(id)
	t.mu.Unlock()
	return err
}

// unpin releases a pin on object id and retires it if it was the last
// pin on a dropped object.
func (t *Tier) unpin(id int32) {
	t.mu.Lock()
	m := &t.objs[id]
	m.pins--
	last := m.pins == 0 && m.state == objDropping
	t.mu.Unlock()
	if last {
		t.retire(id, false)
	}
}

// invalidateHeld zeroes the head entry (page head) of dropped object id,
// which readers still hold, and releases the pin the caller took for it
// under t.mu. The last reader's retire invalidates the rest, unsynced and
// whenever it comes; until the head entry is gone the record would come
// back at Open after a crash (a deleted key served again, or, once a
// newer copy is deleted, an old copy). The caller's pin keeps the pages
// and the entry from being reused (rewritten by another put) until the
// zeroes are written; the caller syncs them per the mode. A reader that
// reads the zeroed head gets a miss (failRead).
func (t *Tier) invalidateHeld(id, head int32) error {
	t.table.dirty.Store(true)
	_, err := t.table.f.WriteAt(t.zero[:entrySize], int64(head)*entrySize)
	if err != nil {
		t.mu.Lock()
		t.stats.IOErrors++
		t.mu.Unlock()
		err = fmt.Errorf("invalidate head entry of page %d: %w", head, err)
	}
	t.unpin(id)
	return err
}

// Get returns the payload of k appended to dst[:0] (see tier.Tier). With
// direct I/O, when dst's capacity is page-aligned and holds the payload's
// last page whole, the pages are read straight into it: the bytes past the
// payload's length, up to the page's end, are overwritten too.
func (t *Tier) Get(ctx context.Context, k block.Key, dst []byte) ([]byte, uint32, error) {
	if err := ctx.Err(); err != nil {
		return dst[:0], 0, fmt.Errorf("ssd: get %s: %w", k, err)
	}
	t.mu.Lock()
	if err := t.beginLocked("get", k); err != nil {
		t.mu.Unlock()
		return dst[:0], 0, err
	}
	defer t.ops.Done()
	for attempt := 0; ; attempt++ {
		id, ok := t.index[k]
		if !ok {
			t.stats.Misses++
			t.mu.Unlock()
			return dst[:0], 0, fmt.Errorf("ssd: get %s: %w", k, kvpool.ErrNotFound)
		}
		o := t.objs[id]
		t.objs[id].pins++
		t.clock++
		t.pol.Hit(policy.Access{Key: policy.Key(id), Time: t.clock})
		t.mu.Unlock()

		out, ioErr, checkErr := t.readObject(o, k, dst)

		t.mu.Lock()
		if ioErr == nil && checkErr == nil {
			t.stats.Hits++
			t.stats.BytesOut += uint64(o.n)
			t.mu.Unlock()
			t.unpin(id)
			return out, o.sum, nil
		}
		if t.raced(id, checkErr, attempt) {
			continue
		}
		t.stats.Misses++
		t.mu.Unlock()
		return dst[:0], 0, t.failRead(id, o, k, "get", ioErr, checkErr)
	}
}

// raced reports whether a read of pinned object id that failed its check
// (attempt+1 times so far) met a copy replaced or deleted meanwhile, whose
// head entry is invalidated while readers hold it (invalidateHeld): then
// it unpins id and the caller, t.mu still held, looks the key up again
// (the newer copy, or a miss). Called with t.mu held.
func (t *Tier) raced(id int32, checkErr error, attempt int) bool {
	if checkErr == nil || t.objs[id].state != objDropping || attempt >= 3 {
		return false
	}
	t.mu.Unlock()
	t.unpin(id)
	t.mu.Lock()
	return true
}

// failRead drops pinned object id (if it is still the copy o) after a
// read of it failed, unpins it, and returns the error to report.
func (t *Tier) failRead(id int32, o object, k block.Key, what string, ioErr, checkErr error) error {
	t.mu.Lock()
	if cur := t.objs[id]; checkErr != nil && cur.state == objDropping {
		// Deleted while this read ran: the Delete invalidated its head
		// entry (the pages are still the object's). The key is gone: a
		// miss, not a corruption.
		t.mu.Unlock()
		t.unpin(id)
		return fmt.Errorf("ssd: %s %s: deleted during the read: %w", what, k, kvpool.ErrNotFound)
	}
	if ioErr != nil {
		t.stats.IOErrors++
	} else {
		t.stats.Corruptions++
	}
	dropped := false
	if cur := t.objs[id]; cur.state == objLive && cur.gen == o.gen {
		t.dropLocked(id)
		dropped = true
	}
	t.mu.Unlock()
	t.unpin(id)
	if dropped && t.opts.OnRemove != nil {
		t.notifyRemoved([]block.Key{k}, RemovedCorrupt)
	}
	reason := ioErr
	if reason == nil {
		reason = checkErr
	}
	return fmt.Errorf("ssd: %s %s from page %d (%d pages): %w: %w", what, k, o.runs[0].start, o.pages, kvpool.ErrCorrupt, reason)
}

// checkHead compares a head entry read back with what the index holds
// (and a key it holds with the index's).
func checkHead(e entry, o object) error {
	if e.kind != kindHead || e.gen != o.gen || e.n != o.n || e.sum != o.sum || e.id != o.key.ID ||
		int(e.tl) != len(o.key.Tenant) || int(e.nl) != len(o.key.Name) || int(e.pages) != int(o.pages) ||
		e.inKey != keyInEntry(o.key, int(o.n)) {
		return fmt.Errorf("head entry holds gen %d, %d bytes, sum %08x, id %016x; the index expects gen %d, %d bytes, sum %08x, id %016x",
			e.gen, e.n, e.sum, e.id, o.gen, o.n, o.sum, o.key.ID)
	}
	if e.inKey && e.key != keyBytes(o.key) {
		return fmt.Errorf("head entry holds tenant %q name %q, want %s", e.key[:e.tl], e.key[e.tl:], o.key)
	}
	return nil
}

// readHead reads and decodes the head entry of o, using b (entrySize
// bytes) to read into.
func (t *Tier) readHead(o object, b []byte) (entry, error, error) {
	hp := o.runs[0].start
	if _, err := t.table.f.ReadAt(b[:entrySize], int64(hp)*entrySize); err != nil {
		return entry{}, fmt.Errorf("read head entry: %w", err), nil
	}
	e, err := decodeEntry(b[:entrySize], uint32(hp))
	if err != nil {
		return entry{}, nil, err
	}
	return e, nil, checkHead(e, o)
}

// checkPrefix compares the tenant and name read back with k's.
func checkPrefix(pre []byte, k block.Key) error {
	tl := len(k.Tenant)
	if string(pre[:tl]) != k.Tenant || string(pre[tl:]) != k.Name {
		return fmt.Errorf("record holds tenant %q name %q, want %s", pre[:tl], pre[tl:], k)
	}
	return nil
}

// readObject reads and verifies pinned object o, expected to hold k.
func (t *Tier) readObject(o object, k block.Key, dst []byte) (out []byte, ioErr, checkErr error) {
	sp, c := t.getBuf(PageSize) // scratch: the head entry, then the tenant and name
	defer t.putBuf(sp, c)
	if _, ioErr, checkErr = t.readHead(o, *sp); ioErr != nil || checkErr != nil {
		return dst[:0], ioErr, checkErr
	}
	n := int(o.n)
	out = slices.Grow(dst[:0], n)[:n]
	pre := (*sp)[:prefixLen(k, n)]
	if err := t.readRecord(o.runs, pre, out); err != nil {
		return dst[:0], err, nil
	}
	if len(pre) > 0 {
		if err := checkPrefix(pre, k); err != nil {
			return dst[:0], nil, err
		}
	}
	if !block.Verify(k, out, o.sum) {
		return dst[:0], nil, fmt.Errorf("payload checksum %08x, head entry says %08x", block.Checksum(k, out), o.sum)
	}
	return out, nil, nil
}

// readRecord reads a record laid over runs into pre (its first len(pre)
// bytes: tenant and name) and pay (the payload): one pread per extent.
// With DirectIO the pages go through an aligned buffer; without, straight
// into pre and pay.
func (t *Tier) readRecord(runs []pageRun, pre, pay []byte) error {
	recLen := len(pre) + len(pay)
	var bp *[]byte
	var c int
	if t.opts.DirectIO {
		bp, c = t.getBuf(min(roundUp(recLen, PageSize), maxIO))
		defer t.putBuf(bp, c)
	}
	for it := t.extents(runs); ; {
		e, ok := it.next()
		if !ok {
			return nil
		}
		pf, off := t.locate(e.page)
		if t.opts.DirectIO && e.rec >= len(pre) {
			// Pages wholly of the payload go straight into pay when its
			// memory there is aligned and has room for the last page's
			// tail (in its spare capacity): no copy through the bounce
			// buffer.
			at := e.rec - len(pre)
			if direct := pay[at:cap(pay)]; len(direct) >= e.n*PageSize && aligned(direct) {
				if _, err := pf.f.ReadAt(direct[:e.n*PageSize], off); err != nil {
					return fmt.Errorf("read pages %d..%d: %w", e.page, int(e.page)+e.n-1, err)
				}
				continue
			}
		}
		if t.opts.DirectIO {
			b := (*bp)[:e.n*PageSize]
			if _, err := pf.f.ReadAt(b, off); err != nil {
				return fmt.Errorf("read pages %d..%d: %w", e.page, int(e.page)+e.n-1, err)
			}
			b = b[:min(len(b), recLen-e.rec)]
			rec := e.rec
			if rec < len(pre) {
				n := copy(pre[rec:], b)
				b, rec = b[n:], rec+n
			}
			copy(pay[rec-len(pre):], b)
			continue
		}
		from, to := e.rec, min(e.rec+e.n*PageSize, recLen)
		for from < to {
			var b []byte
			if from < len(pre) {
				b = pre[from:min(to, len(pre))]
			} else {
				b = pay[from-len(pre) : to-len(pre)]
			}
			if _, err := pf.f.ReadAt(b, off+int64(from-e.rec)); err != nil {
				return fmt.Errorf("read pages %d..%d: %w", e.page, int(e.page)+e.n-1, err)
			}
			from += len(b)
		}
	}
}

// notifyRemoved calls Options.OnRemove for each key. t.mu is not held.
func (t *Tier) notifyRemoved(keys []block.Key, why RemoveReason) {
	for _, k := range keys {
		t.opts.OnRemove(Removed{Key: k, Reason: why})
	}
}

// Item describes one object the tier holds.
type Item struct {
	Key  block.Key
	Size int    // payload bytes
	Sum  uint32 // block.Checksum(Key, payload)
}

// Items returns every object in the index, in no particular order: a
// snapshot taken under the lock, without reading the disk, touching the
// eviction policy or any counter. A node sends it to its master as its
// SSD inventory at registration.
func (t *Tier) Items() []Item {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	out := make([]Item, 0, len(t.index))
	for k, id := range t.index {
		m := &t.objs[id]
		out = append(out, Item{Key: k, Size: int(m.n), Sum: m.sum})
	}
	return out
}

// Stat returns k's size and checksum as the index holds them, and whether
// k is resident. Like Contains it changes no policy state and no counter.
func (t *Tier) Stat(k block.Key) (Item, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return Item{}, false
	}
	id, ok := t.index[k]
	if !ok {
		return Item{}, false
	}
	return Item{Key: k, Size: int(t.objs[id].n), Sum: t.objs[id].sum}, true
}

// Section pins k's object and returns where its payload lies, for a
// zero-copy send (sendfile): the payload is the n bytes at off in f, with
// checksum sum. It works for an object in one run of adjacent pages of one
// file; for any other it returns ErrFragmented (and counts nothing), and
// the caller reads with Get. Before returning it reads the head entry and
// the stored tenant and name back and compares them with k (a mismatch
// drops the object and returns ErrCorrupt); it does not read or verify
// the payload: the receiver verifies it against sum. The object's pages
// cannot be reused until release is called (once; later calls do
// nothing). It counts as a hit.
func (t *Tier) Section(k block.Key) (f vfs.File, off int64, n int, sum uint32, release func(), err error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, 0, 0, 0, nil, fmt.Errorf("ssd: section %s: %w", k, kvpool.ErrClosed)
	}
	var id int32
	var o object
	for attempt := 0; ; attempt++ {
		var ok bool
		id, ok = t.index[k]
		if !ok {
			t.stats.Misses++
			t.mu.Unlock()
			return nil, 0, 0, 0, nil, fmt.Errorf("ssd: section %s: %w", k, kvpool.ErrNotFound)
		}
		o = t.objs[id]
		per := int32(t.opts.PagesPerFile)
		if len(o.runs) != 1 || o.runs[0].start/per != (o.runs[0].start+o.runs[0].n-1)/per {
			t.mu.Unlock()
			return nil, 0, 0, 0, nil, fmt.Errorf("ssd: section %s (%d pages in %d runs): %w", k, o.pages, len(o.runs), ErrFragmented)
		}
		t.objs[id].pins++
		t.clock++
		t.pol.Hit(policy.Access{Key: policy.Key(id), Time: t.clock})
		t.mu.Unlock()

		ioErr, checkErr := t.checkStored(o, k)
		t.mu.Lock()
		if ioErr == nil && checkErr == nil {
			break
		}
		if t.raced(id, checkErr, attempt) {
			continue
		}
		t.stats.Misses++
		t.mu.Unlock()
		return nil, 0, 0, 0, nil, t.failRead(id, o, k, "section", ioErr, checkErr)
	}
	t.stats.Hits++
	t.stats.BytesOut += uint64(o.n)
	t.mu.Unlock()
	pf, poff := t.locate(o.runs[0].start)
	var once sync.Once
	pl := int64(prefixLen(k, int(o.n)))
	return pf.f, poff + pl, int(o.n), o.sum, func() { once.Do(func() { t.unpin(id) }) }, nil
}

// checkStored reads o's head entry and its stored tenant and name and
// compares them with the index and k.
func (t *Tier) checkStored(o object, k block.Key) (ioErr, checkErr error) {
	bp, c := t.getBuf(PageSize)
	defer t.putBuf(bp, c)
	if _, ioErr, checkErr = t.readHead(o, *bp); ioErr != nil || checkErr != nil {
		return ioErr, checkErr
	}
	pl := prefixLen(k, int(o.n))
	if pl == 0 {
		return nil, nil
	}
	pf, off := t.locate(o.runs[0].start)
	b := (*bp)[:PageSize]
	if !t.opts.DirectIO {
		b = b[:pl]
	}
	if _, err := pf.f.ReadAt(b, off); err != nil {
		return fmt.Errorf("read page %d: %w", o.runs[0].start, err), nil
	}
	return nil, checkPrefix(b[:pl], k)
}

// Delete removes k (see tier.Tier). The object leaves the index even when
// invalidating its entries fails; the error then says so.
func (t *Tier) Delete(ctx context.Context, k block.Key) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ssd: delete %s: %w", k, err)
	}
	t.mu.Lock()
	if err := t.beginLocked("delete", k); err != nil {
		t.mu.Unlock()
		return err
	}
	defer t.ops.Done()
	id, ok := t.index[k]
	if !ok {
		t.mu.Unlock()
		return fmt.Errorf("ssd: delete %s: %w", k, kvpool.ErrNotFound)
	}
	now := t.dropLocked(id)
	runs := t.objs[id].runs // read-only once set; id is ours until freed
	head := runs[0].start
	if !now {
		// Readers hold it; the last one retires it. The Delete is
		// acknowledged now, so its head entry goes now (see
		// invalidateHeld).
		t.objs[id].pins++
		t.mu.Unlock()
		err := t.invalidateHeld(id, head)
		if err == nil {
			if err = t.syncFor(t.table); err != nil {
				t.mu.Lock()
				t.stats.IOErrors++
				t.mu.Unlock()
			}
		}
		if err != nil {
			return fmt.Errorf("ssd: delete %s at page %d: %w", k, head, err)
		}
		return nil
	}
	t.mu.Unlock()
	err := t.invalidate(runs)
	if err == nil {
		err = t.syncFor(t.table)
	}
	t.mu.Lock()
	if err != nil {
		t.stats.IOErrors++
	}
	t.freeLocked(id)
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("ssd: delete %s at page %d: %w", k, head, err)
	}
	return nil
}

// Contains reports whether k is resident. It changes no policy state and
// no counter.
func (t *Tier) Contains(k block.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	_, ok := t.index[k]
	return ok
}

// Stats returns a snapshot of the counters.
func (t *Tier) Stats() tier.Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stats
	st.HeldBytes = t.livePages * pageCost
	return st
}

// OpenStats returns what Open found.
func (t *Tier) OpenStats() OpenStats { return t.openStats }

// BlockSize returns the typical object size the policy is sized for.
func (t *Tier) BlockSize() int { return t.opts.BlockSize }

// MaxObjectSize returns the largest payload the tier accepts.
func (t *Tier) MaxObjectSize() int { return t.opts.MaxObjectSize }

// Pages returns the number of pages.
func (t *Tier) Pages() int { return t.nPages }

// Close waits for operations in flight, syncs what was written and closes
// the files. Sections still held read from closed files afterwards.
// Closing twice returns ErrClosed.
func (t *Tier) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return fmt.Errorf("ssd: close %s: %w", t.dir, kvpool.ErrClosed)
	}
	t.closed = true
	t.mu.Unlock()
	t.ops.Wait()
	if t.commit != nil {
		t.commit.stop()
	}
	serr := t.syncDirty()
	cerr := t.closeFiles()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("ssd: close %s: %w", t.dir, err)
	}
	return nil
}

// Check verifies the tier's invariants: index, object table, page bitmap
// and policy agree, every counter matches, and every indexed object's
// head entry on disk names it. Call it only while no operation is in
// flight and no Section is held (tests call it in t.Cleanup).
func (t *Tier) Check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	freeSet := make(map[int32]bool, len(t.freeObjs))
	for _, id := range t.freeObjs {
		if freeSet[id] {
			bad("object %d twice on the free list", id)
		}
		freeSet[id] = true
	}
	owner := make([]int32, t.nPages)
	var bytes, pages int64
	live := 0
	for id := range t.objs {
		m := t.objs[id]
		if m.pins != 0 {
			bad("object %d has %d pins at rest", id, m.pins)
		}
		switch m.state {
		case objFree:
			if !freeSet[int32(id)] {
				bad("free object %d not on the free list", id)
			}
			continue
		case objLive:
			live++
			bytes += int64(m.n)
			pages += int64(m.pages)
			if i, ok := t.index[m.key]; !ok || i != int32(id) {
				bad("live object %d (%s) not indexed", id, m.key)
			}
			if !t.pol.Contains(policy.Key(id)) {
				bad("live object %d not in the policy", id)
			}
		default:
			bad("object %d in transient state %d at rest", id, m.state)
		}
		n := int32(0)
		for _, r := range m.runs {
			for p := r.start; p < r.start+r.n; p++ {
				n++
				if owner[p] != 0 {
					bad("page %d held by objects %d and %d", p, owner[p]-1, id)
				}
				owner[p] = int32(id) + 1
				if !t.alloc.isUsed(int(p)) {
					bad("page %d of object %d is free in the bitmap", p, id)
				}
			}
		}
		if n != m.pages || int(n) != pagesFor(recordLen(m.key, int(m.n))) {
			bad("object %d (%s, %d bytes) holds %d pages, says %d", id, m.key, m.n, n, m.pages)
		}
	}
	held := 0
	for p := range t.nPages {
		if t.alloc.isUsed(p) {
			held++
			if owner[p] == 0 {
				bad("page %d held in the bitmap by no object", p)
			}
		}
	}
	if held != t.nPages-t.alloc.free {
		bad("bitmap holds %d pages, free count says %d", held, t.nPages-t.alloc.free)
	}
	if live != len(t.index) || live != t.pol.Len() || live != t.stats.Blocks {
		bad("live objects %d, index %d, policy %d, Stats.Blocks %d", live, len(t.index), t.pol.Len(), t.stats.Blocks)
	}
	if bytes != t.stats.Bytes || pages != t.livePages {
		bad("live bytes %d pages %d, Stats.Bytes %d, live pages %d", bytes, pages, t.stats.Bytes, t.livePages)
	}
	if t.stats.Evicted > t.stats.EvictAttempts {
		bad("Evicted %d > EvictAttempts %d", t.stats.Evicted, t.stats.EvictAttempts)
	}
	if c, ok := t.pol.(interface{ CheckInvariants() error }); ok {
		if err := c.CheckInvariants(); err != nil {
			bad("policy: %w", err)
		}
	}
	for k, id := range t.index {
		if ioErr, checkErr := t.checkStored(t.objs[id], k); ioErr != nil || checkErr != nil {
			bad("object %d (%s) on disk: %v", id, k, errors.Join(ioErr, checkErr))
		}
	}
	return errors.Join(errs...)
}
