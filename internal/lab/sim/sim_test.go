package sim

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// req builds a request arriving at ms whose blocks have the given keys;
// the prompt fills every block (len(keys)*512 tokens) unless tokens > 0.
func req(ms int64, tokens int, keys ...uint64) trace.Request {
	if tokens == 0 {
		tokens = len(keys) * trace.BlockTokens
	}
	return trace.Request{Timestamp: ms, InputLength: tokens, OutputLength: 1, HashIDs: keys}
}

// keys returns n consecutive keys starting at from.
func keys(from uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = from + uint64(i)
	}
	return out
}

func cat(parts ...[]uint64) []uint64 {
	var out []uint64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func mustRun(t *testing.T, reqs []trace.Request, o Options) *Result {
	t.Helper()
	res, err := Run(context.Background(), reqs, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// near reports whether a and b agree to 1e-9 relative.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

var (
	prof       = costmodel.Default()
	blockBytes = float64(prof.BlockBytes())
	nic100     = 100e9 / 8 // 100 Gbps in B/s
)

func prefill(n, cached int) float64 { return prof.PrefillSeconds(n, cached) }

func TestRecomputeIdleTTFTIsPrefill(t *testing.T) {
	res := mustRun(t, []trace.Request{req(0, 8192, keys(1, 16)...)}, Options{Mode: ModeRecompute, Instances: 1})
	r := res.Records[0]
	if !near(r.TTFT, prefill(8192, 0)) || r.Queue != 0 || r.Transfer != 0 || !near(r.Prefill, r.TTFT) {
		t.Errorf("record %+v: want TTFT = prefill = %g, no queue or transfer", r, prefill(8192, 0))
	}
	if res.Summary.TokenHitRatio != 0 || res.Summary.Served != 1 {
		t.Errorf("summary %+v", res.Summary)
	}
}

func TestFIFOQueueing(t *testing.T) {
	p := prefill(8192, 0)
	reqs := []trace.Request{req(0, 0, keys(1, 16)...), req(0, 0, keys(101, 16)...)}
	for _, tc := range []struct {
		name      string
		instances int
		routing   Routing
		wantTTFT  [2]float64
		wantQueue [2]float64
	}{
		{"one instance: second waits", 1, RoutingRoundRobin, [2]float64{p, 2 * p}, [2]float64{0, p}},
		{"two instances least-loaded: no wait", 2, RoutingLeastLoaded, [2]float64{p, p}, [2]float64{0, 0}},
		{"two instances cache-aware: no wait", 2, RoutingCacheAware, [2]float64{p, p}, [2]float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, reqs, Options{Mode: ModeRecompute, Instances: tc.instances, Routing: tc.routing})
			for i, r := range res.Records {
				if !near(r.TTFT, tc.wantTTFT[i]) || !near(r.Queue, tc.wantQueue[i]) {
					t.Errorf("request %d: TTFT %g queue %g, want %g and %g", i, r.TTFT, r.Queue, tc.wantTTFT[i], tc.wantQueue[i])
				}
			}
		})
	}
}

func TestLocalHitReducesPrefill(t *testing.T) {
	reqs := []trace.Request{
		req(0, 0, keys(1, 16)...),
		req(100_000, 0, cat(keys(1, 8), keys(201, 8))...),
	}
	res := mustRun(t, reqs, Options{Mode: ModeLocal, Instances: 1})
	b := res.Records[1]
	if b.HitTokens[LocalRAM] != 4096 || b.TotalHitTokens() != 4096 || b.HitBlocks[LocalRAM] != 8 {
		t.Fatalf("second request hits %v, want 4096 tokens from local RAM", b.HitTokens)
	}
	if !near(b.Prefill, prefill(8192, 4096)) || !near(b.TTFT, b.Prefill) || !(b.Prefill < prefill(8192, 0)) {
		t.Errorf("prefill %g TTFT %g, want %g (< uncached %g)", b.Prefill, b.TTFT, prefill(8192, 4096), prefill(8192, 0))
	}
	s := res.Summary
	if want := 4096.0 / 16384; !near(s.TokenHitRatio, want) || !near(s.TokenHitRatioLocalRAM, want) || !near(s.BlockHitRatio, 8.0/32) {
		t.Errorf("summary hit ratios %g/%g/%g, want %g", s.TokenHitRatio, s.TokenHitRatioLocalRAM, s.BlockHitRatio, want)
	}
}

func TestGlobalRemoteFetchAtNICSpeed(t *testing.T) {
	one := 4 * blockBytes / nic100 // 4 blocks over one idle 100 Gbps link
	t.Run("one transfer", func(t *testing.T) {
		reqs := []trace.Request{
			req(0, 0, keys(1, 4)...),                         // → instance 0
			req(100_000, 0, cat(keys(1, 4), keys(11, 4))...), // → instance 1, fetches 4 blocks
		}
		res := mustRun(t, reqs, Options{Mode: ModeGlobal, Instances: 2, Routing: RoutingRoundRobin})
		b := res.Records[1]
		if b.Instance != 1 || b.HitTokens[RemoteRAM] != 2048 || b.BytesNet != 4*prof.BlockBytes() {
			t.Fatalf("record %+v: want instance 1, 2048 remote RAM tokens, 4 blocks over the network", b)
		}
		if !near(b.Transfer, one) || !near(b.TTFT, one+prefill(4096, 2048)) {
			t.Errorf("transfer %g TTFT %g, want %g and %g", b.Transfer, b.TTFT, one, one+prefill(4096, 2048))
		}
		if res.Summary.BytesNet != 4*prof.BlockBytes() || !near(res.Summary.TokenHitRatioRemoteRAM, 2048.0/(2048+4096)) {
			t.Errorf("summary bytes %d remote ratio %g", res.Summary.BytesNet, res.Summary.TokenHitRatioRemoteRAM)
		}
	})
	t.Run("two transfers into one instance share its ingress", func(t *testing.T) {
		reqs := []trace.Request{
			req(0, 0, keys(1, 4)...),                                      // → 0
			req(0, 0, keys(11, 4)...),                                     // → 1
			req(100_000, 0, cat(keys(1, 4), keys(11, 4), keys(21, 1))...), // → 2: 4 blocks from 0, 4 from 1
		}
		res := mustRun(t, reqs, Options{Mode: ModeGlobal, Instances: 3, Routing: RoutingRoundRobin})
		c := res.Records[2]
		if c.HitTokens[RemoteRAM] != 8*512 {
			t.Fatalf("hits %v, want 4096 remote RAM tokens", c.HitTokens)
		}
		if !near(c.Transfer, 2*one) || !near(c.TTFT, 2*one+prefill(9*512, 8*512)) {
			t.Errorf("transfer %g, want %g (each at half the ingress)", c.Transfer, 2*one)
		}
	})
}

func TestPrefetchOverlapsQueueing(t *testing.T) {
	// Round robin over 2 instances: A→0, B→1, F→0, C→1. C needs A's 16
	// blocks from instance 0 and queues behind the long B on instance 1.
	reqs := []trace.Request{
		req(0, 0, keys(1, 16)...),                            // A
		req(100_000, 0, keys(1001, 64)...),                   // B: 32k fresh tokens
		req(100_000, 0, keys(5001, 1)...),                    // F
		req(100_000, 0, cat(keys(1, 16), keys(2001, 16))...), // C
	}
	xfer := 16 * blockBytes / nic100
	pb, pc := prefill(32768, 0), prefill(16384, 8192)
	for _, tc := range []struct {
		name       string
		noPrefetch bool
		want       float64
	}{
		{"prefetch", false, pb + pc},
		{"no prefetch", true, pb + xfer + pc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, reqs, Options{Mode: ModeGlobal, Instances: 2, Routing: RoutingRoundRobin, NoPrefetch: tc.noPrefetch})
			c := res.Records[3]
			if c.Instance != 1 || c.HitTokens[RemoteRAM] != 8192 || !near(c.Transfer, xfer) {
				t.Fatalf("record %+v: want instance 1, 8192 remote tokens, transfer %g", c, xfer)
			}
			if !near(c.TTFT, tc.want) {
				t.Errorf("TTFT %g, want %g", c.TTFT, tc.want)
			}
		})
	}
}

