package masterclient_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/meta"
)

// TestKeyOpsOverTheWire: KeyInfo, SetExpiry, Scan and KeyCounts through a
// real masterserver on loopback give what the master holds: an expiry in
// the past hides a key, a forced one reaches a hidden key, a scan with a
// small count returns every visible name, and bad batches are refused
// with ErrBadRequest.
func TestKeyOpsOverTheWire(t *testing.T) {
	m, addr := serve(t, masterserver.Options{})
	ctx := ctxT(t, 20*time.Second)
	c := dial(t, addr, masterclient.Options{})
	var inv meta.Inventory
	for i := range 300 {
		inv = append(inv, meta.Item{Key: block.Named("t", fmt.Sprintf("key:%d", i)), Tier: meta.TierRAM, Size: 10, Sum: uint32(i)})
	}
	inv = append(inv, meta.Item{Key: block.Named("t", "key:0"), Tier: meta.TierSSD, Size: 10})
	inv = append(inv, meta.Item{Key: block.Named("u", "other"), Tier: meta.TierRAM, Size: 1})
	if _, err := m.Register(meta.NodeInfo{ID: "n2", Addr: "127.0.0.1:9", RAMBytes: 1 << 30, SSDBytes: 1 << 30}, inv, meta.NodeUsage{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Register(meta.NodeInfo{ID: "n1", Addr: "127.0.0.1:8", RAMBytes: 1 << 30}, inv[:1], meta.NodeUsage{}); err != nil {
		t.Fatal(err)
	}
	k0, k1, k2 := block.Named("t", "key:0"), block.Named("t", "key:1"), block.Named("t", "key:2")
	absent := block.Named("t", "absent")

	later := time.Now().Add(time.Hour).UnixMilli()
	applied, err := c.SetExpiry(ctx, []block.Key{k0, k1, absent}, []int64{later, 1, later}, false, nil)
	if err != nil || !slices.Equal(applied, []bool{true, true, false}) {
		t.Fatalf("SetExpiry = %v, %v; want [true true false]", applied, err)
	}
	infos, err := c.KeyInfo(ctx, []block.Key{k0, k1, absent, k2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []meta.KeyInfo{
		{Present: true, Visible: true, ExpireAt: later, Holders: []meta.NodeID{"n1", "n2"}},
		{Present: true, ExpireAt: 1, Holders: []meta.NodeID{"n2"}},
		{},
		{Present: true, Visible: true, Holders: []meta.NodeID{"n2"}},
	}
	if fmt.Sprint(infos) != fmt.Sprint(want) {
		t.Fatalf("KeyInfo = %+v\nwant %+v", infos, want)
	}
	if ex, err := c.ExistsKeys(ctx, []block.Key{k0, k1}, nil); err != nil || !slices.Equal(ex, []bool{true, false}) {
		t.Fatalf("ExistsKeys = %v, %v; want the expired key absent", ex, err)
	}
	if applied, err := c.SetExpiry(ctx, []block.Key{k1}, []int64{0}, false, applied); err != nil || applied[0] {
		t.Fatalf("PERSIST of an expired key = %v, %v; want not applied", applied, err)
	}
	if applied, err := c.SetExpiry(ctx, []block.Key{k1}, []int64{0}, true, applied); err != nil || !applied[0] {
		t.Fatalf("forced PERSIST = %v, %v; want applied", applied, err)
	}
	c.SetExpiry(ctx, []block.Key{k2}, []int64{1}, false, nil)

	keys, expiring, err := c.KeyCounts(ctx, "t")
	if err != nil || keys != 299 || expiring != 1 {
		t.Fatalf("KeyCounts(t) = %d, %d, %v; want 299, 1", keys, expiring, err)
	}
	if n, err := c.CountKeys(ctx, "u"); err != nil || n != 1 {
		t.Fatalf("CountKeys(u) = %d, %v; want 1", n, err)
	}

	got := map[string]int{}
	calls := 0
	for cursor := uint64(0); ; calls++ {
		next, names, err := c.Scan(ctx, "t", cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) > 3 {
			t.Fatalf("a page of %d names for count 3", len(names))
		}
		for _, n := range names {
			got[n]++
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(got) != 299 || got["key:2"] != 0 || got["key:1"] != 1 {
		t.Fatalf("scan: %d names (key:1 %d, key:2 %d times) in %d calls; want 299, the expired key:2 missing", len(got), got["key:1"], got["key:2"], calls)
	}
	for n, times := range got {
		if times != 1 {
			t.Fatalf("scan returned %q %d times", n, times)
		}
	}

	bad := []struct {
		name string
		do   func() error
	}{
		{"chain key info", func() error { _, err := c.KeyInfo(ctx, []block.Key{{Tenant: "t", ID: 1}}, nil); return err }},
		{"chain key expire", func() error {
			_, err := c.SetExpiry(ctx, []block.Key{{Tenant: "t", ID: 1}}, []int64{1}, true, nil)
			return err
		}},
		{"two tenants", func() error { _, err := c.KeyInfo(ctx, []block.Key{k0, block.Named("u", "x")}, nil); return err }},
		{"times for keys", func() error { _, err := c.SetExpiry(ctx, []block.Key{k0}, nil, false, nil); return err }},
		{"negative time", func() error { _, err := c.SetExpiry(ctx, []block.Key{k0}, []int64{-5}, false, nil); return err }},
		{"scan bad tenant", func() error { _, _, err := c.Scan(ctx, "a/b", 0, 1); return err }},
		{"count bad tenant", func() error { _, err := c.CountKeys(ctx, "a b"); return err }},
	}
	for _, b := range bad {
		if err := b.do(); !errors.Is(err, meta.ErrBadRequest) {
			t.Errorf("%s: %v; want ErrBadRequest", b.name, err)
		}
	}
	// The connection is still usable.
	if infos, err := c.KeyInfo(ctx, []block.Key{k0}, infos); err != nil || !infos[0].Visible {
		t.Fatalf("after the refusals: %+v, %v", infos, err)
	}
}
