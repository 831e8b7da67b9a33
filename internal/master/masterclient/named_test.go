package masterclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/meta"
)

// TestNamedOverTheWire: a node registers and heartbeats named objects
// (two names sharing an id, and the chain key of that id) through the
// protocol; Locate, ExistsKeys, Query and PlaceObjects see each key on
// its own, and the tasks name the key in full.
func TestNamedOverTheWire(t *testing.T) {
	_, addr := serve(t, masterserver.Options{})
	ctx := ctxT(t, 10*time.Second)
	c := dial(t, addr, masterclient.Options{})
	a := block.Key{Tenant: "t", ID: 7, Name: "a"}
	b := block.Key{Tenant: "t", ID: 7, Name: "b"}
	long := block.Named("t", string(make([]byte, block.MaxNameLen)))
	chain := block.Key{Tenant: "t", ID: 7}
	inv := meta.Inventory{
		{Key: a, Tier: meta.TierRAM, Size: 28, Sum: 1},
		{Key: b, Tier: meta.TierSSD, Size: 32 << 20, Sum: 2},
		{Key: chain, Tier: meta.TierRAM, Size: 4096, Sum: 3},
	}
	info := meta.NodeInfo{ID: "n1", Addr: "127.0.0.1:9", RAMBytes: 1 << 30, SSDBytes: 1 << 34, BlockSize: 4096}
	reg, err := c.Register(ctx, info, inv, meta.NodeUsage{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, "n1", reg.Session, meta.Delta{Added: []meta.Item{{Key: long, Tier: meta.TierRAM, Size: 1, Sum: 4}}}, meta.NodeUsage{}, nil, nil); err != nil {
		t.Fatal(err)
	}

	var r masterclient.LookupResult
	absent := block.Named("t", "absent")
	if err := c.Locate(ctx, []block.Key{a, b, absent, long}, true, &r); err != nil {
		t.Fatal(err)
	}
	if r.Hit != 4 || len(r.Block(2)) != 0 {
		t.Fatalf("Locate: hit %d, absent key's block %+v", r.Hit, r.Block(2))
	}
	for i, want := range []struct {
		sum  uint32
		tier meta.Tier
	}{{1, meta.TierRAM}, {2, meta.TierSSD}, {}, {4, meta.TierRAM}} {
		if i == 2 {
			continue
		}
		if rep := r.Block(i); len(rep) != 1 || rep[0].Sum != want.sum || rep[0].Tier != want.tier || rep[0].Addr != info.Addr {
			t.Errorf("Locate key %d: %+v, want sum %d on %v", i, rep, want.sum, want.tier)
		}
	}
	// A chain batch through LOCATE is a point lookup too.
	if err := c.Locate(ctx, []block.Key{{Tenant: "t", ID: 8}, chain}, false, &r); err != nil || r.Hit != 2 || len(r.Block(1)) != 1 || r.Block(1)[0].Sum != 3 {
		t.Fatalf("Locate of chain keys: %+v, %v", r, err)
	}
	present, err := c.ExistsKeys(ctx, []block.Key{b, absent, a}, nil)
	if err != nil || len(present) != 3 || !present[0] || present[1] || !present[2] {
		t.Fatalf("ExistsKeys = %v, %v", present, err)
	}
	if q, err := c.Query(ctx, b); err != nil || len(q) != 1 || q[0].Sum != 2 {
		t.Fatalf("Query(b) = %+v, %v", q, err)
	}
	if q, err := c.Query(ctx, absent); err != nil || len(q) != 0 {
		t.Fatalf("Query(absent) = %+v, %v", q, err)
	}
	var p masterclient.Placement
	objs := []meta.Object{{Key: block.Named("t", "new"), Size: 28}, {Key: block.Named("t", "kv"), Size: 8 << 20}}
	if err := c.PlaceObjects(ctx, objs, 1, "n1", meta.LocalFirst, &p); err != nil || p.PerBlock != 1 || len(p.Nodes) != 2 || p.Nodes[1].Node != "n1" {
		t.Fatalf("PlaceObjects = %+v, %v", p, err)
	}

	// Bad batches are refused before they are sent.
	mixed := []block.Key{a, chain}
	if err := c.Locate(ctx, mixed, false, &r); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("Locate of a mixed batch: %v", err)
	}
	tooLong := block.Key{Tenant: "t", ID: 1, Name: string(make([]byte, block.MaxNameLen+1))}
	if _, err := c.ExistsKeys(ctx, []block.Key{tooLong}, nil); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("ExistsKeys of a 1025-byte name: %v", err)
	}
	if _, err := c.ExistsKeys(ctx, []block.Key{a, {Tenant: "u", ID: 1, Name: "x"}}, nil); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("ExistsKeys across tenants: %v", err)
	}
}
