package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
	"github.com/kvpool/kvpool/internal/vfs/errorfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

func key(id uint64) block.Key { return block.Key{Tenant: "ten", ID: id} }

// ssdOpts is an SSD tier with room for n objects of up to bs bytes on fs
// (and at most n objects) that evicts only when full, one block at a time.
func ssdOpts(fs vfs.FS, bs, n int) *ssd.Options {
	return &ssd.Options{
		Dir:           "/ssd",
		FS:            fs,
		BlockSize:     bs,
		CapacityBytes: int64(n) * ssd.SlotSize(bs),
		MaxObjects:    n,
		PagesPerFile:  16,
		Sync:          ssd.SyncNone,
		HighWatermark: 1,
		LowWatermark:  1,
	}
}

// testOpts is a store with ramSlots slots of bs bytes and, when fs is not
// nil, an SSD tier of ssdSlots slots on fs.
func testOpts(bs, ramSlots int, fs vfs.FS, ssdSlots int) Options {
	o := Options{RAM: ram.Options{BlockSize: bs, CapacityBytes: int64(bs * ramSlots)}}
	if fs != nil {
		o.SSD = ssdOpts(fs, bs, ssdSlots)
	}
	return o
}

func mustOpen(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { closeChecked(t, s) })
	return s
}

// closeChecked waits for promotions, checks the invariants and closes s
// (a store already closed is left alone).
func closeChecked(t testing.TB, s *Store) {
	t.Helper()
	s.life.Lock()
	closed := s.closed
	s.life.Unlock()
	if closed {
		return
	}
	if err := s.WaitIdle(ctx); err != nil {
		t.Errorf("WaitIdle: %v", err)
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func put(t testing.TB, s *Store, k block.Key, p []byte) Location {
	t.Helper()
	loc, err := s.Put(ctx, k, p, block.Checksum(k, p))
	if err != nil {
		t.Fatalf("Put %s: %v", k, err)
	}
	return loc
}

func mustGet(t testing.TB, s *Store, k block.Key, want []byte) Location {
	t.Helper()
	got, sum, from, err := s.Get(ctx, k, nil)
	if err != nil {
		t.Fatalf("Get %s: %v", k, err)
	}
	if !bytes.Equal(got, want) || sum != block.Checksum(k, want) {
		t.Fatalf("Get %s from %v: wrong bytes or sum", k, from)
	}
	return from
}

func mustMiss(t testing.TB, s *Store, k block.Key) {
	t.Helper()
	got, _, _, err := s.Get(ctx, k, nil)
	if !errors.Is(err, kvpool.ErrNotFound) || len(got) != 0 {
		t.Fatalf("Get %s = %d bytes, %v; want a miss", k, len(got), err)
	}
}

// asTier adapts a store without SSD to tier.Tier for the conformance
// suite (with SSD, eviction demotes, which the suite's LRU cases forbid).
type asTier struct{ *Store }

func (a asTier) Put(ctx context.Context, k block.Key, p []byte, sum uint32) error {
	_, err := a.Store.Put(ctx, k, p, sum)
	return err
}

func (a asTier) Get(ctx context.Context, k block.Key, dst []byte) ([]byte, uint32, error) {
	p, sum, _, err := a.Store.Get(ctx, k, dst)
	return p, sum, err
}

func (a asTier) Stats() tier.Stats { return a.Store.Stats().RAM }

func TestConformance(t *testing.T) {
	tiertest.Run(t, func(t *testing.T, cfg tiertest.Config) tier.Tier {
		s, err := Open(ctx, Options{RAM: ram.ForObjects(cfg.BlockSize, cfg.Blocks, cfg.MaxObjectSize)})
		if err != nil {
			t.Fatal(err)
		}
		return asTier{s}
	})
}

func TestOptionsValidate(t *testing.T) {
	mem := vfs.NewMem()
	tests := []struct {
		name  string
		opts  Options
		field string // "" = valid
	}{
		{"zero", Options{}, ""},
		{"bad RAM", Options{RAM: ram.Options{BlockSize: -1}}, "Options.RAM"},
		{"RAM hook", Options{RAM: ram.Options{OnEvict: func(ram.Evicted) {}}}, "Options.RAM.OnEvict"},
		{"bad SSD", Options{SSD: &ssd.Options{}}, "Options.SSD"},
		// Block sizes are typical object sizes, not slots: they need not agree.
		{"SSD typical size under RAM's", Options{RAM: ram.Options{BlockSize: 8192}, SSD: &ssd.Options{Dir: "/x", FS: mem, BlockSize: 4096}}, ""},
		{"SSD default typical size under RAM's", Options{RAM: ram.Options{BlockSize: 1 << 20}, SSD: &ssd.Options{Dir: "/x", FS: mem}}, ""},
		{"threshold", Options{Promotion: PromotionOptions{Threshold: 300}}, "Options.Promotion.Threshold"},
		{"watermark", Options{Promotion: PromotionOptions{Watermark: 1.5}}, "Options.Promotion.Watermark"},
		{"queue cap", Options{Promotion: PromotionOptions{QueueCap: -1}}, "Options.Promotion.QueueCap"},
		{"rate", Options{Promotion: PromotionOptions{MaxPerHeartbeat: -1}}, "Options.Promotion.MaxPerHeartbeat"},
		{"heartbeat", Options{Promotion: PromotionOptions{Heartbeat: -time.Second}}, "Options.Promotion.Heartbeat"},
		{"ttl", Options{Promotion: PromotionOptions{TaskTTL: -time.Second}}, "Options.Promotion.TaskTTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.field)
			}
			if s, err := Open(ctx, tt.opts); err == nil {
				s.Close()
				t.Fatal("Open accepted what Validate refused")
			}
		})
	}
}

