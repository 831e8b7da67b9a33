package masterserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
)

// fakeNode is a node as the master sees it: an identity and a client.
type fakeNode struct {
	info    meta.NodeInfo
	c       *masterclient.Client
	session meta.Session
}

func (n *fakeNode) register(t *testing.T, inv meta.Inventory) {
	t.Helper()
	r, err := n.c.Register(ctxT(t), n.info, inv, meta.NodeUsage{})
	if err != nil {
		t.Fatalf("register %s: %v", n.info.ID, err)
	}
	n.session = r.Session
}

func (n *fakeNode) heartbeat(t *testing.T, d meta.Delta) meta.HeartbeatReply {
	t.Helper()
	r, err := n.c.Heartbeat(ctxT(t), n.info.ID, n.session, d, meta.NodeUsage{}, nil, nil)
	if err != nil {
		t.Fatalf("heartbeat %s: %v", n.info.ID, err)
	}
	return r
}

func newNodes(t *testing.T, addr string, n int) []*fakeNode {
	out := make([]*fakeNode, n)
	for i := range out {
		out[i] = &fakeNode{
			info: meta.NodeInfo{ID: meta.NodeID(fmt.Sprintf("n%d", i+1)), Addr: fmt.Sprintf("127.0.0.1:%d", 7481+i), RAMBytes: 1 << 30, SSDBytes: 1 << 32},
			c:    dial(t, addr, masterclient.Options{Conns: 1}),
		}
	}
	return out
}

// layout renders a lookup result as "hit: block: node/tier@addr ...".
func layout(r *masterclient.LookupResult) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d:", r.Hit)
	for i := range r.Hit {
		sb.WriteString(" [")
		for j, rep := range r.Block(i) {
			if j > 0 {
				sb.WriteString(" ")
			}
			fmt.Fprintf(&sb, "%s/%v@%s", rep.Node, rep.Tier, rep.Addr)
		}
		sb.WriteString("]")
	}
	return sb.String()
}

