package node

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/listen"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// TestNewRefusesExposedListenWithoutToken: New refuses a data-plane address
// reachable from other hosts unless an auth token is set, and a node on
// 0.0.0.0 with a token serves (reached over 127.0.0.1), refusing clients
// without the token.
func TestNewRefusesExposedListenWithoutToken(t *testing.T) {
	const token = "0123456789abcdef-test"
	cases := []struct {
		listen string
		token  config.Secret
		refuse bool
	}{
		{"127.0.0.1:0", "", false},
		{"localhost:0", "", false},
		{"0.0.0.0:0", "", true},
		{":0", "", true},
		{"192.0.2.1:7480", "", true}, // TEST-NET-1: refused before any bind
		{"0.0.0.0:0", token, false},
	}
	for _, c := range cases {
		t.Run(c.listen+"/token="+string(c.token), func(t *testing.T) {
			cfg := testConfig("")
			cfg.Listen, cfg.AuthToken = c.listen, c.token
			_, err := New(cfg, Options{})
			if !c.refuse {
				if err != nil {
					t.Fatalf("New with listen %s: %v", c.listen, err)
				}
				return
			}
			if !errors.Is(err, listen.ErrNoAuth) || !strings.Contains(err.Error(), c.listen) {
				t.Fatalf("New with listen %s and no token: %v, want an error naming the address and wrapping listen.ErrNoAuth", c.listen, err)
			}
		})
	}

	cfg := testConfig("")
	cfg.Listen, cfg.AuthToken = "0.0.0.0:0", token
	r := start(t, cfg, Options{})
	_, port, err := net.SplitHostPort(r.n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", port) // never send traffic beyond loopback
	ctx := context.Background()
	c, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Tenant: "t", Token: []byte(token)})
	if err != nil {
		t.Fatalf("dial with the token: %v", err)
	}
	defer c.Close()
	if err := c.Put(ctx, 1, []byte("payload")); err != nil {
		t.Fatalf("put with the token: %v", err)
	}
	if c, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Tenant: "t"}); !errors.Is(err, kvpool.ErrUnauthorized) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("dial without the token: %v, want kvpool.ErrUnauthorized", err)
	}
}