// TestDemotionTypicalSizes: an SSD tier sized for objects smaller than
// the RAM tier's typical size (block sizes are policy sizing, not slots)
// takes the larger objects RAM evicts, byte for byte.
func TestDemotionTypicalSizes(t *testing.T) {
	o := Options{
		RAM: ram.Options{BlockSize: 8192, CapacityBytes: 4 * 8192},
		SSD: ssdOpts(vfs.NewMem(), 4096, 64),
	}
	o.SSD.CapacityBytes = 64 * ssd.SlotSize(8192)
	o.Promotion.Off = true
	s := mustOpen(t, o)
	const n = 12
	for i := range uint64(n) {
		put(t, s, key(i), tiertest.Payload(i, 1, 8000))
	}
	if st := s.Stats(); st.SSD.Blocks == 0 {
		t.Fatalf("nothing demoted: %+v", st)
	}
	for i := range uint64(n) {
		want := tiertest.Payload(i, 1, 8000)
		got, _, _, err := s.Get(ctx, key(i), nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %d: %d bytes, %v; want the 8000 bytes put", i, len(got), err)
		}
	}
}

// TestDemotion: filling RAM past its capacity demotes the evicted blocks
// to SSD, where they are readable byte for byte; without SSD they are
// dropped.
func TestDemotion(t *testing.T) {
	const ramSlots, n, bs = 4, 20, 512
	for _, ssdOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("ssd=%v", ssdOn), func(t *testing.T) {
			var fs vfs.FS
			if ssdOn {
				fs = vfs.NewMem()
			}
			o := testOpts(bs, ramSlots, fs, 64)
			o.Promotion.Off = true
			s := mustOpen(t, o)
			for i := range uint64(n) {
				if loc := put(t, s, key(i), tiertest.Payload(i, 1, 100+int(i))); loc != InRAM {
					t.Fatalf("Put %d stored in %v, want ram", i, loc)
				}
			}
			keys := make([]block.Key, n)
			for i := range keys {
				keys[i] = key(uint64(i))
			}
			locs := s.Locate(keys)
			exists := s.Exists(keys)
			for i := range uint64(n) {
				wantLoc := InRAM
				if i < n-ramSlots {
					wantLoc = 0
					if ssdOn {
						wantLoc = InSSD
					}
				}
				if locs[i] != wantLoc || exists[i] != (wantLoc != 0) {
					t.Fatalf("block %d: Locate %v, Exists %v; want %v", i, locs[i], exists[i], wantLoc)
				}
				if wantLoc == 0 {
					mustMiss(t, s, key(i))
					continue
				}
				if from := mustGet(t, s, key(i), tiertest.Payload(i, 1, 100+int(i))); from != wantLoc {
					t.Fatalf("block %d served from %v, want %v", i, from, wantLoc)
				}
			}
			st := s.Stats()
			evicted := uint64(n - ramSlots)
			if st.RAM.Evicted != evicted {
				t.Errorf("RAM evicted %d, want %d", st.RAM.Evicted, evicted)
			}
			if ssdOn && (st.Demotions != evicted || st.Dropped != 0 || st.SSD.Blocks != int(evicted)) {
				t.Errorf("Stats %+v: want %d demotions", st, evicted)
			}
			if !ssdOn && (st.Demotions != 0 || st.Dropped != evicted) {
				t.Errorf("Stats %+v: want %d dropped", st, evicted)
			}
			var bytesDemoted uint64
			for i := range evicted {
				bytesDemoted += 100 + i
			}
			if ssdOn && st.DemotedBytes != bytesDemoted {
				t.Errorf("DemotedBytes %d, want %d", st.DemotedBytes, bytesDemoted)
			}
			if st.Reads != n || st.HitsRAM != ramSlots || st.HitsSSD+st.Misses != evicted {
				t.Errorf("reads %d = %d RAM + %d SSD + %d misses; want %d, %d RAM", st.Reads, st.HitsRAM, st.HitsSSD, st.Misses, n, ramSlots)
			}
		})
	}
}

