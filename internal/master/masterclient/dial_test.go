package masterclient_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/master/masterclient"
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

// TestDialOption: Options.Dial opens the client's connections to the
// master, and the HTTP probe of a silent peer; its error fails Dial.
func TestDialOption(t *testing.T) {
	t.Run("master", func(t *testing.T) {
		_, addr := serve(t, masterserver.Options{})
		var d countingDialer
		c := dial(t, addr, masterclient.Options{Conns: 1, Dial: d.DialContext})
		if _, err := c.Nodes(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got, want := d.dialled(), []string{"tcp " + addr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q", got, want)
		}
	})
	t.Run("probe", func(t *testing.T) {
		addr := silentHTTPServer(t)
		var d countingDialer
		_, err := masterclient.Dial(ctxT(t, 5*time.Second), addr, masterclient.Options{Conns: 1, Dial: d.DialContext})
		if !errors.Is(err, masterclient.ErrUnavailable) || !strings.Contains(err.Error(), "HTTP server") {
			t.Fatalf("dial of a silent HTTP server: %v, want ErrUnavailable naming an HTTP server", err)
		}
		if got, want := d.dialled(), []string{"tcp " + addr, "tcp " + addr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q (the HELLO's connection, then the probe's)", got, want)
		}
	})
	t.Run("error", func(t *testing.T) {
		_, addr := serve(t, masterserver.Options{})
		errRoute := errors.New("no route in this namespace")
		d := countingDialer{err: errRoute}
		_, err := masterclient.Dial(ctxT(t, 5*time.Second), addr, masterclient.Options{Dial: d.DialContext})
		if !errors.Is(err, errRoute) || !errors.Is(err, masterclient.ErrUnavailable) {
			t.Fatalf("Dial with a failing dialer: %v, want it wrapping %v and ErrUnavailable", err, errRoute)
		}
		if got, want := d.dialled(), []string{"tcp " + addr}; !slices.Equal(got, want) {
			t.Fatalf("dialled %q, want %q", got, want)
		}
	})
}

// silentHTTPServer stands in for an HTTP server at a wrong address: it
// answers a HEAD request, and is silent on a connection that sends
// anything else (as an HTTP server waits for the end of a request line).
func silentHTTPServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Go(func() {
				defer nc.Close()
				b := make([]byte, 5)
				if _, err := io.ReadFull(nc, b); err != nil {
					return
				}
				if string(b) == "HEAD " {
					io.WriteString(nc, "HTTP/1.0 200 OK\r\n\r\n")
					return
				}
				io.Copy(io.Discard, nc) // silent until the client hangs up
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
