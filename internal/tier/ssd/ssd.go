// Package ssd is the SSD tier of a node: fixed-size slots in preallocated
// slot files, each slot a 4 KiB header (key, length, checksum, generation,
// header CRC) followed by the payload. The tier survives restarts by
// scanning every slot header at Open; a torn or corrupt slot is dropped
// and counted, never served. It implements tier.Tier.
//
// Durability and visibility:
//   - A Put writes the payload, then the header (the commit record), then
//     syncs per the SyncMode, and only then makes the block visible.
//   - A slot that leaves the index (Delete, eviction, replacement, a
//     failed check) has its header invalidated (magic zeroed) before it is
//     reused or freed, so a deleted block does not come back at restart.
//     Under SyncAlways a Delete syncs that invalidation; under SyncBatch it
//     waits for the group commit; under SyncNone a crash may resurrect a
//     deleted or evicted block (with its correct bytes: never a corrupt
//     one). The invalidation of a copy replaced by a newer Put is synced
//     under SyncAlways only; the newer copy's higher generation wins at
//     the next Open anyway.
//   - Two slots claiming one key at Open: the highest generation wins.
//
// Concurrency: a Tier is safe for concurrent use. One mutex guards the
// index, the slot table and the eviction policy; it is never held during
// disk I/O. A slot being read (by Get, or through a Section) is pinned and
// cannot be reused until unpinned.
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

// OpenStats describe what Open found in the slot files.
type OpenStats struct {
	Slots      int // slots in the tier
	Recovered  int // valid blocks put back in the index
	Torn       int // headers that were neither empty nor valid
	Corrupt    int // valid headers whose payload failed its checksum
	Duplicates int // valid slots for a key another slot holds at a higher generation
	IOErrors   int // slots whose header or payload could not be read
}

type slotState uint8

const (
	slotFree     slotState = iota // on the free list
	slotWriting                   // reserved by a Put in progress
	slotLive                      // in the index
	slotDropping                  // out of the index; waits for its pins, then is invalidated and freed
)

// slotMeta is the in-memory view of one slot.
type slotMeta struct {
	key   block.Key
	n     uint32
	sum   uint32
	gen   uint64
	state slotState
	pins  int32
}

// slotFile is one preallocated file of slots.
type slotFile struct {
	f     vfs.File
	dirty atomic.Bool // written since its last sync
}

// Tier is the SSD tier. Build it with Open.
type Tier struct {
	opts          Options // with defaults
	dir           string
	fs            vfs.FS
	files         []*slotFile
	nSlots        int
	slotSize      int64
	payloadRegion int
	highSlots     int // a put that would take the used slots past this evicts...
	lowSlots      int // ...down to this many
	ioHeader      int // bytes of header read and written (headerLen, or headerSize with O_DIRECT)
	zero          []byte
	bufs          sync.Pool // *[]byte aligned buffers of slotSize bytes (O_DIRECT) or headerSize bytes
	commit        *committer
	openStats     OpenStats

	ops sync.WaitGroup // operations in flight; Close waits for them

	mu     sync.Mutex
	closed bool
	slots  []slotMeta
	index  map[block.Key]int32
	free   []int32
	pol    policy.Eviction
	clock  int64
	gen    uint64
	stats  tier.Stats
}

var _ tier.Tier = (*Tier)(nil)

