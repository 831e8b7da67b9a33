package master

import (
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

// nowMs is the master's clock in unix milliseconds.
func nowMs(m *Master) int64 { t, _ := m.now(); return t.UnixMilli() }

func setExpiry(t testing.TB, m *Master, force bool, at int64, ks ...block.Key) []bool {
	t.Helper()
	ats := make([]int64, len(ks))
	for i := range ats {
		ats[i] = at
	}
	got, err := m.SetExpiry(ks, ats, force, nil)
	if err != nil {
		t.Fatalf("SetExpiry(%v, %d, force %v): %v", ks, at, force, err)
	}
	return got
}

func keyInfo(t testing.TB, m *Master, k block.Key) meta.KeyInfo {
	t.Helper()
	got, err := m.KeyInfo([]block.Key{k}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("KeyInfo(%v) = %v, %v", k, got, err)
	}
	return got[0]
}

// seen reports whether readers see k: Locate finds a replica and
// ExistsKeys agrees.
func seen(t testing.TB, m *Master, k block.Key) bool {
	t.Helper()
	loc := len(locate(t, m, false, k).Block(0)) > 0
	ex, err := m.ExistsKeys([]block.Key{k}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loc != ex[0] {
		t.Fatalf("%v: Locate finds it %v, ExistsKeys %v", k, loc, ex[0])
	}
	return loc
}

// TestExpiryHidesAtDeadline: a named key is visible until its expiry and
// hidden from the millisecond it is reached, on the master's clock; its
// replica stays indexed (Query, KeyInfo) and a forced PERSIST brings it
// back. Chain keys of the same id are unaffected.
func TestExpiryHidesAtDeadline(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour})
	k := block.Named("t", "session:1")
	chainK := block.Key{Tenant: "t", ID: k.ID}
	register(t, m, info("a", 1<<20, 0), meta.Inventory{item(k, meta.TierRAM, 28), item(chainK, meta.TierRAM, 100)})

	at := nowMs(m) + 1000
	if got := setExpiry(t, m, false, at, k); !got[0] {
		t.Fatal("EXPIRE of a visible key did not apply")
	}
	if ki := keyInfo(t, m, k); !ki.Present || !ki.Visible || ki.ExpireAt != at || !slices.Equal(ki.Holders, []meta.NodeID{"a"}) {
		t.Fatalf("KeyInfo before the deadline = %+v", ki)
	}
	clk.Advance(999 * time.Millisecond)
	if !seen(t, m, k) {
		t.Fatal("key hidden 1 ms before its expiry")
	}
	clk.Advance(time.Millisecond)
	if seen(t, m, k) {
		t.Fatal("key visible at its expiry")
	}
	if r := lookup(t, m, "t", false, chainK.ID); r.Hit != 1 {
		t.Fatalf("chain key of the same id: Lookup hit %d, want 1", r.Hit)
	}
	if ki := keyInfo(t, m, k); !ki.Present || ki.Visible || ki.ExpireAt != at || len(ki.Holders) != 1 {
		t.Fatalf("KeyInfo after the deadline = %+v", ki)
	}
	if q := m.Query(k); len(q) != 1 {
		t.Fatalf("Query after the deadline: %d replicas, want the one still indexed", len(q))
	}
	if st := m.Stats(); st.Expiring != 0 || st.RAMReplicas != 2 {
		t.Errorf("Stats: Expiring %d, RAMReplicas %d; want 0, 2", st.Expiring, st.RAMReplicas)
	}
	// Without force an expired key is absent: EXPIRE and PERSIST do not apply.
	if got := setExpiry(t, m, false, 0, k); got[0] {
		t.Fatal("PERSIST of an expired key applied")
	}
	if got := setExpiry(t, m, false, nowMs(m)+5000, k); got[0] {
		t.Fatal("EXPIRE of an expired key applied")
	}
	// With force (a new value was written) it applies to the hidden key.
	if got := setExpiry(t, m, true, 0, k); !got[0] {
		t.Fatal("forced PERSIST of a present key did not apply")
	}
	if !seen(t, m, k) || keyInfo(t, m, k).ExpireAt != 0 {
		t.Fatalf("after a forced PERSIST: %+v", keyInfo(t, m, k))
	}
}

