package sim

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// spaced returns one-block requests with the given keys, 100 s apart (each
// completes long before the next arrives).
func spaced(ks ...uint64) []trace.Request {
	out := make([]trace.Request, len(ks))
	for i, k := range ks {
		out[i] = req(int64(i)*100_000, 0, k)
	}
	return out
}

func TestRedundantReplicaEvictedFirst(t *testing.T) {
	// Round robin over two instances of 3 RAM blocks each. Instance 0
	// stores key 3 (its only copy), then fetches key 1 from instance 1 (a
	// replica), then stores key 2: full. Storing key 5 evicts: LRU names
	// key 3, the last copy; redundant-first evicts the replica of key 1
	// instead (its age, 4 positions, is more than a quarter of key 3's, 6).
	// Request 8 asks instance 0 for key 3 again.
	reqs := spaced(3, 1, 1, 8, 2, 9, 5, 1, 3)
	for _, tc := range []struct {
		name          string
		redundant     bool
		wantHit3      int
		wantRedundant int64
	}{
		{"policy order: last copy lost", false, 0, 0},
		{"redundant first: last copy kept", true, trace.BlockTokens, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, reqs, Options{Instances: 2, RAMBlocks: 3, Routing: RoutingRoundRobin, EvictRedundantFirst: tc.redundant})
			if got := res.Records[2].HitBlocks[RemoteRAM]; got != 1 {
				t.Fatalf("request 2 fetched %d remote blocks, want 1 (the replica this test needs)", got)
			}
			if got := res.Records[8].HitTokens[LocalRAM]; got != tc.wantHit3 {
				t.Errorf("request 8 (key 3 on instance 0) hit %d local tokens, want %d", got, tc.wantHit3)
			}
			if got := res.Summary.RedundantEvictions; got != tc.wantRedundant {
				t.Errorf("redundant evictions %d, want %d", got, tc.wantRedundant)
			}
			// Key 1 is still held by instance 1, so instance 0 can fetch it.
			if got := res.Records[6].TotalHitTokens(); got != 0 {
				t.Errorf("request 6 (new key 5) hit %d tokens, want 0", got)
			}
		})
	}
}

func TestRedundantFirstKeepsRecentReplica(t *testing.T) {
	// Round robin over two instances of 4 RAM blocks. Instance 0 holds
	// key 3 (its only copy, position 0), a replica of key 1 that both
	// instances reuse just before the eviction (positions 7 and 8), and
	// keys 2 and 4. Storing key 5 (position 10) evicts: the replica's age
	// (2) is under a quarter of the last copy's (10), so the policy's
	// victim, key 3, goes after all.
	reqs := spaced(3, 1, 1, 8, 2, 9, 4, 1, 1, 7, 5, 7, 3)
	res := mustRun(t, reqs, Options{Instances: 2, RAMBlocks: 4, Routing: RoutingRoundRobin, EvictRedundantFirst: true})
	if got := res.Records[8].HitBlocks[LocalRAM]; got != 1 {
		t.Fatalf("request 8 hits %v, want its replica of key 1 in local RAM", res.Records[8].HitBlocks)
	}
	if got := res.Records[12].TotalHitTokens(); got != 0 {
		t.Errorf("request 12 (key 3) hit %d tokens, want 0: the last copy should have been evicted", got)
	}
}

