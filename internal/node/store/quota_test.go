package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/quota"
	"github.com/kvpool/kvpool/internal/vfs"
)

// usage returns tenant's charge in the store's ledger.
func usage(s *Store, tenant string) int64 {
	for _, ts := range s.Quota() {
		if ts.Tenant == tenant {
			return ts.Bytes
		}
	}
	return 0
}

// checkUsage compares each tenant's charge with the bytes of the given
// keys that some tier really holds (sizes[k] is k's payload length).
func checkUsage(t *testing.T, s *Store, sizes map[block.Key]int) {
	t.Helper()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for k, n := range sizes {
		if s.Locate([]block.Key{k})[0] != 0 {
			want[k.Tenant] += int64(n)
		}
	}
	for _, ts := range s.Quota() {
		if ts.Bytes != want[ts.Tenant] {
			t.Errorf("tenant %q charged %d bytes, tiers hold %d", ts.Tenant, ts.Bytes, want[ts.Tenant])
		}
		delete(want, ts.Tenant)
	}
	for tenant, n := range want {
		if n != 0 {
			t.Errorf("tenant %q holds %d bytes but is not in the ledger", tenant, n)
		}
	}
}

// TestQuota: Puts within a tenant's quota succeed, one over it fails with
// kvpool.ErrQuota and a message naming tenant, quota and usage, deletes and
// evictions free quota across tiers, tenants are independent, and 0 is
// unlimited.
func TestQuota(t *testing.T) {
	const bs = 100
	blk := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name     string
		ramSlots int
		ssd      bool
		ssdSlots int
		quota    quota.Options
		run      func(t *testing.T, s *Store, sizes map[block.Key]int)
	}{
		{"over quota refused, delete frees", 8, true, 8, quota.Options{DefaultBytes: 250}, func(t *testing.T, s *Store, sizes map[block.Key]int) {
			a := func(id uint64) block.Key { return block.Key{Tenant: "a", ID: id} }
			for id := range uint64(2) {
				put(t, s, a(id), blk(100))
				sizes[a(id)] = 100
			}
			_, err := s.Put(ctx, a(9), blk(100), block.Checksum(a(9), blk(100)))
			if !errors.Is(err, kvpool.ErrQuota) {
				t.Fatalf("Put over quota: %v, want kvpool.ErrQuota", err)
			}
			for _, want := range []string{`tenant "a"`, "uses 200", "250-byte quota"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
			if s.Contains(a(9)) {
				t.Error("the refused block was stored")
			}
			if err := s.Delete(ctx, a(0)); err != nil {
				t.Fatal(err)
			}
			put(t, s, a(9), blk(100))
			sizes[a(9)] = 100
			if got := usage(s, "a"); got != 200 {
				t.Errorf("usage %d, want 200", got)
			}
		}},
		{"demotion keeps the charge, SSD eviction frees it", 2, true, 3, quota.Options{DefaultBytes: 10 * bs}, func(t *testing.T, s *Store, sizes map[block.Key]int) {
			// 2 RAM + 3 SSD slots, inclusive tiers: 8 Puts leave 5 (or
			// fewer) resident; the rest were evicted from SSD.
			for id := range uint64(8) {
				put(t, s, key(id), blk(bs))
				sizes[key(id)] = bs
			}
			checkUsage(t, s, sizes)
			if st := s.Stats(); st.Demotions == 0 || st.SSD.Evicted == 0 {
				t.Fatalf("no demotion or SSD eviction happened: %+v", st)
			}
			// Freed quota is usable again: 10 more blocks fit one by one
			// though the tenant has Put 18 blocks in all.
			for id := uint64(100); id < 110; id++ {
				put(t, s, key(id), blk(bs))
				sizes[key(id)] = bs
			}
		}},
		{"RAM eviction without SSD frees", 3, false, 0, quota.Options{DefaultBytes: 4 * bs}, func(t *testing.T, s *Store, sizes map[block.Key]int) {
			// The quota is checked before the Put evicts: with 3 blocks
			// resident a fourth must fit the quota, then an eviction
			// brings the tenant back to 3.
			for id := range uint64(10) {
				put(t, s, key(id), blk(bs))
				sizes[key(id)] = bs
			}
			if got := usage(s, "ten"); got != 3*bs {
				t.Errorf("usage %d, want %d (3 resident blocks)", got, 3*bs)
			}
		}},
		{"promotion does not double-charge", 4, true, 8, quota.Options{DefaultBytes: 6 * bs}, func(t *testing.T, s *Store, sizes map[block.Key]int) {
			for id := range uint64(6) {
				put(t, s, key(id), blk(bs))
				sizes[key(id)] = bs
			}
			for range 3 {
				mustGet(t, s, key(0), blk(bs))
			}
			if err := s.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			if got := usage(s, "ten"); got != 6*bs {
				t.Errorf("usage %d, want %d", got, 6*bs)
			}
		}},
		{"tenants independent, 0 unlimited", 64, false, 0, quota.Options{Tenants: map[string]int64{"small": bs}}, func(t *testing.T, s *Store, sizes map[block.Key]int) {
			small := block.Key{Tenant: "small", ID: 1}
			put(t, s, small, blk(bs))
			sizes[small] = bs
			for id := range uint64(40) {
				put(t, s, key(id), blk(bs)) // "ten" has no quota
				sizes[key(id)] = bs
			}
			small2 := block.Key{Tenant: "small", ID: 2}
			if _, err := s.Put(ctx, small2, blk(1), block.Checksum(small2, blk(1))); !errors.Is(err, kvpool.ErrQuota) {
				t.Errorf("second block of small: %v, want kvpool.ErrQuota", err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := testOpts(bs, c.ramSlots, nil, 0)
			if c.ssd {
				o = testOpts(bs, c.ramSlots, vfs.NewMem(), c.ssdSlots)
			}
			o.Promotion.Threshold = 1
			o.Promotion.Watermark = 1
			o.Promotion.MaxPerHeartbeat = 1000
			o.Quota = c.quota
			s := mustOpen(t, o)
			sizes := map[block.Key]int{}
			c.run(t, s, sizes)
			checkUsage(t, s, sizes)
		})
	}
}

// TestQuotaRestart: reopening on the same SSD re-derives each tenant's
// usage from the SSD scan, and the quota holds across the restart.
func TestQuotaRestart(t *testing.T) {
	const bs = 100
	mem := vfs.NewMem()
	o := testOpts(bs, 2, mem, 16)
	o.Promotion.Off = true
	o.Quota = quota.Options{DefaultBytes: 5 * bs}
	s := mustOpen(t, o)
	sizes := map[block.Key]int{}
	for _, tenant := range []string{"a", "b"} {
		for id := range uint64(5) {
			k := block.Key{Tenant: tenant, ID: id}
			put(t, s, k, make([]byte, bs))
			sizes[k] = bs
		}
	}
	// Move everything to SSD so it survives the restart.
	for k := range sizes {
		if err := s.Demote(ctx, k); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, o)
	for _, tenant := range []string{"a", "b"} {
		if got := usage(s2, tenant); got != 5*bs {
			t.Errorf("after restart tenant %q uses %d, want %d", tenant, got, 5*bs)
		}
	}
	checkUsage(t, s2, sizes)
	k := block.Key{Tenant: "a", ID: 99}
	if _, err := s2.Put(ctx, k, make([]byte, bs), block.Checksum(k, make([]byte, bs))); !errors.Is(err, kvpool.ErrQuota) {
		t.Errorf("Put over the re-derived quota: %v, want kvpool.ErrQuota", err)
	}
}
