//go:build unix

package nodeserver_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvpool/kvpool/block"
)

// BenchmarkWritevShape measures what the shape of a payload's iovecs costs
// over real loopback TCP, apart from everything else a GET does: a server
// answers each 8-byte request with one 1 MiB payload sent as one writev of
// 1 × 1 MiB, 16 × 64 KiB or 256 × 4 KiB pieces (the RAM tier's chunk size),
// the pieces taken from 64 payloads' worth of arena in a shuffled order so
// that no two iovecs are adjacent; a client reads each answer with
// io.ReadFull. It reports GB/s and the process's CPU seconds per GB (user
// + system, both ends), the figure that survives a shared machine.
func BenchmarkWritevShape(b *testing.B) {
	const size = 1 << 20
	for _, piece := range []int{size, 64 << 10, 4 << 10} {
		b.Run(fmt.Sprintf("iovecs=%d/piece=%dKiB", size/piece, piece>>10), func(b *testing.B) {
			benchRaw(b, size, piece, 1, false)
		})
	}
}

// BenchmarkRawGet is the raw reference of BenchmarkNodeGet's RAM runs in
// the same units: the same block sizes and connections, each block one
// contiguous buffer of a 64-block working set, answered to an 8-byte
// request (the bench target tcp-set), read with io.ReadFull; with
// verify=true the client also computes each block's CRC-32C as it
// arrives, piece by piece as nodeclient does, so the difference between
// the two is what verification costs and the difference to
// BenchmarkNodeGet is what framing, the store and the server cost.
func BenchmarkRawGet(b *testing.B) {
	for _, size := range []int{256 << 10, 1 << 20} {
		for _, verify := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%dKiB/conns=4/verify=%v", size>>10, verify), func(b *testing.B) {
				benchRaw(b, size, size, 4, verify)
			})
		}
	}
}

// benchRaw serves benchBlocks payloads of size bytes, each as size/piece
// scattered pieces, to conns connections reading them back to back.
func benchRaw(b *testing.B, size, piece, conns int, verify bool) {
	per := size / piece
	arena := make([]byte, size*benchBlocks)
	for i := range arena {
		arena[i] = byte(i)
	}
	// Piece j of payload p is the perm[p*per+j]-th piece of the arena.
	perm := rand.New(rand.NewPCG(1, 2)).Perm(per * benchBlocks)
	vecs := make([][][]byte, benchBlocks)
	for p := range vecs {
		for j := range per {
			at := perm[p*per+j] * piece
			vecs[p] = append(vecs[p], arena[at:at+piece:at+piece])
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				var req [8]byte
				var out net.Buffers
				for {
					if _, err := io.ReadFull(c, req[:]); err != nil {
						return
					}
					out = append(out[:0], vecs[binary.LittleEndian.Uint64(req[:])%benchBlocks]...)
					if _, err := out.WriteTo(c); err != nil {
						return
					}
				}
			})
		}
	})
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	var next atomic.Int64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuSeconds(b)
	b.ResetTimer()
	var cwg sync.WaitGroup
	for i, c := range cs {
		cwg.Go(func() {
			buf := make([]byte, size)
			var req [8]byte
			rng := rand.New(rand.NewPCG(3, uint64(i)))
			for next.Add(1) <= int64(b.N) {
				binary.LittleEndian.PutUint64(req[:], rng.Uint64())
				if _, err := c.Write(req[:]); err != nil {
					b.Error(err)
					return
				}
				var sum uint32
				for got := 0; got < size; {
					n, err := c.Read(buf[got:])
					if verify {
						sum = block.UpdateChecksum(sum, buf[got:got+n])
					}
					got += n
					if err != nil && got < size {
						b.Error(err)
						return
					}
				}
				_ = sum
			}
		})
	}
	cwg.Wait()
	b.StopTimer()
	reportCPU(b, size, cpu0)
}
