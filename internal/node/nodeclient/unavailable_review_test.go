package nodeclient_test

import (
	"errors"
	"net"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUnreachableIsUnavailable: a node that cannot be reached, or that
// goes away under a connection, is kvpool.ErrUnavailable, as the master
// is on its plane (the error vocabulary: "cannot be reached").
func TestUnreachableIsUnavailable(t *testing.T) {
	ctx := ctxT(t)
	addr := closedAddr(t)
	if _, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{}); !errors.Is(err, kvpool.ErrUnavailable) {
		t.Errorf("node: Dial of an address nothing listens on: %v, want kvpool.ErrUnavailable", err)
	}
	if mc, err := masterclient.Dial(ctx, addr, masterclient.Options{}); err == nil {
		_, err = mc.Nodes(ctx)
		mc.Close()
		if !errors.Is(err, kvpool.ErrUnavailable) {
			t.Errorf("master: a call to an address nothing listens on: %v, want kvpool.ErrUnavailable", err)
		}
	} else if !errors.Is(err, kvpool.ErrUnavailable) {
		t.Errorf("master: Dial of an address nothing listens on: %v, want kvpool.ErrUnavailable", err)
	}

	// A node that stops under an open connection.
	n := startNode(t, nodeserver.Options{})
	c := dial(t, n.addr, nodeclient.DialOptions{})
	if err := c.Put(ctx, 1, payload(64, 1)); err != nil {
		t.Fatal(err)
	}
	n.srv.Close()
	if _, _, err := c.Get(ctx, 1, nil); !errors.Is(err, kvpool.ErrUnavailable) {
		t.Errorf("node: Get on a connection the stopped node closed: %v, want kvpool.ErrUnavailable", err)
	}
	if _, _, err := c.Get(ctx, 1, nil); !errors.Is(err, kvpool.ErrUnavailable) {
		t.Errorf("node: a second Get on the lost connection: %v, want kvpool.ErrUnavailable", err)
	}
}

// TestFloodPastMaxConns: many clients dial a node at once, far past its
// connection limit: each Dial either succeeds or fails with
// kvpool.ErrUnavailable (a refusal, or a connection closed unanswered),
// never with an error matching no sentinel, and none hangs.
func TestFloodPastMaxConns(t *testing.T) {
	n := startNode(t, nodeserver.Options{MaxConns: 2})
	ctx := ctxT(t)
	errs := make(chan error, 64)
	conns := make(chan *nodeclient.Conn, 64)
	for range 64 {
		go func() {
			c, err := nodeclient.Dial(ctx, n.addr, nodeclient.DialOptions{})
			if err == nil {
				conns <- c
			}
			errs <- err
		}()
	}
	ok := 0
	for range 64 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, kvpool.ErrUnavailable):
			t.Errorf("Dial past the limit: %v, want kvpool.ErrUnavailable", err)
		}
	}
	close(conns)
	for c := range conns {
		c.Close()
	}
	if ok == 0 {
		t.Fatal("no dial succeeded")
	}
}