func TestSkipFetchWhenBandwidthTiny(t *testing.T) {
	reqs := []trace.Request{
		req(0, 0, keys(1, 4)...),
		req(100_000, 0, cat(keys(1, 4), keys(11, 4))...),
	}
	for _, tc := range []struct {
		name      string
		gbps      float64
		wantSkips int
		wantHit   int
	}{
		{"fast NIC fetches", 100, 0, 2048},
		{"tiny NIC recomputes", 0.01, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, reqs, Options{Mode: ModeGlobal, Instances: 2, Routing: RoutingRoundRobin, NICGbps: tc.gbps})
			b := res.Records[1]
			if res.Summary.FetchesSkipped != tc.wantSkips || b.TotalHitTokens() != tc.wantHit {
				t.Fatalf("skips %d hit %d, want %d and %d", res.Summary.FetchesSkipped, b.TotalHitTokens(), tc.wantSkips, tc.wantHit)
			}
			if tc.wantHit == 0 && (b.BytesNet != 0 || !near(b.TTFT, prefill(4096, 0))) {
				t.Errorf("skipped fetch moved %d B, TTFT %g, want 0 and %g", b.BytesNet, b.TTFT, prefill(4096, 0))
			}
		})
	}
}

func TestDemotionThenLocalSSDHit(t *testing.T) {
	reqs := []trace.Request{
		req(0, 0, keys(1, 4)...),
		req(100_000, 0, keys(11, 4)...), // evicts 1..4 from RAM (4 blocks) into SSD
		req(200_000, 0, cat(keys(1, 4), keys(21, 4))...),
	}
	res := mustRun(t, reqs, Options{Mode: ModeLocal, Instances: 1, RAMBlocks: 4, SSDBlocks: 100})
	c := res.Records[2]
	if c.HitTokens[LocalSSD] != 2048 || c.TotalHitTokens() != 2048 || c.BytesSSDRead != 4*prof.BlockBytes() {
		t.Fatalf("record %+v: want 2048 tokens from local SSD, 4 blocks read", c)
	}
	read := 4 * blockBytes / 4e9
	if !near(c.Transfer, read) || !near(c.TTFT, read+prefill(4096, 2048)) {
		t.Errorf("transfer %g TTFT %g, want %g and %g", c.Transfer, c.TTFT, read, read+prefill(4096, 2048))
	}
	s := res.Summary
	// Writes: 1..4 demoted by the second request, 11..14 by the third
	// (1..4 re-demoted by it are already on the SSD).
	if s.BytesSSDWrite != 8*prof.BlockBytes() || !near(s.TokenHitRatioLocalSSD, 2048.0/(2048*2+4096)) {
		t.Errorf("SSD writes %d B, local SSD ratio %g", s.BytesSSDWrite, s.TokenHitRatioLocalSSD)
	}
	t.Run("without SSD the blocks are gone", func(t *testing.T) {
		res := mustRun(t, reqs, Options{Mode: ModeLocal, Instances: 1, RAMBlocks: 4})
		if got := res.Records[2].TotalHitTokens(); got != 0 || res.Summary.BytesSSDWrite != 0 {
			t.Errorf("hit %d tokens, SSD writes %d, want 0 and 0", got, res.Summary.BytesSSDWrite)
		}
	})
	t.Run("remote SSD", func(t *testing.T) {
		// Instance 0 holds 1..4 on its SSD only; instance 1 fetches them
		// through instance 0's SSD and NIC.
		reqs := []trace.Request{
			req(0, 0, keys(1, 4)...),                         // → 0
			req(1_000, 0, keys(501, 1)...),                   // → 1
			req(100_000, 0, keys(11, 4)...),                  // → 0: demotes 1..4
			req(200_000, 0, cat(keys(1, 4), keys(21, 4))...), // → 1
		}
		res := mustRun(t, reqs, Options{Mode: ModeGlobal, Instances: 2, Routing: RoutingRoundRobin, RAMBlocks: 4, SSDBlocks: 100})
		d := res.Records[3]
		// The path is bounded by the SSD (4 GB/s < 12.5 GB/s).
		if d.HitTokens[RemoteSSD] != 2048 || !near(d.Transfer, read) || d.BytesNet != 4*prof.BlockBytes() || d.BytesSSDRead != 4*prof.BlockBytes() {
			t.Errorf("record %+v: want 2048 remote SSD tokens read in %g s", d, read)
		}
	})
}

