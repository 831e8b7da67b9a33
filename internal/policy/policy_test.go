package policy_test

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/policy"
)

// optimalHits returns the most hits any policy can get on seq with a cache
// of capacity blocks, by exhaustive search over resident sets (keys must be
// 0..15). With bypass a miss may leave the cache unchanged; without, the
// missed key must be loaded (demand paging).
func optimalHits(seq []policy.Key, capacity int, bypass bool) int {
	memo := make(map[[2]int]int)
	var best func(i int, set uint16) int
	best = func(i int, set uint16) int {
		if i == len(seq) {
			return 0
		}
		if v, ok := memo[[2]int{i, int(set)}]; ok {
			return v
		}
		bit := uint16(1) << seq[i]
		var v int
		switch {
		case set&bit != 0:
			v = 1 + best(i+1, set)
		case bits.OnesCount16(set) < capacity:
			v = best(i+1, set|bit)
			if bypass {
				v = max(v, best(i+1, set))
			}
		default:
			v = -1
			if bypass {
				v = best(i+1, set)
			}
			for s := set; s != 0; s &= s - 1 {
				out := s & -s
				v = max(v, best(i+1, set&^out|bit))
			}
		}
		memo[[2]int{i, int(set)}] = v
		return v
	}
	return best(0, 0)
}

// TestBeladyIsOptimal checks Belady against exhaustive search on random
// sequences: with bypass it matches the optimum of a cache that may
// bypass, and with NoBypass that of classic demand paging.
func TestBeladyIsOptimal(t *testing.T) {
	r := uint64(42)
	next := func(n int) int {
		r = r*6364136223846793005 + 1442695040888963407
		return int((r >> 33) % uint64(n))
	}
	for trial := range 300 {
		keys := 3 + next(6)
		capacity := 1 + next(4)
		seq := make([]policy.Key, 10+next(20))
		for i := range seq {
			seq[i] = policy.Key(next(keys))
		}
		for _, bypass := range []bool{true, false} {
			c := policy.NewCache(capacity, policy.NewBelady(capacity, policy.BeladyOptions{NoBypass: !bypass}), nil)
			got := strings.Count(hitString(c, seq, nil), "H")
			if want := optimalHits(seq, capacity, bypass); got != want {
				t.Fatalf("trial %d: bypass=%v cap=%d seq=%v: %d hits, optimum %d", trial, bypass, capacity, seq, got, want)
			}
		}
	}
}

// refLRU is a trivially correct LRU: a slice ordered least to most recent.
type refLRU struct {
	keys []policy.Key
	cap  int
}

func (r *refLRU) access(k policy.Key) bool {
	if i := slices.Index(r.keys, k); i >= 0 {
		r.keys = append(slices.Delete(r.keys, i, i+1), k)
		return true
	}
	r.keys = append(r.keys, k)
	if len(r.keys) > r.cap {
		r.keys = r.keys[1:]
	}
	return false
}

// TestLRUMatchesReference compares LRU (and Mooncake with exact sampling,
// or with its default batch order and batches of one block, no watermark,
// which must then be LRU) with the slice model.
func TestLRUMatchesReference(t *testing.T) {
	exact, err := policy.NewMooncakeWith(7, policy.MooncakeOptions{Samples: 1000, HighWatermark: 1, EvictRatio: 1.0 / 7})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := policy.NewMooncakeWith(7, policy.MooncakeOptions{HighWatermark: 1, EvictRatio: 1.0 / 7})
	if err != nil {
		t.Fatal(err)
	}
	for name, ev := range map[string]policy.Eviction{"lru": policy.NewLRU(7), "mooncake-exact": exact, "mooncake-batch-of-1": batch} {
		t.Run(name, func(t *testing.T) {
			c := policy.NewCache(7, ev, nil)
			ref := &refLRU{cap: 7}
			r := uint64(9)
			for i := range 5000 {
				r = r*6364136223846793005 + 1442695040888963407
				k := policy.Key((r >> 33) % 20)
				if got, want := c.Access(policy.Access{Key: k, Time: int64(i)}), ref.access(k); got != want {
					t.Fatalf("access %d of key %d: hit=%v, reference %v", i, k, got, want)
				}
			}
		})
	}
}

