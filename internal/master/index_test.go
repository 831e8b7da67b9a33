package master

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/option"
)

// threeNodes registers n1..n3 with overlapping inventories:
//
//	n1: t/1..4 RAM, t/5 SSD
//	n2: t/1 SSD, t/2 RAM, u/1 RAM
//	n3: t/1 RAM, t/7 RAM
func threeNodes(t *testing.T, m *Master) map[meta.NodeID]meta.Session {
	t.Helper()
	return map[meta.NodeID]meta.Session{
		"n1": register(t, m, info("n1", 10000, 10000), inv(ram("t", 1, 2, 3, 4), ssd("t", 5))),
		"n2": register(t, m, info("n2", 10000, 10000), inv(ssd("t", 1), ram("t", 2), ram("u", 1))),
		"n3": register(t, m, info("n3", 10000, 10000), inv(ram("t", 1, 7))),
	}
}

func TestLookupPrefix(t *testing.T) {
	m, _ := newTest(t, Options{})
	threeNodes(t, m)
	tests := []struct {
		name   string
		tenant string
		ids    []uint64
		hit    int
		layout string
	}{
		{"empty", "t", nil, 0, ""},
		{"first absent", "t", []uint64{9, 1}, 0, ""},
		{"replicas on several nodes", "t", []uint64{1}, 1, "n1:ram,n3:ram,n2:ssd"},
		{"full prefix", "t", []uint64{1, 2, 3, 4, 5}, 5, "n1:ram,n3:ram,n2:ssd|n1:ram,n2:ram|n1:ram|n1:ram|n1:ssd"},
		{"stops at first absent", "t", []uint64{1, 2, 6, 7}, 2, "n1:ram,n3:ram,n2:ssd|n1:ram,n2:ram"},
		{"present after a gap is not a hit", "t", []uint64{6, 7}, 0, ""},
		{"tenant u sees only its block", "u", []uint64{1, 2}, 1, "n2:ram"},
		{"tenant without blocks", "v", []uint64{1}, 0, ""},
		{"empty tenant is its own namespace", "", []uint64{1}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, lease := range []bool{false, true} {
				r := lookup(t, m, tc.tenant, lease, tc.ids...)
				if r.Hit != tc.hit || layout(r) != tc.layout {
					t.Errorf("lease=%v: hit %d %q, want %d %q", lease, r.Hit, layout(r), tc.hit, tc.layout)
				}
			}
		})
	}
	t.Run("replica fields", func(t *testing.T) {
		r := lookup(t, m, "t", false, 5)
		want := meta.Replica{Node: "n1", Tier: meta.TierSSD, Size: 100, Sum: sumOf(key("t", 5))}
		if got := r.Block(0); len(got) != 1 || got[0] != want {
			t.Errorf("block 0 = %+v, want [%+v]", got, want)
		}
	})
	t.Run("exists is per key", func(t *testing.T) {
		got, err := m.Exists("t", []uint64{6, 1, 7, 8}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{false, true, true, false}; !equalBools(got, want) {
			t.Errorf("Exists = %v, want %v", got, want)
		}
	})
	t.Run("query", func(t *testing.T) {
		q := m.Query(key("t", 2))
		if len(q) != 2 || q[0].Node != "n1" || q[1].Node != "n2" || !q[0].NodeAlive || q[0].Evicting {
			t.Errorf("Query = %+v", q)
		}
	})
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLookupReusesResult(t *testing.T) {
	m, _ := newTest(t, Options{})
	threeNodes(t, m)
	var r meta.LookupResult
	if err := m.Lookup("t", []uint64{1, 2, 3}, true, &r); err != nil {
		t.Fatal(err)
	}
	if err := m.Lookup("t", []uint64{2}, false, &r); err != nil {
		t.Fatal(err)
	}
	if r.Hit != 1 || layout(&r) != "n1:ram,n2:ram" || len(r.Ends) != 1 {
		t.Errorf("second lookup into the same result: hit %d %q ends %v", r.Hit, layout(&r), r.Ends)
	}
	ids := []uint64{1, 2, 3, 4}
	if allocs := testing.AllocsPerRun(100, func() { _ = m.Lookup("t", ids, true, &r) }); allocs != 0 {
		t.Errorf("leased Lookup into a warm result allocates %v times", allocs)
	}
}

func TestDeltas(t *testing.T) {
	tests := []struct {
		name  string
		delta meta.Delta
		want  func(base []row) []row
		// lookup after the delta: ids of tenant t and the expected layout
		ids    []uint64
		layout string
	}{
		{
			name:   "added",
			delta:  meta.Delta{Added: inv(ram("t", 6), ssd("t", 2))},
			want:   func(b []row) []row { return sortedRows(b, rowsOf("n3", inv(ram("t", 6), ssd("t", 2)))) },
			ids:    []uint64{1, 2, 3, 4, 5, 6},
			layout: "n1:ram,n3:ram,n2:ssd|n1:ram,n2:ram,n3:ssd|n1:ram|n1:ram|n1:ssd|n3:ram",
		},
		{
			name:  "added again updates size and checksum",
			delta: meta.Delta{Added: []meta.Item{{Key: key("t", 7), Tier: meta.TierRAM, Size: 60, Sum: 42}}},
			want: func(b []row) []row {
				for i := range b {
					if b[i].Node == "n3" && b[i].Key == key("t", 7) {
						b[i].Size, b[i].Sum = 60, 42
					}
				}
				return b
			},
			ids: []uint64{7}, layout: "n3:ram",
		},
		{
			name:   "removed",
			delta:  meta.Delta{Removed: []meta.ItemKey{{Key: key("t", 1), Tier: meta.TierRAM}}},
			want:   func(b []row) []row { return without(b, row{Node: "n3", Key: key("t", 1), Tier: meta.TierRAM}) },
			ids:    []uint64{1},
			layout: "n1:ram,n2:ssd",
		},
		{
			name:   "moved to ssd",
			delta:  meta.Delta{Moved: []meta.Move{{Key: key("t", 7), From: meta.TierRAM, To: meta.TierSSD}}},
			want:   func(b []row) []row { return retier(b, "n3", key("t", 7), meta.TierSSD) },
			ids:    []uint64{7},
			layout: "n3:ssd",
		},
		{
			name: "moved onto an existing copy merges",
			delta: meta.Delta{
				Added: ssd("t", 1),
				Moved: []meta.Move{{Key: key("t", 1), From: meta.TierRAM, To: meta.TierSSD}},
			},
			want: func(b []row) []row {
				return sortedRows(without(b, row{Node: "n3", Key: key("t", 1), Tier: meta.TierRAM}), rowsOf("n3", ssd("t", 1)))
			},
			ids: []uint64{1}, layout: "n1:ram,n2:ssd,n3:ssd",
		},
		{
			name:  "added then removed in one delta",
			delta: meta.Delta{Added: ram("t", 8), Removed: []meta.ItemKey{{Key: key("t", 8), Tier: meta.TierRAM}}},
			want:  func(b []row) []row { return b },
			ids:   []uint64{8}, layout: "",
		},
		{
			name:  "unknown removals and moves are ignored",
			delta: meta.Delta{Removed: []meta.ItemKey{{Key: key("t", 2), Tier: meta.TierRAM}}, Moved: []meta.Move{{Key: key("t", 9), From: meta.TierSSD, To: meta.TierRAM}}},
			want:  func(b []row) []row { return b },
			ids:   []uint64{2}, layout: "n1:ram,n2:ram",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTest(t, Options{})
			sess := threeNodes(t, m)
			base := dump(m)
			heartbeat(t, m, "n3", sess["n3"], tc.delta, nil, nil)
			checkDump(t, m, tc.want(base))
			if r := lookup(t, m, "t", false, tc.ids...); layout(r) != tc.layout {
				t.Errorf("lookup %v = %q, want %q", tc.ids, layout(r), tc.layout)
			}
		})
	}
}

