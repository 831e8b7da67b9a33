package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
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
	multiProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, _ := startCluster(ctx, t, cluster.Options{
		Nodes: 2, RAMBytes: 8 << 20, BlockSize: 16 << 10,
		Heartbeat: itHeartbeat, NodeTTL: itTTL,
		ExtraMasterArgs: []string{"--auth-token", secToken},
		ExtraNodeArgs:   []string{"--auth-token", secToken},
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
		if c, err := newClient("team-a", tok); !errors.Is(err, kvpool.ErrUnauthorized) {
			t.Errorf("client with token %q: %v; want kvpool.ErrUnauthorized", tok, err)
			if err == nil {
				c.Close()
			}
		}
		for _, n := range cl.Nodes {
			if c, err := nodeclient.Dial(ctx, n.Addr, nodeclient.DialOptions{Tenant: "team-a", Token: []byte(tok)}); !errors.Is(err, kvpool.ErrUnauthorized) {
				t.Errorf("dial %s with token %q: %v; want kvpool.ErrUnauthorized", n.Name, tok, err)
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
			if !errors.Is(gerr, kvpool.ErrNotFound) {
				t.Errorf("tenant team-b on %s: Get(%d) = %d bytes, %v; want kvpool.ErrNotFound", l.Node, ids[i], len(got), gerr)
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
		if c, err := client.New(ctx, client.Options{Master: addr}); !errors.Is(err, kvpool.ErrUnauthorized) {
			t.Errorf("client without the token: %v; want kvpool.ErrUnauthorized", err)
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
	if c, err := nodeclient.Dial(ctx, local, nodeclient.DialOptions{Tenant: "t"}); !errors.Is(err, kvpool.ErrUnauthorized) {
		t.Errorf("dial %s without the token: %v; want kvpool.ErrUnauthorized", local, err)
		if err == nil {
			c.Close()
		}
	}
}

// Tenant tokens of TestTenantTokensCluster (16 bytes or more each).
const (
	secAliceToken = "alice-tenant-token-0123456789"
	secBobToken   = "bob-tenant-token-01234567890"
	secCarolToken = "carol-tenant-token-0123456789"
)

// TestTenantTokensCluster: a real master and real nodes started with a
// tenant tokens file (`--tenant-tokens-file`, mode 600) and a shared
// namespace (`--shared-namespaces public:carol`), used through the public
// client package. The tenant comes from the token: bob's token cannot
// look up, check or fetch alice's blocks even naming her tenant (the
// master refuses, the nodes refuse the connection), bob's own namespace
// does not see them under the same ids, bob reads the shared namespace the
// cluster token filled but cannot write it, and carol, its writer, can.
// No token appears in any process's output nor in any /metrics.
func TestTenantTokensCluster(t *testing.T) {
	multiProcess(t)
	tokens := filepath.Join(t.TempDir(), "tenant-tokens")
	content := "# tenant token\nalice " + secAliceToken + "\nbob " + secBobToken + "\ncarol " + secCarolToken + "  # writes public\n"
	if err := os.WriteFile(tokens, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	authArgs := []string{"--auth-token", secToken, "--tenant-tokens-file", tokens, "--shared-namespaces", "public:carol"}
	cl, logs := startCluster(ctx, t, cluster.Options{
		Nodes: 2, RAMBytes: 8 << 20, BlockSize: 16 << 10,
		Heartbeat: itHeartbeat, NodeTTL: itTTL,
		ExtraMasterArgs: authArgs, ExtraNodeArgs: authArgs,
	})
	newClient := func(tenant, token string) *client.Client {
		t.Helper()
		c, err := client.New(ctx, client.Options{Master: cl.Master.Addr, Tenant: tenant, Token: token,
			Replicas: 2, RequestTimeout: 15 * time.Second, DialTimeout: 15 * time.Second})
		if err != nil {
			t.Fatalf("client of tenant %q: %v", tenant, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ids := make([]uint64, 16)
	for i := range ids {
		ids[i] = uint64(5_000_000 + i)
	}
	put := func(c *client.Client) error {
		payloads := make([][]byte, len(ids))
		for i, id := range ids {
			payloads[i] = secPayload(c.Tenant(), id)
		}
		errs, err := c.Put(ctx, ids, payloads, client.PutOptions{})
		return errors.Join(err, errors.Join(errs...))
	}
	indexed := func(c *client.Client) {
		t.Helper()
		eventually(t, fmt.Sprintf("tenant %q's blocks indexed", c.Tenant()), 20*time.Second, func() (bool, string) {
			pre, err := c.Lookup(ctx, ids)
			return err == nil && pre.Len == len(ids), fmt.Sprintf("prefix %d of %d, %v", pre.Len, len(ids), err)
		})
	}
	readAll := func(c *client.Client, owner string) {
		t.Helper()
		res, err := c.Get(ctx, ids, nil)
		if err != nil {
			t.Fatalf("tenant %q with its token: get: %v", c.Tenant(), err)
		}
		if res.Prefix() != len(ids) {
			t.Fatalf("tenant %q: loaded %d of %d blocks", c.Tenant(), res.Prefix(), len(ids))
		}
		for i, id := range ids {
			if !bytes.Equal(res.Blocks[i], secPayload(owner, id)) {
				t.Fatalf("tenant %q: block %d is not %q's payload", c.Tenant(), id, owner)
			}
		}
	}

	// Alice stores a prefix with her own token and reads it back.
	alice := newClient("alice", secAliceToken)
	if err := put(alice); err != nil {
		t.Fatalf("alice: put: %v", err)
	}
	indexed(alice)
	readAll(alice, "alice")
	pre, err := alice.Lookup(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}

	// Bob's token naming tenant alice: the master refuses every request.
	bobAsAlice := newClient("alice", secBobToken)
	if _, err := bobAsAlice.Lookup(ctx, ids); !errors.Is(err, kvpool.ErrUnauthorized) {
		t.Errorf("bob's token as alice: Lookup = %v; want kvpool.ErrUnauthorized", err)
	}
	if _, err := bobAsAlice.Exists(ctx, ids); !errors.Is(err, kvpool.ErrUnauthorized) {
		t.Errorf("bob's token as alice: Exists = %v; want kvpool.ErrUnauthorized", err)
	}
	if res, err := bobAsAlice.Get(ctx, ids, nil); err == nil && res.Prefix() > 0 {
		t.Errorf("bob's token as alice: Get loaded %d of alice's blocks", res.Prefix())
	}
	if err := put(bobAsAlice); !errors.Is(err, kvpool.ErrUnauthorized) {
		t.Errorf("bob's token as alice: Put = %v; want kvpool.ErrUnauthorized", err)
	}
	// ... and every node refuses a connection naming alice with it.
	addrOf := map[string]string{}
	for _, n := range cl.Nodes {
		addrOf[n.Name] = n.Addr
	}
	for _, n := range cl.Nodes {
		if c, err := nodeclient.Dial(ctx, n.Addr, nodeclient.DialOptions{Tenant: "alice", Token: []byte(secBobToken)}); !errors.Is(err, kvpool.ErrUnauthorized) {
			t.Errorf("%s: dial as alice with bob's token: %v; want kvpool.ErrUnauthorized", n.Name, err)
			if err == nil {
				c.Close()
			}
		}
	}
	// Bob in his own namespace, same ids: nothing, on the master or on
	// the nodes that hold alice's blocks.
	bob := newClient("bob", secBobToken)
	if p, err := bob.Lookup(ctx, ids); err != nil || p.Len != 0 {
		t.Errorf("bob: Lookup of alice's ids = prefix %d, %v; want 0", p.Len, err)
	}
	for i, locs := range pre.Replicas {
		for _, l := range locs {
			c, err := nodeclient.Dial(ctx, addrOf[l.Node], nodeclient.DialOptions{Tenant: "bob", Token: []byte(secBobToken)})
			if err != nil {
				t.Fatal(err)
			}
			got, _, gerr := c.Get(ctx, ids[i], nil)
			c.Close()
			if !errors.Is(gerr, kvpool.ErrNotFound) {
				t.Errorf("bob on %s: Get(%d) = %d bytes, %v; want kvpool.ErrNotFound", l.Node, ids[i], len(got), gerr)
			}
		}
	}

	// The shared namespace: the cluster token fills it, bob reads it,
	// bob may not write it, carol may.
	ops := newClient("public", secToken)
	if err := put(ops); err != nil {
		t.Fatalf("cluster token: put in public: %v", err)
	}
	bobPublic := newClient("public", secBobToken)
	indexed(bobPublic)
	readAll(bobPublic, "public")
	if err := put(bobPublic); !errors.Is(err, kvpool.ErrUnauthorized) {
		t.Errorf("bob: put in public = %v; want kvpool.ErrUnauthorized", err)
	}
	if err := put(newClient("public", secCarolToken)); err != nil {
		t.Errorf("carol (public's writer): put in public: %v", err)
	}

	// No token in any /metrics; the master counts its refusals.
	hc := &http.Client{Timeout: 5 * time.Second}
	scrape := func(addr string) string {
		t.Helper()
		resp, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape %s: %d, %v", addr, resp.StatusCode, err)
		}
		return string(b)
	}
	all := []string{cl.Master.AdminAddr}
	for _, n := range cl.Nodes {
		all = append(all, n.AdminAddr)
	}
	secrets := []string{secToken, secAliceToken, secBobToken, secCarolToken}
	for i, addr := range all {
		body := scrape(addr)
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("/metrics of %s contains a token", addr)
			}
		}
		if i == 0 && !regexp.MustCompile(`kvpool_masterserver_requests_forbidden_total\{op="LOOKUP"\} [1-9]`).MatchString(body) {
			t.Errorf("master /metrics does not count the refused lookups")
		}
	}
	hc.CloseIdleConnections()
	// Nor in any process's output, refusals and acceptances included.
	if err := cl.Stop(); err != nil {
		t.Errorf("stop cluster: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "3 tenant tokens") {
		t.Errorf("no startup line mentions the 3 tenant tokens:\n%s", out)
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("process output contains a token")
		}
	}
}

// TestSecurityStartupRefusals: `kvpool master` and `kvpool node` refuse to
// start with a tenant tokens file others may read, tenant tokens without
// the cluster token, or an admin address beyond loopback without a token;
// each error names the cause and never shows a token.
func TestSecurityStartupRefusals(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open-tokens")
	if err := os.WriteFile(open, []byte("alice "+secAliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(dir, "tokens")
	if err := os.WriteFile(private, []byte("alice "+secAliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"master, world-readable tokens file",
			[]string{"master", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--auth-token", secToken, "--tenant-tokens-file", open},
			[]string{open, "0644", "chmod 600"}},
		{"node, world-readable tokens file",
			[]string{"node", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--auth-token", secToken, "--tenant-tokens-file", open},
			[]string{"tenant_tokens_file", open, "0644"}},
		{"master, tenant tokens without the cluster token",
			[]string{"master", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--tenant-tokens-file", private},
			[]string{"ClusterToken"}},
		{"node, tenant tokens without the cluster token",
			[]string{"node", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--tenant-tokens-file", private},
			[]string{"tenant_tokens_file", "auth_token"}},
		{"node, shared writer without a token",
			[]string{"node", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--auth-token", secToken, "--tenant-tokens-file", private, "--shared-namespaces", "public:bob"},
			[]string{"shared_namespaces", `"bob"`}},
		{"master, admin on 0.0.0.0 without a token",
			[]string{"master", "--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0"},
			[]string{"0.0.0.0:0", "--auth-token"}},
		{"node, admin on 0.0.0.0 without a token",
			[]string{"node", "--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0"},
			[]string{"admin_listen", "0.0.0.0:0", "--auth-token"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envAuthToken, "")
			os.Unsetenv(envAuthToken)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // were it to start, it would stop at once
			var stderr bytes.Buffer
			if code := run(ctx, c.args, io.Discard, &stderr); code == 0 {
				t.Fatalf("kvpool %s: exit 0; want a refusal\n%s", strings.Join(c.args, " "), stderr.String())
			}
			msg := stderr.String()
			for _, want := range c.want {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not mention %s:\n%s", want, msg)
				}
			}
			if strings.Contains(msg, secAliceToken) || strings.Contains(msg, secToken) {
				t.Errorf("error shows a token:\n%s", msg)
			}
		})
	}
}
