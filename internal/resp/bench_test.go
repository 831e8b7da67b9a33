package resp

import (
	"io"
	"net"
	"strings"
	"testing"
)

// BenchmarkReadCommand reads pipelined commands from a client that never
// stops (64 KiB reads, many commands each).
func BenchmarkReadCommand(b *testing.B) {
	for _, bc := range []struct{ name, cmd string }{
		{"GET", multibulk("GET", "key:000000000001")},
		{"GET_inline", "GET key:000000000001\r\n"},
		{"SET_4KiB", multibulk("SET", "key:000000000001", strings.Repeat("v", 4<<10))},
		{"SET_1MiB", multibulk("SET", "key:000000000001", strings.Repeat("v", 1<<20))},
		{"SET_1MiB_unpipelined", multibulk("SET", "key:000000000001", strings.Repeat("v", 1<<20))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var src io.Reader = &loopReader{data: []byte(strings.Repeat(bc.cmd, max(1, 64<<10/len(bc.cmd))))}
			if strings.HasSuffix(bc.name, "_unpipelined") {
				// A client that waits for each reply: no read returns
				// bytes of the next command, so the Reader drops its big
				// buffer before each one.
				src = &oneAtATime{cmd: []byte(bc.cmd)}
			}
			rd := NewReader(src, Limits{})
			b.SetBytes(int64(len(bc.cmd)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rd.ReadCommand(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
		})
	}
}

// BenchmarkWriter writes one bulk reply and flushes it, per op: to
// io.Discard, and over TCP loopback (drained by a reader goroutine), where
// BulkSegments goes out in one writev.
func BenchmarkWriter(b *testing.B) {
	k4, m1 := make([]byte, 4<<10), make([]byte, 1<<20)
	segs := make([][]byte, 16) // 1 MiB as 16 pages of 64 KiB
	for i := range segs {
		segs[i] = m1[i*64<<10 : (i+1)*64<<10]
	}
	for _, bc := range []struct {
		name  string
		size  int
		write func(w *Writer)
	}{
		{"Bulk_4KiB", len(k4), func(w *Writer) { w.Bulk(k4) }},
		{"Bulk_1MiB", len(m1), func(w *Writer) { w.Bulk(m1) }},
		{"BulkSegments_1MiB", len(m1), func(w *Writer) { w.BulkSegments(segs) }},
	} {
		for _, dst := range []string{"discard", "tcp"} {
			b.Run(bc.name+"/"+dst, func(b *testing.B) {
				var out io.Writer = io.Discard
				if dst == "tcp" {
					c, s := benchPair(b)
					done := make(chan struct{})
					go func() {
						defer close(done)
						_, _ = io.Copy(io.Discard, c)
					}()
					b.Cleanup(func() {
						s.Close()
						<-done
						c.Close()
					})
					out = s
				}
				w := NewWriter(out)
				b.SetBytes(int64(bc.size))
				b.ReportAllocs()
				for b.Loop() {
					bc.write(w)
					if err := w.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func benchPair(b *testing.B) (client, server net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		b.Fatal("accept failed")
	}
	return c, s
}

// oneAtATime serves cmd over and over, each read ending at the end of a
// copy.
type oneAtATime struct {
	cmd []byte
	off int
}

func (o *oneAtATime) Read(p []byte) (int, error) {
	n := copy(p, o.cmd[o.off:])
	o.off = (o.off + n) % len(o.cmd)
	return n, nil
}