// driver feeds a cache accesses with an increasing clock.
type driver struct {
	c   *policy.Cache
	now int64
}

func drive(c *policy.Cache) *driver { return &driver{c: c} }

// access runs keys through the cache and returns the hits.
func (d *driver) access(keys ...policy.Key) (hits int) {
	for _, k := range keys {
		d.now++
		if d.c.Access(policy.Access{Key: k, Time: d.now}) {
			hits++
		}
	}
	return hits
}

func seq(from, n int) []policy.Key {
	out := make([]policy.Key, n)
	for i := range out {
		out[i] = policy.Key(from + i)
	}
	return out
}

// TestScanResistance: a hot set accessed repeatedly, then a long scan of
// one-off keys, then the hot set again. Recency-only policies lose it;
// frequency-aware ones keep it.
func TestScanResistance(t *testing.T) {
	tests := []struct {
		spec     string
		keepsHot bool
	}{
		{"lru", false},
		{"fifo", false},
		{"mooncake", false},
		{"lfu", true},
		{"s3fifo", true},
		{"arc", true},
		{"lru+second-hit", true},
		{"lru+cms", true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			spec, err := policy.ParseSpec(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			c, err := spec.NewCache(100)
			if err != nil {
				t.Fatal(err)
			}
			d := drive(c)
			hot := seq(0, 20)
			for range 4 {
				d.access(hot...)
			}
			d.access(seq(1000, 300)...)
			hits := d.access(hot...)
			if keeps := hits == len(hot); keeps != tt.keepsHot {
				t.Errorf("hot set hits after scan: %d of %d; want keeps=%v", hits, len(hot), tt.keepsHot)
			}
		})
	}
}

// TestFIFOIgnoresHits: a hit does not save the oldest key under FIFO but
// does under LRU.
func TestFIFOIgnoresHits(t *testing.T) {
	for _, tt := range []struct {
		name string
		ev   policy.Eviction
		hit  bool
	}{{"fifo", policy.NewFIFO(3), false}, {"lru", policy.NewLRU(3), true}} {
		c := policy.NewCache(3, tt.ev, nil)
		d := drive(c)
		d.access(1, 2, 3, 1, 4) // 1 is oldest but was just hit
		if got := c.Contains(1); got != tt.hit {
			t.Errorf("%s: key 1 resident=%v, want %v", tt.name, got, tt.hit)
		}
	}
}

// TestLFUAging: under LFU-DA a block that was popular long ago is evicted
// once newer blocks have been hit more recently, instead of squatting
// forever as under plain LFU.
func TestLFUAging(t *testing.T) {
	c := policy.NewCache(4, policy.NewLFU(4), nil)
	d := drive(c)
	for range 5 {
		d.access(1)
	}
	if !c.Contains(1) {
		t.Fatal("key 1 not resident after 5 accesses")
	}
	// Frequency protects key 1 for a while ...
	d.access(10, 11, 12, 13, 14, 15)
	if !c.Contains(1) {
		t.Fatal("key 1 evicted by a few one-off keys despite count 5")
	}
	// ... but the inflation value rises with each eviction, so twice-used
	// newcomers eventually outrank it.
	for i := 0; i < 40 && c.Contains(1); i++ {
		d.access(policy.Key(100+i), policy.Key(100+i))
	}
	if c.Contains(1) {
		t.Fatal("key 1 (count 5, long unused) was never aged out")
	}
}

