package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// churnPayload is version v of block id's payload, n bytes (n >= 16):
// the id and the version, then bytes that depend on both, so a reply
// carrying another block's or another version's bytes, or a mix of two, is
// recognised.
func churnPayload(id, v uint64, n int) []byte {
	p := make([]byte, n)
	binary.LittleEndian.PutUint64(p, id)
	binary.LittleEndian.PutUint64(p[8:], v)
	x := id*0x9e3779b97f4a7c15 ^ v*0xbf58476d1ce4e5b9
	for i := 16; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}

// churnSize is the size of version v of a block: 1 to 64 chunks of the
// default 4 KiB and a ragged tail, so that freed runs are reused by
// objects of other sizes and an object's runs change between versions.
func churnSize(id, v uint64) int {
	return 16 + int((id*31+v*17)%64)*4096 + int((id+v)%4093)
}

// TestGetDuringChurn: GETs over real TCP, while other connections
// overwrite, delete and (by overfilling the RAM tier) evict the same
// blocks, only ever return a whole version of the block asked for: the
// chunks a GET is sending stay pinned until its writev is done, so no
// concurrent Put may reuse them. Each reply is checked byte for byte
// against the version it names (beyond the checksum nodeclient verifies).
// Loopback copies a reply into the socket within microseconds, so this
// end-to-end check seldom overlaps a reuse; the RAM tier's own tests of
// pinning (TestPinned, TestDeletePinned, TestModel) are what fail when a
// pin is released before the send ends.
func TestGetDuringChurn(t *testing.T) {
	cfg := testConfig("")
	cfg.RAM.Bytes = 4 << 20 // 1,024 chunks
	cfg.MaxObjectBytes = 512 << 10
	r := start(t, cfg, Options{})
	ctx := context.Background()
	const (
		keys    = 48 // objects average 130 KiB: half again what the 4 MiB RAM tier holds
		readers = 4
		writers = 2
		reads   = 300 // GETs per reader
	)
	dial := func() *nodeclient.Conn {
		c, err := nodeclient.Dial(ctx, r.n.Addr(), nodeclient.DialOptions{Tenant: "t"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var (
		mu       sync.Mutex
		versions [keys]uint64 // the highest version written of each key
		done     sync.WaitGroup
		stop     = make(chan struct{})
		hits     [readers]int
	)
	writeConns := make([]*nodeclient.Conn, writers)
	for i := range writeConns {
		writeConns[i] = dial()
	}
	readConns := make([]*nodeclient.Conn, readers)
	for i := range readConns {
		readConns[i] = dial()
	}
	var wwg sync.WaitGroup
	for w, c := range writeConns {
		wwg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := rng.Uint64N(keys)
				if rng.IntN(5) == 0 {
					if err := c.Delete(ctx, id); err != nil && !errors.Is(err, kvpool.ErrNotFound) {
						t.Errorf("delete %d: %v", id, err)
						return
					}
					continue
				}
				mu.Lock()
				versions[id]++
				v := versions[id]
				mu.Unlock()
				if err := c.Put(ctx, id, churnPayload(id, v, churnSize(id, v))); err != nil && !errors.Is(err, kvpool.ErrFull) {
					t.Errorf("put %d version %d: %v", id, v, err)
					return
				}
			}
		})
	}
	for g, c := range readConns {
		done.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			dst := make([]byte, 0, 512<<10)
			for range reads {
				id := rng.Uint64N(keys)
				p, _, err := c.Get(ctx, id, dst)
				if errors.Is(err, kvpool.ErrNotFound) {
					continue
				}
				if err != nil {
					t.Errorf("get %d: %v", id, err)
					return
				}
				if err := checkChurn(id, p); err != nil {
					t.Errorf("get %d: %v", id, err)
					return
				}
				hits[g]++
			}
		})
	}
	done.Wait()
	close(stop)
	wwg.Wait()
	total := 0
	for _, h := range hits {
		total += h
	}
	ts, err := readConns[0].Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ts {
		if s.Name == "ram" {
			t.Logf("%d verified GETs of %d; RAM tier: %d evicted, %d resident", total, readers*reads, s.Stats.Evicted, s.Stats.Blocks)
			if s.Stats.Evicted == 0 {
				t.Errorf("no eviction: the test did not exercise chunk reuse by eviction")
			}
		}
	}
	if total == 0 {
		t.Errorf("no GET found a block: the test checked nothing")
	}
}

// checkChurn reports whether p is a whole version of block id.
func checkChurn(id uint64, p []byte) error {
	if len(p) < 16 {
		return fmt.Errorf("%d bytes, shorter than any version", len(p))
	}
	gotID, v := binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])
	if gotID != id {
		return fmt.Errorf("reply holds block %d's bytes", gotID)
	}
	if n := churnSize(id, v); len(p) != n {
		return fmt.Errorf("version %d: %d bytes, want %d", v, len(p), n)
	}
	want := churnPayload(id, v, len(p))
	for i := range p {
		if p[i] != want[i] {
			return fmt.Errorf("version %d: byte %d is %#x, want %#x", v, i, p[i], want[i])
		}
	}
	return nil
}