func without(rs []row, drop row) []row {
	var out []row
	for _, r := range rs {
		if r.Node != drop.Node || r.Key != drop.Key || r.Tier != drop.Tier {
			out = append(out, r)
		}
	}
	return out
}

func retier(rs []row, node meta.NodeID, k block.Key, to meta.Tier) []row {
	out := append([]row(nil), rs...)
	for i := range out {
		if out[i].Node == node && out[i].Key == k {
			out[i].Tier = to
		}
	}
	return sortedRows(out)
}

func TestNodeTTL(t *testing.T) {
	m, clk := newTest(t, Options{})
	ttl := m.Options().NodeTTL
	invA := inv(ram("t", 1, 2), ssd("t", 3))
	sa := register(t, m, info("a", 1000, 1000), invA)
	sb := register(t, m, info("b", 1000, 1000), inv(ram("t", 1)))
	before := dump(m)

	clk.Advance(ttl / 2)
	heartbeat(t, m, "b", sb, meta.Delta{}, nil, nil) // b stays alive, a goes silent
	clk.Advance(ttl - ttl/2)
	if r := lookup(t, m, "t", false, 1, 2, 3); layout(r) != "a:ram,b:ram|a:ram|a:ssd" {
		t.Fatalf("at exactly the TTL: %q, want a still visible", layout(r))
	}
	if st := m.Stats(); st.NodesLive != 2 || st.NodesDropped != 0 {
		t.Fatalf("at the TTL: %d live, %d dropped", st.NodesLive, st.NodesDropped)
	}
	clk.Advance(time.Nanosecond)
	if r := lookup(t, m, "t", false, 1, 2, 3); layout(r) != "b:ram" {
		t.Fatalf("past the TTL: %q, want only b", layout(r))
	}
	// The lookup ran Expire: a is gone from the index and the membership.
	checkDump(t, m, rowsOf("b", inv(ram("t", 1))))
	if ns := m.Nodes(); len(ns) != 1 || ns[0].Info.ID != "b" {
		t.Fatalf("Nodes = %+v, want only b", ns)
	}
	if st := m.Stats(); st.NodesDropped != 1 || st.RAMReplicas != 1 || st.SSDReplicas != 0 {
		t.Fatalf("stats after drop: %+v", st)
	}
	if _, err := m.Heartbeat("a", sa, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Fatalf("heartbeat of a dropped node: %v, want ErrUnknownNode", err)
	}
	// a comes back with the same inventory: exactly the old index.
	sa2 := register(t, m, info("a", 1000, 1000), invA)
	checkDump(t, m, before)
	if sa2 == sa {
		t.Fatalf("re-registration reused session %d", sa)
	}
	if _, err := m.Heartbeat("a", sa, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Fatalf("heartbeat with the old session: %v, want ErrUnknownNode", err)
	}
	heartbeat(t, m, "a", sa2, meta.Delta{}, nil, nil)
}