func TestRoutingChoice(t *testing.T) {
	reqs := []trace.Request{
		req(0, 0, keys(1, 16)...),
		req(100_000, 0, cat(keys(1, 16), keys(17, 16))...),
	}
	for _, tc := range []struct {
		routing  Routing
		wantInst int
		wantHit  int
	}{
		{RoutingRoundRobin, 1, 0},
		{RoutingCacheAware, 0, 8192},
	} {
		t.Run(string(tc.routing), func(t *testing.T) {
			res := mustRun(t, reqs, Options{Mode: ModeLocal, Instances: 2, Routing: tc.routing})
			b := res.Records[1]
			if b.Instance != tc.wantInst || b.TotalHitTokens() != tc.wantHit {
				t.Errorf("instance %d hit %d, want %d and %d", b.Instance, b.TotalHitTokens(), tc.wantInst, tc.wantHit)
			}
		})
	}
	t.Run("cache-aware avoids a long queue", func(t *testing.T) {
		// Instance 0 holds the prefix but is busy for ~27 s; instance 1 is
		// idle: recomputing there is faster.
		reqs := []trace.Request{
			req(0, 0, keys(1, 16)...),                          // → 0
			req(100_000, 0, keys(1001, 256)...),                // → 0 (lowest index, idle, no hits anywhere)
			req(100_000, 0, cat(keys(1, 16), keys(17, 16))...), // 0 is busy: → 1
		}
		res := mustRun(t, reqs, Options{Mode: ModeLocal, Instances: 2, Routing: RoutingCacheAware})
		if got := res.Records[1].Instance; got != 0 {
			t.Fatalf("long request on instance %d, want 0", got)
		}
		if c := res.Records[2]; c.Instance != 1 || c.TotalHitTokens() != 0 || !near(c.TTFT, prefill(16384, 0)) {
			t.Errorf("record %+v: want instance 1, no hit, TTFT %g", c, prefill(16384, 0))
		}
	})
}