// TestEndToEnd drives a server with three fake nodes and a reader client
// over loopback through every op and the admin endpoints.
func TestEndToEnd(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{}, nil)
	nodes := newNodes(t, ts.addr, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.register(t, slices.Concat(items("t", meta.TierRAM, 100, 1, 2, 3, 4)))
	n2.register(t, slices.Concat(items("t", meta.TierSSD, 100, 1, 2)))
	n3.register(t, slices.Concat(items("t", meta.TierRAM, 100, 3), items("u", meta.TierRAM, 100, 9)))
	reader := dial(t, ts.addr, masterclient.Options{})
	ctx := ctxT(t)
	var res masterclient.LookupResult
	lookup := func(tenant string, lease bool, ids ...uint64) string {
		t.Helper()
		if err := reader.Lookup(ctx, tenant, ids, lease, &res); err != nil {
			t.Fatal(err)
		}
		return layout(&res)
	}

	const a1, a2, a3 = "127.0.0.1:7481", "127.0.0.1:7482", "127.0.0.1:7483"
	steps := []struct {
		name  string
		do    func()
		ids   []uint64
		want  string
		other string // tenant
	}{
		{"registered", nil, []uint64{1, 2, 3, 4, 5},
			"4: [n1/ram@" + a1 + " n2/ssd@" + a2 + "] [n1/ram@" + a1 + " n2/ssd@" + a2 + "] [n1/ram@" + a1 + " n3/ram@" + a3 + "] [n1/ram@" + a1 + "]", ""},
		{"added by delta", func() { n3.heartbeat(t, meta.Delta{Added: items("t", meta.TierRAM, 100, 5)}) }, []uint64{4, 5},
			"2: [n1/ram@" + a1 + "] [n3/ram@" + a3 + "]", ""},
		{"removed by delta", func() {
			n1.heartbeat(t, meta.Delta{Removed: []meta.ItemKey{{Key: block.Key{Tenant: "t", ID: 4}, Tier: meta.TierRAM}}})
		}, []uint64{3, 4, 5}, "1: [n1/ram@" + a1 + " n3/ram@" + a3 + "]", ""},
		{"moved by delta", func() {
			n1.heartbeat(t, meta.Delta{Moved: []meta.Move{{Key: block.Key{Tenant: "t", ID: 3}, From: meta.TierRAM, To: meta.TierSSD}}})
		}, []uint64{3}, "1: [n3/ram@" + a3 + " n1/ssd@" + a1 + "]", ""},
		{"other tenant", nil, []uint64{9, 1}, "1: [n3/ram@" + a3 + "]", "u"},
		{"miss", nil, []uint64{42, 1}, "0:", ""},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		tenant := "t"
		if s.other != "" {
			tenant = s.other
		}
		if got := lookup(tenant, false, s.ids...); got != s.want {
			t.Errorf("%s: lookup %v = %s\nwant %s", s.name, s.ids, got, s.want)
		}
	}

	// Exists changes nothing: no lease before or after; a leased lookup
	// sets one.
	key := block.Key{Tenant: "t", ID: 1}
	leased := func() bool {
		reps, err := reader.Query(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) != 2 || reps[0].Node != "n1" || reps[0].Addr != a1 || !reps[0].NodeAlive {
			t.Fatalf("query %v: %+v", key, reps)
		}
		return !reps[0].LeaseUntil.IsZero()
	}
	got, err := reader.Exists(ctx, "t", []uint64{1, 4, 5, 99}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, false}; !slices.Equal(got, want) {
		t.Errorf("exists = %v, want %v", got, want)
	}
	if leased() {
		t.Error("exists or an unleased lookup granted a lease")
	}
	lookup("t", true, 1)
	if !leased() {
		t.Error("a leased lookup granted no lease")
	}

	// Place: local-first with the hint, with addresses.
	var pl masterclient.Placement
	if err := reader.Place(ctx, "t", []uint64{100, 101}, 2, "n2", meta.StrategyDefault, &pl); err != nil {
		t.Fatal(err)
	}
	if pl.PerBlock != 2 || pl.Degraded || len(pl.Nodes) != 4 || pl.Block(0)[0] != (masterclient.Target{Node: "n2", Addr: a2}) {
		t.Errorf("placement %+v", pl)
	}
	if err := reader.Place(ctx, "t", []uint64{1}, 5, "", meta.Hash, &pl); err != nil || !pl.Degraded || pl.PerBlock != 3 {
		t.Errorf("degraded placement %+v, %v", pl, err)
	}
	if err := reader.Place(ctx, "t", []uint64{1}, 0, "", meta.Hash, &pl); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("place with 0 replicas: %v, want ErrBadRequest", err)
	}

	// Nodes carry the data-plane addresses.
	ns, err := reader.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range ns {
		addrs = append(addrs, string(n.Info.ID)+"="+n.Info.Addr)
	}
	if want := []string{"n1=" + a1, "n2=" + a2, "n3=" + a3}; !slices.Equal(addrs, want) {
		t.Errorf("nodes %v, want %v", addrs, want)
	}

	// Bad requests come back as errors wrapping the master's sentinels.
	if err := reader.Lookup(ctx, "bad/tenant", []uint64{1}, false, &res); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("bad tenant: %v", err)
	}
	if _, err := n1.c.Heartbeat(ctx, "n1", n1.session+1, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Errorf("stale session: %v, want ErrUnknownNode", err)
	}

	t.Run("admin", func(t *testing.T) {
		code, body := httpGet(t, ts.admin+"/health")
		if code != 200 || !strings.Contains(body, `"ok"`) {
			t.Errorf("/health: %d %s", code, body)
		}
		code, body = httpGet(t, ts.admin+"/nodes")
		var nodes []NodeJSON
		if err := json.Unmarshal([]byte(body), &nodes); code != 200 || err != nil || len(nodes) != 3 || nodes[2].Addr != a3 || nodes[0].RAMReplicas != 2 {
			t.Errorf("/nodes: %d %v %s", code, err, body)
		}
		for _, key := range []string{"1", "0x1", "0X01"} {
			code, body = httpGet(t, ts.admin+"/query_key?tenant=t&key="+key)
			var q QueryJSON
			if err := json.Unmarshal([]byte(body), &q); code != 200 || err != nil || q.Key != 1 || len(q.Replicas) != 2 ||
				q.Replicas[0].Node != "n1" || q.Replicas[0].Addr != a1 || q.Replicas[0].Tier != "ram" || q.Replicas[1].Tier != "ssd" || q.Replicas[0].LeaseUntil == nil {
				t.Errorf("/query_key key=%s: %d %v %s", key, code, err, body)
			}
		}
		for _, bad := range []string{"?tenant=t&key=x", "?tenant=t", "?tenant=a/b&key=1", "?tenant=t&key=0x"} {
			if code, body := httpGet(t, ts.admin+"/query_key"+bad); code != 400 || !strings.Contains(body, "error") {
				t.Errorf("/query_key%s: %d %s, want 400", bad, code, body)
			}
		}
		code, body = httpGet(t, ts.admin+"/metrics")
		for _, want := range []string{"master_promotion_admitted_total", `kvpool_masterserver_requests_total{op="LOOKUP"}`, "go_goroutines", "kvpool_master_"} {
			if code != 200 || !strings.Contains(body, want) {
				t.Errorf("/metrics: %d, no %s", code, want)
			}
		}
	})
}

