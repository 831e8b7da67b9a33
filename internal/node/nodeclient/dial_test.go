package nodeclient_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
)

// countingDialer dials with a net.Dialer, or fails with err when set, and
// records every network and address it is asked for.
type countingDialer struct {
	err error

	mu    sync.Mutex
	calls []string // "network addr"
}

func (d *countingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.calls = append(d.calls, network+" "+addr)
	d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *countingDialer) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// TestDialOption: DialOptions.Dial opens the connection, of a Conn and of
// each of a Pool's; its error fails the dial.
func TestDialOption(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	n.b.Store(block.Key{ID: 1}, payload(10, 1))
	t.Run("conn", func(t *testing.T) {
		var d countingDialer
		c := dial(t, n.addr, nodeclient.DialOptions{Dial: d.DialContext})
		if _, err := c.Stats(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got, want := d.dialled(), []string{"tcp " + n.addr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q", got, want)
		}
	})
	t.Run("pool", func(t *testing.T) {
		var d countingDialer
		p, err := nodeclient.NewPool(n.addr, nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Dial: d.DialContext}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, _, err := p.Get(ctxT(t), 1, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := d.dialled(), []string{"tcp " + n.addr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q", got, want)
		}
	})
	t.Run("error", func(t *testing.T) {
		errRoute := errors.New("no route in this namespace")
		d := countingDialer{err: errRoute}
		_, err := nodeclient.Dial(ctxT(t), n.addr, nodeclient.DialOptions{Dial: d.DialContext})
		if !errors.Is(err, errRoute) {
			t.Fatalf("Dial with a failing dialer: %v, want it wrapping %v", err, errRoute)
		}
		if got, want := d.dialled(), []string{"tcp " + n.addr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q", got, want)
		}
	})
}
