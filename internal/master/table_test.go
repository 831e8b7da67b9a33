package master

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// TestIndexTablesChurn drives the flat index through growth, deletion
// (backward shifts), overflow replicas, name-arena compaction and the
// reuse of freed entries: rounds of thousands of keys (chain and named,
// long names, three tenants, one to three replicas) added, moved and
// removed through heartbeats, the index compared with a model and its
// invariants checked after every round; at the end every key is removed
// and every shard must be empty.
func TestIndexTablesChurn(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	nodes := []meta.NodeID{"a", "b", "c"}
	sess := make([]meta.Session, len(nodes))
	for i, id := range nodes {
		sess[i] = register(t, m, info(id, 1<<50, 1<<50), nil)
	}
	model := make([]modelNode, len(nodes))
	for i := range model {
		model[i] = modelNode{}
	}
	rng := rand.New(rand.NewPCG(19, 4))
	tenants := []string{"t", "tenant-two", "u"}
	mkKey := func() block.Key {
		tn := tenants[rng.IntN(len(tenants))]
		id := rng.Uint64N(6000)
		if rng.IntN(2) == 0 {
			return block.Key{Tenant: tn, ID: id}
		}
		// Long names so the arenas pass minArenaGC and get compacted;
		// a few share an id with a chain key or with each other.
		name := fmt.Sprintf("%s/%d/%s", strings.Repeat("n", 60+int(id%50)), id, tn)
		return block.Key{Tenant: tn, ID: id % 4000, Name: name}
	}
	want := func() []row {
		var out []row
		for i, mn := range model {
			for _, it := range mn {
				out = append(out, row{nodes[i], it.Key, it.Tier, it.Size, it.Sum})
			}
		}
		slices.SortFunc(out, rowCmp)
		return out
	}
	for round := range 6 {
		deltas := make([]meta.Delta, len(nodes))
		for range 6000 {
			k := mkKey()
			for i := range nodes {
				if rng.IntN(3) == 0 {
					continue
				}
				tier := modelTiers[rng.IntN(2)]
				ik := meta.ItemKey{Key: k, Tier: tier}
				switch op := rng.IntN(10); {
				case op < 6 || round == 0:
					deltas[i].Added = append(deltas[i].Added, meta.Item{Key: k, Tier: tier, Size: int64(100 + rng.IntN(900)), Sum: rng.Uint32()})
				case op < 9:
					deltas[i].Removed = append(deltas[i].Removed, ik)
				default:
					deltas[i].Moved = append(deltas[i].Moved, meta.Move{Key: k, From: tier}) // To set below
				}
			}
		}
		for i := range nodes {
			for j := range deltas[i].Moved {
				mv := &deltas[i].Moved[j]
				mv.To = meta.TierSSD
				if mv.From == meta.TierSSD {
					mv.To = meta.TierRAM
				}
			}
			heartbeat(t, m, nodes[i], sess[i], deltas[i], nil, nil)
			model[i].apply(deltas[i])
		}
		checkDump(t, m, want())
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// Point lookups agree with the model, for present and absent keys.
		present := map[block.Key]bool{}
		for _, mn := range model {
			for ik := range mn {
				present[ik.Key] = true
			}
		}
		probe := make([]block.Key, 0, 512)
		for range 512 {
			probe = append(probe, mkKey())
		}
		got, err := m.ExistsKeys(probe, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range probe {
			if got[i] != present[k] {
				t.Fatalf("round %d: exists %v = %v, model says %v", round, k, got[i], present[k])
			}
		}
	}
	// Empty every node; the shards must end empty with their lists whole.
	for i := range nodes {
		var d meta.Delta
		for ik := range model[i] {
			d.Removed = append(d.Removed, ik)
		}
		heartbeat(t, m, nodes[i], sess[i], d, nil, nil)
		model[i] = modelNode{}
		checkDump(t, m, want()) // the names survive the arenas' compaction
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("after emptying node %s: %v", nodes[i], err)
		}
	}
	checkDump(t, m, nil)
	for i := range m.shards {
		if s := &m.shards[i]; s.keys != 0 || s.nOvfUse != 0 || len(s.names) != 0 {
			t.Fatalf("shard %d after removing everything: %d keys, %d overflow replicas, %d name bytes", i, s.keys, s.nOvfUse, len(s.names))
		}
	}
}