// stepClock is a master.Clock that moves only when told, so a test's TTL
// passes in master time exactly when the test says, however late the
// machine runs it.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestTTLExpiry: a node that stops heartbeating disappears from lookups
// (lazily) and is dropped by the maintenance loop (without any lookup).
// The master's clock steps one heartbeat interval per poll, after n2's
// heartbeat: n2 never misses its TTL, n1 misses it after three steps,
// whatever the real scheduling.
func TestTTLExpiry(t *testing.T) {
	clk := &stepClock{now: time.Unix(1_700_000_000, 0)}
	m := newMaster(t, master.Options{NodeTTL: 300 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, Clock: clk})
	ts := start(t, m, Options{}, nil)
	if ts.MaintenanceInterval() != 25*time.Millisecond {
		t.Fatalf("maintenance every %v, want heartbeat/4", ts.MaintenanceInterval())
	}
	nodes := newNodes(t, ts.addr, 2)
	for _, n := range nodes {
		n.register(t, items("t", meta.TierRAM, 10, 1))
	}
	// n2 keeps heartbeating, n1 goes silent: the maintenance loop drops
	// n1 (no Lookup runs meanwhile, so nothing else expires it).
	waitFor(t, "n1 dropped", 10*time.Second, func() bool {
		nodes[1].heartbeat(t, meta.Delta{})
		clk.advance(100 * time.Millisecond)
		return len(m.Nodes()) == 1
	})
	if st := m.Stats(); st.NodesDropped != 1 || st.RAMReplicas != 1 {
		t.Fatalf("stats after expiry: %+v", st)
	}
	var res masterclient.LookupResult
	if err := nodes[1].c.Lookup(ctxT(t), "t", []uint64{1}, false, &res); err != nil || layout(&res) != "1: [n2/ram@127.0.0.1:7482]" {
		t.Fatalf("lookup after expiry: %s %v", layout(&res), err)
	}
	if _, err := nodes[0].c.Heartbeat(ctxT(t), "n1", nodes[0].session, meta.Delta{}, meta.NodeUsage{}, nil, nil); !errors.Is(err, meta.ErrUnknownNode) {
		t.Fatalf("heartbeat of a dropped node: %v, want ErrUnknownNode", err)
	}
}

// TestTTLExpiryThroughLookup: a silent node's replicas vanish from
// Lookup as soon as its TTL passes.
func TestTTLExpiryThroughLookup(t *testing.T) {
	m := newMaster(t, master.Options{NodeTTL: 200 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond})
	ts := start(t, m, Options{MaintenanceInterval: time.Hour}, nil) // only Lookup expires
	nodes := newNodes(t, ts.addr, 1)
	nodes[0].register(t, items("t", meta.TierRAM, 10, 1, 2))
	var res masterclient.LookupResult
	c := dial(t, ts.addr, masterclient.Options{})
	waitFor(t, "replicas gone from lookups", 10*time.Second, func() bool {
		if err := c.Lookup(ctxT(t), "t", []uint64{1, 2}, false, &res); err != nil {
			t.Fatal(err)
		}
		return res.Hit == 0
	})
}