// TestS3FIFOGhost: a key evicted from the small queue is remembered, and
// on its return it enters the main queue, where it survives a scan.
func TestS3FIFOGhost(t *testing.T) {
	c := policy.NewCache(10, policy.NewS3FIFO(10), nil) // S = 1 block, M = 9
	d := drive(c)
	d.access(1)
	d.access(seq(100, 15)...) // 1 leaves S for the ghost queue
	if c.Contains(1) {
		t.Fatal("key 1 still resident after a scan through S")
	}
	d.access(1) // ghost hit: into M
	d.access(seq(200, 30)...)
	if !c.Contains(1) {
		t.Fatal("key 1 re-admitted from the ghost was lost to a scan of one-off keys")
	}
}

// TestARCAdapts walks ARC through a hand-traced sequence: hits in B1 grow
// T1's target p, a hit in B2 shrinks it.
func TestARCAdapts(t *testing.T) {
	arc := policy.NewARC(4)
	c := policy.NewCache(4, arc, nil)
	d := drive(c)
	steps := []struct {
		keys   []policy.Key
		target int
		why    string
	}{
		// 1 goes to T2; 2..5 fill T1 and REPLACE sends 2 to B1. (A scan
		// of T1 alone leaves no ghosts: with |T1| = c ARC drops T1's LRU.)
		{[]policy.Key{1, 1, 2, 3, 4, 5}, 0, "no ghost hit yet"},
		{[]policy.Key{2}, 1, "B1 hit: p += max(1, |B2|/|B1|) = 1; 3 goes to B1"},
		{[]policy.Key{10, 11}, 1, "misses: 4 and 5 go to B1, 3 falls off"},
		{[]policy.Key{4}, 2, "B1 hit: p = 2; |T1| = 2 is not > p, so T2's LRU (1) goes to B2"},
		{[]policy.Key{1}, 1, "B2 hit: p -= max(1, |B1|/|B2|) = 1"},
	}
	for i, s := range steps {
		d.access(s.keys...)
		if got := arc.Target(); got != s.target {
			t.Fatalf("step %d (%s): target %d, want %d", i, s.why, got, s.target)
		}
	}
}

// TestMooncakeBatches: nothing is evicted until 90% of capacity is passed,
// then 5% of capacity at once; the cache settles between 85% and 90%.
func TestMooncakeBatches(t *testing.T) {
	c := policy.NewCache(100, policy.NewMooncake(100), nil)
	d := drive(c)
	evicted := 0
	c.OnEvict = func(policy.Key) { evicted++ }
	for i := range 90 {
		d.access(policy.Key(i))
	}
	if c.Len() != 90 || evicted != 0 {
		t.Fatalf("after 90 inserts: Len %d, %d evicted; want 90, 0", c.Len(), evicted)
	}
	d.access(90)
	if c.Len() != 86 || evicted != 5 {
		t.Fatalf("after the 91st insert: Len %d, %d evicted; want 86, 5", c.Len(), evicted)
	}
	for i := range 1000 {
		d.access(policy.Key(1000 + i))
		if c.Len() < 86 || c.Len() > 90 {
			t.Fatalf("insert %d: Len %d outside [86, 90]", i, c.Len())
		}
	}
}

