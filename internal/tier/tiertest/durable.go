package tiertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
)

// Storage is what RunDurable runs a durable tier on: Open opens a tier on
// the same storage every time (what one tier wrote and synced, the next
// finds), and Crash loses everything not yet synced, as a power cut does
// (the tier open at the time is then closed; its Close may fail).
type Storage interface {
	Open(t *testing.T) tier.Tier
	Crash()
}

// StorageOpener returns new, empty storage for cfg. The tiers it opens
// must make every Put and Delete durable before it returns (an SSD tier:
// SyncAlways), hold cfg.Blocks objects of cfg.BlockSize without evicting,
// and accept payloads up to cfg.MaxObjectSize.
type StorageOpener func(t *testing.T, cfg Config) Storage

// SegmentPutter is implemented by tiers that take a payload in pieces (a
// demotion hands over a RAM tier's chunks).
type SegmentPutter interface {
	PutSegments(ctx context.Context, k block.Key, payload tier.Segments, sum uint32) error
}

// Durable suite defaults: objects up to 1 MiB (so that a large object
// spans many pages and files, but the suite stays quick), room for 48
// objects of 64 KiB.
const (
	durableBlock = 64 << 10
	durableMax   = 1 << 20
	durableMany  = 48
)

// RunDurable runs the restart and crash cases for tiers that survive a
// restart: objects of mixed sizes and names come back byte-identical after
// a clean reopen and after a crash; deletes stay deleted; churn and
// payloads put in many pieces survive.
func RunDurable(t *testing.T, open StorageOpener) {
	tests := []struct {
		name string
		run  func(t *testing.T, open StorageOpener)
	}{
		{"ReopenMixed", testReopenMixed},
		{"CrashMixed", testCrashMixed},
		{"ReopenChurn", testReopenChurn},
		{"SegmentsReopen", testSegmentsReopen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open) })
	}
}

// durableCfg is the Config of the durable cases.
func durableCfg() Config {
	return Config{BlockSize: durableBlock, Blocks: durableMany, MaxObjectSize: durableMax}
}

// NamedKey returns the i-th of a set of test names: short and long (up to
// block.MaxNameLen), printable and binary; keys 2j and 2j+1 share an ID
// (a colliding hash), so a tier that compared IDs only would mix them up.
func NamedKey(tenant string, i int) block.Key {
	var name string
	switch i % 4 {
	case 0:
		name = fmt.Sprintf("model@%d@chunk", i)
	case 1:
		name = fmt.Sprintf("bin\x00\xff%d", i)
	case 2:
		name = strings.Repeat("n", 1+(i*37)%block.MaxNameLen)
	default:
		name = strings.Repeat(fmt.Sprintf("%c", 'a'+i%26), block.MaxNameLen-i%3)
	}
	name = fmt.Sprintf("%04d/%s", i, name)
	if len(name) > block.MaxNameLen {
		name = name[:block.MaxNameLen]
	}
	return block.Key{Tenant: tenant, ID: uint64(i / 2), Name: name}
}

// mixedSizes are the payload sizes of the mixed cases, 0 B to max.
func mixedSizes(max int) []int {
	sizes := []int{0, 1, 28, 4095, 4096, 4097, 32 << 10, 100_000, max - 1, max}
	out := sizes[:0]
	for _, n := range sizes {
		if n <= max {
			out = append(out, n)
		}
	}
	return out
}

// durable is a tier under test on its storage, and the model of what it
// must hold.
type durable struct {
	t     *testing.T
	st    Storage
	tier  tier.Tier
	model map[block.Key][]byte
}

func newDurable(t *testing.T, open StorageOpener, cfg Config) *durable {
	d := &durable{t: t, st: open(t, cfg), model: map[block.Key][]byte{}}
	d.tier = d.st.Open(t)
	t.Cleanup(func() {
		if d.tier != nil {
			d.tier.Close()
		}
	})
	return d
}

func (d *durable) put(k block.Key, p []byte) {
	d.t.Helper()
	if err := d.tier.Put(context.Background(), k, p, block.Checksum(k, p)); err != nil {
		d.t.Fatalf("Put %s (%d bytes): %v", k, len(p), err)
	}
	d.model[k] = bytes.Clone(p)
}

func (d *durable) del(k block.Key) {
	d.t.Helper()
	if err := d.tier.Delete(context.Background(), k); err != nil {
		d.t.Fatalf("Delete %s: %v", k, err)
	}
	delete(d.model, k)
}

// restart closes the tier (or crashes the storage first) and opens it
// again.
func (d *durable) restart(crash bool) {
	d.t.Helper()
	if crash {
		d.st.Crash()
		d.tier.Close()
	} else if err := d.tier.Close(); err != nil {
		d.t.Fatalf("Close: %v", err)
	}
	d.tier = nil
	d.tier = d.st.Open(d.t)
}