func TestHotReplication(t *testing.T) {
	// Round robin over two instances. Key 1 is computed on instance 0 and
	// asked for on instance 1 by requests 1, 3 and 5. With ReplicateHot
	// (3 asks) request 1's fetch is not kept (2 asks: cold), request 3's
	// is (3 asks: hot), so request 5 hits locally. With ReplicateAll
	// request 3 already hits locally.
	reqs := spaced(1, 1, 5, 1, 6, 1)
	for _, tc := range []struct {
		name        string
		repl        Replication
		wantSrc3    Source
		wantSkipped int64
	}{
		{"all: every fetch replicated", ReplicateAll, LocalRAM, 0},
		{"hot: the cold fetch is not kept", ReplicateHot, RemoteRAM, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, reqs, Options{Instances: 2, RAMBlocks: 8, Routing: RoutingRoundRobin, Replication: tc.repl})
			if got := res.Records[1].HitBlocks[RemoteRAM]; got != 1 {
				t.Fatalf("request 1 fetched %d remote blocks, want 1", got)
			}
			if got := res.Records[3].HitBlocks[tc.wantSrc3]; got != 1 {
				t.Errorf("request 3 hits %v, want its block from %v", res.Records[3].HitBlocks, tc.wantSrc3)
			}
			if got := res.Records[5].HitBlocks[LocalRAM]; got != 1 {
				t.Errorf("request 5 hits %v, want its block from local RAM", res.Records[5].HitBlocks)
			}
			if got := res.Summary.ReplicasSkipped; got != tc.wantSkipped {
				t.Errorf("replicas skipped %d, want %d", got, tc.wantSkipped)
			}
		})
	}
}

func TestColdFetchTouchesSource(t *testing.T) {
	// Instance 0 (2 RAM blocks) computes key 1, then key 2. Instance 1
	// uses key 1 without keeping it (cold); that read renews key 1 at
	// instance 0, so instance 0's next new key evicts key 2, not key 1.
	reqs := spaced(1, 9, 2, 1, 3, 8, 1)
	res := mustRun(t, reqs, Options{Instances: 2, RAMBlocks: 2, Routing: RoutingRoundRobin, Replication: ReplicateHot, HotAccesses: 10})
	if got := res.Records[3].HitBlocks[RemoteRAM]; got != 1 {
		t.Fatalf("request 3 hits %v, want key 1 fetched from instance 0", res.Records[3].HitBlocks)
	}
	if got := res.Records[6].HitBlocks[LocalRAM]; got != 1 {
		t.Errorf("request 6 (key 1 on instance 0) hits %v, want local RAM: the remote read should have renewed it", res.Records[6].HitBlocks)
	}
}

func TestJointRoutingUsesPendingPrefix(t *testing.T) {
	// Request 0 (a 32-block prefix) starts on instance 0. Request 1 shares
	// that prefix and arrives while it is still prefilling: nothing is
	// cached yet, so Algorithm 1 sends it to idle instance 1 and
	// recomputes; joint routing sees that instance 0 will hold the prefix
	// when request 1 reaches its head, waits there, and reuses it.
	prefix := keys(1, 32)
	p0 := prefill(32*trace.BlockTokens, 0)
	at := int64(p0*1000) - 300 // 0.3 s before request 0 completes
	reqs := []trace.Request{
		req(0, 0, prefix...),
		req(at, 0, cat(prefix, keys(1000, 8))...),
	}
	n := 40 * trace.BlockTokens
	for _, tc := range []struct {
		routing  Routing
		wantInst int
		wantHit  int
		wantLate int64
	}{
		{RoutingCacheAware, 1, 0, 0},
		{RoutingJoint, 0, 32 * trace.BlockTokens, 32},
	} {
		t.Run(string(tc.routing), func(t *testing.T) {
			res := mustRun(t, reqs, Options{Instances: 2, Routing: tc.routing})
			r := res.Records[1]
			if r.Instance != tc.wantInst || r.HitTokens[LocalRAM] != tc.wantHit || res.Summary.LateBoundBlocks != tc.wantLate {
				t.Fatalf("request 1 on instance %d with %d local hit tokens, %d late-bound blocks; want %d, %d, %d",
					r.Instance, r.HitTokens[LocalRAM], res.Summary.LateBoundBlocks, tc.wantInst, tc.wantHit, tc.wantLate)
			}
			if want := prefill(n, tc.wantHit); !near(r.Prefill, want) {
				t.Errorf("prefill %g, want %g", r.Prefill, want)
			}
		})
	}
	ca := mustRun(t, reqs, Options{Instances: 2, Routing: RoutingCacheAware}).Records[1].TTFT
	joint := mustRun(t, reqs, Options{Instances: 2, Routing: RoutingJoint}).Records[1].TTFT
	if !(joint < ca) {
		t.Errorf("joint TTFT %g, cache-aware %g: waiting for the pending prefix should be faster", joint, ca)
	}
}

