package hitrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// req builds a request whose input covers its blocks exactly.
func req(ts int64, ids ...uint64) trace.Request {
	return trace.Request{Timestamp: ts, InputLength: len(ids) * trace.BlockTokens, OutputLength: 1, HashIDs: ids}
}

// replay runs reqs and returns the result and the per-request (node, hit)
// pairs in replay order.
func replay(t *testing.T, reqs []trace.Request, opts Options) (Result, [][2]int) {
	t.Helper()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := prepare(reqs)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Policy.NeedsFuture() {
		p.computeNextUses()
	}
	var per [][2]int
	res, err := p.run(opts.withDefaults(), func(i, node, hit int) {
		if i != len(per) {
			t.Fatalf("observed request %d out of order", i)
		}
		per = append(per, [2]int{node, hit})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Run must agree with the observed replay.
	viaRun, err := Run(reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(viaRun) != fmt.Sprint(res) {
		t.Fatalf("Run = %+v, replay = %+v", viaRun, res)
	}
	return res, per
}

func hits(per [][2]int) []int {
	out := make([]int, len(per))
	for i, p := range per {
		out[i] = p[1]
	}
	return out
}

func nodes(per [][2]int) []int {
	out := make([]int, len(per))
	for i, p := range per {
		out[i] = p[0]
	}
	return out
}

func TestTimestampOrderTiesInFileOrder(t *testing.T) {
	// File order: A(t=2) B(t=1) C(t=2) D(t=2). Replay: B A C D.
	// Capacity 1, LRU: B puts 1; A hits 1; C replaces it with 2; D misses 1.
	// File order would give A miss, B hit; an unstable sort could put D
	// before C (D would hit).
	reqs := []trace.Request{req(2, 1), req(1, 1), req(2, 2), req(2, 1)}
	res, per := replay(t, reqs, Options{Capacity: 1})
	if got, want := hits(per), []int{0, 1, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("hits in replay order %v, want %v", got, want)
	}
	if res.HitBlocks != 1 || res.Requests != 4 || res.Blocks != 4 {
		t.Fatalf("result %+v", res)
	}
	if reqs[0].Timestamp != 2 || reqs[1].Timestamp != 1 {
		t.Fatal("Run reordered the caller's slice")
	}
}

func TestHitLengthCheckedBeforeUpdate(t *testing.T) {
	tests := []struct {
		name string
		reqs []trace.Request
		cap  int
		want []int
	}{
		// The second 5 is a cache hit, but not a prefix hit: the request
		// found nothing when it arrived.
		{"own repeat", []trace.Request{req(0, 5, 5)}, 10, []int{0}},
		{"own repeat later", []trace.Request{req(0, 5, 6, 5, 6)}, 10, []int{0}},
		// The prefix stops at the first absent key even if later keys are
		// cached.
		{"gap", []trace.Request{req(0, 1, 3), req(1, 1, 2, 3)}, 10, []int{0, 1}},
		// Cached prefix then the request evicts its own prefix (capacity
		// 2): the count is taken before.
		{"self eviction", []trace.Request{req(0, 1, 2), req(1, 1, 2, 3, 4)}, 2, []int{0, 2}},
		{"full hit", []trace.Request{req(0, 1, 2), req(1, 1, 2)}, 10, []int{0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, per := replay(t, tt.reqs, Options{Capacity: tt.cap})
			if got := hits(per); !slices.Equal(got, tt.want) {
				t.Fatalf("hits %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	reqs := []trace.Request{req(0, 1, 2), req(1, 1, 2), req(2, 1, 2), req(3, 3)}
	tests := []struct {
		routing   string
		nodes     []int
		hits      []int
		perNode   []int
		hitBlocks int64
	}{
		// rr: 0,1,0,1 — only the third request finds its prefix.
		{RoundRobin, []int{0, 1, 0, 1}, []int{0, 0, 2, 0}, []int{2, 2}, 2},
		// affinity: the first goes to 0 (tie, lowest index), the next two
		// follow their prefix, the last (no prefix anywhere) goes to the
		// cache with fewer requests.
		{Affinity, []int{0, 0, 0, 1}, []int{0, 2, 2, 0}, []int{3, 1}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.routing, func(t *testing.T) {
			res, per := replay(t, reqs, Options{Capacity: 10, Nodes: 2, Routing: tt.routing})
			if got := nodes(per); !slices.Equal(got, tt.nodes) {
				t.Errorf("nodes %v, want %v", got, tt.nodes)
			}
			if got := hits(per); !slices.Equal(got, tt.hits) {
				t.Errorf("hits %v, want %v", got, tt.hits)
			}
			if !slices.Equal(res.NodeRequests, tt.perNode) || res.HitBlocks != tt.hitBlocks {
				t.Errorf("node requests %v, hit blocks %d; want %v, %d", res.NodeRequests, res.HitBlocks, tt.perNode, tt.hitBlocks)
			}
			if res.Routing != tt.routing || res.Nodes != 2 {
				t.Errorf("result names routing %q, nodes %d", res.Routing, res.Nodes)
			}
		})
	}
}

func TestAffinityTieBreaks(t *testing.T) {
	tests := []struct {
		name  string
		reqs  []trace.Request
		nodes int
		want  []int // cache of each request
		hits  []int
	}{
		{
			// No prefix anywhere: fewest requests, then lowest index;
			// [2 5] follows its prefix to cache 1.
			"new prefixes", []trace.Request{req(0, 1), req(1, 2), req(2, 3), req(3, 4), req(4, 2, 5)}, 3,
			[]int{0, 1, 2, 0, 1}, []int{0, 0, 0, 0, 1},
		},
		{
			// Key 5 ends up in both caches ([9 5] goes to the emptier
			// cache 1). [5] then ties on hit length and on request count
			// → lowest index 0; [5 6] ties on hit length, cache 1 has
			// fewer requests → 1.
			"equal prefixes", []trace.Request{req(0, 5), req(1, 9, 5), req(2, 5), req(3, 5, 6)}, 2,
			[]int{0, 1, 0, 1}, []int{0, 0, 1, 1},
		},
		{
			// The longest prefix wins over load.
			"longest", []trace.Request{req(0, 1, 2), req(1, 1, 2), req(2, 1, 2), req(3, 1, 3)}, 2,
			[]int{0, 0, 0, 0}, []int{0, 2, 2, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, per := replay(t, tt.reqs, Options{Capacity: 10, Nodes: tt.nodes, Routing: Affinity})
			if got := nodes(per); !slices.Equal(got, tt.want) {
				t.Errorf("nodes %v, want %v", got, tt.want)
			}
			if got := hits(per); !slices.Equal(got, tt.hits) {
				t.Errorf("hits %v, want %v", got, tt.hits)
			}
		})
	}
}

func TestOneNodeIsGlobal(t *testing.T) {
	reqs := randomTrace(1, 300, 40)
	for _, spec := range []string{"lru", "s3fifo+second-hit", "belady"} {
		s, _ := policy.ParseSpec(spec)
		a, err := Run(reqs, Options{Policy: s, Capacity: 50, Routing: RoundRobin})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(reqs, Options{Policy: s, Capacity: 50, Nodes: 1, Routing: Affinity})
		if err != nil {
			t.Fatal(err)
		}
		a.Routing, b.Routing = "", ""
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s: rr %+v != affinity %+v with one node", spec, a, b)
		}
	}
}

func TestTokenMinRule(t *testing.T) {
	// 700 tokens in 2 blocks: a full hit is 700 tokens, not 1024; a
	// one-block hit is 512.
	short := trace.Request{Timestamp: 0, InputLength: 700, OutputLength: 1, HashIDs: []uint64{1, 2}}
	partial := trace.Request{Timestamp: 2, InputLength: 1500, OutputLength: 1, HashIDs: []uint64{1, 3, 4}}
	res, per := replay(t, []trace.Request{short, short, partial}, Options{Capacity: 10})
	if got := hits(per); !slices.Equal(got, []int{0, 2, 1}) {
		t.Fatalf("hits %v", got)
	}
	if res.HitTokens != 700+512 || res.InputTokens != 700+700+1500 {
		t.Fatalf("hit tokens %d of %d, want %d of %d", res.HitTokens, res.InputTokens, 1212, 2900)
	}
	if res.HitBlocks != 3 || res.Blocks != 7 || res.Accesses != 7 {
		t.Fatalf("hit blocks %d of %d (%d accesses), want 3 of 7", res.HitBlocks, res.Blocks, res.Accesses)
	}
	if want := 1212.0 / 2900; res.TokenHitRatio != want {
		t.Fatalf("token hit ratio %v, want %v", res.TokenHitRatio, want)
	}
	if want := 3.0 / 7; res.BlockHitRatio != want {
		t.Fatalf("block hit ratio %v, want %v", res.BlockHitRatio, want)
	}
}

// recorder is an LRU that records the accesses the engine passes.
type recorder struct {
	*policy.LRU
	got []policy.Access
}

func (r *recorder) Insert(a policy.Access) { r.got = append(r.got, a); r.LRU.Insert(a) }
func (r *recorder) Hit(a policy.Access)    { r.got = append(r.got, a); r.LRU.Hit(a) }

func TestAccessFields(t *testing.T) {
	// Replay order: [1 2] (t=0), [2 3] (t=1), [1] (t=2) — accesses 0..4.
	p, err := prepare([]trace.Request{req(2, 1), req(0, 1, 2), req(1, 2, 3)})
	if err != nil {
		t.Fatal(err)
	}
	p.computeNextUses()
	if want := []int64{4, 2, policy.NoNextUse, policy.NoNextUse, policy.NoNextUse}; !slices.Equal(p.next, want) {
		t.Fatalf("next uses %v, want %v", p.next, want)
	}
	rec := &recorder{LRU: policy.NewLRU(10)}
	c := policy.NewCache(10, rec, nil)
	var seq int64
	for _, r := range p.reqs {
		_, seq = accessCounting(c, r.HashIDs, seq, p.next)
	}
	want := []policy.Access{
		{Key: 1, Hint: block.Hint{Depth: 0}, Time: 0, NextUse: 4},
		{Key: 2, Hint: block.Hint{Depth: 1, Parent: 1}, Time: 1, NextUse: 2},
		{Key: 2, Hint: block.Hint{Depth: 0}, Time: 2, NextUse: policy.NoNextUse},
		{Key: 3, Hint: block.Hint{Depth: 1, Parent: 2}, Time: 3, NextUse: policy.NoNextUse},
		{Key: 1, Hint: block.Hint{Depth: 0}, Time: 4, NextUse: policy.NoNextUse},
	}
	if !slices.Equal(rec.got, want) {
		t.Fatalf("accesses\n got %+v\nwant %+v", rec.got, want)
	}
	// Without a future-needing policy NextUse is NoNextUse throughout.
	rec = &recorder{LRU: policy.NewLRU(10)}
	accessAll(policy.NewCache(10, rec, nil), []uint64{7, 8}, 100, nil)
	if rec.got[0].NextUse != policy.NoNextUse || rec.got[1].Time != 101 || rec.got[1].Parent != 7 {
		t.Fatalf("accesses %+v", rec.got)
	}
}

// randomTrace returns n requests with shared prefixes: each picks one of
// a few "system prompts" and either extends an earlier request or adds
// fresh blocks; timestamps repeat (ties) and go backwards in file order
// now and then.
func randomTrace(seed uint64, n, keys int) []trace.Request {
	s := seed*0x9e3779b97f4a7c15 + 1
	rnd := func(m int) int {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return int(s % uint64(m))
	}
	var out []trace.Request
	fresh := uint64(keys)
	for i := range n {
		var ids []uint64
		if len(out) > 0 && rnd(2) == 0 {
			prev := out[rnd(len(out))].HashIDs
			ids = append(ids, prev[:1+rnd(len(prev))]...)
		} else {
			ids = append(ids, uint64(rnd(4)))
		}
		for range rnd(5) {
			if rnd(3) == 0 {
				ids = append(ids, uint64(rnd(keys)))
			} else {
				fresh++
				ids = append(ids, fresh)
			}
		}
		tokens := (len(ids)-1)*trace.BlockTokens + 1 + rnd(trace.BlockTokens)
		out = append(out, trace.Request{Timestamp: int64(i/3 - rnd(2)), InputLength: tokens, OutputLength: 1, HashIDs: ids})
	}
	return out
}

// naive is the engine written the obvious way: sort, check the prefix
// with Contains, then access every block. The engine must match it.
func naive(t *testing.T, reqs []trace.Request, opts Options) Result {
	t.Helper()
	opts = opts.withDefaults()
	sorted := slices.Clone(reqs)
	slices.SortStableFunc(sorted, func(a, b trace.Request) int { return int(a.Timestamp - b.Timestamp) })
	type acc struct {
		key uint64
		seq int64
	}
	var all []acc
	for _, r := range sorted {
		for _, k := range r.HashIDs {
			all = append(all, acc{k, int64(len(all))})
		}
	}
	next := make([]int64, len(all))
	for i := range all {
		next[i] = policy.NoNextUse
		for j := i + 1; j < len(all); j++ {
			if all[j].key == all[i].key {
				next[i] = int64(j)
				break
			}
		}
	}
	caches := make([]*policy.Cache, opts.Nodes)
	for i := range caches {
		c, err := opts.Policy.NewCache(opts.Capacity)
		if err != nil {
			t.Fatal(err)
		}
		caches[i] = c
	}
	counts := make([]int, opts.Nodes)
	res := Result{Policy: opts.Policy.String(), Capacity: opts.Capacity, Nodes: opts.Nodes, Routing: opts.Routing, Requests: len(reqs)}
	var seq int64
	for i, r := range sorted {
		h := make([]int, opts.Nodes)
		for n, c := range caches {
			for _, k := range r.HashIDs {
				if !c.Contains(k) {
					break
				}
				h[n]++
			}
		}
		node := i % opts.Nodes
		if opts.Routing == Affinity {
			node = 0
			for n := range caches {
				if h[n] > h[node] || (h[n] == h[node] && counts[n] < counts[node]) {
					node = n
				}
			}
		}
		counts[node]++
		for j, k := range r.HashIDs {
			a := policy.Access{Key: k, Hint: block.Hint{Depth: j}, Time: seq, NextUse: policy.NoNextUse}
			if j > 0 {
				a.Parent = r.HashIDs[j-1]
			}
			if opts.Policy.NeedsFuture() {
				a.NextUse = next[seq]
			}
			caches[node].Access(a)
			seq++
		}
		res.HitBlocks += int64(h[node])
		res.HitTokens += int64(r.HitTokens(h[node]))
		res.InputTokens += int64(r.InputLength)
		res.Blocks += int64(len(r.HashIDs))
	}
	res.Accesses = seq
	res.TokenHitRatio = float64(res.HitTokens) / float64(res.InputTokens)
	res.BlockHitRatio = float64(res.HitBlocks) / float64(res.Blocks)
	if opts.Nodes > 1 {
		res.NodeRequests = counts
	}
	return res
}

// TestMatchesNaive compares the engine (fused prefix counting, shared
// next-use table) with the obvious implementation on random traces, for
// every preset policy, with one and several caches and both routings.
func TestMatchesNaive(t *testing.T) {
	for seed := range uint64(3) {
		reqs := randomTrace(seed, 400, 60)
		for _, spec := range append(policy.Presets(), policy.Spec{Eviction: "belady", Admission: "cms"}) {
			for _, o := range []Options{
				{Capacity: 30},
				{Capacity: 7, Nodes: 3},
				{Capacity: 12, Nodes: 3, Routing: Affinity},
			} {
				o.Policy = spec
				got, err := Run(reqs, o)
				if err != nil {
					t.Fatal(err)
				}
				if want := naive(t, reqs, o); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("seed %d %s cap=%d nodes=%d %s:\n got  %+v\n want %+v", seed, spec, o.Capacity, o.Nodes, o.Routing, got, want)
				}
			}
		}
	}
}

// TestInfiniteCache: with room for every block and no admission filter,
// every policy reaches the same "infinite cache" ratio, computed here with
// a plain set.
func TestInfiniteCache(t *testing.T) {
	reqs := randomTrace(7, 500, 80)
	seen := make(map[uint64]bool)
	var hit, in int64
	sorted := slices.Clone(reqs)
	slices.SortStableFunc(sorted, func(a, b trace.Request) int { return int(a.Timestamp - b.Timestamp) })
	for _, r := range sorted {
		h := 0
		for _, k := range r.HashIDs {
			if !seen[k] {
				break
			}
			h++
		}
		for _, k := range r.HashIDs {
			seen[k] = true
		}
		hit += int64(r.HitTokens(h))
		in += int64(r.InputLength)
	}
	want := float64(hit) / float64(in)
	if want == 0 {
		t.Fatal("test trace has no reuse")
	}
	for _, name := range policy.EvictionNames() {
		res, err := Run(reqs, Options{Policy: policy.Spec{Eviction: name}, Capacity: 2 * len(seen)})
		if err != nil {
			t.Fatal(err)
		}
		if res.TokenHitRatio != want {
			t.Errorf("%s: token hit ratio %v, infinite cache %v", name, res.TokenHitRatio, want)
		}
	}
}

func TestZeroCapacityAndEmptyTrace(t *testing.T) {
	res, err := Run(randomTrace(1, 100, 10), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.HitBlocks != 0 || res.TokenHitRatio != 0 || res.Policy != "lru" || res.Nodes != 1 || res.Routing != RoundRobin {
		t.Fatalf("zero options: %+v", res)
	}
	res, err = Run(nil, Options{Capacity: 10})
	if err != nil || res.Requests != 0 || res.TokenHitRatio != 0 {
		t.Fatalf("empty trace: %+v, %v", res, err)
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		reqs []trace.Request
		opts Options
		want string
	}{
		{"negative capacity", nil, Options{Capacity: -1}, "capacity: -1: want >= 0"},
		{"negative nodes", nil, Options{Nodes: -2}, "nodes: -2"},
		{"routing", nil, Options{Routing: "random"}, `routing: unknown routing "random" (known: rr, affinity)`},
		{"policy", nil, Options{Policy: policy.Spec{Eviction: "clock"}}, `unknown eviction policy "clock"`},
		{"admission", nil, Options{Policy: policy.Spec{Eviction: "lru", Admission: "tinylfu"}}, `unknown admission policy "tinylfu"`},
		{"negative input", []trace.Request{req(0, 1), {Timestamp: 5, InputLength: -3}}, Options{}, "request 1 (timestamp 5): input_length -3 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(tt.reqs, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSweep(t *testing.T) {
	reqs := randomTrace(3, 300, 50)
	specs := []policy.Spec{{Eviction: "lru"}, {Eviction: "belady"}, {Eviction: "arc", Admission: "second-hit"}}
	caps := []int{5, 20, 0, 80}
	for _, workers := range []int{1, 3, 0} {
		got, err := Sweep(context.Background(), reqs, SweepOptions{Policies: specs, Capacities: caps, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(specs)*len(caps) {
			t.Fatalf("%d results, want %d", len(got), len(specs)*len(caps))
		}
		i := 0
		for _, s := range specs {
			for _, c := range caps {
				want, err := Run(reqs, Options{Policy: s, Capacity: c})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got[i]) != fmt.Sprint(want) {
					t.Fatalf("workers=%d result %d: %+v, want %+v", workers, i, got[i], want)
				}
				i++
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Sweep(ctx, reqs, SweepOptions{Policies: specs, Capacities: caps, Workers: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sweep: error %v", err)
	}
	for _, bad := range []SweepOptions{
		{Capacities: caps},
		{Policies: specs},
		{Policies: specs, Capacities: []int{5, -1}},
		{Policies: specs, Capacities: caps, Workers: -1},
	} {
		if _, err := Sweep(context.Background(), reqs, bad); err == nil {
			t.Errorf("Sweep(%+v) accepted", bad)
		}
	}
}

// TestAffinitySkewWarning checks the warning of an affinity run whose
// requests all share block 0 (all on one node), and its absence for rr
// and for a balanced affinity run.
func TestAffinitySkewWarning(t *testing.T) {
	var shared, disjoint []trace.Request
	for i := range 20 {
		shared = append(shared, req(int64(i), 0, uint64(100+i)))
		disjoint = append(disjoint, req(int64(i), uint64(1000+i)))
	}
	for _, tt := range []struct {
		name    string
		reqs    []trace.Request
		routing string
		warn    bool
	}{
		{"affinity, shared first block", shared, Affinity, true},
		{"rr, shared first block", shared, RoundRobin, false},
		{"affinity, no sharing", disjoint, Affinity, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(tt.reqs, Options{Capacity: 100, Nodes: 4, Routing: tt.routing})
			if err != nil {
				t.Fatal(err)
			}
			w := res.Warning()
			if (w != "") != tt.warn {
				t.Fatalf("Warning() = %q with node requests %v; want a warning: %v", w, res.NodeRequests, tt.warn)
			}
			if tt.warn && !strings.Contains(w, "100% of the requests (20 of 20) to node 0 of 4") {
				t.Errorf("Warning() = %q, want it to say 100%% (20 of 20) on node 0 of 4", w)
			}
		})
	}
}
