package nodeclient_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
)

// TestPoolCloseInterrupts: Close ends a dial stuck on a node that accepts
// and never answers, and a call in flight on a node that holds it, both
// with ErrClosed, though their timeouts are an hour.
func TestPoolCloseInterrupts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if nc, err := ln.Accept(); err == nil {
			accepted <- nc
		}
	}()
	p, err := nodeclient.NewPool(ln.Addr().String(), nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Timeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Get(ctxT(t), 1, nil)
		done <- err
	}()
	nc := <-accepted // the dial is waiting for the hello-ack
	defer nc.Close()
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, nodeclient.ErrClosed) {
			t.Fatalf("dial interrupted by Close: %v, want ErrClosed", err)
		}
	case <-time.After(time.Minute): // a hang, not a speed bound
		t.Fatal("Close did not end a dial waiting on a silent node")
	}

	// A call in flight: the node holds the write of its PUT (ingress pacer).
	g := newGate()
	n := startNode(t, nodeserver.Options{Ingress: g})
	p2, err := nodeclient.NewPool(n.addr, nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Timeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- p2.Put(ctxT(t), 1, payload(1024, 1)) }()
	<-g.entered
	p2.Close()
	select {
	case err := <-done:
		if !errors.Is(err, nodeclient.ErrClosed) {
			t.Fatalf("call interrupted by Close: %v, want ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not end a call in flight")
	}
	close(g.open)
}