func TestJointRoutingPicksHolderOverSlowTransfer(t *testing.T) {
	// Instance 0 holds a 32-block prefix and is busy for about a second;
	// instance 1 is idle. At 1 Gbps the prefix would take 43 s to fetch and
	// recomputing it costs more than the queue, so both routings wait for
	// the holder; at 100 Gbps plenty of time remains to prefetch it to the
	// idle instance.
	prefix := keys(1, 32)
	reqs := []trace.Request{
		req(0, 0, prefix...),
		req(100_000, 0, keys(500, 16)...),
		req(100_010, 0, cat(prefix, keys(1000, 8))...),
	}
	for _, tc := range []struct {
		nic      float64
		routing  Routing
		wantInst int
	}{
		{1, RoutingCacheAware, 0},
		{1, RoutingJoint, 0},
		{100, RoutingCacheAware, 1},
		{100, RoutingJoint, 1},
	} {
		t.Run(fmt.Sprintf("%s at %g Gbps", tc.routing, tc.nic), func(t *testing.T) {
			res := mustRun(t, reqs, Options{Instances: 2, Routing: tc.routing, NICGbps: tc.nic})
			if res.Records[1].Instance != 0 {
				t.Fatalf("request 1 ran on %d, want 0 (the setup needs instance 0 busy)", res.Records[1].Instance)
			}
			r := res.Records[2]
			if r.Instance != tc.wantInst || r.TotalHitTokens() != 32*trace.BlockTokens {
				t.Errorf("request 2 on instance %d with %d hit tokens, want instance %d reusing the whole prefix",
					r.Instance, r.TotalHitTokens(), tc.wantInst)
			}
		})
	}
}

// jointOptions are option sets exercising every joint mechanism.
func jointOptions() []Options {
	return []Options{
		{Instances: 4, RAMBlocks: 40, SSDBlocks: 60, Routing: RoutingJoint},
		{Instances: 4, RAMBlocks: 40, SSDBlocks: 60, Replication: ReplicateHot},
		{Instances: 4, RAMBlocks: 40, SSDBlocks: 60, EvictRedundantFirst: true},
		{Instances: 4, RAMBlocks: 40, SSDBlocks: 60, Policy: "mooncake", Routing: RoutingJoint, Replication: ReplicateHot, EvictRedundantFirst: true},
		{Instances: 4, RAMBlocks: 40, Policy: "kvchain", Routing: RoutingJoint, Replication: ReplicateHot, EvictRedundantFirst: true, RateMultiplier: 4},
		{Instances: 3, RAMBlocks: 30, Policy: "s3fifo+second-hit", Routing: RoutingJoint, Replication: ReplicateHot, HotAccesses: 5, EvictRedundantFirst: true, NoPrefetch: true},
	}
}

func TestJointDeterministicAndConsistent(t *testing.T) {
	reqs := randomTrace(5, 1200)
	for i, o := range jointOptions() {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			a := mustRun(t, reqs, o)
			b := mustRun(t, reqs, o)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("options %+v: two runs differ", o)
			}
			s, err := newSimulator(reqs, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			resident := 0
			for k, hs := range s.idx {
				for _, h := range hs {
					c := s.inst[h.Inst].ram
					if h.Tier == tierSSD {
						c = s.inst[h.Inst].ssd
					} else {
						resident++
					}
					if !c.Contains(k) {
						t.Fatalf("index lists key %d on %+v, which does not hold it", k, h)
					}
				}
			}
			total := 0
			for i, in := range s.inst {
				total += in.ram.Len()
				for k := range in.last {
					if !in.ram.Contains(k) {
						t.Fatalf("instance %d tracks the last access of key %d, which is not in its RAM", i, k)
					}
				}
				if len(in.pending) != 0 {
					t.Errorf("instance %d still has %d pending keys after the run", i, len(in.pending))
				}
			}
			if resident != total {
				t.Errorf("index lists %d RAM replicas, caches hold %d", resident, total)
			}
			if a.Summary.HitTokens == 0 {
				t.Errorf("no hits at all; the trace does not exercise the caches")
			}
		})
	}
}

