package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/tier/tiertest"
	"github.com/kvpool/kvpool/internal/vfs"
)

// TestNamedCollision: two named keys that share an ID (constructed
// directly, as if their names hashed alike) and a chain key with that ID
// are three objects, through Put, Get, View, Acquire, Exists, Delete,
// demotion to SSD and promotion back: a read never returns another name's
// bytes.
func TestNamedCollision(t *testing.T) {
	const bs = 512
	a := block.Key{Tenant: "ten", ID: 7, Name: "a"}
	b := block.Key{Tenant: "ten", ID: 7, Name: "b"}
	c := block.Key{Tenant: "ten", ID: 7} // the chain key with the same ID
	pa, pb, pc := tiertest.Payload(1, 1, 100), tiertest.Payload(2, 1, 200), tiertest.Payload(3, 1, 300)
	for _, ssdOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "ram", true: "ram+ssd"}[ssdOn], func(t *testing.T) {
			var fs vfs.FS
			if ssdOn {
				fs = vfs.NewMem()
			}
			o := testOpts(bs, 8, fs, 16)
			o.Promotion.Threshold = 1
			o.Promotion.MaxPerHeartbeat = 100
			s := mustOpen(t, o)
			put(t, s, a, pa)
			put(t, s, b, pb)
			put(t, s, c, pc)
			check := func(stage string) {
				t.Helper()
				for _, kp := range []struct {
					k block.Key
					p []byte
				}{{a, pa}, {b, pb}, {c, pc}} {
					mustGet(t, s, kp.k, kp.p)
					err := s.View(ctx, kp.k, func(p tier.Segments, sum uint32, _ Location) error {
						if string(p.AppendTo(nil)) != string(kp.p) || sum != block.Checksum(kp.k, kp.p) {
							t.Errorf("%s: View %s: wrong bytes", stage, kp.k)
						}
						return nil
					})
					if err != nil {
						t.Fatalf("%s: View %s: %v", stage, kp.k, err)
					}
					ref, err := s.Acquire(ctx, kp.k)
					if err != nil {
						t.Fatalf("%s: Acquire %s: %v", stage, kp.k, err)
					}
					if ref.File == nil && string(ref.Payload.AppendTo(nil)) != string(kp.p) {
						t.Errorf("%s: Acquire %s: wrong bytes", stage, kp.k)
					}
					ref.Release()
				}
			}
			check("in RAM")
			if ssdOn {
				for _, k := range []block.Key{a, b, c} {
					if err := s.Demote(ctx, k); err != nil {
						t.Fatalf("Demote %s: %v", k, err)
					}
				}
				if locs := s.Locate([]block.Key{a, b, c}); locs[0] != InSSD || locs[1] != InSSD || locs[2] != InSSD {
					t.Fatalf("after demotion: %v, want ssd ×3", locs)
				}
				check("on SSD")
				if err := s.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Promote(ctx, []block.Key{a, b}); err != nil {
					t.Fatal(err)
				}
				if err := s.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
				check("after promotion")
			}
			if err := s.Delete(ctx, a); err != nil {
				t.Fatal(err)
			}
			if ex := s.Exists([]block.Key{a, b, c}); ex[0] || !ex[1] || !ex[2] {
				t.Fatalf("after deleting a: Exists = %v, want [false true true]", ex)
			}
			mustMiss(t, s, a)
			mustGet(t, s, b, pb)
			mustGet(t, s, c, pc)
		})
	}
}

// TestMaxObjectSize: a Put over Options.MaxObjectSize is refused up front
// (nothing stored or charged) with the size, the limit and the setting;
// one of exactly the limit is stored. A name over 1 KiB is refused too.
func TestMaxObjectSize(t *testing.T) {
	o := testOpts(4096, 8, nil, 0)
	o.MaxObjectSize = 1000
	s := mustOpen(t, o)
	k := block.Named("ten", "big")
	p := make([]byte, 1001)
	_, err := s.Put(ctx, k, p, block.Checksum(k, p))
	if !errors.Is(err, kvpool.ErrTooLarge) {
		t.Fatalf("Put of 1001 bytes: %v, want too large", err)
	}
	for _, want := range []string{"1001 bytes", "max object size of 1000 bytes", "--max-object-bytes", "max_object_bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if s.Contains(k) || len(s.Quota()) != 0 && s.Quota()[0].Bytes != 0 {
		t.Fatalf("a refused Put left something behind: contains %v, quota %+v", s.Contains(k), s.Quota())
	}
	put(t, s, k, p[:1000])
	mustGet(t, s, k, p[:1000])
	long := block.Named("ten", strings.Repeat("x", block.MaxNameLen+1))
	if _, err := s.Put(ctx, long, []byte("x"), block.Checksum(long, []byte("x"))); !errors.Is(err, block.ErrBadName) {
		t.Fatalf("Put under a 1025-byte name: %v, want bad name", err)
	}
	if s.MaxObjectSize() != 1000 {
		t.Errorf("MaxObjectSize() = %d", s.MaxObjectSize())
	}
	o.MaxObjectSize = MaxObjectSizeLimit + 1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "Options.MaxObjectSize") {
		t.Errorf("Validate of MaxObjectSize over the limit: %v", err)
	}
}
