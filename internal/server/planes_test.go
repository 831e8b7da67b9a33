package server_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/nodeserver/nodeservertest"
)

// plane is one real server behind the skeleton, with MaxConns 1 and a
// cluster token, and a client call that needs one connection.
type plane struct {
	name  string
	start func(t *testing.T, token []byte) (addr string)
	// connect opens a connection with token and returns it (to close) or
	// the error a caller sees.
	connect func(ctx context.Context, addr string, token []byte) (func(), error)
}

var planes = []plane{
	{
		name: "node",
		start: func(t *testing.T, token []byte) string {
			s, err := nodeserver.New(nodeserver.Options{Backend: nodeservertest.NewBackend(t.TempDir()), MaxConns: 1, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			return serve(t, s.Serve, s.Close)
		},
		connect: func(ctx context.Context, addr string, token []byte) (func(), error) {
			c, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Token: token})
			if err != nil {
				return nil, err
			}
			return func() { c.Close() }, nil
		},
	},
	{
		name: "master",
		start: func(t *testing.T, token []byte) string {
			m, err := master.New(master.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := masterserver.New(m, masterserver.Options{MaxConns: 1, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			return serve(t, s.Serve, s.Close)
		},
		connect: func(ctx context.Context, addr string, token []byte) (func(), error) {
			c, err := masterclient.Dial(ctx, addr, masterclient.Options{Token: token, Conns: 1})
			if err != nil {
				return nil, err
			}
			if _, err := c.Nodes(ctx); err != nil { // connects
				c.Close()
				return nil, err
			}
			return func() { c.Close() }, nil
		},
	},
}

func serve(t *testing.T, run func(context.Context, net.Listener) error, stop func() error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- run(context.Background(), ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestSameRefusalFromBothPlanes: a node and the master refusing a
// connection for the same reason give the caller the same error, though
// their protocols number the reasons differently.
func TestSameRefusalFromBothPlanes(t *testing.T) {
	token := []byte("cluster-secret")
	for _, p := range planes {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Two servers, so that no check waits for a slot the other
			// freed.
			if _, err := p.connect(ctx, p.start(t, token), []byte("wrong")); !errors.Is(err, kvpool.ErrUnauthorized) {
				t.Fatalf("wrong token: %v, want kvpool.ErrUnauthorized", err)
			}
			addr := p.start(t, token)
			closeFirst, err := p.connect(ctx, addr, token)
			if err != nil {
				t.Fatalf("first connection: %v", err)
			}
			defer closeFirst()
			if _, err := p.connect(ctx, addr, token); !errors.Is(err, kvpool.ErrUnavailable) {
				t.Fatalf("over MaxConns: %v, want kvpool.ErrUnavailable", err)
			}
		})
	}
}