// TestExistsKeepsOrder: Exists and Locate do not make a block recent, so
// the block they asked about is still the one RAM evicts next.
func TestExistsKeepsOrder(t *testing.T) {
	s := mustOpen(t, testOpts(64, 2, vfs.NewMem(), 8))
	put(t, s, key(1), []byte("a"))
	put(t, s, key(2), []byte("b"))
	before := s.Stats()
	for range 3 {
		s.Exists([]block.Key{key(1)})
		s.Locate([]block.Key{key(1)})
		s.Contains(key(1))
	}
	if after := s.Stats(); after.RAM != before.RAM || after.Reads != before.Reads {
		t.Fatalf("existence checks changed Stats: %+v → %+v", before.RAM, after.RAM)
	}
	put(t, s, key(3), []byte("c"))
	if got := s.Locate([]block.Key{key(1), key(2), key(3)}); fmt.Sprint(got) != "[ssd ram ram]" {
		t.Fatalf("Locate = %v, want [ssd ram ram]: block 1 was least recently used", got)
	}
}

// TestPutAndDeleteAcrossTiers: a new Put of a demoted key replaces the SSD
// copy (no older copy survives, even a restart); Delete removes both.
func TestPutAndDeleteAcrossTiers(t *testing.T) {
	mem := vfs.NewMem()
	o := testOpts(64, 2, mem, 8)
	o.Promotion.Off = true
	s := mustOpen(t, o)
	put(t, s, key(1), []byte("old"))
	put(t, s, key(2), []byte("b"))
	put(t, s, key(3), []byte("c")) // demotes 1
	if got := s.Locate([]block.Key{key(1)})[0]; got != InSSD {
		t.Fatalf("block 1 in %v, want ssd", got)
	}
	put(t, s, key(1), []byte("new")) // demotes 2; the SSD copy of 1 is stale
	if got := s.Locate([]block.Key{key(1), key(2)}); fmt.Sprint(got) != "[ram ssd]" {
		t.Fatalf("Locate = %v, want [ram ssd]", got)
	}
	mustGet(t, s, key(1), []byte("new"))
	if err := s.Delete(ctx, key(2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, key(2)); !errors.Is(err, kvpool.ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
	mustMiss(t, s, key(2))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, o)
	// RAM is volatile: 1 ("new") and 3 were only in RAM; 2 was deleted.
	for _, id := range []uint64{1, 2, 3} {
		mustMiss(t, s2, key(id))
	}
	if st, ok := s2.SSDOpenStats(); !ok || st.Recovered != 0 {
		t.Fatalf("SSDOpenStats = %+v, %v; want nothing recovered", st, ok)
	}
}

// TestRestart: closing and reopening with the same SSD directory finds
// every demoted block byte for byte, and nothing that was only in RAM.
func TestRestart(t *testing.T) {
	mem := vfs.NewMem()
	const ramSlots, n = 8, 40
	o := testOpts(1024, ramSlots, mem, 64)
	s := mustOpen(t, o)
	for i := range uint64(n) {
		put(t, s, key(i), tiertest.Payload(i, 7, 16+int(i)*20))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := s.Put(ctx, key(1), nil, block.Checksum(key(1), nil)); !errors.Is(err, kvpool.ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}
	s2 := mustOpen(t, o)
	if st, _ := s2.SSDOpenStats(); st.Recovered != n-ramSlots || st.Corrupt+st.Torn+st.IOErrors != 0 {
		t.Fatalf("SSDOpenStats %+v, want %d recovered and nothing dropped", st, n-ramSlots)
	}
	for i := range uint64(n) {
		if i >= n-ramSlots {
			mustMiss(t, s2, key(i))
			continue
		}
		if from := mustGet(t, s2, key(i), tiertest.Payload(i, 7, 16+int(i)*20)); from != InSSD {
			t.Fatalf("block %d served from %v after restart", i, from)
		}
	}
}

// TestWriteAround: a block the RAM tier's admission refuses goes to SSD
// when there is one, and is refused when there is not.
func TestWriteAround(t *testing.T) {
	for _, ssdOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("ssd=%v", ssdOn), func(t *testing.T) {
			var fs vfs.FS
			if ssdOn {
				fs = vfs.NewMem()
			}
			o := testOpts(64, 4, fs, 8)
			o.RAM.Admission = "second-hit"
			o.Promotion.Off = true
			s := mustOpen(t, o)
			p := []byte("refused by RAM once")
			loc, err := s.Put(ctx, key(1), p, block.Checksum(key(1), p))
			if !ssdOn {
				if !errors.Is(err, ram.ErrNotAdmitted) || s.Contains(key(1)) {
					t.Fatalf("Put without SSD = %v, %v; want ErrNotAdmitted and nothing stored", loc, err)
				}
				return
			}
			if err != nil || loc != InSSD {
				t.Fatalf("Put = %v, %v; want stored on ssd", loc, err)
			}
			if from := mustGet(t, s, key(1), p); from != InSSD {
				t.Fatalf("served from %v", from)
			}
			if loc := put(t, s, key(1), p); loc != InRAM { // second miss: admitted
				t.Fatalf("second Put stored in %v, want ram", loc)
			}
			if got := s.Locate([]block.Key{key(1)})[0]; got != InRAM {
				t.Fatalf("after the RAM put: %v, want ram only (the SSD copy was replaced)", got)
			}
			if st := s.Stats(); st.WriteArounds != 1 || st.RAMCounters.Rejected != 1 {
				t.Fatalf("Stats: %d write-arounds, %d rejected; want 1, 1", st.WriteArounds, st.RAMCounters.Rejected)
			}
		})
	}
}