// TestExpiryPastAndAbsent: an expiry at or before now hides a visible key
// at once; a key the index does not hold is not applied to, forced or
// not; PERSIST of a visible key clears its expiry.
func TestExpiryPastAndAbsent(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	k, other := block.Named("t", "k"), block.Named("t", "other")
	register(t, m, info("a", 1<<20, 0), meta.Inventory{item(k, meta.TierRAM, 1), item(other, meta.TierRAM, 1)})
	absent := block.Named("t", "absent")
	if got := setExpiry(t, m, false, nowMs(m)+10, absent, k); got[0] || !got[1] {
		t.Fatalf("EXPIRE absent, k = %v; want [false true]", got)
	}
	if got := setExpiry(t, m, true, nowMs(m)+10, absent); got[0] {
		t.Fatal("forced EXPIRE of an absent key applied")
	}
	if got := setExpiry(t, m, false, 0, k); !got[0] || keyInfo(t, m, k).ExpireAt != 0 || !seen(t, m, k) {
		t.Fatalf("PERSIST of a visible key: %v, %+v", got, keyInfo(t, m, k))
	}
	if got := setExpiry(t, m, false, nowMs(m), other); !got[0] || seen(t, m, other) {
		t.Fatalf("EXPIRE at now: applied %v, visible %v; want applied and hidden", got[0], seen(t, m, other))
	}
	if got := setExpiry(t, m, false, 1, k); !got[0] || seen(t, m, k) {
		t.Fatalf("EXPIRE in 1970: applied %v, visible %v; want applied and hidden", got[0], seen(t, m, k))
	}
	if keyInfo(t, m, absent).Present {
		t.Fatal("absent key present")
	}
	if st := m.Stats(); st.Expiring != 0 {
		t.Errorf("Stats.Expiring = %d after only past expiries", st.Expiring)
	}
}

// TestExpiryDroppedWithLastReplica: the expiry record lives while any
// replica of its key does; once the last leaves the index (a delta, a
// dropped node) the key written again starts without a TTL.
func TestExpiryDroppedWithLastReplica(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Hour})
	k := block.Named("t", "cached")
	it := item(k, meta.TierRAM, 50)
	sa := register(t, m, info("a", 1<<20, 0), meta.Inventory{it})
	sb := register(t, m, info("b", 1<<20, 1<<20), meta.Inventory{item(k, meta.TierSSD, 50)})
	at := nowMs(m) + 60_000
	setExpiry(t, m, false, at, k)
	if st := m.Stats(); st.Expiring != 1 {
		t.Fatalf("Stats.Expiring = %d, want 1", st.Expiring)
	}

	heartbeat(t, m, "a", sa, meta.Delta{Removed: []meta.ItemKey{{Key: k, Tier: meta.TierRAM}}}, nil, nil)
	if ki := keyInfo(t, m, k); ki.ExpireAt != at || !slices.Equal(ki.Holders, []meta.NodeID{"b"}) {
		t.Fatalf("one replica left: %+v; want the expiry kept, holder b", ki)
	}
	heartbeat(t, m, "b", sb, meta.Delta{Removed: []meta.ItemKey{{Key: k, Tier: meta.TierSSD}}}, nil, nil)
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if ki := keyInfo(t, m, k); ki.Present || ki.ExpireAt != 0 || ki.Holders != nil {
		t.Fatalf("no replica left: %+v; want absent, no expiry", ki)
	}
	heartbeat(t, m, "a", sa, meta.Delta{Added: []meta.Item{it}}, nil, nil)
	if ki := keyInfo(t, m, k); !ki.Visible || ki.ExpireAt != 0 {
		t.Fatalf("written again: %+v; want visible without a TTL", ki)
	}
	clk.Advance(2 * time.Minute)
	if !seen(t, m, k) {
		t.Fatal("written again: hidden by the old expiry")
	}

	// A node dropped for silence takes its keys' records with it.
	setExpiry(t, m, false, nowMs(m)+1000, k)
	clk.Advance(2 * time.Hour)
	if n := m.Expire(); n != 2 {
		t.Fatalf("Expire dropped %d nodes, want 2", n)
	}
	register(t, m, info("a", 1<<20, 0), meta.Inventory{it})
	if ki := keyInfo(t, m, k); !ki.Visible || ki.ExpireAt != 0 {
		t.Fatalf("after the node came back: %+v", ki)
	}
}