// Open opens (creating if needed) the SSD tier in opts.Dir, scanning every
// slot to rebuild the index.
func Open(ctx context.Context, opts Options) (*Tier, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	t := &Tier{
		opts:          o,
		dir:           o.Dir,
		fs:            o.FS,
		slotSize:      SlotSize(o.BlockSize),
		payloadRegion: int(roundUp(int64(o.BlockSize), vfs.DirectIOAlign)),
		ioHeader:      headerLen,
		index:         map[block.Key]int32{},
	}
	if o.DirectIO {
		t.ioHeader = headerSize
	}
	t.nSlots = int(o.CapacityBytes / t.slotSize)
	// The epsilon keeps 0.95*20 from rounding to 20 or 0.9*10 to 8.
	t.highSlots = min(max(int(math.Ceil(o.HighWatermark*float64(t.nSlots)-1e-9)), 1), t.nSlots)
	t.lowSlots = min(max(int(math.Floor(o.LowWatermark*float64(t.nSlots)+1e-9)), 0), t.highSlots-1)
	t.zero = alignedBuf(headerSize)
	bufSize := headerSize
	if o.DirectIO {
		bufSize = int(t.slotSize)
	}
	t.bufs.New = func() any { b := alignedBuf(bufSize); return &b }
	t.slots = make([]slotMeta, t.nSlots)
	t.pol = o.NewEviction(t.nSlots)
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

// openFiles checks the geometry and opens, creates and sizes the slot
// files, removing those beyond the capacity.
func (t *Tier) openFiles() error {
	if err := t.fs.MkdirAll(t.dir, 0o755); err != nil {
		return fmt.Errorf("create dir: %w", err)
	}
	names, err := t.fs.ReadDir(t.dir)
	if err != nil {
		return fmt.Errorf("list dir: %w", err)
	}
	if err := checkGeometry(t.fs, t.dir, geometry{formatVersion, t.opts.BlockSize, t.opts.SlotsPerFile}, names); err != nil {
		return err
	}
	per := t.opts.SlotsPerFile
	nFiles := (t.nSlots + per - 1) / per
	flag := os.O_RDWR | os.O_CREATE
	if t.opts.DirectIO {
		flag |= vfs.ODirect
	}
	created := false
	for i := range nFiles {
		name := filepath.Join(t.dir, slotFileName(i))
		want := int64(min(per, t.nSlots-i*per)) * t.slotSize
		size, err := t.fs.Stat(name)
		if errors.Is(err, os.ErrNotExist) {
			created, size = true, 0
		} else if err != nil {
			return fmt.Errorf("stat %s: %w", name, err)
		}
		f, err := t.fs.OpenFile(name, flag, 0o644)
		if err != nil {
			if t.opts.DirectIO && errors.Is(err, syscall.EINVAL) {
				return fmt.Errorf("open %s with O_DIRECT: %w: the filesystem refuses it (%w); set DirectIO off", name, ErrNoDirectIO, err)
			}
			return fmt.Errorf("open %s: %w", name, err)
		}
		t.files = append(t.files, &slotFile{f: f})
		if size != want {
			// Truncate preallocates (sparse on most filesystems, so a full
			// device shows up as ENOSPC on a later Put, which reports ErrFull).
			if err := f.Truncate(want); err != nil {
				return fmt.Errorf("size %s to %d bytes: %w", name, want, err)
			}
			if err := f.Sync(); err != nil {
				return fmt.Errorf("sync %s: %w", name, err)
			}
		}
	}
	for _, n := range names {
		if i, ok := parseSlotFileName(n); ok && i >= nFiles {
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
	for _, sf := range t.files {
		if err := sf.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// locate returns the file of slot s and the slot's offset in it.
func (t *Tier) locate(s int32) (*slotFile, int64) {
	per := int32(t.opts.SlotsPerFile)
	return t.files[s/per], int64(s%per) * t.slotSize
}

func (t *Tier) getBuf() *[]byte  { return t.bufs.Get().(*[]byte) }
func (t *Tier) putBuf(b *[]byte) { t.bufs.Put(b) }

// scan reads every slot header and rebuilds the index: it finds the
// blocks that survived, invalidates the slots that hold none that can be
// trusted, and loads the survivors.
func (t *Tier) scan(ctx context.Context) error {
	live, drop, err := t.scanSlots(ctx)
	if err != nil {
		return err
	}
	if err := t.dropSlots(drop); err != nil {
		return err
	}
	t.loadLive(live)
	return nil
}

// scannedBlock is a block scan found in slot s.
type scannedBlock struct {
	s int32
	h header
}

// scanSlots reads every slot and returns the blocks to keep, one per key,
// and the slots to invalidate: unreadable, torn or corrupt ones and the
// older copies of a key found twice.
func (t *Tier) scanSlots(ctx context.Context) (live []scannedBlock, drop []int32, err error) {
	verify := !t.opts.SkipScanVerify
	var buf []byte
	if verify {
		buf = alignedBuf(int(t.slotSize))
	} else {
		buf = alignedBuf(headerSize)
	}
	byKey := map[block.Key]int{} // key -> index in live
	st := &t.openStats
	st.Slots = t.nSlots
	for s := int32(0); s < int32(t.nSlots); s++ {
		if s%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, fmt.Errorf("scan slot %d: %w", s, err)
			}
		}
		h, verdict := t.checkSlot(s, buf, verify)
		switch verdict {
		case scanEmpty:
			continue
		case scanBad:
			drop = append(drop, s)
			continue
		}
		if i, dup := byKey[h.key]; dup {
			st.Duplicates++
			if live[i].h.gen > h.gen {
				drop = append(drop, s)
				continue
			}
			drop = append(drop, live[i].s)
			live[i] = scannedBlock{s, h}
			continue
		}
		byKey[h.key] = len(live)
		live = append(live, scannedBlock{s, h})
	}
	return live, drop, nil
}

// scanVerdict is what checkSlot found in a slot.
type scanVerdict int

const (
	scanEmpty scanVerdict = iota // no block: leave the slot alone
	scanBad                      // unreadable, torn or corrupt: invalidate it
	scanGood                     // a block whose header (and, verifying, payload) checks out
)

// checkSlot reads slot s into buf (the header only, or the whole slot when
// verify is set, checking the payload against its checksum) and counts
// what it found wrong in t.openStats.
func (t *Tier) checkSlot(s int32, buf []byte, verify bool) (header, scanVerdict) {
	st := &t.openStats
	sf, off := t.locate(s)
	if _, err := sf.f.ReadAt(buf[:t.ioHeader], off); err != nil {
		st.IOErrors++
		return header{}, scanBad
	}
	h, err := decodeHeader(buf[:t.ioHeader], uint32(s), t.opts.BlockSize)
	if errors.Is(err, errEmptySlot) {
		return header{}, scanEmpty
	}
	if err != nil {
		st.Torn++
		return header{}, scanBad
	}
	if !verify {
		return h, scanGood
	}
	n := int(h.n)
	rn := n
	if t.opts.DirectIO {
		rn = int(roundUp(int64(n), vfs.DirectIOAlign))
	}
	p := buf[headerSize : headerSize+rn]
	if _, err := sf.f.ReadAt(p, off+headerSize); err != nil {
		st.IOErrors++
		return header{}, scanBad
	}
	if !block.Verify(h.key, p[:n], h.sum) {
		st.Corrupt++
		return header{}, scanBad
	}
	return h, scanGood
}

// dropSlots invalidates the slots scan rejected and makes that durable.
func (t *Tier) dropSlots(drop []int32) error {
	for _, s := range drop {
		if err := t.invalidate(s); err != nil {
			return fmt.Errorf("drop slot %d: %w", s, err)
		}
	}
	if len(drop) > 0 {
		if err := t.syncDirty(); err != nil {
			return fmt.Errorf("sync after dropping %d slots: %w", len(drop), err)
		}
	}
	return nil
}

// loadLive puts the blocks scan kept into the index and the policy, in
// write order so that recency policies start from it, and puts every other
// slot on the free list.
func (t *Tier) loadLive(live []scannedBlock) {
	slices.SortFunc(live, func(a, b scannedBlock) int {
		switch {
		case a.h.gen < b.h.gen:
			return -1
		case a.h.gen > b.h.gen:
			return 1
		}
		return 0
	})
	inIndex := make([]bool, t.nSlots)
	for _, l := range live {
		t.slots[l.s] = slotMeta{key: l.h.key, n: l.h.n, sum: l.h.sum, gen: l.h.gen, state: slotLive}
		t.index[l.h.key] = l.s
		t.insertLocked(l.s)
		t.stats.Blocks++
		t.stats.Bytes += int64(l.h.n)
		t.gen = max(t.gen, l.h.gen)
		inIndex[l.s] = true
	}
	t.openStats.Recovered = len(live)
	// Free list: pop from the end, so lower slots are used first.
	for s := int32(t.nSlots) - 1; s >= 0; s-- {
		if !inIndex[s] {
			t.free = append(t.free, s)
		}
	}
}

// insertLocked makes slot s resident in the policy.
func (t *Tier) insertLocked(s int32) {
	t.clock++
	t.pol.Insert(policy.Access{Key: policy.Key(s), Time: t.clock})
}

// invalidate zeroes slot s's header on disk.
func (t *Tier) invalidate(s int32) error {
	sf, off := t.locate(s)
	if _, err := sf.f.WriteAt(t.zero[:t.ioHeader], off); err != nil {
		return fmt.Errorf("invalidate slot %d: %w", s, err)
	}
	sf.dirty.Store(true)
	return nil
}

// syncDirty syncs every file written since its last sync.
func (t *Tier) syncDirty() error {
	var errs []error
	for i, sf := range t.files {
		if !sf.dirty.Swap(false) {
			continue
		}
		if err := sf.f.Sync(); err != nil {
			sf.dirty.Store(true)
			errs = append(errs, fmt.Errorf("sync %s: %w", slotFileName(i), err))
		}
	}
	return errors.Join(errs...)
}

// syncFor makes the writes an operation did to files durable per the sync
// mode: files are synced under SyncAlways; SyncBatch waits for the group
// commit; SyncNone does nothing.
func (t *Tier) syncFor(files ...*slotFile) error {
	switch t.opts.Sync {
	case SyncAlways:
		var errs []error
		for i, sf := range files {
			if sf == nil || slices.Contains(files[:i], sf) {
				continue
			}
			if err := sf.f.Sync(); err != nil {
				errs = append(errs, err)
			}
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

// Put stores payload under k (see tier.Tier). It claims a slot under t.mu,
// writes the block without the lock, and publishes it under t.mu again;
// only then is the block visible to Get.
// PutSegments is Put of a payload held in pieces (a RAM tier's chunks, as
// a demotion hands them over).
func (t *Tier) PutSegments(ctx context.Context, k block.Key, payload tier.Segments, sum uint32) error {
	if len(payload) == 1 {
		return t.Put(ctx, k, payload[0], sum)
	}
	return t.Put(ctx, k, payload.AppendTo(make([]byte, 0, payload.Len())), sum)
}

func (t *Tier) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	if err := t.checkPut(ctx, k, payload, sum); err != nil {
		return err
	}

	t.mu.Lock()
	if err := t.beginLocked("put", k); err != nil {
		t.mu.Unlock()
		return err
	}
	defer t.ops.Done()
	victims := t.makeRoomLocked()
	if t.opts.OnRemove != nil && len(victims) > 0 {
		// Every return below unlocks t.mu first, so the deferred call
		// runs without the lock, once the victims have left the index.
		defer t.notifyRemoved(t.keysLocked(victims), RemovedEvicted)
	}
	s, takeover, ok := t.claimSlotLocked(victims)
	if !ok {
		t.mu.Unlock()
		return fmt.Errorf("ssd: put %s: all %d slots are being written or read: %w", k, t.nSlots, kvpool.ErrFull)
	}
	t.gen++
	h := header{slot: uint32(s), key: k, n: uint32(len(payload)), sum: sum, gen: t.gen}
	t.slots[s] = slotMeta{key: k, n: h.n, sum: sum, gen: h.gen, state: slotWriting}
	t.mu.Unlock()

	ioErrs, werr := t.writeClaimed(s, victims, h, payload)

	if takeover {
		victims = victims[:len(victims)-1] // slot s: freed below only on failure
	}
	t.mu.Lock()
	retire, superseded, err := t.publishLocked(s, h, victims, ioErrs, werr)
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if superseded {
		t.retire(retire)
		return nil
	}
	if retire >= 0 {
		t.retire(retire)
		if t.opts.Sync == SyncAlways {
			rf, _ := t.locate(retire)
			if err := rf.f.Sync(); err != nil {
				t.countIOError()
			}
		}
	}
	return nil
}

// checkPut rejects a put that must not reach the disk: a done context, an
// invalid key, a payload larger than a block, or a checksum that does not
// match the payload.
func (t *Tier) checkPut(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ssd: put %s: %w", k, err)
	}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("ssd: put %s: %w", k, err)
	}
	if len(payload) > t.opts.BlockSize {
		return fmt.Errorf("ssd: put %s: %d bytes, block size %d: %w", k, len(payload), t.opts.BlockSize, kvpool.ErrTooLarge)
	}
	if got := block.Checksum(k, payload); got != sum {
		return fmt.Errorf("ssd: put %s: checksum %08x given, payload has %08x: %w", k, sum, got, kvpool.ErrCorrupt)
	}
	return nil
}

// keysLocked returns the keys held by slots. Called with t.mu held.
func (t *Tier) keysLocked(slots []int32) []block.Key {
	keys := make([]block.Key, len(slots))
	for i, s := range slots {
		keys[i] = t.slots[s].key
	}
	return keys
}

// claimSlotLocked picks the slot a put writes into: a free one, else the
// last of the victims the put just evicted (takeover; it is invalidated,
// like every victim, before the payload lands on it). ok is false when
// every slot is being written or read. Called with t.mu held.
func (t *Tier) claimSlotLocked(victims []int32) (s int32, takeover, ok bool) {
	switch {
	case len(t.free) > 0:
		s = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
		return s, false, true
	case len(victims) > 0:
		return victims[len(victims)-1], true, true
	}
	return 0, false, false
}

// writeClaimed invalidates the victims a put evicted, so they stay gone
// (and the one it takes over holds no block while its payload is
// rewritten), then writes the block into slot s and syncs the files it
// touched per the sync mode. If the write or the sync fails, slot s is
// invalidated again. It returns the number of I/O errors to count and the
// write's error. Called without t.mu: slot s is slotWriting, so no one else
// touches it.
func (t *Tier) writeClaimed(s int32, victims []int32, h header, payload []byte) (ioErrs uint64, werr error) {
	touched := make([]*slotFile, 0, 1+len(victims))
	for _, v := range victims {
		if err := t.invalidate(v); err != nil {
			ioErrs++ // a stale header fails its payload checksum once the slot is rewritten
		}
		sf, _ := t.locate(v)
		touched = append(touched, sf)
	}

	sf, off := t.locate(s)
	touched = append(touched, sf)
	werr = t.writeSlot(sf, off, s, h, payload)
	if werr == nil {
		if err := t.syncFor(touched...); err != nil {
			werr = fmt.Errorf("sync: %w", err)
		}
	}
	if werr != nil {
		ioErrs++
		if err := t.invalidate(s); err != nil {
			ioErrs++
		}
	}
	return ioErrs, werr
}

// publishLocked ends a put of block h into slot s: it counts the I/O
// errors, frees the victims (the taken-over one is not among them), and,
// if the write succeeded, makes slot s the copy of h.key in the index. It
// returns the slot the caller must retire once t.mu is released (-1 for
// none): the copy slot s replaced, or slot s itself when superseded is set
// (a concurrent put of the key committed a newer copy, so ours loses). On
// a failed write it frees slot s and returns the put's error. Called with
// t.mu held.
func (t *Tier) publishLocked(s int32, h header, victims []int32, ioErrs uint64, werr error) (retire int32, superseded bool, err error) {
	k := h.key
	t.stats.IOErrors += ioErrs
	for _, v := range victims {
		t.freeLocked(v)
	}
	if werr != nil {
		t.freeLocked(s)
		if errors.Is(werr, syscall.ENOSPC) {
			return -1, false, fmt.Errorf("ssd: put %s into slot %d: device full: %w: %w", k, s, kvpool.ErrFull, werr)
		}
		return -1, false, fmt.Errorf("ssd: put %s into slot %d: %w", k, s, werr)
	}
	retire = -1
	if old, ok := t.index[k]; ok {
		if t.slots[old].gen > h.gen {
			// A concurrent put of k committed a newer copy: ours loses.
			t.slots[s].state = slotDropping
			t.stats.BytesIn += uint64(h.n)
			return s, true, nil
		}
		if t.dropLocked(old) {
			retire = old
		}
	}
	t.slots[s].state = slotLive
	t.index[k] = s
	t.insertLocked(s)
	t.stats.Blocks++
	t.stats.Bytes += int64(h.n)
	t.stats.BytesIn += uint64(h.n)
	return retire, false, nil
}

func (t *Tier) countIOError() {
	t.mu.Lock()
	t.stats.IOErrors++
	t.mu.Unlock()
}

// writeSlot writes payload then header into the slot at off of sf.
func (t *Tier) writeSlot(sf *slotFile, off int64, s int32, h header, payload []byte) error {
	bp := t.getBuf()
	defer t.putBuf(bp)
	buf := *bp
	if t.opts.DirectIO {
		n := int(roundUp(int64(len(payload)), vfs.DirectIOAlign))
		p := buf[headerSize : headerSize+n]
		copy(p, payload)
		clear(p[len(payload):])
		if n > 0 {
			if _, err := sf.f.WriteAt(p, off+headerSize); err != nil {
				return fmt.Errorf("write payload: %w", err)
			}
		}
	} else if len(payload) > 0 {
		if _, err := sf.f.WriteAt(payload, off+headerSize); err != nil {
			return fmt.Errorf("write payload: %w", err)
		}
	}
	hb := buf[:t.ioHeader]
	clear(hb)
	h.encode(hb)
	if _, err := sf.f.WriteAt(hb, off); err != nil {
		sf.dirty.Store(true)
		return fmt.Errorf("write header: %w", err)
	}
	sf.dirty.Store(true)
	return nil
}

// makeRoomLocked evicts per the watermarks when one more slot would take
// the used slots past highSlots. It returns the evicted slots, which the
// caller invalidates and frees (or takes over); pinned victims are skipped
// and made most recently used, as they are being read.
func (t *Tier) makeRoomLocked() []int32 {
	used := t.nSlots - len(t.free)
	if used+1 <= t.highSlots {
		return nil
	}
	need := used - t.lowSlots
	var victims, pinned []int32
	for tries := t.pol.Len(); len(victims) < need && tries > 0; tries-- {
		k, ok := t.pol.Victim()
		if !ok {
			break
		}
		v := int32(k)
		t.stats.EvictAttempts++
		t.pol.Remove(k)
		if t.slots[v].pins > 0 {
			pinned = append(pinned, v)
			continue
		}
		m := &t.slots[v]
		delete(t.index, m.key)
		t.stats.Blocks--
		t.stats.Bytes -= int64(m.n)
		t.stats.Evicted++
		m.state = slotDropping
		victims = append(victims, v)
	}
	for _, v := range pinned {
		t.insertLocked(v)
	}
	return victims
}

// dropLocked takes live slot s out of the index and the policy. It reports
// whether the caller must retire it now (it is not pinned); otherwise the
// last unpin retires it.
func (t *Tier) dropLocked(s int32) bool {
	m := &t.slots[s]
	delete(t.index, m.key)
	t.pol.Remove(policy.Key(s))
	t.stats.Blocks--
	t.stats.Bytes -= int64(m.n)
	m.state = slotDropping
	return m.pins == 0
}

// freeLocked returns slot s to the free list.
func (t *Tier) freeLocked(s int32) {
	t.slots[s] = slotMeta{}
	t.free = append(t.free, s)
}

// retire invalidates a dropped, unpinned slot and frees it.
func (t *Tier) retire(s int32) {
	err := t.invalidate(s)
	t.mu.Lock()
	if err != nil {
		t.stats.IOErrors++
	}
	t.freeLocked(s)
	t.mu.Unlock()
}

// unpin releases a pin on slot s and retires it if it was the last pin on
// a dropped slot.
func (t *Tier) unpin(s int32) {
	t.mu.Lock()
	m := &t.slots[s]
	m.pins--
	last := m.pins == 0 && m.state == slotDropping
	t.mu.Unlock()
	if last {
		t.retire(s)
	}
}

// Get returns the payload of k appended to dst[:0] (see tier.Tier).
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
	s, ok := t.index[k]
	if !ok {
		t.stats.Misses++
		t.mu.Unlock()
		return dst[:0], 0, fmt.Errorf("ssd: get %s: %w", k, kvpool.ErrNotFound)
	}
	m := t.slots[s]
	t.slots[s].pins++
	t.clock++
	t.pol.Hit(policy.Access{Key: policy.Key(s), Time: t.clock})
	t.mu.Unlock()

	out, ioErr, checkErr := t.readSlot(s, m, dst)

	t.mu.Lock()
	if ioErr == nil && checkErr == nil {
		t.stats.Hits++
		t.stats.BytesOut += uint64(m.n)
		t.mu.Unlock()
		t.unpin(s)
		return out, m.sum, nil
	}
	t.stats.Misses++
	if ioErr != nil {
		t.stats.IOErrors++
	} else {
		t.stats.Corruptions++
	}
	dropped := false
	if cur := t.slots[s]; cur.state == slotLive && cur.gen == m.gen {
		t.dropLocked(s)
		dropped = true
	}
	t.mu.Unlock()
	t.unpin(s)
	if dropped && t.opts.OnRemove != nil {
		t.notifyRemoved([]block.Key{k}, RemovedCorrupt)
	}
	reason := ioErr
	if reason == nil {
		reason = checkErr
	}
	return dst[:0], 0, fmt.Errorf("ssd: get %s from slot %d: %w: %w", k, s, kvpool.ErrCorrupt, reason)
}

// readSlot reads and verifies pinned slot s, expected to hold m.
func (t *Tier) readSlot(s int32, m slotMeta, dst []byte) (out []byte, ioErr, checkErr error) {
	sf, off := t.locate(s)
	n := int(m.n)
	bp := t.getBuf()
	defer t.putBuf(bp)
	buf := *bp
	var hb, payload []byte
	out = slices.Grow(dst[:0], n)[:n]
	if t.opts.DirectIO {
		// One read for header and payload, into an aligned buffer.
		rn := headerSize + int(roundUp(int64(n), vfs.DirectIOAlign))
		if _, err := sf.f.ReadAt(buf[:rn], off); err != nil {
			return dst[:0], fmt.Errorf("read: %w", err), nil
		}
		hb, payload = buf[:headerSize], buf[headerSize:headerSize+n]
		copy(out, payload)
	} else {
		// Two reads, the payload straight into dst: cheaper than one read
		// into a bounce buffer and a copy of the whole payload.
		hb = buf[:headerLen]
		if _, err := sf.f.ReadAt(hb, off); err != nil {
			return dst[:0], fmt.Errorf("read header: %w", err), nil
		}
		if n > 0 {
			if _, err := sf.f.ReadAt(out, off+headerSize); err != nil {
				return dst[:0], fmt.Errorf("read payload: %w", err), nil
			}
		}
	}
	h, err := decodeHeader(hb, uint32(s), t.opts.BlockSize)
	switch {
	case err != nil:
		return dst[:0], nil, err
	case h.key != m.key || h.n != m.n || h.sum != m.sum || h.gen != m.gen:
		return dst[:0], nil, fmt.Errorf("header holds %s (%d bytes, sum %08x, gen %d), index expects %s (%d bytes, sum %08x, gen %d)",
			h.key, h.n, h.sum, h.gen, m.key, m.n, m.sum, m.gen)
	case !block.Verify(m.key, out, m.sum):
		return dst[:0], nil, fmt.Errorf("payload checksum %08x, header says %08x", block.Checksum(m.key, out), m.sum)
	}
	return out, nil, nil
}

// notifyRemoved calls Options.OnRemove for each key. t.mu is not held.
func (t *Tier) notifyRemoved(keys []block.Key, why RemoveReason) {
	for _, k := range keys {
		t.opts.OnRemove(Removed{Key: k, Reason: why})
	}
}

// Item describes one block the tier holds.
type Item struct {
	Key  block.Key
	Size int    // payload bytes
	Sum  uint32 // block.Checksum(Key, payload)
}

// Items returns every block in the index, in no particular order: a
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
	for k, s := range t.index {
		m := &t.slots[s]
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
	s, ok := t.index[k]
	if !ok {
		return Item{}, false
	}
	return Item{Key: k, Size: int(t.slots[s].n), Sum: t.slots[s].sum}, true
}

// Section pins k's slot and returns where its payload lies, for a
// zero-copy send (sendfile): the payload is the n bytes at off in f, with
// checksum sum. The slot cannot be reused until release is called (once;
// later calls do nothing). Section does not read or verify the payload:
// the receiver verifies it against sum. It counts as a hit.
func (t *Tier) Section(k block.Key) (f vfs.File, off int64, n int, sum uint32, release func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, 0, 0, 0, nil, fmt.Errorf("ssd: section %s: %w", k, kvpool.ErrClosed)
	}
	s, ok := t.index[k]
	if !ok {
		t.stats.Misses++
		return nil, 0, 0, 0, nil, fmt.Errorf("ssd: section %s: %w", k, kvpool.ErrNotFound)
	}
	m := &t.slots[s]
	m.pins++
	t.clock++
	t.pol.Hit(policy.Access{Key: policy.Key(s), Time: t.clock})
	t.stats.Hits++
	t.stats.BytesOut += uint64(m.n)
	sf, soff := t.locate(s)
	var once sync.Once
	return sf.f, soff + headerSize, int(m.n), m.sum, func() { once.Do(func() { t.unpin(s) }) }, nil
}

// Delete removes k (see tier.Tier). The block leaves the index even when
// invalidating its header fails; the error then says so.
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
	s, ok := t.index[k]
	if !ok {
		t.mu.Unlock()
		return fmt.Errorf("ssd: delete %s: %w", k, kvpool.ErrNotFound)
	}
	now := t.dropLocked(s)
	t.mu.Unlock()
	if !now {
		return nil // the last reader retires the slot
	}
	sf, _ := t.locate(s)
	err := t.invalidate(s)
	if err == nil {
		err = t.syncFor(sf)
	}
	t.mu.Lock()
	if err != nil {
		t.stats.IOErrors++
	}
	t.freeLocked(s)
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("ssd: delete %s from slot %d: %w", k, s, err)
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
	return t.stats
}

