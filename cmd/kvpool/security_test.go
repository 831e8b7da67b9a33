package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/masterproto"
	"github.com/kvpool/kvpool/internal/nodeclient"
	"github.com/kvpool/kvpool/internal/tier"
	"github.com/kvpool/kvpool/internal/wire"
)

// secToken is the shared auth token of the security tests' processes (a
// node requires 16 bytes or more).
const secToken = "security-test-token-0123456789"

// secPayload is tenant's payload for id: different for every (tenant, id),
// so a block served to the wrong tenant would show.
func secPayload(tenant string, id uint64) []byte {
	p := itPayload(id)[:4<<10]
	return append([]byte(tenant+":"), p...)
}

// TestTenantIsolationCluster: through a real master and real node
// processes, two tenants using the very same block ids see only their own
// blocks — the master's lookup and exists are per tenant, and a node asked
// directly for the other tenant's ids answers not found — and a client
// without the cluster's token is refused by the master and by the nodes.
func TestTenantIsolationCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(asKvpoolEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var logs bytes.Buffer
	cl, err := cluster.Start(ctx, cluster.Options{
		Binary: exe, Nodes: 2, RAMBytes: 8 << 20, BlockSize: 16 << 10,
		Heartbeat: itHeartbeat, NodeTTL: itTTL,
		ExtraMasterArgs: []string{"--auth-token", secToken},
		ExtraNodeArgs:   []string{"--auth-token", secToken},
		Stdout:          &logs, Stderr: &logs, StopTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("start cluster: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
		if t.Failed() {
			t.Logf("cluster output:\n%s", logs.String())
		}
	})
	newClient := func(tenant, token string) (*client.Client, error) {
		c, err := client.New(ctx, client.Options{Master: cl.Master.Addr, Tenant: tenant, Token: token,
			Replicas: 2, RequestTimeout: 15 * time.Second, DialTimeout: 15 * time.Second})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}

	// Refused without the token, by the master and by every node.
	for _, tok := range []string{"", "not-the-security-test-token"} {
		if c, err := newClient("team-a", tok); !errors.Is(err, masterproto.ErrUnauthorized) {
			t.Errorf("client with token %q: %v; want masterproto.ErrUnauthorized", tok, err)
			if err == nil {
				c.Close()
			}
		}
		for _, n := range cl.Nodes {
			if c, err := nodeclient.Dial(ctx, n.Addr, nodeclient.DialOptions{Tenant: "team-a", Token: []byte(tok)}); !errors.Is(err, wire.ErrUnauthorized) {
				t.Errorf("dial %s with token %q: %v; want wire.ErrUnauthorized", n.Name, tok, err)
				if err == nil {
					c.Close()
				}
			}
		}
	}

	a, err := newClient("team-a", secToken)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newClient("team-b", secToken)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, 32) // one request's prefix chain, the same for both tenants
	for i := range ids {
		ids[i] = uint64(3_000_000 + i)
	}
	put := func(c *client.Client) {
		t.Helper()
		payloads := make([][]byte, len(ids))
		for i, id := range ids {
			payloads[i] = secPayload(c.Tenant(), id)
		}
		errs, err := c.Put(ctx, ids, payloads, client.PutOptions{})
		if err != nil || errors.Join(errs...) != nil {
			t.Fatalf("tenant %q: put %d blocks: %v %v", c.Tenant(), len(ids), err, errors.Join(errs...))
		}
		eventually(t, fmt.Sprintf("tenant %q's blocks indexed", c.Tenant()), 20*time.Second, func() (bool, string) {
			pre, err := c.Lookup(ctx, ids)
			return err == nil && pre.Len == len(ids), fmt.Sprintf("prefix %d of %d, %v", pre.Len, len(ids), err)
		})
	}
	readOwn := func(c *client.Client) {
		t.Helper()
		res, err := c.Get(ctx, ids, nil)
		if err != nil {
			t.Fatalf("tenant %q: get: %v", c.Tenant(), err)
		}
		if res.Prefix() != len(ids) {
			t.Fatalf("tenant %q: loaded %d of its %d blocks", c.Tenant(), res.Prefix(), len(ids))
		}
		for i, id := range ids {
			if !bytes.Equal(res.Blocks[i], secPayload(c.Tenant(), id)) {
				t.Fatalf("tenant %q: block %d is not its own payload", c.Tenant(), id)
			}
		}
	}

	// 1. Tenant A stores a prefix; tenant B, same ids, finds nothing.
	put(a)
	pre, err := a.Lookup(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if pre, err := b.Lookup(ctx, ids); err != nil || pre.Len != 0 {
		t.Errorf("tenant team-b: Lookup of team-a's ids = prefix %d, %v; want 0", pre.Len, err)
	}
	present, err := b.Exists(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range present {
		if p {
			t.Errorf("tenant team-b: Exists(%d) = true; only team-a stored it", ids[i])
		}
	}
	res, err := b.Get(ctx, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Prefix() != 0 || res.Count(client.Missing) != len(ids) {
		t.Errorf("tenant team-b: Get of team-a's ids: %d loaded, %d missing; want 0 loaded, %d missing",
			res.Prefix(), res.Count(client.Missing), len(ids))
	}
	// Asked directly, the nodes holding team-a's blocks deny them to team-b.
	addrOf := map[string]string{}
	for _, n := range cl.Nodes {
		addrOf[n.Name] = n.Addr
	}
	for i, locs := range pre.Replicas {
		for _, l := range locs {
			c, err := nodeclient.Dial(ctx, addrOf[l.Node], nodeclient.DialOptions{Tenant: "team-b", Token: []byte(secToken)})
			if err != nil {
				t.Fatal(err)
			}
			got, _, gerr := c.Get(ctx, ids[i], nil)
			ex, eerr := c.Exists(ctx, ids[i:i+1])
			c.Close()
			if !errors.Is(gerr, tier.ErrNotFound) {
				t.Errorf("tenant team-b on %s: Get(%d) = %d bytes, %v; want tier.ErrNotFound", l.Node, ids[i], len(got), gerr)
			}
			if eerr != nil || ex[0] {
				t.Errorf("tenant team-b on %s: Exists(%d) = %v, %v; want false", l.Node, ids[i], ex, eerr)
			}
		}
	}

	// 2. Tenant B stores its own blocks under the same ids: each tenant
	// reads back exactly its own payloads.
	put(b)
	readOwn(a)
	readOwn(b)
}

// TestListenRequiresAuthToken: `kvpool node` and `kvpool master` refuse a
// listen address reachable from other hosts without an auth token, with an
// error naming the address and the fix; with a token they start on
// 0.0.0.0 (and are reached here over 127.0.0.1 only).
func TestListenRequiresAuthToken(t *testing.T) {
	refused := []struct {
		name string
		args []string
		addr string
	}{
		{"node on 0.0.0.0", []string{"node", "--listen", "0.0.0.0:0", "--admin-listen", "127.0.0.1:0"}, "0.0.0.0:0"},
		{"node on every interface", []string{"node", "--listen", ":0", "--admin-listen", "127.0.0.1:0"}, ":0"},
		{"node on a routable IP", []string{"node", "--listen", "192.0.2.1:7480", "--admin-listen", "127.0.0.1:0"}, "192.0.2.1:7480"},
		{"master on 0.0.0.0", []string{"master", "--listen", "0.0.0.0:0", "--admin-listen", "off"}, "0.0.0.0:0"},
		{"master on [::]", []string{"master", "--listen", "[::]:0", "--admin-listen", "off"}, "[::]:0"},
		{"master on a routable IP", []string{"master", "--listen", "192.0.2.1:7470", "--admin-listen", "off"}, "192.0.2.1:7470"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envAuthToken, "") // an inherited token would let it start
			os.Unsetenv(envAuthToken)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // were it to start, it would stop at once
			var stderr bytes.Buffer
			code := run(ctx, c.args, io.Discard, &stderr)
			msg := stderr.String()
			if code == 0 {
				t.Fatalf("kvpool %s: exit 0; want a refusal\n%s", strings.Join(c.args, " "), msg)
			}
			for _, want := range []string{c.addr, "--auth-token", envAuthToken, "127.0.0.1:"} {
				if !strings.Contains(msg, want) {
					t.Errorf("kvpool %s: error does not mention %q:\n%s", strings.Join(c.args, " "), want, msg)
				}
			}
		})
	}

	t.Run("node with a token", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a process")
		}
		p := startNode(t, []string{envAuthToken + "=" + secToken}, "--listen", "0.0.0.0:0", "--admin-listen", "127.0.0.1:0", "--ram-bytes", "4MiB")
		defer p.stop(t)
		checkNodeOverLoopback(t, p.addr)
	})

	t.Run("master with a token", func(t *testing.T) {
		matched := make(chan []string, 1)
		stderr := &lineWriter{re: regexp.MustCompile(`listening on (\S+), admin off;`), match: matched}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		env := func(k string) (string, bool) { return "", false }
		go func() {
			done <- runMasterEnv(ctx, []string{"--listen", "0.0.0.0:0", "--admin-listen", "off", "--auth-token", secToken}, env, stderr)
		}()
		var m []string
		select {
		case m = <-matched:
		case err := <-done:
			t.Fatalf("master on 0.0.0.0 with a token exited: %v\n%s", err, stderr)
		case <-time.After(20 * time.Second):
			t.Fatalf("no startup line after 20 s:\n%s", stderr)
		}
		_, port, err := net.SplitHostPort(m[1])
		if err != nil {
			t.Fatalf("startup line address %q: %v", m[1], err)
		}
		addr := net.JoinHostPort("127.0.0.1", port) // never send traffic beyond loopback
		if c, err := client.New(ctx, client.Options{Master: addr, Token: secToken}); err != nil {
			t.Errorf("client with the token: %v", err)
		} else {
			if _, err := c.Nodes(ctx); err != nil {
				t.Errorf("nodes with the token: %v", err)
			}
			c.Close()
		}
		if c, err := client.New(ctx, client.Options{Master: addr}); !errors.Is(err, masterproto.ErrUnauthorized) {
			t.Errorf("client without the token: %v; want masterproto.ErrUnauthorized", err)
			if err == nil {
				c.Close()
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("master returned %v after cancel", err)
		}
	})
}

// checkNodeOverLoopback connects to the node bound at addr (0.0.0.0:PORT)
// through 127.0.0.1:PORT: with the token it serves, without it refuses.
func checkNodeOverLoopback(t *testing.T, addr string) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("node address %q: %v", addr, err)
	}
	local := net.JoinHostPort("127.0.0.1", port) // never send traffic beyond loopback
	ctx := context.Background()
	c, err := nodeclient.Dial(ctx, local, nodeclient.DialOptions{Tenant: "t", Token: []byte(secToken)})
	if err != nil {
		t.Fatalf("dial %s with the token: %v", local, err)
	}
	defer c.Close()
	if err := c.Put(ctx, 1, []byte("one")); err != nil {
		t.Fatalf("put with the token: %v", err)
	}
	if got, _, err := c.Get(ctx, 1, nil); err != nil || string(got) != "one" {
		t.Fatalf("get with the token: %q, %v", got, err)
	}
	if c, err := nodeclient.Dial(ctx, local, nodeclient.DialOptions{Tenant: "t"}); !errors.Is(err, wire.ErrUnauthorized) {
		t.Errorf("dial %s without the token: %v; want wire.ErrUnauthorized", local, err)
		if err == nil {
			c.Close()
		}
	}
}