// TestExpiryOnDeadNode: a key whose only node missed its TTL is absent to
// non-forced EXPIRE, and present (not visible) to KeyInfo and forced
// EXPIRE until the node is dropped.
func TestExpiryOnDeadNode(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: 3 * time.Second})
	k := block.Named("t", "k")
	register(t, m, info("a", 1<<20, 0), meta.Inventory{item(k, meta.TierRAM, 1)})
	clk.Advance(4 * time.Second)
	m.nextExpiry.Store(1<<63 - 1) // keep the node indexed: no lazy Expire
	if got := setExpiry(t, m, false, nowMs(m)+1000, k); got[0] {
		t.Fatal("EXPIRE of a key on a dead node applied")
	}
	if ki := keyInfo(t, m, k); !ki.Present || ki.Visible {
		t.Fatalf("KeyInfo = %+v; want present, not visible", ki)
	}
	if got := setExpiry(t, m, true, nowMs(m)+1000, k); !got[0] {
		t.Fatal("forced EXPIRE of a present key did not apply")
	}
}

// TestKeyInfoHolders: the holders are distinct nodes (two tiers of one
// node count once), sorted; KeyInfo changes nothing.
func TestKeyInfoHolders(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	k, solo := block.Named("t", "k"), block.Named("t", "solo")
	register(t, m, info("c", 1<<20, 1<<20), meta.Inventory{item(k, meta.TierRAM, 1), item(k, meta.TierSSD, 1)})
	register(t, m, info("a", 1<<20, 0), meta.Inventory{item(k, meta.TierRAM, 1), item(solo, meta.TierRAM, 1)})
	register(t, m, info("b", 1<<20, 0), nil)
	dst := make([]meta.KeyInfo, 0, 3)
	dst, err := m.KeyInfo([]block.Key{k, block.Named("t", "nope"), solo}, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []meta.KeyInfo{
		{Present: true, Visible: true, Holders: []meta.NodeID{"a", "c"}},
		{},
		{Present: true, Visible: true, Holders: []meta.NodeID{"a"}},
	}
	if fmt.Sprint(dst) != fmt.Sprint(want) {
		t.Fatalf("KeyInfo = %+v\nwant %+v", dst, want)
	}
	// The Holders storage of dst is reused.
	first := &dst[0].Holders[0]
	if dst, err = m.KeyInfo([]block.Key{k}, dst); err != nil || &dst[0].Holders[0] != first {
		t.Errorf("KeyInfo did not reuse dst's Holders (%v)", err)
	}
	if st := m.Stats(); st.LeasesGranted != 0 || st.Lookups != 0 {
		t.Errorf("KeyInfo had side effects: %+v", st)
	}
}

// TestKeyOpsValidate: bad keys are refused with ErrBadRequest, naming the
// key, and change nothing.
func TestKeyOpsValidate(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	k := block.Named("t", "k")
	register(t, m, info("a", 1<<20, 0), meta.Inventory{item(k, meta.TierRAM, 1)})
	long := block.Named("t", strings.Repeat("n", block.MaxNameLen+1))
	cases := []struct {
		name string
		keys []block.Key
		at   []int64
	}{
		{"chain key", []block.Key{k, {Tenant: "t", ID: 1}}, []int64{1, 1}},
		{"two tenants", []block.Key{k, block.Named("u", "k")}, []int64{1, 1}},
		{"long name", []block.Key{long}, []int64{1}},
		{"bad tenant", []block.Key{block.Named("a/b", "k")}, []int64{1}},
		{"times for keys", []block.Key{k}, []int64{1, 2}},
		{"negative time", []block.Key{k}, []int64{-1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := m.SetExpiry(c.keys, c.at, true, nil); !errors.Is(err, meta.ErrBadRequest) {
				t.Errorf("SetExpiry: %v, want ErrBadRequest", err)
			}
			if len(c.keys) != len(c.at) || c.at[0] < 0 {
				return
			}
			if _, err := m.KeyInfo(c.keys, nil); !errors.Is(err, meta.ErrBadRequest) {
				t.Errorf("KeyInfo: %v, want ErrBadRequest", err)
			}
		})
	}
	if keyInfo(t, m, k).ExpireAt != 0 {
		t.Fatal("a refused SetExpiry changed the key")
	}
	if _, _, err := m.Scan("a/b", 0, 10, nil); !errors.Is(err, meta.ErrBadRequest) {
		t.Errorf("Scan of a bad tenant: %v", err)
	}
	if n := m.CountKeys("a/b"); n != 0 {
		t.Errorf("CountKeys of a bad tenant = %d", n)
	}
}

// scanAll runs a whole scan of tenant with count, calling between (if not
// nil) after every call, and returns how often each name came back.
func scanAll(t testing.TB, m *Master, tenant string, count int, between func(call int)) map[string]int {
	t.Helper()
	got := map[string]int{}
	var cursor uint64
	var names []string
	for call := 0; ; call++ {
		if call > 1_000_000 {
			t.Fatal("the scan does not end")
		}
		var err error
		cursor, names, err = m.Scan(tenant, cursor, count, names)
		if err != nil {
			t.Fatal(err)
		}
		limit := count
		if limit <= 0 {
			limit = DefaultScanCount
		}
		if len(names) > min(limit, MaxScanCount) { // no hash groups here: one name per hash
			t.Fatalf("call %d: %d names for count %d", call, len(names), count)
		}
		for _, n := range names {
			got[n]++
		}
		if cursor == 0 {
			return got
		}
		if between != nil {
			between(call)
		}
	}
}

func namedItems(tenant, prefix string, n int) []meta.Item {
	out := make([]meta.Item, n)
	for i := range out {
		out[i] = item(block.Named(tenant, fmt.Sprintf("%s%d", prefix, i)), meta.TierRAM, 1)
	}
	return out
}

// TestScanEveryKeyOnce: with a small count, a scan of 10,000 keys over
// every shard returns each of the tenant's visible named keys exactly once
// (the index does not change), none of another tenant, no chain key, no
// expired key.
func TestScanEveryKeyOnce(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	mine := namedItems("t", "k", 10_000)
	in := inv(mine, namedItems("u", "k", 500), ram("t", 1, 2, 3))
	register(t, m, info("a", 1<<40, 0), in)
	gone := block.Named("t", "k17")
	setExpiry(t, m, false, 1, gone)
	for _, count := range []int{1, 7, 0, 5000} {
		got := scanAll(t, m, "t", count, nil)
		if len(got) != len(mine)-1 {
			t.Errorf("count %d: %d distinct names, want %d", count, len(got), len(mine)-1)
		}
		for _, it := range mine {
			if n := got[it.Key.Name]; n != 1 && it.Key != gone {
				t.Fatalf("count %d: %q returned %d times, want once", count, it.Key.Name, n)
			}
		}
		if got[gone.Name] != 0 {
			t.Errorf("count %d: the expired key was returned", count)
		}
	}
	if n, e := m.KeyCounts("t"); n != int64(len(mine)-1) || e != 0 {
		t.Errorf("KeyCounts(t) = %d, %d; want %d, 0", n, e, len(mine)-1)
	}
}

// TestScanBounds: count defaults to 10, is clamped to MaxScanCount, and a
// reply of long names stops at MaxScanBytes; a call on an empty tenant
// ends with nothing.
func TestScanBounds(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	long := make([]meta.Item, 1000)
	for i := range long {
		long[i] = item(block.Named("t", fmt.Sprintf("%04d%s", i, strings.Repeat("x", block.MaxNameLen-4))), meta.TierRAM, 1)
	}
	register(t, m, info("a", 1<<40, 0), inv(long, namedItems("s", "k", 9000)))
	_, names, err := m.Scan("s", 0, 0, nil)
	if err != nil || len(names) > DefaultScanCount || len(names) == 0 {
		t.Fatalf("count 0: %d names, %v; want 1 to %d", len(names), err, DefaultScanCount)
	}
	_, names, _ = m.Scan("s", 0, 1<<30, nil)
	if len(names) > MaxScanCount {
		t.Fatalf("count 2^30: %d names, want at most %d", len(names), MaxScanCount)
	}
	total := 0
	for cursor := uint64(0); ; {
		cursor, names, err = m.Scan("t", cursor, MaxScanCount, names)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, n := range names {
			size += len(n)
		}
		if size > MaxScanBytes+block.MaxNameLen {
			t.Fatalf("a reply of %d name bytes, budget %d", size, MaxScanBytes)
		}
		total += len(names)
		if cursor == 0 {
			break
		}
	}
	if total != len(long) {
		t.Fatalf("scan of long names: %d, want %d", total, len(long))
	}
	if got := scanAll(t, m, "nobody", 10, nil); len(got) != 0 {
		t.Fatalf("scan of an empty tenant: %v", got)
	}
}

// TestScanKeepsHashGroups: names sharing an id (one hash) come in one
// reply even over count, so a cursor never has to resume inside them.
func TestScanKeepsHashGroups(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	var in meta.Inventory
	for _, id := range []uint64{7, 8, 9} {
		for _, n := range []string{"a", "b", "c"} {
			in = append(in, item(block.Key{Tenant: "t", ID: id, Name: fmt.Sprintf("%s%d", n, id)}, meta.TierRAM, 1))
		}
	}
	register(t, m, info("a", 1<<20, 0), in)
	seenAll := map[string]int{}
	var cursor uint64
	for {
		var names []string
		var err error
		cursor, names, err = m.Scan("t", cursor, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 0 && len(names) != 3 {
			t.Fatalf("a reply of %v; want one whole group of 3", names)
		}
		for _, n := range names {
			seenAll[n]++
		}
		if cursor == 0 {
			break
		}
	}
	if len(seenAll) != 9 {
		t.Fatalf("returned %v", seenAll)
	}
}

// TestScanWhileChanging: keys added and removed between the calls of a
// scan (and concurrently with them) do not hide a key present throughout.
func TestScanWhileChanging(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	stable := namedItems("t", "stable", 10_000)
	volatile := namedItems("t", "vol", 3000)
	s := register(t, m, info("a", 1<<40, 0), inv(stable, volatile))
	fresh := 0
	got := scanAll(t, m, "t", 5, func(call int) {
		var d meta.Delta
		if call < len(volatile) {
			d.Removed = append(d.Removed, meta.ItemKey{Key: volatile[call].Key, Tier: meta.TierRAM})
		}
		for range 2 {
			d.Added = append(d.Added, item(block.Named("t", fmt.Sprintf("new%d", fresh)), meta.TierRAM, 1))
			fresh++
		}
		heartbeat(t, m, "a", s, d, nil, nil)
	})
	for _, it := range stable {
		if got[it.Key.Name] == 0 {
			t.Fatalf("%q, present throughout, was not returned", it.Key.Name)
		}
	}

	// The same while another goroutine changes the index.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			it := item(block.Named("t", fmt.Sprintf("churn%d", i%500)), meta.TierRAM, 1)
			d := meta.Delta{Added: []meta.Item{it}}
			if i%2 == 1 {
				d = meta.Delta{Removed: []meta.ItemKey{{Key: it.Key, Tier: meta.TierRAM}}}
			}
			if _, err := m.Heartbeat("a", s, d, meta.NodeUsage{}, nil, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	got = scanAll(t, m, "t", 50, nil)
	close(stop)
	wg.Wait()
	for _, it := range stable {
		if got[it.Key.Name] == 0 {
			t.Fatalf("concurrent changes: %q, present throughout, was not returned", it.Key.Name)
		}
	}
}

// TestCountKeys: CountKeys and KeyCounts count the tenant's visible named
// keys (not chain keys, other tenants', expired ones or a dead node's),
// and the expiring ones among them.
func TestCountKeys(t *testing.T) {
	m, clk := newTest(t, Options{NodeTTL: time.Minute})
	a, b, c := block.Named("t", "a"), block.Named("t", "b"), block.Named("t", "c")
	sa := register(t, m, info("a", 1<<20, 0), inv([]meta.Item{item(a, meta.TierRAM, 1), item(b, meta.TierRAM, 1), item(c, meta.TierRAM, 1)},
		ram("t", 1, 2), namedItems("u", "x", 4)))
	register(t, m, info("b", 1<<20, 0), namedItems("t", "onb", 2))
	if n := m.CountKeys("t"); n != 5 {
		t.Fatalf("CountKeys(t) = %d, want 5", n)
	}
	setExpiry(t, m, false, nowMs(m)+30_000, a)
	setExpiry(t, m, false, nowMs(m)+90_000, b)
	setExpiry(t, m, false, 1, c)
	if n, e := m.KeyCounts("t"); n != 4 || e != 2 {
		t.Fatalf("KeyCounts(t) = %d, %d; want 4, 2", n, e)
	}
	if st := m.Stats(); st.Expiring != 2 {
		t.Fatalf("Stats.Expiring = %d, want 2", st.Expiring)
	}
	clk.Advance(40 * time.Second)
	heartbeat(t, m, "a", sa, meta.Delta{}, nil, nil)
	if n, e := m.KeyCounts("t"); n != 3 || e != 1 {
		t.Fatalf("after a's expiry: KeyCounts(t) = %d, %d; want 3, 1", n, e)
	}
	clk.Advance(30 * time.Second) // b's node is past its TTL
	if n := m.CountKeys("t"); n != 1 {
		t.Fatalf("with node b gone: CountKeys(t) = %d, want 1 (b)", n)
	}
	if n := m.CountKeys("u"); n != 4 {
		t.Fatalf("CountKeys(u) = %d, want 4", n)
	}
}

// TestKeyOpsConcurrent: SetExpiry, KeyInfo, Scan and KeyCounts race with
// nodes adding and removing the same keys (run with -race); the expiry
// records never outlive their keys' replicas (CheckInvariants, also at the
// end of the test).
func TestKeyOpsConcurrent(t *testing.T) {
	m, _ := newTest(t, Options{NodeTTL: time.Hour})
	const nodes, keys, steps = 3, 64, 300
	key := func(i int) block.Key { return block.Named("t", fmt.Sprintf("k%d", i%keys)) }
	sess := make([]meta.Session, nodes)
	for n := range nodes {
		sess[n] = register(t, m, info(meta.NodeID(fmt.Sprintf("n%d", n)), 1<<30, 0), nil)
	}
	var wg sync.WaitGroup
	for n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := meta.NodeID(fmt.Sprintf("n%d", n))
			held := map[block.Key]bool{}
			for i := range steps {
				k := key(i*7 + n)
				d := meta.Delta{Added: []meta.Item{item(k, meta.TierRAM, 1)}}
				if held[k] {
					d = meta.Delta{Removed: []meta.ItemKey{{Key: k, Tier: meta.TierRAM}}}
				}
				held[k] = !held[k]
				if _, err := m.Heartbeat(id, sess[n], d, meta.NodeUsage{}, nil, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var infos []meta.KeyInfo
		var names []string
		var ok []bool
		for i := range steps {
			ks := []block.Key{key(i), key(i + 1)}
			var err error
			if ok, err = m.SetExpiry(ks, []int64{int64(i%3) * (nowMs(m) + 1000), 1}, i%2 == 0, ok); err != nil {
				t.Error(err)
				return
			}
			if infos, err = m.KeyInfo(ks, infos); err != nil {
				t.Error(err)
				return
			}
			for _, ki := range infos {
				if ki.Visible && !ki.Present || !ki.Present && (ki.ExpireAt != 0 || ki.Holders != nil) {
					t.Errorf("inconsistent KeyInfo %+v", ki)
				}
			}
			if _, names, err = m.Scan("t", uint64(i), 5, names); err != nil {
				t.Error(err)
				return
			}
			if n, e := m.KeyCounts("t"); e > n {
				t.Errorf("KeyCounts = %d keys, %d expiring", n, e)
			}
			if i%50 == 0 {
				if err := m.CheckInvariants(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	wg.Wait()
}