// verify checks that the tier holds exactly the model, byte for byte, and
// that keys in absent are absent.
func (d *durable) verify(where string, absent ...block.Key) {
	d.t.Helper()
	ctx := context.Background()
	var n int64
	for k, want := range d.model {
		got, sum, err := d.tier.Get(ctx, k, nil)
		if err != nil {
			d.t.Fatalf("%s: Get %s: %v", where, k, err)
		}
		if !equal(got, want) || sum != block.Checksum(k, want) {
			d.t.Fatalf("%s: Get %s: %d bytes (sum %08x), want the %d put", where, k, len(got), sum, len(want))
		}
		n += int64(len(want))
	}
	for _, k := range absent {
		if _, ok := d.model[k]; ok {
			continue
		}
		if _, _, err := d.tier.Get(ctx, k, nil); !errors.Is(err, kvpool.ErrNotFound) {
			d.t.Fatalf("%s: Get %s: %v, want ErrNotFound", where, k, err)
		}
	}
	if st := d.tier.Stats(); st.Blocks != len(d.model) || st.Bytes != n {
		d.t.Fatalf("%s: Stats say %d objects, %d bytes; want %d, %d", where, st.Blocks, st.Bytes, len(d.model), n)
	}
	if c, ok := d.tier.(Checker); ok {
		if err := c.Check(); err != nil {
			d.t.Fatalf("%s: Check: %v", where, err)
		}
	}
}

// putMixed puts one object of every mixed size under a named key (with
// colliding IDs) and a chain key, and deletes one of each kind.
func (d *durable) putMixed(max int) []block.Key {
	var keys []block.Key
	for i, n := range mixedSizes(max) {
		nk := NamedKey("ten", i)
		d.put(nk, Payload(keyID(nk), 1, n))
		ck := block.Key{Tenant: "ten", ID: uint64(1000 + i)}
		d.put(ck, Payload(ck.ID, 1, n))
		keys = append(keys, nk, ck)
	}
	d.del(keys[2])
	d.del(keys[5])
	return keys
}

func testReopenMixed(t *testing.T, open StorageOpener) {
	cfg := durableCfg()
	d := newDurable(t, open, cfg)
	keys := d.putMixed(cfg.MaxObjectSize)
	d.verify("before restart", keys...)
	d.restart(false)
	d.verify("after reopen", keys...)
	d.restart(false)
	d.verify("after a second reopen", keys...)
}

func testCrashMixed(t *testing.T, open StorageOpener) {
	cfg := durableCfg()
	d := newDurable(t, open, cfg)
	keys := d.putMixed(cfg.MaxObjectSize)
	// Replace a few, then crash: every acknowledged put and delete holds.
	for _, k := range keys[6:10] {
		d.put(k, Payload(keyID(k), 2, 1+len(d.model[k])/2))
	}
	d.restart(true)
	d.verify("after a crash", keys...)
}

func testReopenChurn(t *testing.T, open StorageOpener) {
	cfg := durableCfg()
	d := newDurable(t, open, cfg)
	rng := rand.New(rand.NewPCG(15, 1))
	const keys = 24 // at most 24 of up to BlockSize bytes: nothing is evicted
	var all []block.Key
	for i := range keys {
		all = append(all, NamedKey("churn", i))
	}
	for step := range 600 {
		k := all[rng.IntN(keys)]
		switch r := rng.IntN(10); {
		case r < 6:
			d.put(k, Payload(keyID(k), uint64(step), rng.IntN(cfg.BlockSize+1)))
		case r < 8:
			if _, ok := d.model[k]; ok {
				d.del(k)
			}
		case r == 8:
			d.restart(false)
			d.verify(fmt.Sprintf("step %d: after reopen", step), all...)
		default:
			d.restart(true)
			d.verify(fmt.Sprintf("step %d: after a crash", step), all...)
		}
	}
	d.restart(false)
	d.verify("at the end", all...)
}

func testSegmentsReopen(t *testing.T, open StorageOpener) {
	cfg := durableCfg()
	d := newDurable(t, open, cfg)
	if _, ok := d.tier.(SegmentPutter); !ok {
		t.Skip("the tier has no PutSegments")
	}
	rng := rand.New(rand.NewPCG(15, 2))
	var keys []block.Key
	for i, n := range mixedSizes(cfg.MaxObjectSize) {
		k := NamedKey("seg", i)
		p := Payload(keyID(k), 1, n)
		// Cut p into pieces of 0 to ~3 pages, as a RAM tier's chunks
		// (and a demotion) hand it over.
		var segs tier.Segments
		for rest := p; ; {
			c := min(len(rest), rng.IntN(3*4096+1))
			segs = append(segs, rest[:c])
			rest = rest[c:]
			if len(rest) == 0 {
				break
			}
		}
		if err := d.tier.(SegmentPutter).PutSegments(context.Background(), k, segs, segs.Checksum(k)); err != nil {
			t.Fatalf("PutSegments %s (%d bytes in %d pieces): %v", k, n, len(segs), err)
		}
		d.model[k] = p
		keys = append(keys, k)
	}
	// A checksum that does not match the pieces is refused.
	k := NamedKey("seg", 99)
	if err := d.tier.(SegmentPutter).PutSegments(context.Background(), k, tier.Segments{[]byte("a"), []byte("b")}, block.Checksum(k, []byte("ab"))^1); !errors.Is(err, kvpool.ErrCorrupt) {
		t.Errorf("PutSegments with a wrong checksum: %v, want ErrCorrupt", err)
	}
	d.verify("before restart", append(keys, k)...)
	d.restart(false)
	d.verify("after reopen", append(keys, k)...)
}

// keyID is the Payload id of a named key: its key checksum, so that
// colliding IDs still get distinct payloads.
func keyID(k block.Key) uint64 { return uint64(block.KeySum(k)) }