func TestLateHeartbeatDropsNode(t *testing.T) {
	m, clk := newTest(t, Options{})
	s := register(t, m, info("a", 1000, 0), inv(ram("t", 1)))
	clk.Advance(m.Options().NodeTTL + 1)
	// No lookup or Expire ran: the heartbeat itself finds the node late.
	if _, err := m.Heartbeat("a", s, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Fatalf("late heartbeat: %v, want ErrUnknownNode", err)
	}
	checkDump(t, m, nil)
	if n := m.Expire(); n != 0 {
		t.Errorf("Expire dropped %d nodes, want 0 (already dropped)", n)
	}
	if ns := m.Nodes(); len(ns) != 0 {
		t.Errorf("Nodes = %+v, want none", ns)
	}
}

func TestReregisterReplacesInventory(t *testing.T) {
	m, _ := newTest(t, Options{})
	sess := threeNodes(t, m)
	// n1 restarts having lost t/3 and gained t/9; its t/1 lease survives.
	clkLease := lookup(t, m, "t", true, 1)
	if clkLease.Hit != 1 {
		t.Fatal("setup lookup missed")
	}
	newInv := inv(ram("t", 1, 2, 4, 9), ssd("t", 5))
	var others []row
	for _, r := range dump(m) {
		if r.Node != "n1" {
			others = append(others, r)
		}
	}
	s2 := register(t, m, info("n1", 10000, 10000), newInv)
	checkDump(t, m, sortedRows(others, rowsOf("n1", newInv)))
	for _, q := range m.Query(key("t", 1)) {
		if q.LeaseUntil.IsZero() {
			t.Errorf("replica %s:%v of t/1 lost its lease on re-registration", q.Node, q.Tier)
		}
	}
	if s2 == sess["n1"] {
		t.Error("session unchanged")
	}
}