func TestJointAccessTimesIncreasePerCache(t *testing.T) {
	reqs := randomTrace(11, 800)
	o := Options{Instances: 3, RAMBlocks: 30, SSDBlocks: 40, Routing: RoutingJoint, Replication: ReplicateHot, EvictRedundantFirst: true}
	s, err := newSimulator(reqs, o)
	if err != nil {
		t.Fatal(err)
	}
	var checkers []*timeChecker
	for i := range s.inst {
		ram := &timeChecker{LRU: policy.NewLRU(30), t: t, name: fmt.Sprintf("RAM %d", i)}
		ssd := &timeChecker{LRU: policy.NewLRU(40), t: t, name: fmt.Sprintf("SSD %d", i)}
		s.inst[i].ram = policy.NewCache(30, ram, nil)
		s.inst[i].ssd = policy.NewCache(40, ssd, nil)
		s.hookEvictions(i)
		checkers = append(checkers, ram, ssd)
	}
	if err := s.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range checkers {
		if c.n < 10 {
			t.Errorf("%s saw only %d accesses; the test exercises nothing", c.name, c.n)
		}
	}
	if s.replicasSkipped == 0 || s.redundantEvictions == 0 || s.lateBlocks == 0 {
		t.Errorf("skipped %d, redundant %d, late %d: the trace does not exercise every mechanism",
			s.replicasSkipped, s.redundantEvictions, s.lateBlocks)
	}
}

func TestJointValidate(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string
	}{
		{Options{Replication: "some"}, "Replication"},
		{Options{HotAccesses: 1}, "HotAccesses"},
		{Options{HotAccesses: -3}, "HotAccesses"},
		{Options{Routing: "joint-ish"}, "Routing"},
	} {
		err := tc.o.Validate()
		if option.Field(err) != tc.field {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.o, err, tc.field)
		}
	}
	if err := (Options{Routing: RoutingJoint, Replication: ReplicateHot, HotAccesses: 2, EvictRedundantFirst: true}).Validate(); err != nil {
		t.Errorf("valid joint options: %v", err)
	}
}