func TestReject(t *testing.T) {
	reqs := []trace.Request{req(0, 0, keys(1, 16)...), req(0, 0, keys(101, 16)...)}
	for _, tc := range []struct {
		name         string
		reject       bool
		wantRejected int
		wantAttain   float64
	}{
		{"off", false, 0, 0.5},
		{"on", true, 1, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, reqs, Options{Mode: ModeRecompute, Instances: 1, SLOSeconds: 1.5, Reject: tc.reject})
			s := res.Summary
			if s.Rejected != tc.wantRejected || s.Served+s.Rejected != 2 || !near(s.SLOAttainment, tc.wantAttain) {
				t.Errorf("rejected %d served %d attainment %g, want %d, %d, %g",
					s.Rejected, s.Served, s.SLOAttainment, tc.wantRejected, 2-tc.wantRejected, tc.wantAttain)
			}
			if tc.reject && (!res.Records[1].Rejected || res.Records[1].Instance != -1) {
				t.Errorf("second record %+v, want rejected", res.Records[1])
			}
		})
	}
}

// randomTrace returns n requests with shared prefixes: a few system
// prompts, multi-turn sessions, Poisson-ish arrivals.
func randomTrace(seed uint64, n int) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	next := uint64(1_000_000)
	fresh := func(k int) []uint64 {
		out := keys(next, k)
		next += uint64(k)
		return out
	}
	var systems [][]uint64
	for range 5 {
		systems = append(systems, fresh(2+rng.IntN(10)))
	}
	var sessions [][]uint64
	var out []trace.Request
	ts := int64(0)
	for range n {
		ts += int64(rng.ExpFloat64() * 150)
		var ks []uint64
		if len(sessions) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(sessions))
			ks = cat(sessions[i], fresh(1+rng.IntN(4)))
			sessions[i] = ks
		} else {
			ks = cat(systems[rng.IntN(len(systems))], fresh(1+rng.IntN(20)))
			sessions = append(sessions, ks)
		}
		tokens := len(ks)*trace.BlockTokens - rng.IntN(trace.BlockTokens)
		out = append(out, req(ts, tokens, append([]uint64(nil), ks...)...))
	}
	return out
}