func TestMasterRestart(t *testing.T) {
	a, _ := newTest(t, Options{})
	sess := threeNodes(t, a)
	heartbeat(t, a, "n1", sess["n1"], meta.Delta{
		Added:   ram("t", 10, 11),
		Removed: []meta.ItemKey{{Key: key("t", 3), Tier: meta.TierRAM}},
		Moved:   []meta.Move{{Key: key("t", 4), From: meta.TierRAM, To: meta.TierSSD}},
	}, nil, nil)
	heartbeat(t, a, "n2", sess["n2"], meta.Delta{Moved: []meta.Move{{Key: key("t", 1), From: meta.TierSSD, To: meta.TierRAM}}}, nil, nil)
	heartbeat(t, a, "n3", sess["n3"], meta.Delta{Removed: []meta.ItemKey{{Key: key("t", 7), Tier: meta.TierRAM}}, Added: ssd("u", 5)}, nil, nil)
	want := dump(a)

	// Each node's current full inventory, as the node itself would list it.
	invs := map[meta.NodeID]meta.Inventory{}
	for _, r := range want {
		invs[r.Node] = append(invs[r.Node], meta.Item{Key: r.Key, Tier: r.Tier, Size: r.Size, Sum: r.Sum})
	}
	b, _ := newTest(t, Options{})
	for _, id := range []meta.NodeID{"n3", "n1", "n2"} {
		register(t, b, info(id, 10000, 10000), invs[id])
	}
	checkDump(t, b, want)
	for _, ids := range [][]uint64{{1, 2, 3}, {1, 2, 4, 5}, {10, 11}} {
		ra, rb := lookup(t, a, "t", false, ids...), lookup(t, b, "t", false, ids...)
		if layout(ra) != layout(rb) {
			t.Errorf("lookup %v: master A %q, master B %q", ids, layout(ra), layout(rb))
		}
	}
}

