package nodeserver_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"testing"
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
	const size, payloads = 1 << 20, 64
	for _, piece := range []int{size, 64 << 10, 4 << 10} {
		b.Run(fmt.Sprintf("iovecs=%d/piece=%dKiB", size/piece, piece>>10), func(b *testing.B) {
			benchWritevShape(b, size, piece, payloads)
		})
	}
}

func benchWritevShape(b *testing.B, size, piece, payloads int) {
	arena := make([]byte, size*payloads)
	for i := range arena {
		arena[i] = byte(i)
	}
	// Each payload's pieces are scattered over the arena: piece j of
	// payload p is the perm[p*per+j]-th piece of the arena.
	per := size / piece
	perm := rand.New(rand.NewPCG(1, 2)).Perm(per * payloads)
	vecs := make([][][]byte, payloads)
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
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var req [8]byte
		var out net.Buffers
		for {
			if _, err := io.ReadFull(c, req[:]); err != nil {
				return
			}
			out = append(out[:0], vecs[binary.LittleEndian.Uint64(req[:])%uint64(payloads)]...)
			if _, err := out.WriteTo(c); err != nil {
				return
			}
		}
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, size)
	var req [8]byte
	rng := rand.New(rand.NewPCG(3, 4))
	b.SetBytes(int64(size))
	cpu0 := cpuSeconds(b)
	b.ResetTimer()
	for b.Loop() {
		binary.LittleEndian.PutUint64(req[:], rng.Uint64())
		if _, err := c.Write(req[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	gb := float64(b.N) * float64(size) / 1e9
	b.ReportMetric(gb/b.Elapsed().Seconds(), "GB/s")
	b.ReportMetric((cpuSeconds(b)-cpu0)/gb, "cpu-s/GB")
}

// cpuSeconds returns the process's user + system CPU time so far.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
