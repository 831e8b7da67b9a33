package nodeserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/node"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
)

// tenantToken is the auth token of the servers in the tenant tests; 16
// bytes or more, as config.Node requires of a node's token.
const tenantToken = "tenant-test-token-0123"

// tenantServers are the servers the tenant tests run against: the
// in-memory test backend, and a real node (the tiered store, RAM and SSD)
// as `kvpool node` runs it. Each returns the data-plane address.
var tenantServers = []struct {
	name  string
	start func(t *testing.T) string
}{
	{"nodeservertest backend", func(t *testing.T) string {
		_, addr := start(t, nil, nodeserver.Options{Token: []byte(tenantToken)})
		return addr
	}},
	{"node with RAM and SSD tiers", startTenantNode},
}

// startTenantNode runs a node.Node on loopback with an auth token, a RAM
// tier of 8 blocks and an SSD tier, until the test ends.
func startTenantNode(t *testing.T) string {
	t.Helper()
	return startTenantNodeWith(t, func(*config.Node) {})
}

// startTenantNodeWith is startTenantNode with the configuration changed by
// edit before the node starts.
func startTenantNodeWith(t *testing.T, edit func(*config.Node)) string {
	t.Helper()
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.AuthToken = tenantToken
	cfg.BlockSize = 4 << 10
	cfg.RAM.Bytes = 8 * cfg.BlockSize // the tests store more: some blocks go to SSD
	cfg.SSD.Enabled, cfg.SSD.Path, cfg.SSD.Bytes, cfg.SSD.Sync = true, t.TempDir(), 16<<20, "none"
	edit(&cfg)
	n, err := node.New(cfg, node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node Run: %v", err)
		}
	})
	select {
	case <-n.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("node ended before serving: %v", err)
	}
	return n.Addr()
}

