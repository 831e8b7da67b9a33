package masterserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/listen"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
)

const (
	clusterToken = "cluster-token-0123456789"
	aliceToken   = "alice-token-0123456789"
	bobToken     = "bob-token-01234567890"
)

func tenantOptions() Options {
	return Options{
		Token:        []byte(clusterToken),
		TenantTokens: map[string][]byte{"alice": []byte(aliceToken), "bob": []byte(bobToken)},
		Shared:       []auth.Namespace{{Name: "public"}},
	}
}

// TestTenantTokens: the tenant of a LOOKUP, EXISTS, QUERY or PLACE comes
// from the connection's token, not the request body: bob's token cannot
// ask about alice's blocks even naming her tenant, may read but not place
// in the shared namespace, and cannot act as a node; each refusal is an
// ERROR (ErrUnauthorized) that leaves the connection usable and is counted
// in kvpool_masterserver_requests_forbidden_total.
func TestTenantTokens(t *testing.T) {
	m := newMaster(t, master.Options{})
	ts := start(t, m, tenantOptions(), nil)
	inv := append(items("alice", meta.TierRAM, 100, 1, 2, 3), items("public", meta.TierRAM, 100, 1, 2)...)
	if _, err := m.Register(meta.NodeInfo{ID: "n1", Addr: "127.0.0.1:1", RAMBytes: 1 << 30}, inv, meta.NodeUsage{}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	ids := []uint64{1, 2, 3}
	bob := dial(t, ts.addr, masterclient.Options{Token: []byte(bobToken)})
	alice := dial(t, ts.addr, masterclient.Options{Token: []byte(aliceToken)})
	ops := dial(t, ts.addr, masterclient.Options{Token: []byte(clusterToken)})

	var res masterclient.LookupResult
	var pl masterclient.Placement
	refused := []struct {
		name string
		do   func() error
	}{
		{"LOOKUP of alice", func() error { return bob.Lookup(ctx, "alice", ids, false, &res) }},
		{"leased LOOKUP of alice", func() error { return bob.Lookup(ctx, "alice", ids, true, &res) }},
		{"EXISTS of alice", func() error { _, err := bob.Exists(ctx, "alice", ids, nil); return err }},
		{"QUERY of alice", func() error { _, err := bob.Query(ctx, block.Key{Tenant: "alice", ID: 1}); return err }},
		{"LOCATE of alice's name", func() error { return bob.Locate(ctx, []block.Key{block.Named("alice", "x")}, true, &res) }},
		{"named EXISTS of alice", func() error { _, err := bob.ExistsKeys(ctx, []block.Key{block.Named("alice", "x")}, nil); return err }},
		{"named QUERY of alice", func() error { _, err := bob.Query(ctx, block.Named("alice", "x")); return err }},
		{"named PLACE for alice", func() error {
			return bob.PlaceObjects(ctx, []meta.Object{{Key: block.Named("alice", "x"), Size: 28}}, 1, "", meta.StrategyDefault, &pl)
		}},
		{"PLACE for alice", func() error { return bob.Place(ctx, "alice", ids, 1, "", meta.StrategyDefault, &pl) }},
		{"PLACE in public", func() error { return bob.Place(ctx, "public", ids, 1, "", meta.StrategyDefault, &pl) }},
		{"LOOKUP of the default tenant", func() error { return bob.Lookup(ctx, "", ids, false, &res) }},
		{"REGISTER", func() error {
			_, err := bob.Register(ctx, meta.NodeInfo{ID: "evil", Addr: "127.0.0.1:2", RAMBytes: 1 << 30}, nil, meta.NodeUsage{})
			return err
		}},
		{"HEARTBEAT", func() error {
			_, err := bob.Heartbeat(ctx, "n1", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil)
			return err
		}},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			err := r.do()
			if !errors.Is(err, masterclient.ErrUnauthorized) {
				t.Fatalf("bob: %v; want masterclient.ErrUnauthorized", err)
			}
			if strings.Contains(err.Error(), bobToken) {
				t.Errorf("error %q contains the token", err)
			}
			// The connection is still usable: bob reads his own tenant.
			if err := bob.Lookup(ctx, "bob", ids, false, &res); err != nil || res.Hit != 0 {
				t.Errorf("bob: LOOKUP of bob after the refusal = hit %d, %v", res.Hit, err)
			}
		})
	}
	if err := bob.Lookup(ctx, "public", ids, false, &res); err != nil || res.Hit != 2 {
		t.Errorf("bob: LOOKUP of public = hit %d, %v; want 2", res.Hit, err)
	}
	if err := alice.Lookup(ctx, "alice", ids, false, &res); err != nil || res.Hit != 3 {
		t.Errorf("alice: LOOKUP of alice = hit %d, %v; want 3", res.Hit, err)
	}
	if err := alice.Place(ctx, "alice", []uint64{9}, 1, "", meta.StrategyDefault, &pl); err != nil {
		t.Errorf("alice: PLACE for alice: %v", err)
	}
	if err := ops.Lookup(ctx, "alice", ids, false, &res); err != nil || res.Hit != 3 {
		t.Errorf("cluster token: LOOKUP of alice = hit %d, %v; want 3", res.Hit, err)
	}
	if err := ops.Place(ctx, "public", []uint64{9}, 1, "", meta.StrategyDefault, &pl); err != nil {
		t.Errorf("cluster token: PLACE in public: %v", err)
	}
	if _, err := ops.Heartbeat(ctx, "n1", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil); errors.Is(err, masterclient.ErrUnauthorized) {
		t.Errorf("cluster token: HEARTBEAT refused: %v", err)
	}

	code, body := httpGet(t, ts.admin+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	want := map[string]int{"LOOKUP": 3, "LOCATE": 1, "EXISTS": 2, "QUERY": 2, "PLACE": 3, "REGISTER": 1, "HEARTBEAT": 1}
	for op, n := range want {
		re := regexp.MustCompile(`kvpool_masterserver_requests_forbidden_total\{op="` + op + `"\} (\d+)`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			t.Errorf("/metrics has no forbidden counter for %s", op)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != n {
			t.Errorf("forbidden %s = %d; want %d", op, got, n)
		}
	}
	for _, tok := range []string{clusterToken, aliceToken, bobToken} {
		if strings.Contains(body, tok) {
			t.Errorf("/metrics contains a token")
		}
	}
}

// exposedListener is a loopback listener that reports a wildcard address,
// so ServeAdmin treats it as reachable from other hosts while the test
// still only talks over loopback.
type exposedListener struct{ net.Listener }

func (l exposedListener) Addr() net.Addr {
	port := l.Listener.Addr().(*net.TCPAddr).Port
	return &net.TCPAddr{IP: net.IPv4zero, Port: port}
}

// TestAdminBeyondLoopback: an admin listener beyond loopback needs the
// cluster token, and then every request must carry it as a bearer token.
func TestAdminBeyondLoopback(t *testing.T) {
	t.Run("no token", func(t *testing.T) {
		s, err := New(newMaster(t, master.Options{}), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ServeAdmin(context.Background(), exposedListener{ln}); !errors.Is(err, listen.ErrNoAuth) {
			t.Fatalf("ServeAdmin beyond loopback without a token: %v; want listen.ErrNoAuth", err)
		}
		if err := (Config{AdminListen: "0.0.0.0:0"}).Validate(); !errors.Is(err, listen.ErrNoAuth) {
			t.Errorf("Config.Validate with AdminListen 0.0.0.0 and no token: %v; want listen.ErrNoAuth", err)
		}
	})
	t.Run("cluster token", func(t *testing.T) {
		s, err := New(newMaster(t, master.Options{}), tenantOptions())
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := "http://" + ln.Addr().String()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- s.ServeAdmin(ctx, exposedListener{ln}) }()
		defer func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("ServeAdmin: %v", err)
			}
			s.Close()
		}()
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		for _, c := range []struct {
			name, auth string
			code       int
		}{
			{"no header", "", http.StatusUnauthorized},
			{"tenant token", "Bearer " + aliceToken, http.StatusUnauthorized},
			{"cluster token", "Bearer " + clusterToken, http.StatusOK},
		} {
			for _, path := range []string{"/metrics", "/nodes", "/health"} {
				req, _ := http.NewRequest(http.MethodGet, addr+path, nil)
				if c.auth != "" {
					req.Header.Set("Authorization", c.auth)
				}
				resp, err := cl.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != c.code {
					t.Errorf("%s %s: %d; want %d", c.name, path, resp.StatusCode, c.code)
				}
			}
		}
	})
}
