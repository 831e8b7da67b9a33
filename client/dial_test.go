package client_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterserver"
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

// serveMaster serves m's master protocol on loopback until the test ends
// and returns its address.
func serveMaster(t *testing.T, m *master.Master) string {
	t.Helper()
	s, err := masterserver.New(m, masterserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		s.Close()
	})
	return ln.Addr().String()
}

// TestDialOption: Options.Dial opens the client's connections to the
// master and to the nodes; its error is the error of what needed them.
func TestDialOption(t *testing.T) {
	t.Run("master and nodes", func(t *testing.T) {
		c := newCluster(t, 1)
		maddr := serveMaster(t, c.m)
		var d countingDialer
		cl, err := client.New(ctxFor(t), client.Options{Master: maddr, Dial: d.DialContext})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		ids := seq(1, 4)
		put(t, cl, ids, client.PutOptions{})
		res, err := cl.Get(ctxFor(t), ids, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkLoaded(t, res, ids)
		stats, err := cl.NodeStats(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || !stats[0].Reached {
			t.Fatalf("node stats %+v, want n0 reached", stats)
		}
		// The master's pooled connections are dialled on first use and
		// the nodes' as calls need them: which address comes first and
		// which ones were dialled is fixed, how often is not.
		got := d.dialled()
		if len(got) == 0 || got[0] != "tcp "+maddr {
			t.Fatalf("dialled %q, want the master %s first", got, maddr)
		}
		seen := slices.Compact(slices.Sorted(slices.Values(got)))
		want := slices.Sorted(slices.Values([]string{"tcp " + maddr, "tcp " + c.nodes[0].addr}))
		if !slices.Equal(seen, want) {
			t.Fatalf("dialled %q, want only and both of %q", got, want)
		}
	})
	t.Run("master error", func(t *testing.T) {
		c := newCluster(t, 0)
		maddr := serveMaster(t, c.m)
		errRoute := errors.New("no route in this namespace")
		d := countingDialer{err: errRoute}
		cl, err := client.New(ctxFor(t), client.Options{Master: maddr, Dial: d.DialContext})
		if err == nil {
			cl.Close()
			t.Fatal("New succeeded with a dialer that fails")
		}
		if !errors.Is(err, errRoute) {
			t.Fatalf("New: %v, want it wrapping %v", err, errRoute)
		}
		if got, want := d.dialled(), []string{"tcp " + maddr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q", got, want)
		}
	})
	t.Run("node error", func(t *testing.T) {
		c := newCluster(t, 1)
		errRoute := errors.New("no route in this namespace")
		d := countingDialer{err: errRoute}
		cl := newClient(t, c, client.Options{Dial: d.DialContext})
		stats, err := cl.NodeStats(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || stats[0].Reached || !errors.Is(stats[0].Err, errRoute) {
			t.Fatalf("node stats %+v, want n0 not reached with an error wrapping %v", stats, errRoute)
		}
		if got, want := d.dialled(), []string{"tcp " + c.nodes[0].addr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q", got, want)
		}
	})
}