func dialTenant(t *testing.T, addr, tenant string) *nodeclient.Conn {
	t.Helper()
	c, err := nodeclient.Dial(context.Background(), addr, nodeclient.DialOptions{Tenant: tenant, Token: []byte(tenantToken), Timeout: testTimeout})
	if err != nil {
		t.Fatalf("dial %s as tenant %q: %v", addr, tenant, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tenantPayload is the payload tenant stores under id: different for every
// (tenant, id), so a block served to the wrong tenant would show.
func tenantPayload(tenant string, id uint64) []byte {
	return []byte(fmt.Sprintf("tenant %q block %d %s", tenant, id, bytes.Repeat([]byte{byte(id)}, int(id%97))))
}

// TestTenantIsolation: tenants using the very same block ids on one node
// never see each other's blocks: Exists says false, Get and MGet say not
// found, Delete cannot remove them, and each tenant's own writes and
// deletes leave the others' blocks intact. Tenant names are case
// sensitive and "" (the default tenant) is a tenant like any other.
func TestTenantIsolation(t *testing.T) {
	tenants := []string{"team-a", "Team-A", "team-b", ""}
	ids := make([]uint64, 24) // three times the node's RAM tier
	for i := range ids {
		ids[i] = uint64(1000 + i)
	}
	for _, srv := range tenantServers {
		t.Run(srv.name, func(t *testing.T) {
			ctx := context.Background()
			addr := srv.start(t)
			owner := dialTenant(t, addr, tenants[0])
			payloads := make([][]byte, len(ids))
			for i, id := range ids {
				payloads[i] = tenantPayload(tenants[0], id)
			}
			errs, err := owner.MPut(ctx, ids, payloads)
			if err != nil || errors.Join(errs...) != nil {
				t.Fatalf("tenant %q: put %d blocks: %v %v", tenants[0], len(ids), err, errors.Join(errs...))
			}

			// Every other tenant: nothing there, nothing to delete.
			for _, other := range tenants[1:] {
				c := dialTenant(t, addr, other)
				present, err := c.Exists(ctx, ids)
				if err != nil {
					t.Fatalf("tenant %q: exists: %v", other, err)
				}
				for i, p := range present {
					if p {
						t.Errorf("tenant %q: Exists(%d) = true; the block belongs to tenant %q", other, ids[i], tenants[0])
					}
				}
				for _, id := range ids[:3] {
					if got, _, err := c.Get(ctx, id, nil); !errors.Is(err, kvpool.ErrNotFound) {
						t.Errorf("tenant %q: Get(%d) = %d bytes, %v; want kvpool.ErrNotFound", other, id, len(got), err)
					}
				}
				res, err := c.MGet(ctx, ids, nil)
				if err != nil {
					t.Fatalf("tenant %q: mget: %v", other, err)
				}
				for i, r := range res {
					if !errors.Is(r.Err, kvpool.ErrNotFound) {
						t.Errorf("tenant %q: MGet block %d = %d bytes, %v; want kvpool.ErrNotFound", other, ids[i], len(r.Payload), r.Err)
					}
				}
				if err := c.Delete(ctx, ids[0]); !errors.Is(err, kvpool.ErrNotFound) {
					t.Errorf("tenant %q: Delete(%d) = %v; want kvpool.ErrNotFound", other, ids[0], err)
				}
			}

			// Each other tenant stores its own blocks under the same ids.
			for _, other := range tenants[1:] {
				c := dialTenant(t, addr, other)
				for _, id := range ids[:4] {
					if err := c.Put(ctx, id, tenantPayload(other, id)); err != nil {
						t.Fatalf("tenant %q: put %d: %v", other, id, err)
					}
				}
			}
			// The owner deletes one block; the others keep theirs.
			if err := owner.Delete(ctx, ids[0]); err != nil {
				t.Fatalf("tenant %q: delete %d: %v", tenants[0], ids[0], err)
			}
			for _, tn := range tenants {
				c := dialTenant(t, addr, tn)
				for _, id := range ids[:4] {
					got, _, err := c.Get(ctx, id, nil)
					switch {
					case tn == tenants[0] && id == ids[0]:
						if !errors.Is(err, kvpool.ErrNotFound) {
							t.Errorf("tenant %q: Get(%d) after its delete = %v; want kvpool.ErrNotFound", tn, id, err)
						}
					case err != nil:
						t.Errorf("tenant %q: Get(%d): %v", tn, id, err)
					case !bytes.Equal(got, tenantPayload(tn, id)):
						t.Errorf("tenant %q: Get(%d) = %q; want its own payload", tn, id, got)
					}
				}
			}
			// The owner still has every other block, byte for byte.
			res, err := owner.MGet(ctx, ids[1:], nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil || !bytes.Equal(r.Payload, payloads[i+1]) {
					t.Errorf("tenant %q: block %d = %d bytes, %v; want its payload", tenants[0], ids[i+1], len(r.Payload), r.Err)
				}
			}
			// Names are per tenant too: one name, a different object in
			// each tenant, none visible to another.
			const name = "meta-llama/Llama-3.1-8B@1@0@5f3a@kv"
			if err := owner.PutNamed(ctx, name, []byte("owner's")); err != nil {
				t.Fatal(err)
			}
			for _, other := range tenants[1:] {
				c := dialTenant(t, addr, other)
				if ex, err := c.ExistsNamed(ctx, []string{name}); err != nil || ex[0] {
					t.Errorf("tenant %q: ExistsNamed(%q) = %v, %v; the object belongs to %q", other, name, ex, err, tenants[0])
				}
				if got, _, err := c.GetNamed(ctx, name, nil); !errors.Is(err, kvpool.ErrNotFound) {
					t.Errorf("tenant %q: GetNamed = %q, %v; want kvpool.ErrNotFound", other, got, err)
				}
				if err := c.DeleteNamed(ctx, name); !errors.Is(err, kvpool.ErrNotFound) {
					t.Errorf("tenant %q: DeleteNamed = %v; want kvpool.ErrNotFound", other, err)
				}
				if err := c.PutNamed(ctx, name, []byte(other+"'s")); err != nil {
					t.Fatal(err)
				}
			}
			for _, tn := range tenants {
				want := tn + "'s"
				if tn == tenants[0] {
					want = "owner's"
				}
				if got, _, err := dialTenant(t, addr, tn).GetNamed(ctx, name, nil); err != nil || string(got) != want {
					t.Errorf("tenant %q: GetNamed = %q, %v; want %q", tn, got, err, want)
				}
			}
		})
	}
}

// TestTenantAuth: a server started with a token refuses a hello without it
// or with a wrong one (kvpool.ErrUnauthorized) and serves one with it.
func TestTenantAuth(t *testing.T) {
	cases := []struct {
		name  string
		token []byte
		ok    bool
	}{
		{"no token", nil, false},
		{"wrong token", []byte("tenant-test-token-0124"), false},
		{"prefix of the token", []byte(tenantToken[:len(tenantToken)-1]), false},
		{"token with a suffix", []byte(tenantToken + "x"), false},
		{"right token", []byte(tenantToken), true},
	}
	for _, srv := range tenantServers {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.start(t)
			ctx := context.Background()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					conn, err := nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Tenant: "team-a", Token: c.token, Timeout: testTimeout})
					if !c.ok {
						if err == nil {
							conn.Close()
						}
						if !errors.Is(err, kvpool.ErrUnauthorized) {
							t.Fatalf("dial: %v; want kvpool.ErrUnauthorized", err)
						}
						return
					}
					if err != nil {
						t.Fatalf("dial: %v", err)
					}
					defer conn.Close()
					if err := conn.Put(ctx, 7, []byte("seven")); err != nil {
						t.Fatalf("put: %v", err)
					}
					if got, _, err := conn.Get(ctx, 7, nil); err != nil || string(got) != "seven" {
						t.Fatalf("get: %q, %v", got, err)
					}
				})
			}
		})
	}
}