// TestMasterRestart: the master goes away and a new one starts on the same
// port: calls during the outage fail fast with ErrUnavailable; afterwards
// heartbeats get ErrUnknownNode, nodes re-register, and the index is
// rebuilt from their inventories.
func TestMasterRestart(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{}, nil)
	addr := ts.addr
	nodes := newNodes(t, addr, 2)
	nodes[0].register(t, items("t", meta.TierRAM, 10, 1, 2))
	nodes[1].register(t, items("t", meta.TierSSD, 10, 1))
	const outageTimeout = time.Minute
	reader := dial(t, addr, masterclient.Options{Conns: 2, Timeout: outageTimeout})
	var res masterclient.LookupResult
	if err := reader.Lookup(ctxT(t), "t", []uint64{1, 2}, false, &res); err != nil || res.Hit != 2 {
		t.Fatalf("before restart: %s %v", layout(&res), err)
	}

	ts.stop()
	for i := range 3 { // every pooled connection notices
		// The reader's timeout (dial and call) is a minute: a lookup that
		// waited for it instead of failing on the refused dial would take
		// that long, which no scheduling delay comes near, so the bound
		// derives from the configured timeout rather than a guess.
		start := time.Now()
		err := reader.Lookup(context.Background(), "t", []uint64{1}, false, &res)
		if took := time.Since(start); !isUnavailable(err) || took >= outageTimeout {
			t.Fatalf("lookup %d during the outage: %v after %v; want ErrUnavailable from the refused dial, well before the %v timeout", i, err, took, outageTimeout)
		}
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("rebind %s: %v", addr, err)
	}
	m2 := newMaster(t, master.Options{})
	start(t, m2, Options{}, ln)
	for _, n := range nodes {
		var herr error
		waitFor(t, "heartbeat answered by the new master", 10*time.Second, func() bool {
			_, herr = n.c.Heartbeat(ctxT(t), n.info.ID, n.session, meta.Delta{}, meta.NodeUsage{}, nil, nil)
			return !isUnavailable(herr)
		})
		if !errors.Is(herr, meta.ErrUnknownNode) {
			t.Fatalf("heartbeat to the new master: %v, want ErrUnknownNode", herr)
		}
	}
	if err := reader.Lookup(ctxT(t), "t", []uint64{1}, false, &res); err != nil || res.Hit != 0 {
		t.Fatalf("new master before re-registration: %s %v", layout(&res), err)
	}
	nodes[0].register(t, items("t", meta.TierRAM, 10, 1, 2))
	nodes[1].register(t, items("t", meta.TierSSD, 10, 1))
	nodes[0].heartbeat(t, meta.Delta{})
	if err := reader.Lookup(ctxT(t), "t", []uint64{1, 2}, false, &res); err != nil ||
		layout(&res) != "2: [n1/ram@127.0.0.1:7481 n2/ssd@127.0.0.1:7482] [n1/ram@127.0.0.1:7481]" {
		t.Fatalf("after re-registration: %s %v", layout(&res), err)
	}
}

// TestAuth: with a token, only clients presenting it get in.
func TestAuth(t *testing.T) {
	ts := start(t, newMaster(t, master.Options{}), Options{Token: []byte("s3cret")}, nil)
	for _, tok := range []string{"", "wrong", "s3cret-longer"} {
		c, err := masterclient.Dial(ctxT(t), ts.addr, masterclient.Options{Token: []byte(tok)})
		if err == nil {
			c.Close()
			t.Fatalf("token %q accepted", tok)
		}
		if !errors.Is(err, masterclient.ErrUnauthorized) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	c := dial(t, ts.addr, masterclient.Options{Token: []byte("s3cret")})
	if _, err := c.Nodes(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
