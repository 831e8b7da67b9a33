package policy_test

import (
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/policy"
)

func TestChainOptionsValidate(t *testing.T) {
	tests := []struct {
		name  string
		opts  policy.ChainOptions
		field string // "" = valid
	}{
		{"zero", policy.ChainOptions{}, ""},
		{"all set", policy.ChainOptions{SmallPercent: 20, GhostPercent: 100, SketchPercent: 500, DuelSample: 8, DuelWindow: 4, DisableChainOrder: true}, ""},
		{"small negative", policy.ChainOptions{SmallPercent: -1}, "SmallPercent"},
		{"small over 100", policy.ChainOptions{SmallPercent: 101}, "SmallPercent"},
		{"ghost negative", policy.ChainOptions{GhostPercent: -5}, "GhostPercent"},
		{"ghost over footprint", policy.ChainOptions{GhostPercent: 201}, "GhostPercent"},
		{"sketch negative", policy.ChainOptions{SketchPercent: -1}, "SketchPercent"},
		{"duel sample 1", policy.ChainOptions{DuelSample: 1}, "DuelSample"},
		{"duel window negative", policy.ChainOptions{DuelWindow: -1}, "DuelWindow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.field)
			}
			if _, err := policy.NewChainWith(10, tt.opts); err == nil {
				t.Fatal("NewChainWith accepted invalid options")
			}
		})
	}
}

// access is a chained access: key k at depth d with parent p.
func access(k, p policy.Key, d int) policy.Access {
	return policy.Access{Key: k, Hint: block.Hint{Depth: d, Parent: p}}
}

// TestChainEvictsTailsFirst pins the chain-order rule: a request's blocks
// are evicted deepest first, so the shared root survives, where LRU evicts
// the root first.
func TestChainEvictsTailsFirst(t *testing.T) {
	tests := []struct {
		name string
		ev   policy.Eviction
		want policy.Key // first victim after one request 1→2→3→4
	}{
		{"kvchain", mustChain(t, policy.ChainOptions{DisableProbation: true, DisableTailDemotion: true}), 4},
		{"kvchain without chain order", mustChain(t, policy.ChainOptions{DisableProbation: true, DisableTailDemotion: true, DisableChainOrder: true}), 1},
		{"lru", policy.NewLRU(8), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, k := range []policy.Key{1, 2, 3, 4} {
				tt.ev.Insert(access(k, k-1, i))
			}
			if got, ok := tt.ev.Victim(); !ok || got != tt.want {
				t.Fatalf("Victim = %d, %v; want %d", got, ok, tt.want)
			}
		})
	}
}

// TestChainTailDemotion pins the tail-demotion rule: when the next request
// starts, the previous request's deepest block is the next victim even if
// an older request's blocks are resident.
func TestChainTailDemotion(t *testing.T) {
	for _, disable := range []bool{false, true} {
		p := mustChain(t, policy.ChainOptions{DisableProbation: true, DisableTailDemotion: disable})
		p.Insert(access(10, 0, 0)) // an older single-block request
		for i, k := range []policy.Key{1, 2, 3} {
			p.Insert(access(k, k-1, i))
		}
		p.Hit(access(1, 0, 0)) // next request starts
		want := policy.Key(3)
		if disable {
			want = 10
		}
		if got, _ := p.Victim(); got != want {
			t.Errorf("DisableTailDemotion=%v: Victim = %d, want %d", disable, got, want)
		}
	}
}

// TestChainGhostPromotes pins probation: a key evicted from probation and
// missed again enters the protected queue, so it outlives new keys.
func TestChainGhostPromotes(t *testing.T) {
	c := policy.NewCache(10, mustChain(t, policy.ChainOptions{DisableDuel: true, DisableSketch: true}), nil)
	c.Access(policy.Access{Key: 100})
	for k := range policy.Key(20) { // flush 100 out of probation
		c.Access(policy.Access{Key: 1000 + k})
	}
	if c.Contains(100) {
		t.Fatal("100 still resident after 20 new keys in a 10-block cache")
	}
	c.Access(policy.Access{Key: 100}) // ghost hit: protected
	for k := range policy.Key(20) {
		c.Access(policy.Access{Key: 2000 + k})
	}
	if !c.Contains(100) {
		t.Fatal("ghost-promoted key 100 evicted by one-hit keys")
	}
}