func TestDeterministic(t *testing.T) {
	reqs := randomTrace(7, 1500)
	for _, o := range []Options{
		{RAMBlocks: 64, SSDBlocks: 128},
		{RAMBlocks: 64, SSDBlocks: 128, Policy: "belady", Routing: RoutingLeastLoaded},
		{RAMBlocks: 100, Policy: "s3fifo+second-hit", NoPrefetch: true, NICGbps: 10, Reject: true, SLOSeconds: 5},
		{Mode: ModeLocal, RAMBlocks: 50, SSDBlocks: 50, Routing: RoutingRoundRobin},
	} {
		a := mustRun(t, reqs, o)
		b := mustRun(t, reqs, o)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("options %+v: two runs differ", o)
		}
		if a.Summary.HitTokens == 0 {
			t.Errorf("options %+v: no hits at all; the trace does not exercise the caches", o)
		}
		s := a.Summary
		split := s.TokenHitRatioLocalRAM + s.TokenHitRatioLocalSSD + s.TokenHitRatioRemoteRAM + s.TokenHitRatioRemoteSSD
		if !near(split, s.TokenHitRatio) {
			t.Errorf("options %+v: split ratios sum to %g, total %g", o, split, s.TokenHitRatio)
		}
	}
}

// TestIndexMatchesCaches checks after a run that the global index lists
// exactly the resident blocks of every cache.
func TestIndexMatchesCaches(t *testing.T) {
	reqs := randomTrace(3, 1000)
	for _, pol := range []string{"lru", "mooncake", "belady", "lfu+cms", "arc", "s3fifo+second-hit"} {
		t.Run(pol, func(t *testing.T) {
			s, err := newSimulator(reqs, Options{Instances: 4, RAMBlocks: 40, SSDBlocks: 60, Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			counts := make(map[holder]int)
			for k, hs := range s.idx {
				if len(hs) == 0 {
					t.Fatalf("key %d has an empty holder list", k)
				}
				for _, h := range hs {
					counts[h]++
					c := s.inst[h.Inst].ram
					if h.Tier == tierSSD {
						c = s.inst[h.Inst].ssd
					}
					if !c.Contains(k) {
						t.Fatalf("index lists key %d on %+v, which does not hold it", k, h)
					}
				}
			}
			for i, in := range s.inst {
				if got := counts[holder{int32(i), tierRAM}]; got != in.ram.Len() {
					t.Errorf("instance %d RAM: index has %d keys, cache %d", i, got, in.ram.Len())
				}
				if got := counts[holder{int32(i), tierSSD}]; got != in.ssd.Len() {
					t.Errorf("instance %d SSD: index has %d keys, cache %d", i, got, in.ssd.Len())
				}
			}
		})
	}
}

func TestGoodputBisection(t *testing.T) {
	// One instance, 20 one-second prefills one second apart, SLO 10 s. At
	// rate multiplier m > 1 request k finishes at k+1 and waits
	// k(1-1/m)+1; 18 of 20 meet the SLO while 17(1-1/m)+1 <= 10, so the
	// goodput multiplier is 17/8.
	var reqs []trace.Request
	for k := range 20 {
		reqs = append(reqs, req(int64(k)*1000, 0, keys(uint64(100*k), 16)...))
	}
	o := Options{Mode: ModeRecompute, Instances: 1, SLOSeconds: 10}
	prev := 2.0
	for _, m := range []float64{0.5, 1, 1.5, 2, 2.1, 2.2, 3, 8} {
		o.RateMultiplier = m
		att := mustRun(t, reqs, o).Summary.SLOAttainment
		if att > prev {
			t.Errorf("attainment rises from %g to %g at multiplier %g", prev, att, m)
		}
		prev = att
	}
	o.RateMultiplier = 0
	m, rps, err := Goodput(context.Background(), reqs, o, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := 17.0 / 8
	if !(m <= want && m >= want/(1+goodputTolerance)) {
		t.Errorf("goodput multiplier %g, want within %g%% below %g", m, 100*goodputTolerance, want)
	}
	if !near(rps, m*20/19) {
		t.Errorf("goodput %g req/s, want multiplier × trace rate = %g", rps, m*20/19)
	}
	t.Run("unreachable target", func(t *testing.T) {
		o := o
		o.SLOSeconds = 0.5 // every prefill takes 1 s
		m, rps, err := Goodput(context.Background(), reqs, o, 0.9)
		if err != nil || m != 0 || rps != 0 {
			t.Errorf("Goodput = %g, %g, %v; want 0, 0, nil", m, rps, err)
		}
	})
	t.Run("bad target", func(t *testing.T) {
		if _, _, err := Goodput(context.Background(), reqs, o, 1.5); err == nil || !strings.Contains(err.Error(), "target") {
			t.Errorf("Goodput with target 1.5: %v", err)
		}
	})
}

func TestValidate(t *testing.T) {
	badProfile := costmodel.Default()
	badProfile.Layers = 0
	otherBlocks := costmodel.Default()
	otherBlocks.BlockTokens = 256
	for _, tc := range []struct {
		field string
		opts  Options
	}{
		{"Instances", Options{Instances: -1}},
		{"RAMBlocks", Options{RAMBlocks: -5}},
		{"SSDBlocks", Options{SSDBlocks: -1}},
		{"Mode", Options{Mode: "both"}},
		{"Routing", Options{Routing: "random"}},
		{"Policy", Options{Policy: "lru+nope"}},
		{"RateMultiplier", Options{RateMultiplier: -2}},
		{"RateMultiplier", Options{RateMultiplier: math.NaN()}},
		{"NICGbps", Options{NICGbps: math.Inf(1)}},
		{"SSDGBps", Options{SSDGBps: -4}},
		{"SLOSeconds", Options{SLOSeconds: -1}},
		{"Profile", Options{Profile: badProfile}},
		{"Profile", Options{Profile: otherBlocks}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			err := tc.opts.Validate()
			if option.Field(err) != tc.field {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.field)
			}
			if _, err := Run(context.Background(), []trace.Request{req(0, 0, 1)}, tc.opts); err == nil {
				t.Error("Run accepted the bad options")
			}
		})
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}

func TestBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs []trace.Request
		want string
	}{
		{"empty", nil, "no requests"},
		{"zero length", []trace.Request{req(0, 0, 1), {Timestamp: 5, InputLength: 0}}, "request 1: input_length 0"},
		{"key count", []trace.Request{req(0, 2000, 1, 2)}, "request 0: 2 hash_ids for 2000 input tokens, want 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.reqs, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, randomTrace(1, 10), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v", err)
	}
	if _, _, err := Goodput(ctx, randomTrace(1, 10), Options{}, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Goodput with a cancelled context: %v", err)
	}
}