// TestMooncakeSeed: the sampling is deterministic for a seed and differs
// across seeds.
func TestMooncakeSeed(t *testing.T) {
	run := func(seed uint64) string {
		p, err := policy.NewMooncakeWith(50, policy.MooncakeOptions{Samples: 5, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		c := policy.NewCache(50, p, nil)
		d := drive(c)
		var b strings.Builder
		c.OnEvict = func(k policy.Key) { fmt.Fprintf(&b, "%d ", k) }
		for i := range 500 {
			d.access(policy.Key(i%137), policy.Key(i%11))
		}
		return b.String()
	}
	if run(1) != run(1) {
		t.Fatal("same seed, different evictions")
	}
	if run(1) == run(2) {
		t.Fatal("different seeds, identical evictions: the seed is ignored")
	}
}

func TestSecondHit(t *testing.T) {
	c := policy.NewCache(4, policy.NewLRU(4), policy.NewSecondHit(4))
	d := drive(c)
	if d.access(1) != 0 || c.Contains(1) {
		t.Fatal("first miss admitted")
	}
	d.access(1)
	if !c.Contains(1) {
		t.Fatal("second miss not admitted")
	}
	d.access(2)
	d.access(10, 11, 12, 13) // push 2 out of the 4-key window
	d.access(2)
	if c.Contains(2) {
		t.Fatal("a miss outside the window was admitted")
	}
}

func TestCMS(t *testing.T) {
	p, err := policy.NewCMSWith(64, policy.CMSOptions{SampleSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	a := func(k policy.Key) bool { return p.Admit(policy.Access{Key: k}) }
	if a(7) {
		t.Fatal("first miss admitted")
	}
	if !a(7) {
		t.Fatal("second miss not admitted")
	}
	for range 3 {
		a(9)
	}
	before := p.Estimate(9)
	for i := range 1000 { // forces one halving
		a(policy.Key(100000 + i))
	}
	if after := p.Estimate(9); after >= before {
		t.Fatalf("estimate of key 9 went from %d to %d across a halving", before, after)
	}
	for _, bad := range []policy.CMSOptions{{Threshold: -1}, {Depth: 9}, {Width: 100}, {SampleSize: -3}} {
		if _, err := policy.NewCMSWith(10, bad); err == nil {
			t.Errorf("NewCMSWith(%+v) accepted", bad)
		}
	}
}

func TestOptionValidation(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"s3 small", policy.S3FIFOOptions{SmallPercent: 101}.Validate(), "SmallPercent"},
		{"s3 move", policy.S3FIFOOptions{MoveToMain: 4}.Validate(), "MoveToMain"},
		{"mooncake samples", policy.MooncakeOptions{Samples: -1}.Validate(), "Samples"},
		{"mooncake watermark", policy.MooncakeOptions{HighWatermark: 1.5}.Validate(), "HighWatermark"},
		{"cms width", policy.CMSOptions{Width: 3}.Validate(), "Width"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.field) {
			t.Errorf("%s: error %v does not name %s", tt.name, tt.err, tt.field)
		}
	}
}

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    policy.Spec
		str     string
		wantErr string
	}{
		{in: "lru", want: policy.Spec{Eviction: "lru"}, str: "lru"},
		{in: "s3fifo+second-hit", want: policy.Spec{Eviction: "s3fifo", Admission: "second-hit"}, str: "s3fifo+second-hit"},
		{in: " LRU+CMS ", want: policy.Spec{Eviction: "lru", Admission: "cms"}, str: "lru+cms"},
		{in: "arc+all", want: policy.Spec{Eviction: "arc"}, str: "arc"},
		{in: "belady", want: policy.Spec{Eviction: "belady"}, str: "belady"},
		{in: "", wantErr: "empty"},
		{in: "lru+", wantErr: "empty policy name"},
		{in: "+cms", wantErr: "empty policy name"},
		{in: "lruu", wantErr: `unknown eviction policy "lruu" (valid: lru, fifo, lfu, s3fifo, arc, mooncake, kvchain, belady)`},
		{in: "lru+nope", wantErr: `unknown admission policy "nope" (valid: all, second-hit, cms)`},
		{in: "lru+cms+second-hit", wantErr: "at most one admission"},
		{in: "kvchain(perr=0.2,seed=1)", want: policy.Spec{Eviction: "kvchain(perr=0.2,seed=1)"}, str: "kvchain(perr=0.2,seed=1)"},
		{in: " KVChain( seed=1 ; perr=0.2 )+CMS", want: policy.Spec{Eviction: "kvchain(perr=0.2,seed=1)", Admission: "cms"}, str: "kvchain(perr=0.2,seed=1)+cms"},
		{in: "kvchain(perr=1e+0)", want: policy.Spec{Eviction: "kvchain(perr=1e+0)"}, str: "kvchain(perr=1e+0)"},
		{in: "kvchain()", want: policy.Spec{Eviction: "kvchain"}, str: "kvchain"},
		{in: "kvchain(perr=1.5)", wantErr: "perr"},
		{in: "kvchain(perr=nan)", wantErr: "perr"},
		{in: "kvchain(seed=-1)", wantErr: "seed"},
		{in: "kvchain(size=3)", wantErr: `unknown parameter "size" (valid: perr, seed, probation)`},
		{in: "kvchain(probation=OFF;perr=0.1)", want: policy.Spec{Eviction: "kvchain(perr=0.1,probation=off)"}, str: "kvchain(perr=0.1,probation=off)"},
		{in: "kvchain(probation=maybe)", wantErr: `probation = "maybe": want on or off`},
		{in: "kvchain(perr=0.1,perr=0.2)", wantErr: "perr given twice"},
		{in: "kvchain(perr)", wantErr: `"perr": want key=value`},
		{in: "kvchain(perr=0.1", wantErr: "parentheses"},
		{in: "kvchain)", wantErr: "')' without '('"},
		{in: "lru(perr=0.1)", wantErr: "lru takes no parameters"},
		{in: "kvchain(perr=0.1)+cms(perr=1)", wantErr: "unknown admission policy"},
	}
	for _, tt := range tests {
		got, err := policy.ParseSpec(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSpec(%q) error %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.str {
			t.Errorf("ParseSpec(%q) = %+v (%q), %v; want %+v (%q)", tt.in, got, got.String(), err, tt.want, tt.str)
		}
	}
	for _, s := range policy.Presets() {
		back, err := policy.ParseSpec(s.String())
		if err != nil || back.String() != s.String() {
			t.Errorf("preset %v does not round-trip: %v, %v", s, back, err)
		}
	}
}

func TestSpecNewCache(t *testing.T) {
	if _, err := (policy.Spec{Eviction: "lru"}).NewCache(-1); err == nil || !strings.Contains(err.Error(), "capacity -1") {
		t.Errorf("negative capacity: error %v", err)
	}
	if _, err := (policy.Spec{Eviction: "nope"}).NewCache(5); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown eviction: error %v", err)
	}
	for _, name := range policy.EvictionNames() {
		c, err := policy.Spec{Eviction: name}.NewCache(0)
		if err != nil {
			t.Fatal(err)
		}
		d := drive(c)
		if d.access(1, 1, 2, 1) != 0 || c.Len() != 0 {
			t.Errorf("%s: a capacity-0 cache holds %d blocks", name, c.Len())
		}
		if c.Eviction().Name() != name {
			t.Errorf("registry name %q builds a policy named %q", name, c.Eviction().Name())
		}
	}
	var zero policy.Spec
	if zero.String() != "lru" || zero.NeedsFuture() {
		t.Errorf("zero Spec is %q, NeedsFuture %v; want lru, false", zero, zero.NeedsFuture())
	}
	if !(policy.Spec{Eviction: "belady", Admission: "second-hit"}).NeedsFuture() {
		t.Error("belady does not need the future")
	}
}

// TestNoAllocSteadyState: once a cache has been full for a while, an access
// allocates nothing, whatever the policy.
func TestNoAllocSteadyState(t *testing.T) {
	for _, spec := range policy.Presets() {
		t.Run(spec.String(), func(t *testing.T) {
			c, err := spec.NewCache(1000)
			if err != nil {
				t.Fatal(err)
			}
			r := uint64(5)
			now := int64(0)
			step := func() {
				r = r*6364136223846793005 + 1442695040888963407
				k := policy.Key((r >> 33) % 5000)
				now++
				c.Access(policy.Access{Key: k, Time: now, NextUse: now + int64(r>>50)})
			}
			for range 50000 {
				step()
			}
			if allocs := testing.AllocsPerRun(5000, step); allocs != 0 {
				t.Fatalf("%v allocations per access", allocs)
			}
		})
	}
}