func TestBadInput(t *testing.T) {
	m, _ := newTest(t, Options{})
	s := register(t, m, info("a", 1000, 1000), inv(ram("t", 1)))
	before := dump(m)
	long := strings.Repeat("x", block.MaxTenantLen+1)
	regTests := []struct {
		name string
		info meta.NodeInfo
		inv  meta.Inventory
		want string
	}{
		{"empty id", meta.NodeInfo{Addr: "h:1"}, nil, "NodeInfo.ID"},
		{"no addr", meta.NodeInfo{ID: "b"}, nil, "NodeInfo.Addr"},
		{"bad addr", meta.NodeInfo{ID: "b", Addr: "nohostport"}, nil, "NodeInfo.Addr"},
		{"negative ram", meta.NodeInfo{ID: "b", Addr: "h:1", RAMBytes: -1}, nil, "NodeInfo.RAMBytes"},
		{"bad tier", info("b", 1, 1), meta.Inventory{{Key: key("t", 1), Tier: 9}}, "inventory[0]"},
		{"zero tier", info("b", 1, 1), meta.Inventory{{Key: key("t", 1)}}, "inventory[0]"},
		{"bad tenant", info("b", 1, 1), meta.Inventory{{Key: key("bad tenant", 1), Tier: meta.TierRAM}}, "inventory[0]"},
		{"negative size", info("b", 1, 1), meta.Inventory{{Key: key("t", 1), Tier: meta.TierRAM, Size: -5}}, "inventory[0]"},
		{"duplicate", info("b", 1, 1), inv(ram("t", 1, 2), ram("t", 2)), "inventory[2]"},
	}
	for _, tc := range regTests {
		t.Run("register/"+tc.name, func(t *testing.T) {
			_, err := m.Register(tc.info, tc.inv, meta.NodeUsage{})
			if !errors.Is(err, meta.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadRequest naming %q", err, tc.want)
			}
		})
	}
	hbTests := []struct {
		name  string
		delta meta.Delta
		hits  []block.Key
		done  []meta.TaskResult
		usage meta.NodeUsage
		want  string
	}{
		{"added bad tier", meta.Delta{Added: []meta.Item{{Key: key("t", 2), Tier: 0}}}, nil, nil, meta.NodeUsage{}, "delta.Added[0]"},
		{"removed bad tenant", meta.Delta{Removed: []meta.ItemKey{{Key: key(long, 1), Tier: meta.TierRAM}}}, nil, nil, meta.NodeUsage{}, "delta.Removed[0]"},
		{"move to itself", meta.Delta{Moved: []meta.Move{{Key: key("t", 1), From: meta.TierRAM, To: meta.TierRAM}}}, nil, nil, meta.NodeUsage{}, "delta.Moved[0]"},
		{"move bad tier", meta.Delta{Moved: []meta.Move{{Key: key("t", 1), From: meta.TierRAM, To: 7}}}, nil, nil, meta.NodeUsage{}, "delta.Moved[0].To"},
		{"bad ssd hit", meta.Delta{}, []block.Key{key("t", 1), key("x y", 1)}, nil, meta.NodeUsage{}, "ssdHits[1]"},
		{"negative bytes", meta.Delta{}, nil, []meta.TaskResult{{ID: 1, OK: true, Bytes: -1}}, meta.NodeUsage{}, "done[0]"},
		{"negative usage", meta.Delta{}, nil, nil, meta.NodeUsage{RAMUsed: -1}, "usage"},
		// A valid first entry must not be applied when a later one is bad.
		{"atomic", meta.Delta{Added: ram("t", 2), Removed: []meta.ItemKey{{Key: key("t", 1), Tier: 0}}}, nil, nil, meta.NodeUsage{}, "delta.Removed[0]"},
	}
	for _, tc := range hbTests {
		t.Run("heartbeat/"+tc.name, func(t *testing.T) {
			_, err := m.Heartbeat("a", s, tc.delta, tc.usage, tc.hits, tc.done)
			if !errors.Is(err, meta.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadRequest naming %q", err, tc.want)
			}
		})
	}
	checkDump(t, m, before)
	if _, err := m.Heartbeat("nobody", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := m.Heartbeat("a", s+1, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Errorf("wrong session: %v", err)
	}
	if err := m.Lookup(long, []uint64{1}, true, &meta.LookupResult{}); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("lookup with a bad tenant: %v", err)
	}
	if err := m.Lookup("t", []uint64{1}, true, nil); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("lookup into nil: %v", err)
	}
	if _, err := m.Exists("a b", []uint64{1}, nil); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("exists with a bad tenant: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string // "" = valid
	}{
		{"zero", Options{}, ""},
		{"negative ttl", Options{NodeTTL: -1}, "NodeTTL"},
		{"heartbeat not under ttl", Options{NodeTTL: time.Second}, "HeartbeatInterval"},
		{"negative lease", Options{LeaseTTL: -time.Second}, "LeaseTTL"},
		{"unknown strategy", Options{Placement: 9}, "Placement"},
		{"unknown policy", Options{Eviction: "nope"}, "Eviction"},
		{"offline policy", Options{Eviction: "belady"}, "Eviction"},
		{"high over 1", Options{HighWatermark: 1.5}, "HighWatermark"},
		{"low not under high", Options{HighWatermark: 0.5}, "LowWatermark"},
		{"low is 1", Options{LowWatermark: 1}, "LowWatermark"},
		{"threshold", Options{Promotion: PromotionOptions{Threshold: 300}}, "Promotion.Threshold"},
		{"ram watermark", Options{Promotion: PromotionOptions{RAMWatermark: 2}}, "Promotion.RAMWatermark"},
		{"queue cap", Options{Promotion: PromotionOptions{QueueCap: -1}}, "Promotion.QueueCap"},
		{"per heartbeat", Options{Promotion: PromotionOptions{MaxPerHeartbeat: -1}}, "Promotion.MaxPerHeartbeat"},
		{"task timeout", Options{Promotion: PromotionOptions{TaskTimeout: -1}}, "Promotion.TaskTimeout"},
		{"sketch", Options{Promotion: PromotionOptions{SketchKeys: 1 << 30}}, "Promotion.SketchKeys"},
		{"policy capacity", Options{PolicyCapacity: -1}, "PolicyCapacity"},
		{"s3fifo ok", Options{Eviction: "s3fifo"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if _, err := New(tc.opts); err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if option.Field(err) != tc.want {
				t.Fatalf("Validate = %v, want an error naming %s", err, tc.want)
			}
			if _, err := New(tc.opts); err == nil {
				t.Fatal("New accepted invalid options")
			}
		})
	}
}