func TestWriteRecordsCSV(t *testing.T) {
	res := mustRun(t, []trace.Request{req(0, 0, keys(1, 4)...), req(1500, 0, keys(1, 8)...)}, Options{Mode: ModeLocal, Instances: 1})
	var b strings.Builder
	if err := WriteRecordsCSV(&b, res.Records); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || strings.Join(rows[0], ",") != "id,arrival_s,instance,input_tokens,hit_tokens_local_ram,"+
		"hit_tokens_local_ssd,hit_tokens_remote_ram,hit_tokens_remote_ssd,bytes_net,bytes_ssd_read,queue_s,"+
		"transfer_s,prefill_s,ttft_s,rejected" {
		t.Fatalf("CSV:\n%s", b.String())
	}
	row := rows[2]
	ttft, err := strconv.ParseFloat(row[13], 64)
	if err != nil || ttft != res.Records[1].TTFT {
		t.Errorf("ttft column %q does not read back as %g", row[13], res.Records[1].TTFT)
	}
	if row[0] != "1" || row[1] != "1.5" || row[2] != "0" || row[3] != "4096" || row[4] != "2048" || row[14] != "false" {
		t.Errorf("row %v", row)
	}
}

// timeChecker is an LRU that fails the test when a cache's accesses do not
// have strictly increasing Time or carry a NextUse that is not in the
// future.
type timeChecker struct {
	*policy.LRU
	t    *testing.T
	name string
	last int64
	n    int
}

func (c *timeChecker) check(a policy.Access) {
	c.n++
	if a.Time <= c.last && c.n > 1 {
		c.t.Fatalf("%s: access %d at time %d after %d", c.name, c.n, a.Time, c.last)
	}
	if a.NextUse <= a.Time {
		c.t.Fatalf("%s: access %d at time %d has next use %d", c.name, c.n, a.Time, a.NextUse)
	}
	c.last = a.Time
}

func (c *timeChecker) Insert(a policy.Access) { c.check(a); c.LRU.Insert(a) }
func (c *timeChecker) Hit(a policy.Access)    { c.check(a); c.LRU.Hit(a) }

func TestAccessTimesIncreasePerCache(t *testing.T) {
	reqs := randomTrace(11, 800)
	// "belady" makes the simulator fill NextUse; the caches are then
	// swapped for checking LRUs.
	s, err := newSimulator(reqs, Options{Instances: 3, RAMBlocks: 30, SSDBlocks: 40, Policy: "belady"})
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
}
