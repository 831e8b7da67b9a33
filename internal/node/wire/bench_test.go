package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/kvpool/kvpool/block"
)

const (
	// benchBlocks × benchBlockSize is the MGET response the brief asks to
	// measure: 8 blocks of 1 MiB.
	benchBlocks    = 8
	benchBlockSize = 1 << 20
	// loopbackChunk is the Linux loopback MTU (64 KiB): the most a socket
	// moves per segment, so the in-memory benchmarks move bytes in pieces
	// of this size, as send and recv on a loopback socket would.
	loopbackChunk = 64 << 10
)

// chunkWriter copies what it is given into a loopback-sized buffer, one
// chunk at a time, as the kernel copies a send into a socket buffer.
type chunkWriter struct{ buf [loopbackChunk]byte }

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		p = p[copy(w.buf[:], p):]
	}
	return n, nil
}

// loopReader serves frame over and over, at most loopbackChunk bytes a
// read, as recv from a loopback socket does.
type loopReader struct {
	frame []byte
	off   int
}

func (r *loopReader) Read(p []byte) (int, error) {
	if r.off == len(r.frame) {
		r.off = 0
	}
	n := copy(p[:min(len(p), loopbackChunk)], r.frame[r.off:])
	r.off += n
	return n, nil
}

func benchResponse(b *testing.B) ([]Block, []byte) {
	blks := make([]Block, benchBlocks)
	for i := range blks {
		blks[i] = okBlock(uint64(i+1), benchBlockSize)
	}
	enc, err := AppendMGetResponse(nil, 1, blks)
	if err != nil {
		b.Fatal(err)
	}
	return blks, enc
}

func reportGBps(b *testing.B, frameLen int) {
	b.ReportMetric(float64(frameLen)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// readMGet decodes one MGET response from r, landing payloads in dsts and,
// with verify, checking every checksum.
func readMGet(r *Reader, dsts [][]byte, verify bool) error {
	if _, err := r.ReadHeader(); err != nil {
		return err
	}
	n, err := r.BeginBlocks()
	if err != nil {
		return err
	}
	for i := range n {
		bh, err := r.NextBlock()
		if err != nil {
			return err
		}
		p, err := r.ReadPayload(dsts[i])
		if err != nil {
			return err
		}
		if verify && bh.Code == CodeOK && !block.Verify(block.Key{Tenant: testTenant, ID: bh.ID}, p, bh.Checksum) {
			return errors.New("checksum mismatch")
		}
	}
	return nil
}

func BenchmarkMGetResponse(b *testing.B) {
	blks, enc := benchResponse(b)
	dsts := make([][]byte, benchBlocks)
	for i := range dsts {
		dsts[i] = make([]byte, 0, benchBlockSize)
	}

	// Encoders: by reference (byRef, as the node server sends) sends payloads (the kernel's copy into
	// the socket buffer is the only one); Append copies them into the frame.
	b.Run("encode/gather", func(b *testing.B) {
		var g byRef
		var w chunkWriter
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for range b.N {
			if _, err := g.writeTo(&w, OpMGetResponse, 1, blks); err != nil {
				b.Fatal(err)
			}
		}
		reportGBps(b, len(enc))
	})
	b.Run("encode/append", func(b *testing.B) {
		buf := make([]byte, 0, len(enc))
		var w chunkWriter
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for range b.N {
			out, err := AppendMGetResponse(buf[:0], 1, blks)
			if err != nil {
				b.Fatal(err)
			}
			w.Write(out)
		}
		reportGBps(b, len(enc))
	})

	// Decoders: the streaming path lands payloads in the caller's buffers;
	// ReadFrame collects them in the Frame's own buffer.
	for _, c := range []struct {
		name   string
		verify bool
	}{{"decode/stream", false}, {"decode/stream+verify", true}} {
		b.Run(c.name, func(b *testing.B) {
			r, err := NewReader(&loopReader{frame: enc}, Limits{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for range b.N {
				if err := readMGet(r, dsts, c.verify); err != nil {
					b.Fatal(err)
				}
			}
			reportGBps(b, len(enc))
		})
	}
	b.Run("decode/frame", func(b *testing.B) {
		r, err := NewReader(&loopReader{frame: enc}, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		var f Frame
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for range b.N {
			if err := r.ReadFrame(&f); err != nil {
				b.Fatal(err)
			}
		}
		reportGBps(b, len(enc))
	})

	// End to end over a real loopback TCP connection: byRef + writev on
	// one side, streaming decode into destination buffers on the other.
	b.Run("tcp-loopback", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Skipf("no loopback TCP: %v", err)
		}
		defer ln.Close()
		var wg sync.WaitGroup
		sendErr := make(chan error, 1)
		n := b.N
		wg.Add(1)
		go func() { // owned: the benchmark waits for it below
			defer wg.Done()
			conn, err := ln.Accept()
			if err != nil {
				sendErr <- err
				return
			}
			defer conn.Close()
			var g byRef
			for range n {
				if _, err := g.writeTo(conn, OpMGetResponse, 1, blks); err != nil {
					sendErr <- err
					return
				}
			}
			sendErr <- nil
		}()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		r, err := NewReader(conn, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		b.ResetTimer()
		for range n {
			if err := readMGet(r, dsts, false); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		wg.Wait()
		if err := <-sendErr; err != nil {
			b.Fatal(err)
		}
		reportGBps(b, len(enc))
	})
}

// TestSteadyStateAllocs: once buffers are warm, encoding and decoding a
// block frame allocate nothing (the benchmarks report the same).
func TestSteadyStateAllocs(t *testing.T) {
	blks := []Block{okBlock(1, 70_000), {ID: 2, Code: CodeNotFound}, okBlock(3, 10)}
	enc, err := AppendMGetResponse(nil, 1, blks)
	if err != nil {
		t.Fatal(err)
	}
	var g byRef
	buf := make([]byte, 0, len(enc))
	dsts := [][]byte{make([]byte, 0, 70_000), nil, make([]byte, 0, 10)}
	r, err := NewReader(&loopReader{frame: enc}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var f Frame
	ids := []uint64{1, 2, 3}
	cases := []struct {
		name string
		fn   func() error
	}{
		{"gather", func() error {
			_, err := g.writeTo(io.Discard, OpMGetResponse, 1, blks)
			return err
		}},
		{"append", func() error {
			_, err := AppendMGetResponse(buf[:0], 1, blks)
			return err
		}},
		{"append get and put", func() error {
			_ = AppendGet(buf[:0], 1, 2)
			_, err := AppendPut(buf[:0], 1, blks[2])
			return err
		}},
		{"append mget", func() error {
			_, err := AppendMGet(buf[:0], 1, ids)
			return err
		}},
		// Without verification: block.Checksum's own allocations, if any,
		// are block's business (the benchmark's stream+verify shows them).
		{"stream decode", func() error { return readMGet(r, dsts, false) }},
		{"frame decode", func() error { return r.ReadFrame(&f) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.fn(); err != nil { // warm up
				t.Fatal(err)
			}
			var ferr error
			allocs := testing.AllocsPerRun(20, func() {
				if err := c.fn(); err != nil {
					ferr = err
				}
			})
			if ferr != nil {
				t.Fatal(ferr)
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per op, want 0", allocs)
			}
		})
	}
	if !bytes.Equal(dsts[0][:len(blks[0].Payload)], blks[0].Payload) {
		t.Fatal("payload not decoded into the caller's buffer")
	}
}