// OpenStats returns what Open found.
func (t *Tier) OpenStats() OpenStats { return t.openStats }

// BlockSize returns the largest payload a slot holds.
func (t *Tier) BlockSize() int { return t.opts.BlockSize }

// Slots returns the number of slots.
func (t *Tier) Slots() int { return t.nSlots }

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

// Check verifies the tier's invariants: index, slot table, free list and
// policy agree, every counter matches, and every indexed slot's header on
// disk names its block. Call it only while no operation is in flight and
// no Section is held (tests call it in t.Cleanup).
func (t *Tier) Check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	freeSet := make(map[int32]bool, len(t.free))
	for _, s := range t.free {
		if freeSet[s] {
			bad("slot %d twice on the free list", s)
		}
		freeSet[s] = true
		if t.slots[s].state != slotFree {
			bad("slot %d on the free list in state %d", s, t.slots[s].state)
		}
	}
	var bytes int64
	live := 0
	for s := range t.slots {
		m := t.slots[s]
		if m.pins != 0 {
			bad("slot %d has %d pins at rest", s, m.pins)
		}
		switch m.state {
		case slotFree:
			if !freeSet[int32(s)] {
				bad("free slot %d not on the free list", s)
			}
		case slotLive:
			live++
			bytes += int64(m.n)
			if i, ok := t.index[m.key]; !ok || i != int32(s) {
				bad("live slot %d (%s) not indexed", s, m.key)
			}
			if !t.pol.Contains(policy.Key(s)) {
				bad("live slot %d not in the policy", s)
			}
		default:
			bad("slot %d in transient state %d at rest", s, m.state)
		}
	}
	if live != len(t.index) || live != t.pol.Len() || live != t.stats.Blocks {
		bad("live slots %d, index %d, policy %d, Stats.Blocks %d", live, len(t.index), t.pol.Len(), t.stats.Blocks)
	}
	if bytes != t.stats.Bytes {
		bad("live bytes %d, Stats.Bytes %d", bytes, t.stats.Bytes)
	}
	if t.stats.Evicted > t.stats.EvictAttempts {
		bad("Evicted %d > EvictAttempts %d", t.stats.Evicted, t.stats.EvictAttempts)
	}
	if c, ok := t.pol.(interface{ CheckInvariants() error }); ok {
		if err := c.CheckInvariants(); err != nil {
			bad("policy: %w", err)
		}
	}
	hb := alignedBuf(headerSize)
	for k, s := range t.index {
		sf, off := t.locate(s)
		if _, err := sf.f.ReadAt(hb[:t.ioHeader], off); err != nil {
			bad("read header of slot %d: %w", s, err)
			continue
		}
		h, err := decodeHeader(hb[:t.ioHeader], uint32(s), t.opts.BlockSize)
		m := t.slots[s]
		if err != nil || h.key != k || h.gen != m.gen || h.n != m.n || h.sum != m.sum {
			bad("slot %d on disk: %+v, %v; index: %s gen %d", s, h, err, k, m.gen)
		}
	}
	return errors.Join(errs...)
}