// TestViewAndAcquire: zero-copy reads from each tier.
func TestViewAndAcquire(t *testing.T) {
	o := testOpts(4096, 2, vfs.NewMem(), 8)
	o.Promotion.Off = true
	s := mustOpen(t, o)
	for i := range uint64(3) {
		put(t, s, key(i), tiertest.Payload(i, 1, 3000))
	}
	for i, want := range []Location{InSSD, InRAM, InRAM} {
		k, p := key(uint64(i)), tiertest.Payload(uint64(i), 1, 3000)
		err := s.View(ctx, k, func(seg tier.Segments, sum uint32, from Location) error {
			got := seg.AppendTo(nil)
			if from != want || !bytes.Equal(got, p) || sum != block.Checksum(k, p) {
				return fmt.Errorf("from %v, %d bytes", from, len(got))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("View %d: %v", i, err)
		}
		ref, err := s.Acquire(ctx, k)
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		got := ref.Payload.AppendTo(nil)
		if ref.File != nil {
			got = make([]byte, ref.Len)
			if _, err := ref.File.ReadAt(got, ref.Off); err != nil {
				t.Fatal(err)
			}
		}
		if ref.From != want || !bytes.Equal(got, p) || ref.Sum != block.Checksum(k, p) {
			t.Fatalf("Acquire %d: from %v, %d bytes; want %v", i, ref.From, len(got), want)
		}
		ref.Release()
		ref.Release()
	}
	boom := errors.New("peer went away")
	for _, id := range []uint64{0, 2} {
		if err := s.View(ctx, key(id), func(tier.Segments, uint32, Location) error { return boom }); !errors.Is(err, boom) {
			t.Errorf("View %d with a failing callback = %v", id, err)
		}
	}
	for _, read := range []func(block.Key) error{
		func(k block.Key) error {
			return s.View(ctx, k, func(tier.Segments, uint32, Location) error { return nil })
		},
		func(k block.Key) error { _, err := s.Acquire(ctx, k); return err },
	} {
		if err := read(key(99)); !errors.Is(err, kvpool.ErrNotFound) {
			t.Errorf("read of an absent key = %v, want ErrNotFound", err)
		}
	}
}

// TestViewAllocs: a View served from RAM allocates nothing.
func TestViewAllocs(t *testing.T) {
	s := mustOpen(t, testOpts(4096, 4, vfs.NewMem(), 8))
	put(t, s, key(1), tiertest.Payload(1, 1, 4096))
	n := 0
	fn := func(p tier.Segments, _ uint32, _ Location) error { n += p.Len(); return nil }
	if a := testing.AllocsPerRun(100, func() {
		if err := s.View(ctx, key(1), fn); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("View from RAM: %v allocs/op, want 0", a)
	}
}

// TestBitFlip: a bit flipped in an SSD read is a miss with the corruption
// counted, never wrong bytes; the corrupt copy is dropped.
func TestBitFlip(t *testing.T) {
	efs := errorfs.Wrap(vfs.NewMem(), nil)
	const n, ramSlots, bs = 60, 4, 4096
	o := testOpts(bs, ramSlots, efs, 128)
	o.Promotion.Off = true // only the test reads the SSD
	s := mustOpen(t, o)
	for i := range uint64(n) {
		put(t, s, key(i), tiertest.Payload(i, 1, bs))
	}
	sw := errorfs.NewSwitch(errorfs.OnPath("pages-*", errorfs.OnOps(errorfs.OpRead, errorfs.Probability(0.3, 5, errorfs.BitFlip(3)))))
	efs.SetInjector(sw)
	sw.Set(true)
	corrupt := 0
	for i := range uint64(n - ramSlots) {
		before := efs.Counts().BitFlips
		got, _, from, err := s.Get(ctx, key(i), nil)
		flipped := efs.Counts().BitFlips > before
		switch {
		case flipped && (!errors.Is(err, kvpool.ErrNotFound) || !errors.Is(err, kvpool.ErrCorrupt) || len(got) != 0):
			t.Fatalf("Get %d with a flipped bit: %d bytes, %v; want a miss marked corrupt", i, len(got), err)
		case !flipped && (err != nil || from != InSSD || !bytes.Equal(got, tiertest.Payload(i, 1, bs))):
			t.Fatalf("Get %d without a flip: from %v, %v", i, from, err)
		}
		if flipped {
			corrupt++
			if s.Contains(key(i)) {
				t.Fatalf("corrupt block %d still present", i)
			}
		}
	}
	sw.Set(false)
	st := s.Stats()
	if corrupt == 0 || st.SSDCorruptions != uint64(corrupt) || st.SSD.Corruptions != uint64(corrupt) || st.Misses != uint64(corrupt) {
		t.Errorf("%d corrupt reads; Stats: store %d, SSD %d corruptions, %d misses", corrupt, st.SSDCorruptions, st.SSD.Corruptions, st.Misses)
	}
}

// TestDiskFull: when the SSD fills up, demotions and write-arounds fail
// cleanly and are counted, and RAM keeps serving.
func TestDiskFull(t *testing.T) {
	efs := errorfs.Wrap(vfs.NewMem(), nil)
	const ramSlots, bs = 4, 4096
	o := testOpts(bs, ramSlots, efs, 64)
	o.Promotion.Off = true
	s := mustOpen(t, o)
	for i := range uint64(8) { // 0..3 demoted
		put(t, s, key(i), tiertest.Payload(i, 1, bs))
	}
	full := errorfs.NewSwitch(errorfs.OnOps(errorfs.OpWrite, errorfs.NoSpace(0)))
	efs.SetInjector(full)
	full.Set(true)
	for i := uint64(8); i < 16; i++ { // each evicts one of 4..11: all demotions fail
		if loc := put(t, s, key(i), tiertest.Payload(i, 1, bs)); loc != InRAM {
			t.Fatalf("Put %d on a full disk stored in %v", i, loc)
		}
	}
	st := s.Stats()
	if st.DemotionFailures != 8 || st.DemotionsFull != 8 || st.Demotions != 4 {
		t.Fatalf("Stats: %d demotions, %d failed (%d full); want 4, 8, 8", st.Demotions, st.DemotionFailures, st.DemotionsFull)
	}
	for i := range uint64(16) {
		switch {
		case i < 4: // demoted before the disk filled
			if from := mustGet(t, s, key(i), tiertest.Payload(i, 1, bs)); from != InSSD {
				t.Fatalf("block %d from %v", i, from)
			}
		case i < 12: // dropped by a failed demotion
			mustMiss(t, s, key(i))
		default:
			if from := mustGet(t, s, key(i), tiertest.Payload(i, 1, bs)); from != InRAM {
				t.Fatalf("block %d from %v", i, from)
			}
		}
	}
	full.Set(false)
	put(t, s, key(100), tiertest.Payload(100, 1, bs)) // the disk has room again: demotion works
	if st := s.Stats(); st.Demotions != 5 {
		t.Fatalf("after the disk recovered: %d demotions, want 5", st.Demotions)
	}
}

// TestDiskFullWriteAround: a Put RAM refuses fails cleanly when the SSD
// is full, naming both reasons.
func TestDiskFullWriteAround(t *testing.T) {
	efs := errorfs.Wrap(vfs.NewMem(), nil)
	o := testOpts(4096, 4, efs, 64)
	o.RAM.Admission = "second-hit"
	s := mustOpen(t, o)
	efs.SetInjector(errorfs.OnOps(errorfs.OpWrite, errorfs.NoSpace(0)))
	p := []byte("x")
	loc, err := s.Put(ctx, key(1), p, block.Checksum(key(1), p))
	if !errors.Is(err, ram.ErrNotAdmitted) || !errors.Is(err, kvpool.ErrFull) || loc != 0 {
		t.Fatalf("write-around on a full disk = %v, %v; want ErrNotAdmitted and ErrFull", loc, err)
	}
	if s.Contains(key(1)) {
		t.Fatal("failed put visible")
	}
}

// TestConcurrent: puts, reads of every kind, deletes and promotions race
// on a small RAM over an SSD; every byte read is right, and the tiers'
// invariants hold afterwards.
func TestConcurrent(t *testing.T) {
	const (
		workers = 4
		ops     = 600
		keys    = 48
		bs      = 1024
	)
	o := testOpts(bs, 12, vfs.NewMem(), 40)
	o.Promotion = PromotionOptions{Threshold: 1, MaxPerHeartbeat: 1000}
	s := mustOpen(t, o)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dst []byte
			for i := range ops {
				id := uint64((w*7919 + i*31) % keys)
				k := key(id)
				check := func(p []byte, sum uint32) error {
					if _, err := tiertest.CheckPayload(id, p); err != nil {
						return err
					}
					if !block.Verify(k, p, sum) {
						return fmt.Errorf("%s: checksum does not match", k)
					}
					return nil
				}
				var err error
				switch i % 9 {
				case 0, 1, 2:
					p := tiertest.Payload(id, uint64(w<<16|i), 16+(i*37)%(bs-16))
					_, err = s.Put(ctx, k, p, block.Checksum(k, p))
				case 3, 4:
					var sum uint32
					if dst, sum, _, err = s.Get(ctx, k, dst); err == nil {
						err = check(dst, sum)
					}
				case 5, 6:
					err = s.View(ctx, k, func(p tier.Segments, sum uint32, _ Location) error { return check(p.AppendTo(nil), sum) })
				case 7:
					var ref Ref
					if ref, err = s.Acquire(ctx, k); err == nil {
						p := ref.Payload.AppendTo(nil)
						if ref.File != nil {
							p = make([]byte, ref.Len)
							_, err = ref.File.ReadAt(p, ref.Off)
						}
						if err == nil {
							err = check(p, ref.Sum)
						}
						ref.Release()
					}
				default:
					err = s.Delete(ctx, k)
				}
				if err != nil && !errors.Is(err, kvpool.ErrNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := s.Stats()
	if st.Demotions == 0 || st.SSDCorruptions+st.RAMCorruptions != 0 || st.DemotionFailures != 0 {
		t.Errorf("Stats %+v: want demotions, no corruption, no failed demotion", st)
	}
}

// TestWriteAroundReplacesPinned: a Put that RAM refuses because every
// slot is pinned goes to SSD, and the older RAM copy of the key goes.
func TestWriteAroundReplacesPinned(t *testing.T) {
	s := mustOpen(t, testOpts(64, 2, vfs.NewMem(), 8))
	put(t, s, key(1), []byte("old"))
	put(t, s, key(2), []byte("b"))
	var refs []Ref
	for _, id := range []uint64{1, 2} {
		ref, err := s.Acquire(ctx, key(id))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	if loc := put(t, s, key(1), []byte("new")); loc != InSSD {
		t.Fatalf("Put with every RAM slot pinned stored in %v, want ssd", loc)
	}
	if string(refs[0].Payload.AppendTo(nil)) != "old" {
		t.Fatal("the pinned old copy changed under its reader")
	}
	for _, r := range refs {
		r.Release()
	}
	if loc := s.Locate([]block.Key{key(1)})[0]; loc != InSSD {
		t.Fatalf("block 1 in %v, want ssd only", loc)
	}
	mustGet(t, s, key(1), []byte("new"))
}

// TestAcquireSSDFragmented: with ZeroCopySSD, an SSD object whose pages
// are not adjacent cannot be one file section; Acquire reads it (verified)
// instead, and still hands out a section for an object in one run.
func TestAcquireSSDFragmented(t *testing.T) {
	const bs = 4096
	o := testOpts(bs, 2, vfs.NewMem(), 64)
	o.SSD.CapacityBytes = 64 * (ssd.PageSize + 64) // 64 pages
	o.SSD.MaxObjects = 0
	o.SSD.MaxObjectSize = 8 * ssd.PageSize
	o.Promotion.Off = true
	o.ZeroCopySSD = true
	s := mustOpen(t, o)
	// Fill the SSD tier with one-page objects and free every other page.
	for i := range uint64(64) {
		p := []byte{byte(i)}
		if err := s.ssd.Put(ctx, key(100+i), p, block.Checksum(key(100+i), p)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(0); i < 64; i += 2 {
		if err := s.ssd.Delete(ctx, key(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	k := block.Named("ten", "fragmented")
	p := tiertest.Payload(1, 1, 5*ssd.PageSize)
	if err := s.ssd.Put(ctx, k, p, block.Checksum(k, p)); err != nil {
		t.Fatal(err)
	}
	ref, err := s.Acquire(ctx, k)
	if err != nil || ref.From != InSSD || ref.File != nil || !bytes.Equal(ref.Payload.AppendTo(nil), p) || ref.Sum != block.Checksum(k, p) {
		t.Fatalf("Acquire of a fragmented SSD object: from %v, file %v, %d bytes, %v; want its bytes, read", ref.From, ref.File != nil, ref.Len, err)
	}
	ref.Release()
	ref, err = s.Acquire(ctx, key(101)) // one page: a section
	if err != nil || ref.File == nil || ref.Len != 1 {
		t.Fatalf("Acquire of a one-page SSD object: file %v, %d bytes, %v; want a section", ref.File != nil, ref.Len, err)
	}
	ref.Release()
}

// TestAcquireSSDVerified: by default Acquire of an SSD block reads and
// verifies it, so a flipped bit is a counted miss and the copy is dropped
// on the node; with ZeroCopySSD it hands out the file region unread.
func TestAcquireSSDVerified(t *testing.T) {
	const ramSlots, bs = 2, 4096
	for _, zeroCopy := range []bool{false, true} {
		t.Run(fmt.Sprintf("zerocopy=%v", zeroCopy), func(t *testing.T) {
			efs := errorfs.Wrap(vfs.NewMem(), nil)
			o := testOpts(bs, ramSlots, efs, 16)
			o.Promotion.Off = true
			o.ZeroCopySSD = zeroCopy
			s := mustOpen(t, o)
			for i := range uint64(4) { // 0 and 1 are demoted to SSD
				put(t, s, key(i), tiertest.Payload(i, 1, bs))
			}
			ref, err := s.Acquire(ctx, key(0))
			if err != nil || ref.From != InSSD {
				t.Fatalf("Acquire of an SSD block: from %v, %v", ref.From, err)
			}
			if zeroCopy != (ref.File != nil) || zeroCopy == (ref.Payload != nil) {
				t.Fatalf("zero copy %v: File %v, %d payload bytes", zeroCopy, ref.File != nil, len(ref.Payload))
			}
			if !zeroCopy && !bytes.Equal(ref.Payload.AppendTo(nil), tiertest.Payload(0, 1, bs)) {
				t.Fatal("verified SSD read returned other bytes")
			}
			ref.Release()

			if zeroCopy {
				// The payload is unread: a flip in it is the receiver's to
				// catch (it verifies Sum).
				efs.SetInjector(errorfs.OnPath("pages-*", errorfs.OnOps(errorfs.OpRead, errorfs.BitFlip(9))))
				ref, err = s.Acquire(ctx, key(1))
				efs.SetInjector(nil)
				if err != nil {
					t.Fatalf("zero-copy Acquire: %v", err)
				}
				ref.Release()
				// The head entry (which holds the short key of a 4 KiB
				// block) is read back and compared, so a flip there is a
				// corrupt miss.
				efs.SetInjector(errorfs.OnPath("pages.tbl", errorfs.OnOps(errorfs.OpRead, errorfs.BitFlip(9))))
				ref, err = s.Acquire(ctx, key(1))
				efs.SetInjector(nil)
				if err == nil {
					ref.Release()
				}
				if !errors.Is(err, kvpool.ErrNotFound) || !strings.Contains(err.Error(), "failed verification") || s.Contains(key(1)) {
					t.Fatalf("zero-copy Acquire with a flipped head entry: %v (present %v); want a corrupt miss", err, s.Contains(key(1)))
				}
				return
			}
			efs.SetInjector(errorfs.OnPath("pages-*", errorfs.OnOps(errorfs.OpRead, errorfs.BitFlip(9))))
			ref, err = s.Acquire(ctx, key(1))
			efs.SetInjector(nil)
			if !errors.Is(err, kvpool.ErrCorrupt) || ref.Payload != nil {
				t.Fatalf("Acquire of a flipped SSD block = %v with %d bytes; want a corrupt miss", err, len(ref.Payload))
			}
			if s.Contains(key(1)) || s.Stats().SSDCorruptions != 1 {
				t.Fatalf("corrupt copy kept (present %v, %d corruptions counted)", s.Contains(key(1)), s.Stats().SSDCorruptions)
			}
		})
	}
}

// TestLargerThanRAMKeeps: an object the RAM tier would not keep (larger
// than its low watermark) goes to SSD; without SSD it is refused, never
// acknowledged and then dropped.
func TestLargerThanRAMKeeps(t *testing.T) {
	for _, withSSD := range []bool{true, false} {
		t.Run(fmt.Sprintf("ssd=%v", withSSD), func(t *testing.T) {
			var fs vfs.FS
			if withSSD {
				fs = vfs.NewMem()
			}
			o := testOpts(4096, 10, fs, 16)
			o.RAM.HighWatermark, o.RAM.LowWatermark = 0.9, 0.5
			s := mustOpen(t, o)
			k := block.Named("t", "big")
			p := tiertest.Payload(1, 1, 7*4096)
			loc, err := s.Put(ctx, k, p, block.Checksum(k, p))
			if withSSD {
				if err != nil || loc != InSSD {
					t.Fatalf("Put of 7 chunks into a RAM tier keeping 5: %v, %v; want it on SSD", loc, err)
				}
				mustGet(t, s, k, p)
				return
			}
			if !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), "low watermark") {
				t.Fatalf("Put without SSD: %v, %v; want ErrTooLarge naming the low watermark", loc, err)
			}
			if s.Contains(k) {
				t.Fatal("a refused object is stored")
			}
		})
	}
}