// Per-tenant tokens (package auth): the cluster token (tenantToken) may act
// for any tenant; alice's and bob's tokens bind a connection to their
// tenant; "public" is a shared namespace carol may write.
const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-01234567890"
	carolToken = "carol-token-0123456789"
)

// tokenServers are tenantServers started with tenant tokens and a shared
// namespace.
var tokenServers = []struct {
	name  string
	start func(t *testing.T) string
}{
	{"nodeservertest backend", func(t *testing.T) string {
		_, addr := start(t, nil, nodeserver.Options{
			Token:        []byte(tenantToken),
			TenantTokens: map[string][]byte{"alice": []byte(aliceToken), "bob": []byte(bobToken), "carol": []byte(carolToken)},
			Shared:       []auth.Namespace{{Name: "public", Writers: []string{"carol"}}},
		})
		return addr
	}},
	{"node with RAM and SSD tiers", func(t *testing.T) string {
		return startTenantNodeWith(t, func(cfg *config.Node) {
			cfg.TenantTokens = map[string]config.Secret{"alice": aliceToken, "bob": bobToken, "carol": carolToken}
			cfg.SharedNamespaces = []auth.Namespace{{Name: "public", Writers: []string{"carol"}}}
		})
	}},
}

func dialAs(ctx context.Context, addr, tenant, token string) (*nodeclient.Conn, error) {
	return nodeclient.Dial(ctx, addr, nodeclient.DialOptions{Tenant: tenant, Token: []byte(token), Timeout: testTimeout})
}

