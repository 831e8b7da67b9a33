package masterserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
)

// lookupFixture registers three nodes holding keys 0..n-1 of tenant "t"
// (two replicas each) directly in m and returns a LOOKUP request frame for
// 32 of them.
func lookupFixture(tb testing.TB, s *Server, n int, lease bool) []byte {
	tb.Helper()
	for i := range 3 {
		var inv meta.Inventory
		for id := range uint64(n) {
			if int(id)%3 != i {
				inv = append(inv, meta.Item{Key: keyT(id), Tier: meta.Tier(1 + i%2), Size: 65536, Sum: uint32(id)})
			}
		}
		info := meta.NodeInfo{ID: meta.NodeID(fmt.Sprintf("node-%d", i)), Addr: fmt.Sprintf("127.0.0.1:%d", 7480+i), RAMBytes: 1 << 40, SSDBytes: 1 << 40}
		if _, err := s.m.Register(info, inv, meta.NodeUsage{}); err != nil {
			tb.Fatal(err)
		}
		s.setAddr(info.ID, info.Addr)
	}
	ids := make([]uint64, 32)
	for i := range ids {
		ids[i] = uint64(i)
	}
	b, err := masterproto.AppendLookup(nil, 1, &masterproto.Lookup{Tenant: "t", IDs: ids, Lease: lease})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestLookupZeroAllocs: the server answers a LOOKUP (decode, master
// lookup with lease, addresses, encode) without allocating in steady
// state.
func TestLookupZeroAllocs(t *testing.T) {
	for _, lease := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease=%v", lease), func(t *testing.T) {
			s, err := New(newMaster(t, master.Options{}), Options{})
			if err != nil {
				t.Fatal(err)
			}
			req := lookupFixture(t, s, 64, lease)
			g, err := s.srv.Auth().Authenticate(nil) // an open server: everything allowed
			if err != nil {
				t.Fatal(err)
			}
			c := &conn{s: s, grant: g, out: make([]byte, 0, 1<<16), reign: s.current()}
			h := masterproto.ParseHeader(req)
			body := req[masterproto.HeaderLen:]
			run := func() {
				c.out = c.out[:0]
				c.handle(h, body)
			}
			run()
			var res masterproto.LookupResult
			if err := masterproto.DecodeLookupResult(masterproto.ParseHeader(c.out), c.out[masterproto.HeaderLen:], masterproto.Limits{}, &res); err != nil || res.Hit != 32 || len(res.Replicas) != 64 {
				t.Fatalf("response: hit %d, %d replicas, %v", res.Hit, len(res.Replicas), err)
			}
			if n := testing.AllocsPerRun(200, run); n != 0 {
				t.Fatalf("%v allocations per LOOKUP on the server, want 0", n)
			}
		})
	}
}

// BenchmarkLookup32Loopback: 16 client goroutines (8 × GOMAXPROCS on
// this 2-core machine) pipelining 32-key leased LOOKUPs over a
// pool of loopback connections to one server. Reports keys/s.
func BenchmarkLookup32Loopback(b *testing.B) {
	for _, conns := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			// The fixture's nodes never heartbeat: a TTL longer than any run.
			m := newMaster(b, master.Options{NodeTTL: time.Hour, HeartbeatInterval: time.Minute})
			ts := start(b, m, Options{}, nil)
			lookupFixture(b, ts.Server, 4096, true)
			c := dial(b, ts.addr, masterclient.Options{Conns: conns})
			b.ReportAllocs()
			b.SetParallelism(8) // 8 × GOMAXPROCS goroutines: 16 on 2 cores
			ctx := context.Background()
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var res masterclient.LookupResult
				ids := make([]uint64, 32)
				next := uint64(0)
				for pb.Next() {
					for i := range ids {
						ids[i] = (next + uint64(i)) % 4096
					}
					next += 32
					if err := c.Lookup(ctx, "t", ids, true, &res); err != nil {
						b.Error(err)
						return
					}
					if res.Hit != 32 {
						b.Errorf("hit %d", res.Hit)
						return
					}
				}
			})
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N*32)/el.Seconds(), "keys/s")
			b.ReportMetric(float64(b.N)/el.Seconds(), "lookups/s")
		})
	}
}

func keyT(id uint64) block.Key { return block.Key{Tenant: "t", ID: id} }
