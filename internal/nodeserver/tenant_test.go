package nodeserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/node"
	"github.com/kvpool/kvpool/internal/nodeclient"
	"github.com/kvpool/kvpool/internal/nodeserver"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/wire"
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
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.AuthToken = tenantToken
	cfg.BlockSize = 4 << 10
	cfg.RAM.Bytes = 8 * cfg.BlockSize // the tests store more: some blocks go to SSD
	cfg.SSD.Enabled, cfg.SSD.Path, cfg.SSD.Bytes, cfg.SSD.Sync = true, t.TempDir(), 16<<20, "none"
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
					if got, _, err := c.Get(ctx, id, nil); !errors.Is(err, tier.ErrNotFound) {
						t.Errorf("tenant %q: Get(%d) = %d bytes, %v; want tier.ErrNotFound", other, id, len(got), err)
					}
				}
				res, err := c.MGet(ctx, ids, nil)
				if err != nil {
					t.Fatalf("tenant %q: mget: %v", other, err)
				}
				for i, r := range res {
					if !errors.Is(r.Err, tier.ErrNotFound) {
						t.Errorf("tenant %q: MGet block %d = %d bytes, %v; want tier.ErrNotFound", other, ids[i], len(r.Payload), r.Err)
					}
				}
				if err := c.Delete(ctx, ids[0]); !errors.Is(err, tier.ErrNotFound) {
					t.Errorf("tenant %q: Delete(%d) = %v; want tier.ErrNotFound", other, ids[0], err)
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
						if !errors.Is(err, tier.ErrNotFound) {
							t.Errorf("tenant %q: Get(%d) after its delete = %v; want tier.ErrNotFound", tn, id, err)
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
		})
	}
}

// TestTenantAuth: a server started with a token refuses a hello without it
// or with a wrong one (wire.ErrUnauthorized) and serves one with it.
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
						if !errors.Is(err, wire.ErrUnauthorized) {
							t.Fatalf("dial: %v; want wire.ErrUnauthorized", err)
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
