package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// tcpRequestLen is the raw TCP target's request: 8 bytes, the order of a
// node GET's request frame body (a key ID), so the receiver pays one small
// write and one block read per request like a GET.
const tcpRequestLen = 8

// tcpTarget is the raw loopback TCP limit: a minimal server that answers
// every 8-byte request with BlockSize bytes from memory, and clients that
// read them with io.ReadFull. No framing, no checksum: what a node GET
// could reach at best on this machine.
//
// Without set (target tcp, "tcp (one buffer)") every answer is the same
// buffer, which stays in the CPU's caches: a limit no store serving a data
// set reaches. With set (target tcp-set, "tcp (working set)") the server
// holds the node target's working set, Spec.blocks() buffers of BlockSize
// bytes, and the request names the buffer (a little-endian index, drawn
// at random like the node target's ids): the same bytes from memory a node
// GET from RAM sends, which is the fair reference for it.
type tcpTarget struct {
	set bool
	rawServers
}

func (t *tcpTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	n := 1
	if t.set {
		n = spec.blocks()
	}
	values := make([][]byte, n)
	for v := range values {
		values[v] = make([]byte, spec.BlockSize)
		for i := range values[v] {
			values[v][i] = byte(i + v)
		}
	}
	ln, err := t.listen(func(c net.Conn) { serveRaw(c, values) })
	if err != nil {
		return nil, err
	}
	if !t.set {
		n = 0
	}
	return t.tcpWorkers(ctx, ln, spec, n)
}

// tcpWorkers dials spec.Conns connections to ln, a worker each reading
// spec.BlockSize bytes per request; with n > 0 each request names one of
// n blocks at random, else it names the first.
func (r *rawServers) tcpWorkers(ctx context.Context, ln net.Listener, spec Spec, n int) ([]Worker, error) {
	ws := make([]Worker, spec.Conns)
	for i := range ws {
		c, err := r.dial(ctx, ln)
		if err != nil {
			return nil, err
		}
		w := &tcpWorker{c: c, buf: make([]byte, spec.BlockSize)}
		if n > 0 {
			w.mix = newMix(i, n, 0)
		}
		ws[i] = w
	}
	return ws, nil
}

// rawServers are the raw references' loopback listeners and every
// connection made to or accepted by them, all closed by Close.
type rawServers struct {
	lns   []net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// listen starts a listener on loopback that runs serve on every
// connection it accepts, until Close.
func (r *rawServers) listen(serve func(net.Conn)) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	r.lns = append(r.lns, ln)
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed by Close
			}
			r.track(c)
			r.wg.Go(func() { serve(c) })
		}
	})
	return ln, nil
}

// dial opens a connection to ln that Close closes.
func (r *rawServers) dial(ctx context.Context, ln net.Listener) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", ln.Addr(), err)
	}
	r.track(c)
	return c, nil
}

func (r *rawServers) track(c net.Conn) {
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

// Close closes the listeners and connections and waits for the servers.
func (r *rawServers) Close() error {
	var errs []error
	for _, ln := range r.lns {
		errs = append(errs, ln.Close())
	}
	r.mu.Lock()
	for _, c := range r.conns {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
	return errors.Join(errs...)
}

// serveRaw answers each request read from c with the value it names
// (values[0] when there is one) until c fails or names no value.
func serveRaw(c net.Conn, values [][]byte) {
	var req [tcpRequestLen]byte
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		i := binary.LittleEndian.Uint64(req[:])
		if i >= uint64(len(values)) {
			return // the worker sees the connection end: its request failed
		}
		if _, err := c.Write(values[i]); err != nil {
			return
		}
	}
}

type tcpWorker struct {
	c   net.Conn
	mix mix // picks the value of a working set; zero for one buffer
	req [tcpRequestLen]byte
	buf []byte
}

func (w *tcpWorker) Do(ctx context.Context) (Op, error) {
	if w.mix.rng != nil {
		id, _ := w.mix.next()
		binary.LittleEndian.PutUint64(w.req[:], id)
	}
	if _, err := w.c.Write(w.req[:]); err != nil {
		return Op{}, fmt.Errorf("send request: %w", err)
	}
	if _, err := io.ReadFull(w.c, w.buf); err != nil {
		return Op{}, fmt.Errorf("read %d bytes: %w", len(w.buf), err)
	}
	return Op{Ops: 1, Bytes: int64(len(w.buf))}, nil
}
