package master

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTest returns a master on a fake clock whose invariants are checked
// when the test ends.
func newTest(t testing.TB, opts Options) (*Master, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	opts.Clock = clk
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := m.CheckInvariants(); err != nil {
			t.Errorf("invariants at end of test: %v", err)
		}
	})
	return m, clk
}

// info describes a node with RAM/SSD capacity and 100-byte slots.
func info(id meta.NodeID, ram, ssd int64) meta.NodeInfo {
	return meta.NodeInfo{ID: id, Addr: string(id) + ":7000", RAMBytes: ram, SSDBytes: ssd, BlockSize: 100}
}

// ram and ssd build inventory items of 100 bytes for ids of tenant.
func ram(tenant string, ids ...uint64) []meta.Item { return items(tenant, meta.TierRAM, ids) }
func ssd(tenant string, ids ...uint64) []meta.Item { return items(tenant, meta.TierSSD, ids) }

func items(tenant string, tier meta.Tier, ids []uint64) []meta.Item {
	out := make([]meta.Item, len(ids))
	for i, id := range ids {
		k := block.Key{Tenant: tenant, ID: id}
		out[i] = meta.Item{Key: k, Tier: tier, Size: 100, Sum: sumOf(k)}
	}
	return out
}

// sumOf is a stand-in checksum that depends on the key.
func sumOf(k block.Key) uint32 { return uint32(k.ID*2654435761) ^ uint32(len(k.Tenant)) }

func inv(parts ...[]meta.Item) meta.Inventory { return slices.Concat(parts...) }

// otherTier is the tier a move from t goes to.
func otherTier(t meta.Tier) meta.Tier {
	if t == meta.TierSSD {
		return meta.TierRAM
	}
	return meta.TierSSD
}

func register(t testing.TB, m *Master, ni meta.NodeInfo, inv meta.Inventory) meta.Session {
	t.Helper()
	r, err := m.Register(ni, inv, meta.NodeUsage{})
	if err != nil {
		t.Fatalf("Register %s: %v", ni.ID, err)
	}
	return r.Session
}

func heartbeat(t testing.TB, m *Master, id meta.NodeID, s meta.Session, d meta.Delta, hits []block.Key, done []meta.TaskResult) meta.HeartbeatReply {
	t.Helper()
	r, err := m.Heartbeat(id, s, d, meta.NodeUsage{}, hits, done)
	if err != nil {
		t.Fatalf("Heartbeat %s: %v", id, err)
	}
	return r
}

// dropSilent lets node id (session sess) go silent for 12 s while the
// alive nodes heartbeat half way, runs Expire and checks that it dropped
// id alone and that id's session is gone. The master's NodeTTL is 10 s.
func dropSilent(t testing.TB, m *Master, clk *fakeClock, id meta.NodeID, sess meta.Session, alive map[meta.NodeID]meta.Session) {
	t.Helper()
	clk.Advance(6 * time.Second)
	for a, s := range alive {
		heartbeat(t, m, a, s, meta.Delta{}, nil, nil)
	}
	clk.Advance(6 * time.Second)
	if got := m.Expire(); got != 1 {
		t.Fatalf("Expire dropped %d nodes, want %s", got, id)
	}
	if _, err := m.Heartbeat(id, sess, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Fatalf("heartbeat of the dropped node %s: %v", id, err)
	}
}

// row is one replica in an index dump.
type row struct {
	Node meta.NodeID
	Key  block.Key
	Tier meta.Tier
	Size int64
	Sum  uint32
}

func (r row) String() string {
	return fmt.Sprintf("%s:%v:%v:%d:%x", r.Node, r.Key, r.Tier, r.Size, r.Sum)
}

func rowCmp(a, b row) int {
	return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Key.Tenant, b.Key.Tenant),
		cmp.Compare(a.Key.ID, b.Key.ID), cmp.Compare(a.Key.Name, b.Key.Name), cmp.Compare(a.Tier, b.Tier))
}

// dump returns every replica in the index, sorted.
func dump(m *Master) []row {
	var out []row
	for i := range m.shards {
		func() {
			s := &m.shards[i]
			s.mu.RLock()
			defer s.mu.RUnlock() // a panic here must not leave CheckInvariants waiting
			for ei := range s.entries() {
				k := s.keyOf(s.ent(ei))
				for r := range s.replicas(ei) {
					out = append(out, row{m.nodeAt(r.node).id, k, r.tier(), r.size(), r.sum})
				}
			}
		}()
	}
	slices.SortFunc(out, rowCmp)
	return out
}

// rowsOf returns the dump rows of a node's inventory.
func rowsOf(id meta.NodeID, inv meta.Inventory) []row {
	out := make([]row, len(inv))
	for i, it := range inv {
		out[i] = row{id, it.Key, it.Tier, it.Size, it.Sum}
	}
	return out
}

func sortedRows(rs ...[]row) []row {
	out := slices.Concat(rs...)
	slices.SortFunc(out, rowCmp)
	return out
}

func diffRows(got, want []row) string {
	var b strings.Builder
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || i < len(got) && rowCmp(got[i], want[j]) < 0:
			fmt.Fprintf(&b, "  extra   %v\n", got[i])
			i++
		case i == len(got) || rowCmp(got[i], want[j]) > 0:
			fmt.Fprintf(&b, "  missing %v\n", want[j])
			j++
		default:
			if got[i] != want[j] {
				fmt.Fprintf(&b, "  got %v want %v\n", got[i], want[j])
			}
			i++
			j++
		}
	}
	return b.String()
}

func checkDump(t testing.TB, m *Master, want []row) {
	t.Helper()
	if d := diffRows(dump(m), want); d != "" {
		t.Fatalf("index differs:\n%s", d)
	}
}

// layout renders a lookup result as "n1:ram,n2:ssd|n3:ram" (blocks split
// by |).
func layout(r *meta.LookupResult) string {
	var b strings.Builder
	for i := range r.Hit {
		if i > 0 {
			b.WriteByte('|')
		}
		for j, rep := range r.Block(i) {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s:%v", rep.Node, rep.Tier)
		}
	}
	return b.String()
}

func lookup(t testing.TB, m *Master, tenant string, lease bool, ids ...uint64) *meta.LookupResult {
	t.Helper()
	var r meta.LookupResult
	if err := m.Lookup(tenant, ids, lease, &r); err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	return &r
}

func key(tenant string, id uint64) block.Key { return block.Key{Tenant: tenant, ID: id} }

func taskString(ts []meta.Task) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%v:%d", t.Kind, t.Key.ID)
	}
	return b.String()
}