// TestTenantTokens: a connection's tenant token decides what it may
// touch. Bob's token cannot open a connection naming alice (nor any tenant
// but bob), so bob never sees alice's blocks even under identical ids; a
// shared namespace is readable by every tenant token but writable only by
// the cluster token and its writers, and a refused write leaves the
// connection usable.
func TestTenantTokens(t *testing.T) {
	ids := []uint64{1, 2, 3, 4}
	for _, srv := range tokenServers {
		t.Run(srv.name, func(t *testing.T) {
			ctx := context.Background()
			addr := srv.start(t)

			// Connections a token may not open.
			refused := []struct{ tenant, token string }{
				{"alice", bobToken},     // another tenant
				{"dave", bobToken},      // a tenant without a token
				{"", bobToken},          // the default tenant
				{"Bob", bobToken},       // names are case sensitive
				{"bob", "bob-token-0"},  // a prefix of bob's token
				{"bob", bobToken + "x"}, // bob's token with a suffix
				{"public", ""},          // shared, but unauthenticated
			}
			for _, r := range refused {
				c, err := dialAs(ctx, addr, r.tenant, r.token)
				if err == nil {
					c.Close()
				}
				if !errors.Is(err, kvpool.ErrUnauthorized) {
					t.Errorf("dial as tenant %q with token %q: %v; want kvpool.ErrUnauthorized", r.tenant, r.token, err)
				}
			}

			// Alice stores blocks; bob, same ids in his own namespace,
			// finds none and cannot delete them.
			alice := mustDial(t, addr, "alice", aliceToken)
			for _, id := range ids {
				if err := alice.Put(ctx, id, tenantPayload("alice", id)); err != nil {
					t.Fatalf("alice: put %d: %v", id, err)
				}
			}
			bob := mustDial(t, addr, "bob", bobToken)
			present, err := bob.Exists(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range present {
				if p {
					t.Errorf("bob: Exists(%d) = true; only alice stored it", ids[i])
				}
			}
			for _, id := range ids {
				if got, _, err := bob.Get(ctx, id, nil); !errors.Is(err, kvpool.ErrNotFound) {
					t.Errorf("bob: Get(%d) = %d bytes, %v; want kvpool.ErrNotFound", id, len(got), err)
				}
			}
			if err := bob.Delete(ctx, ids[0]); !errors.Is(err, kvpool.ErrNotFound) {
				t.Errorf("bob: Delete(%d) = %v; want kvpool.ErrNotFound", ids[0], err)
			}
			if got, _, err := alice.Get(ctx, ids[0], nil); err != nil || !bytes.Equal(got, tenantPayload("alice", ids[0])) {
				t.Errorf("alice: Get(%d) after bob's delete = %q, %v; want her payload", ids[0], got, err)
			}
			// The cluster token still acts for alice.
			ops := mustDial(t, addr, "alice", tenantToken)
			if got, _, err := ops.Get(ctx, ids[1], nil); err != nil || !bytes.Equal(got, tenantPayload("alice", ids[1])) {
				t.Errorf("cluster token as alice: Get(%d) = %q, %v; want alice's payload", ids[1], got, err)
			}

			// The shared namespace: the cluster token writes it, bob
			// reads it and may not write it, carol (a writer) may.
			pub := mustDial(t, addr, "public", tenantToken)
			for _, id := range ids {
				if err := pub.Put(ctx, id, tenantPayload("public", id)); err != nil {
					t.Fatalf("cluster token: put public %d: %v", id, err)
				}
			}
			if err := pub.PutNamed(ctx, "public-doc", []byte("doc")); err != nil {
				t.Fatalf("cluster token: put named public-doc: %v", err)
			}
			bobPub := mustDial(t, addr, "public", bobToken)
			if got, _, err := bobPub.Get(ctx, ids[0], nil); err != nil || !bytes.Equal(got, tenantPayload("public", ids[0])) {
				t.Errorf("bob: Get(public %d) = %q, %v; want the public payload", ids[0], got, err)
			}
			writes := []struct {
				name string
				do   func() error
			}{
				{"put", func() error { return bobPub.Put(ctx, 99, []byte("bob was here")) }},
				{"mput", func() error {
					_, err := bobPub.MPut(ctx, []uint64{98, 99}, [][]byte{[]byte("x"), []byte("y")})
					return err
				}},
				{"delete", func() error { return bobPub.Delete(ctx, ids[0]) }},
				{"put named", func() error { return bobPub.PutNamed(ctx, "bob", []byte("bob was here")) }},
				{"mput named", func() error {
					_, err := bobPub.MPutNamed(ctx, []string{"x", "y"}, [][]byte{[]byte("x"), []byte("y")})
					return err
				}},
				{"delete named", func() error { return bobPub.DeleteNamed(ctx, "public-doc") }},
			}
			for _, w := range writes {
				if err := w.do(); !errors.Is(err, kvpool.ErrUnauthorized) {
					t.Errorf("bob: %s in public = %v; want kvpool.ErrUnauthorized", w.name, err)
				}
				// The connection stays usable after the refusal.
				if ex, err := bobPub.Exists(ctx, ids[:1]); err != nil || !ex[0] {
					t.Errorf("bob: Exists(public %d) after the refused %s = %v, %v; want true", ids[0], w.name, ex, err)
				}
			}
			// SYNC reveals and changes nothing: a reader may send it.
			if err := bobPub.Sync(ctx); err != nil {
				t.Errorf("bob: sync on public (read only) = %v; want nil", err)
			}
			if ex, err := bobPub.Exists(ctx, []uint64{98, 99}); err != nil || ex[0] || ex[1] {
				t.Errorf("bob: refused writes stored blocks: Exists = %v, %v", ex, err)
			}
			if ex, err := bobPub.ExistsNamed(ctx, []string{"public-doc", "bob", "x"}); err != nil || !ex[0] || ex[1] || ex[2] {
				t.Errorf("bob: refused named writes changed the namespace: ExistsNamed = %v, %v; want [true false false]", ex, err)
			}
			carolPub := mustDial(t, addr, "public", carolToken)
			if err := carolPub.Put(ctx, 50, []byte("carol's prompt")); err != nil {
				t.Errorf("carol (a writer): put public 50: %v", err)
			}
			if got, _, err := bobPub.Get(ctx, 50, nil); err != nil || string(got) != "carol's prompt" {
				t.Errorf("bob: Get(public 50) = %q, %v; want carol's block", got, err)
			}
		})
	}
}

func mustDial(t *testing.T, addr, tenant, token string) *nodeclient.Conn {
	t.Helper()
	c, err := dialAs(context.Background(), addr, tenant, token)
	if err != nil {
		t.Fatalf("dial %s as tenant %q: %v", addr, tenant, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTenantTokensNeverLogged: a node logging at debug level, serving an
// accepted and a refused connection and a refused write, never writes a
// token to its log.
func TestTenantTokensNeverLogged(t *testing.T) {
	var logs syncBuffer
	_, addr := start(t, nil, nodeserver.Options{
		Token:        []byte(tenantToken),
		TenantTokens: map[string][]byte{"alice": []byte(aliceToken), "bob": []byte(bobToken)},
		Shared:       []auth.Namespace{{Name: "public"}},
		Logger:       slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	ctx := context.Background()
	if c, err := dialAs(ctx, addr, "alice", bobToken); err == nil {
		c.Close()
		t.Fatal("bob's token opened alice's namespace")
	}
	if c, err := dialAs(ctx, addr, "alice", "wrong-token-0123456789"); err == nil {
		c.Close()
		t.Fatal("a wrong token was accepted")
	}
	c := mustDial(t, addr, "public", aliceToken)
	if err := c.Put(ctx, 1, []byte("x")); !errors.Is(err, kvpool.ErrUnauthorized) {
		t.Fatalf("alice: put in public = %v; want kvpool.ErrUnauthorized", err)
	}
	c.Close()
	if logs.Len() == 0 {
		t.Fatal("nothing logged at debug level; the test would not see a token")
	}
	for _, tok := range []string{tenantToken, aliceToken, bobToken, "wrong-token-0123456789"} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("log contains a token:\n%s", logs.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