// TestChainDuelPicksLRU pins set dueling: on a stream where every key is
// reused once, 40 accesses later (within the cache, beyond probation),
// probation only delays each key's protection, and the duel turns it off.
func TestChainDuelPicksLRU(t *testing.T) {
	hits := func(o policy.ChainOptions) int {
		p, err := policy.NewChainWith(320, o)
		if err != nil {
			t.Fatal(err)
		}
		c := policy.NewCache(320, p, nil)
		n := 0
		for i := range 20000 {
			k := policy.Key(i / 2)
			if i%2 == 1 {
				k = policy.Key(i/2 - 20) // the key first seen 40 accesses ago
			}
			if c.Access(policy.Access{Key: k, Time: int64(i)}) {
				n++
			}
		}
		return n
	}
	duel, fixed, lruLike := hits(policy.ChainOptions{}), hits(policy.ChainOptions{DisableDuel: true}), hits(policy.ChainOptions{DisableProbation: true})
	if duel <= fixed {
		t.Errorf("dueling kvchain hits %d, probation-only %d: want more", duel, fixed)
	}
	if duel < lruLike*9/10 {
		t.Errorf("dueling kvchain hits %d, no probation %d: want within 10%%", duel, lruLike)
	}
	t.Logf("hits of 20000: duel %d, probation only %d, no probation %d", duel, fixed, lruLike)
}

// chainSlack is the token-hit-ratio shortfall the generated-trace test
// tolerates: 0.1 points. At 10,000 blocks on the chat trace every policy
// is within a point of Belady and kvchain trails LRU by 0.02 points (its
// probation shadow costs a few sampled keys); without dueling it trails
// by 8 points, so the slack does not hide a real loss.
const chainSlack = 0.001

func mustChain(t *testing.T, o policy.ChainOptions) *policy.Chain {
	t.Helper()
	p, err := policy.NewChainWith(8, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChainBeatsBaselinesOnGeneratedTraces is the behavioural target of
// docs/policy.md on traces the policy was not tuned on, at its
// capacities: kvchain's token hit ratio is at least the best of LRU, LFU,
// S3-FIFO and ARC, less chainSlack. (At 1,000 blocks on the chat trace it
// is 0.4 points below LFU: see docs/policy.md.)
func TestChainBeatsBaselinesOnGeneratedTraces(t *testing.T) {
	// Seeds other than the lab's (0 and 7, docs/policy.md), so these
	// traces were not seen while tuning.
	chat := tracegen.ChatOptions()
	chat.Requests, chat.Seed = 6000, 11
	long := chat
	long.Seed, long.MeanTurns, long.Input = 12, 3, tracegen.LengthDist{Mean: 3000, Sigma: 1}
	for _, tt := range []struct {
		name string
		opts tracegen.Options
		caps []int
	}{
		{"chat", chat, []int{2000, 5000, 10000}},
		{"long sessions", long, []int{2000, 5000, 10000}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reqs, err := tracegen.Generate(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			specs := []policy.Spec{{Eviction: "kvchain"}, {Eviction: "lru"}, {Eviction: "lfu"}, {Eviction: "s3fifo"}, {Eviction: "arc"}}
			res, err := hitrate.Sweep(t.Context(), reqs, hitrate.SweepOptions{Policies: specs, Capacities: tt.caps})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range tt.caps {
				chain := res[i].TokenHitRatio
				for j := 1; j < len(specs); j++ {
					r := res[j*len(tt.caps)+i]
					if r.TokenHitRatio > chain+chainSlack {
						t.Errorf("%d blocks: kvchain %.4f below %s %.4f", c, chain, r.Policy, r.TokenHitRatio)
					}
				}
				t.Logf("%d blocks: kvchain %.4f", c, chain)
			}
		})
	}
}

// BenchmarkChainAccess drives a 5,000-block cache with a tracegen chat
// trace and reports the cost per block access, next to LRU's.
func BenchmarkChainAccess(b *testing.B) {
	opts := tracegen.ChatOptions()
	opts.Requests = 2000
	reqs, err := tracegen.Generate(opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"kvchain", "lru"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var accesses, hits int64
			for b.Loop() {
				ev, err := policy.NewEviction(name, 5000)
				if err != nil {
					b.Fatal(err)
				}
				c := policy.NewCache(5000, ev, nil)
				for _, r := range reqs {
					for i, k := range r.HashIDs {
						a := policy.Access{Key: k, Hint: block.Hint{Depth: i}}
						if i > 0 {
							a.Parent = r.HashIDs[i-1]
						}
						if c.Access(a) {
							hits++
						}
						accesses++
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(accesses), "ns/access")
			b.ReportMetric(float64(hits)/float64(accesses), "block-hit-ratio")
		})
	}
}