// TestIndexExpiryByEntry checks that a named key's expiry record goes with
// its last replica even when its entry is reused at once by another key.
func TestIndexExpiryByEntry(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour})
	s := register(t, m, info("a", 1<<30, 1<<30), nil)
	k1, k2 := block.Named("t", "one"), block.Named("t", "two")
	heartbeat(t, m, "a", s, meta.Delta{Added: []meta.Item{{Key: k1, Tier: meta.TierRAM, Size: 10}}}, nil, nil)
	at := clk.Now().Add(time.Hour).UnixMilli()
	if ok, err := m.SetExpiry([]block.Key{k1}, []int64{at}, false, nil); err != nil || !ok[0] {
		t.Fatalf("SetExpiry: %v %v", ok, err)
	}
	heartbeat(t, m, "a", s, meta.Delta{Removed: []meta.ItemKey{{Key: k1, Tier: meta.TierRAM}}}, nil, nil)
	heartbeat(t, m, "a", s, meta.Delta{Added: []meta.Item{{Key: k2, Tier: meta.TierRAM, Size: 10}, {Key: k1, Tier: meta.TierRAM, Size: 10}}}, nil, nil)
	infos, err := m.KeyInfo([]block.Key{k1, k2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, ki := range infos {
		if !ki.Present || !ki.Visible || ki.ExpireAt != 0 {
			t.Errorf("key %d after delete and SET: %+v, want present, visible, no expiry", i, ki)
		}
	}
}

// TestIndexNodeNumbers checks that a dropped and forgotten node's number
// is reused by a new node without its replicas showing under the new one.
func TestIndexNodeNumbers(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Second, HeartbeatInterval: 100 * time.Millisecond})
	register(t, m, info("old", 1<<30, 1<<30), inv(ram("t", 1, 2, 3)))
	clk.Advance(2 * time.Second)
	if n := m.Expire(); n != 1 {
		t.Fatalf("Expire dropped %d nodes, want 1", n)
	}
	m.Expire() // forgets it
	register(t, m, info("new", 1<<30, 1<<30), inv(ram("t", 3, 4)))
	if got := layout(lookup(t, m, "t", false, 1)); got != "" {
		t.Errorf("block 1 of the dropped node: %q, want absent", got)
	}
	if got := layout(lookup(t, m, "t", false, 3, 4)); got != "new:ram|new:ram" {
		t.Errorf("blocks 3, 4: %q, want new:ram|new:ram", got)
	}
}

// TestReplicaPacking checks the packed replica fields: sizes up to
// meta.MaxItemSize, tiers and the evicting flag round-trip, and leases
// in wrapping 32-bit milliseconds stay right across the wrap.
func TestReplicaPacking(t *testing.T) {
	var r replica
	for _, sz := range []int64{0, 1, 1<<32 - 1, 1 << 32, 1<<40 - 1, meta.MaxItemSize} {
		r.setSize(sz)
		if got := r.size(); got != sz {
			t.Errorf("size %d reads back as %d", sz, got)
		}
	}
	for _, tier := range modelTiers {
		for _, ev := range []bool{false, true} {
			r.setTier(tier)
			r.setEvicting(ev)
			if r.tier() != tier || r.evicting() != ev || r.size() != meta.MaxItemSize {
				t.Errorf("tier %v evicting %v: read %v %v, size %d", tier, ev, r.tier(), r.evicting(), r.size())
			}
		}
	}
	m, _ := newTest(t, Options{LeaseTTL: 5 * time.Second})
	for _, now := range []uint32{0, 1000, 1<<32 - 2000, 1<<32 - 1} {
		var s shard // r's, out of the index
		r := replica{}
		if m.leaseActive(&r, now) {
			t.Errorf("now %d: a replica never leased is leased", now)
		}
		if !m.extendLease(&s, &r, now+5000, now) || !m.leaseActive(&r, now) || !m.leaseActive(&r, now+4999) {
			t.Errorf("now %d: a lease to now+5s is not running before its end", now)
		}
		if m.leaseActive(&r, now+5000) || m.leaseActive(&r, now+25*24*3600*1000) {
			t.Errorf("now %d: a lease runs at its end or 25 days later", now)
		}
		if m.extendLease(&s, &r, now+3000, now+1000) || atomic.LoadUint32(&r.lease) != now+5000 {
			t.Errorf("now %d: a shorter lease shortened a running one", now)
		}
		if !m.extendLease(&s, &r, now+9000, now+6000) || !m.leaseActive(&r, now+8999) {
			t.Errorf("now %d: an ended lease is not renewed", now)
		}
	}
}