func TestCeiling(t *testing.T) {
	// One instance, SLO 10 s: three 16-block requests one second apart,
	// the second and third sharing an 8-block prefix with the first.
	reqs := []trace.Request{
		req(0, 0, keys(1, 16)...),
		req(1000, 0, cat(keys(1, 8), keys(100, 8))...),
		req(2000, 0, cat(keys(1, 8), keys(200, 8))...),
	}
	c, err := NewCeiling(reqs, Options{Instances: 1, SLOSeconds: 10})
	if err != nil {
		t.Fatal(err)
	}
	n := 16 * trace.BlockTokens
	if want := 2.0 * 4096 / (3 * 8192); !near(c.TokenHitRatio, want) {
		t.Errorf("hit ratio %g, want %g", c.TokenHitRatio, want)
	}
	work := prefill(n, 0) + 2*prefill(n, 4096)
	if !near(c.WorkSeconds, work) || !near(c.CapacityMultiplier, 2/work) {
		t.Errorf("work %g capacity ×%g, want %g and ×%g", c.WorkSeconds, c.CapacityMultiplier, work, 2/work)
	}
	// At multiplier 1 nothing waits long; at 1000 all arrive at once and
	// the last finishes after the whole work.
	if got := c.Attainment(1); got != 1 {
		t.Errorf("attainment at ×1 = %g, want 1", got)
	}
	sim1 := mustRun(t, reqs, Options{Instances: 1, SLOSeconds: 10, RAMBlocks: 100})
	m, _, err := c.Goodput(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ms, _, err := Goodput(context.Background(), reqs, Options{Instances: 1, SLOSeconds: 10, RAMBlocks: 100}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m < ms || sim1.Summary.TokenHitRatio > c.TokenHitRatio {
		t.Errorf("ceiling ×%g (hit %g) below the simulator's ×%g (hit %g)", m, c.TokenHitRatio, ms, sim1.Summary.TokenHitRatio)
	}
	mr, _, err := c.GoodputRejecting(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	msr, _, err := Goodput(context.Background(), reqs, Options{Instances: 1, SLOSeconds: 10, RAMBlocks: 100, Reject: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mr < msr || mr < m {
		t.Errorf("ceiling with rejection ×%g below the simulator's with rejection ×%g or the FIFO ceiling ×%g", mr, msr, m)
	}
	t.Run("shortest first", func(t *testing.T) {
		// One instance, SLO 5 s: a short request, then a 64k-token one
		// (10.6 s), then four short ones. FIFO makes the four wait behind
		// the long one; shortest-first serves them first.
		reqs := []trace.Request{req(0, 0, keys(1, 16)...), req(100, 0, keys(100, 128)...)}
		for k := range 4 {
			reqs = append(reqs, req(200+int64(k)*100, 0, keys(uint64(1000+100*k), 16)...))
		}
		c, err := NewCeiling(reqs, Options{Instances: 1, SLOSeconds: 5})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Attainment(1); !near(got, 1.0/6) {
			t.Errorf("FIFO attainment %g, want 1/6", got)
		}
		if got := c.AttainmentShortestFirst(1); !near(got, 5.0/6) {
			t.Errorf("shortest-first attainment %g, want 5/6", got)
		}
		// With rejection the long request is turned away on arrival (its
		// own TTFT, 10.6 s, exceeds the SLO), so the four short ones run
		// behind the first: 5 of 6 within the SLO, and the rejected one
		// takes no instance time.
		if got := c.AttainmentRejecting(1); !near(got, 5.0/6) {
			t.Errorf("attainment with rejection %g, want 5/6", got)
		}
		if got := c.Attainment(1); !near(got, 1.0/6) {
			t.Errorf("FIFO attainment after a rejecting pass %g, want 1/6 (state leaked)", got)
		}
		mr, _, err := c.GoodputRejecting(context.Background(), 0.8)
		if err != nil {
			t.Fatal(err)
		}
		if mf0, _, _ := c.Goodput(context.Background(), 0.8); !(mr > mf0) {
			t.Errorf("goodput with rejection ×%g, want above FIFO's ×%g", mr, mf0)
		}
		mf, _, err := c.Goodput(context.Background(), 0.8)
		if err != nil {
			t.Fatal(err)
		}
		ms, _, err := c.GoodputShortestFirst(context.Background(), 0.8)
		if err != nil {
			t.Fatal(err)
		}
		if !(ms > mf) {
			t.Errorf("shortest-first goodput ×%g not above FIFO ×%g", ms, mf)
		}
	})
	if _, err := NewCeiling(nil, Options{}); err == nil {
		t.Error("NewCeiling(nil) succeeded")
	}
	bad := []trace.Request{{Timestamp: 0, InputLength: 1024, HashIDs: []uint64{1}}}
	if _, err := NewCeiling(bad, Options{}); err == nil || !strings.Contains(err.Error(), "hash_ids") {
		t.Errorf("NewCeiling(bad request) = %v, want a hash_ids error", err)
	}
}

// TestJointRecomputeIsCacheAware: with no caches there is nothing
// pending to count, so joint routing decides as cache-aware routing (it
// used to ask the missing RAM cache and crash).
func TestJointRecomputeIsCacheAware(t *testing.T) {
	reqs := randomTrace(13, 300)
	o := Options{Mode: ModeRecompute, Instances: 3}
	want := mustRun(t, reqs, o)
	o.Routing = RoutingJoint
	got := mustRun(t, reqs, o)
	got.Summary.Routing = want.Summary.Routing
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recompute mode: joint routing differs from cache-aware routing:\n%+v\n%+v", got.Summary, want.Summary)
	}
}
