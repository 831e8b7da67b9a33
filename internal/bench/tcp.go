package bench

import (
	"context"
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
type tcpTarget struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func (t *tcpTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	t.ln = ln
	value := make([]byte, spec.BlockSize)
	for i := range value {
		value[i] = byte(i)
	}
	t.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed by Close
			}
			t.track(c)
			t.wg.Go(func() { serveRaw(c, value) })
		}
	})
	var d net.Dialer
	ws := make([]Worker, spec.Conns)
	for i := range ws {
		c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", ln.Addr(), err)
		}
		t.track(c)
		ws[i] = &tcpWorker{c: c, buf: make([]byte, spec.BlockSize)}
	}
	return ws, nil
}

func (t *tcpTarget) track(c net.Conn) {
	t.mu.Lock()
	t.conns = append(t.conns, c)
	t.mu.Unlock()
}

// serveRaw answers each request read from c with value until c fails.
func serveRaw(c net.Conn, value []byte) {
	var req [tcpRequestLen]byte
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		if _, err := c.Write(value); err != nil {
			return
		}
	}
}

func (t *tcpTarget) Close() error {
	var errs []error
	if t.ln != nil {
		errs = append(errs, t.ln.Close())
	}
	t.mu.Lock()
	for _, c := range t.conns {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	t.mu.Unlock()
	t.wg.Wait()
	return errors.Join(errs...)
}

type tcpWorker struct {
	c   net.Conn
	req [tcpRequestLen]byte
	buf []byte
}

func (w *tcpWorker) Do(ctx context.Context) (Op, error) {
	if _, err := w.c.Write(w.req[:]); err != nil {
		return Op{}, fmt.Errorf("send request: %w", err)
	}
	if _, err := io.ReadFull(w.c, w.buf); err != nil {
		return Op{}, fmt.Errorf("read %d bytes: %w", len(w.buf), err)
	}
	return Op{Ops: 1, Bytes: int64(len(w.buf))}, nil
}
