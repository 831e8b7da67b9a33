package masterserver

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/listen"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/option"
)

// TestConfigListenNeedsToken: a control-plane address reachable from other
// hosts is refused by Validate (and so by Run) unless the server has a
// token; with one, Run serves on 0.0.0.0 and only clients with the token
// get in (reached over 127.0.0.1).
func TestConfigListenNeedsToken(t *testing.T) {
	token := []byte("master-test-token")
	cases := []struct {
		listen string
		token  []byte
		refuse bool
	}{
		{"127.0.0.1:0", nil, false},
		{"[::1]:7470", nil, false},
		{"0.0.0.0:7470", nil, true},
		{":7470", nil, true},
		{"[::]:0", nil, true},
		{"192.0.2.1:7470", nil, true},
		{"0.0.0.0:7470", token, false},
	}
	for _, c := range cases {
		t.Run(c.listen, func(t *testing.T) {
			cfg := Config{Listen: c.listen, AdminListen: AdminOff, Server: Options{Token: c.token}}
			err := cfg.Validate()
			if !c.refuse {
				if err != nil {
					t.Fatalf("Validate with listen %s: %v", c.listen, err)
				}
				return
			}
			if !errors.Is(err, listen.ErrNoAuth) || !strings.Contains(err.Error(), c.listen) || option.Field(err) != "Listen" {
				t.Fatalf("Validate with listen %s and no token: %v, want an error naming the listen address option and the address, wrapping listen.ErrNoAuth", c.listen, err)
			}
			if rerr := Run(context.Background(), cfg, io.Discard); !errors.Is(rerr, listen.ErrNoAuth) {
				t.Fatalf("Run with listen %s and no token: %v, want listen.ErrNoAuth", c.listen, rerr)
			}
		})
	}

	started := make(chan string, 1) // read here, never through logs.addr (Write clears that field)
	logs := &lineSink{addr: started}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Listen: "0.0.0.0:0", AdminListen: AdminOff, Server: Options{Token: token}}, logs)
	}()
	var bound string
	select {
	case bound = <-started:
	case err := <-done:
		cancel()
		t.Fatalf("Run on 0.0.0.0 with a token: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		t.Fatalf("startup line address %q: %v", bound, err)
	}
	addr := net.JoinHostPort("127.0.0.1", port) // never send traffic beyond loopback
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	defer dcancel()
	mc, err := masterclient.Dial(dctx, addr, masterclient.Options{Token: token})
	if err != nil {
		t.Fatalf("dial with the token: %v", err)
	}
	if _, err := mc.Nodes(dctx); err != nil {
		t.Errorf("Nodes with the token: %v", err)
	}
	mc.Close()
	if mc, err := masterclient.Dial(dctx, addr, masterclient.Options{}); !errors.Is(err, kvpool.ErrUnauthorized) {
		if err == nil {
			mc.Close()
		}
		t.Fatalf("dial without the token: %v, want kvpool.ErrUnauthorized", err)
	}
}

// lineSink receives Run's output and sends the address of its startup
// line ("listening on ADDR,") once.
type lineSink struct {
	mu   sync.Mutex
	buf  strings.Builder
	addr chan string
}

func (w *lineSink) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.addr != nil {
		if _, rest, ok := strings.Cut(w.buf.String(), "listening on "); ok {
			if a, _, ok := strings.Cut(rest, ","); ok {
				w.addr <- a
				w.addr = nil
			}
		}
	}
	return len(p), nil
}