func TestNodesAndStats(t *testing.T) {
	m, clk := newTest(t, Options{})
	sa := register(t, m, info("a", 1000, 5000), inv(ram("t", 1, 2), ssd("t", 3)))
	register(t, m, meta.NodeInfo{ID: "b", Addr: "b:1", RAMBytes: 1000, BlockSize: 64}, inv(ram("t", 1)))
	clk.Advance(time.Second)
	if _, err := m.Heartbeat("a", sa, meta.Delta{}, meta.NodeUsage{RAMUsed: 123, SSDUsed: 456}, nil, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(500 * time.Millisecond)
	ns := m.Nodes()
	if len(ns) != 2 {
		t.Fatalf("Nodes = %+v", ns)
	}
	a, b := ns[0], ns[1]
	if a.Info.ID != "a" || a.Info.Addr != "a:7000" || !a.Alive || a.HeartbeatAge != 500*time.Millisecond ||
		a.Reported != (meta.NodeUsage{RAMUsed: 123, SSDUsed: 456}) || a.Indexed != (meta.NodeUsage{RAMUsed: 200, SSDUsed: 100}) ||
		a.RAMReplicas != 2 || a.SSDReplicas != 1 || a.Session != sa {
		t.Errorf("node a: %+v", a)
	}
	// b's 100-byte block takes two 64-byte slots.
	if b.Info.ID != "b" || b.HeartbeatAge != 1500*time.Millisecond || b.Indexed != (meta.NodeUsage{RAMUsed: 128, SSDUsed: 0}) {
		t.Errorf("node b: %+v", b)
	}
	lookup(t, m, "t", false, 1, 2, 9)
	lookup(t, m, "t", true, 3)
	st := m.Stats()
	want := Stats{
		NodesLive: 2, Registers: 2, Heartbeats: 1, RAMReplicas: 3, SSDReplicas: 1,
		PoolRAMBytes: 2000, PoolRAMUsed: 328, Lookups: 2, LookupKeys: 4, LookupHitKeys: 3,
		LeasesGranted: 1, LeasesActive: 1,
	}
	if st != want {
		t.Errorf("Stats\n got %+v\nwant %+v", st, want)
	}
}

// TestDropLeavesMembershipFree: Expire removes a dropped node's replicas
// without the membership lock, so the other nodes' heartbeats and
// registrations go on meanwhile — a drop walks the whole index, seconds
// at tens of millions of keys, and nodes kept waiting past their TTLs
// would be dropped next.
func TestDropLeavesMembershipFree(t *testing.T) {
	m, clk := newTest(t, Options{})
	register(t, m, info("a", 1000, 0), inv(ram("t", 1, 2, 3)))
	sb := register(t, m, info("b", 1000, 0), inv(ram("t", 4, 5)))
	ttl := m.Options().NodeTTL
	clk.Advance(ttl / 2)
	heartbeat(t, m, "b", sb, meta.Delta{}, nil, nil) // b keeps up, a is silent
	clk.Advance(ttl/2 + 1)
	calls := 0
	m.onDrop = func() {
		calls++
		if !m.nodesMu.TryRLock() {
			// Not t.Fatal: the test's end would wait for the lock.
			t.Error("the membership lock is held while a dropped node's replicas are removed")
			return
		}
		m.nodesMu.RUnlock()
		// a is dead to readers already, though its replicas are still
		// indexed.
		if r := lookup(t, m, "t", false, 1); r.Hit != 0 {
			t.Errorf("lookup of a's t/1 during its drop: %d hits, want 0", r.Hit)
		}
		heartbeat(t, m, "b", sb, meta.Delta{Added: ram("t", 6)}, nil, nil)
		register(t, m, info("c", 1000, 0), inv(ram("t", 7)))
	}
	if n := m.Expire(); n != 1 {
		t.Fatalf("Expire dropped %d nodes, want 1 (a)", n)
	}
	if calls != 1 {
		t.Fatalf("onDrop ran %d times, want 1", calls)
	}
	m.onDrop = nil
	checkDump(t, m, sortedRows(rowsOf("b", inv(ram("t", 4, 5, 6))), rowsOf("c", inv(ram("t", 7)))))
	var ids []meta.NodeID
	for _, n := range m.Nodes() {
		ids = append(ids, n.Info.ID)
	}
	if !slices.Equal(ids, []meta.NodeID{"b", "c"}) {
		t.Errorf("nodes after the drop: %v, want [b c]", ids)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
