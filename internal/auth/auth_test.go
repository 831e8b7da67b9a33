package auth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/listen"
)

const (
	clusterTok = "cluster-token-0123456789"
	aliceTok   = "alice-token-0123456789"
	bobTok     = "bob-token-01234567890"
	carolTok   = "carol-token-0123456789"
)

func testTable(t *testing.T) *auth.Table {
	t.Helper()
	tb, err := auth.New(auth.Options{
		ClusterToken: []byte(clusterTok),
		TenantTokens: map[string][]byte{"alice": []byte(aliceTok), "bob": []byte(bobTok), "carol": []byte(carolTok)},
		Shared:       []auth.Namespace{{Name: "public", Writers: []string{"carol"}}, {Name: "docs"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestCheck: who may read and write which namespace.
func TestCheck(t *testing.T) {
	tb := testTable(t)
	cases := []struct {
		name  string
		token string
		ns    string
		write bool
		ok    bool
	}{
		{"cluster reads any tenant", clusterTok, "alice", false, true},
		{"cluster writes any tenant", clusterTok, "bob", true, true},
		{"cluster writes a tenant without token", clusterTok, "someone-else", true, true},
		{"cluster writes shared", clusterTok, "public", true, true},
		{"tenant reads its own", aliceTok, "alice", false, true},
		{"tenant writes its own", aliceTok, "alice", true, true},
		{"tenant reads another tenant", bobTok, "alice", false, false},
		{"tenant writes another tenant", bobTok, "alice", true, false},
		{"tenant reads a tenant without token", aliceTok, "dave", false, false},
		{"tenant reads the default tenant", aliceTok, "", false, false},
		{"names are case sensitive", aliceTok, "Alice", false, false},
		{"tenant reads shared", bobTok, "public", false, true},
		{"tenant writes shared, not a writer", bobTok, "public", true, false},
		{"writer writes shared", carolTok, "public", true, true},
		{"writer of one shared namespace writes another", carolTok, "docs", true, false},
		{"tenant reads a shared namespace without writers", aliceTok, "docs", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := tb.Authenticate([]byte(c.token))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			err = g.Check(c.ns, c.write)
			if c.ok {
				if err != nil {
					t.Fatalf("Check(%q, write=%v) = %v; want allowed", c.ns, c.write, err)
				}
				return
			}
			if !errors.Is(err, auth.ErrForbidden) {
				t.Fatalf("Check(%q, write=%v) = %v; want auth.ErrForbidden", c.ns, c.write, err)
			}
			op := "read"
			if c.write {
				op = "write"
			}
			tenant, _ := g.Tenant()
			for _, want := range []string{`"` + tenant + `"`, `"` + c.ns + `"`, op} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

// TestAuthenticate: which grant each token gets; wrong and missing tokens
// are refused without the token in the error.
func TestAuthenticate(t *testing.T) {
	tb := testTable(t)
	cases := []struct {
		name    string
		token   string
		cluster bool
		tenant  string // "" with cluster false: refused
	}{
		{"cluster token", clusterTok, true, ""},
		{"tenant token", aliceTok, false, "alice"},
		{"another tenant token", bobTok, false, "bob"},
		{"no token", "", false, ""},
		{"wrong token", "wrong-token-0123456789", false, ""},
		{"prefix of a tenant token", aliceTok[:len(aliceTok)-1], false, ""},
		{"tenant token with a suffix", aliceTok + "x", false, ""},
		{"prefix of the cluster token", clusterTok[:8], false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := tb.Authenticate([]byte(c.token))
			if !c.cluster && c.tenant == "" {
				if !errors.Is(err, auth.ErrUnauthenticated) {
					t.Fatalf("Authenticate = %v, %v; want auth.ErrUnauthenticated", g, err)
				}
				if c.token != "" && strings.Contains(err.Error(), c.token) {
					t.Errorf("error %q contains the token", err)
				}
				if err := g.Check("alice", false); !errors.Is(err, auth.ErrForbidden) {
					t.Errorf("refused grant Check = %v; want auth.ErrForbidden", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if g.Cluster() != c.cluster {
				t.Errorf("Cluster() = %v; want %v", g.Cluster(), c.cluster)
			}
			tenant, bound := g.Tenant()
			if tenant != c.tenant || bound != (c.tenant != "") {
				t.Errorf("Tenant() = %q, %v; want %q", tenant, bound, c.tenant)
			}
			if strings.Contains(g.String(), c.token) {
				t.Errorf("String() = %q contains the token", g.String())
			}
		})
	}
}

// TestOpen: a table without tokens allows everything to everyone, as
// servers did before tokens; one with only a cluster token refuses others.
func TestOpen(t *testing.T) {
	open, err := auth.New(auth.Options{Shared: []auth.Namespace{{Name: "public"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !open.Open() {
		t.Fatal("Open() = false for a table without tokens")
	}
	for _, tok := range []string{"", "anything"} {
		g, err := open.Authenticate([]byte(tok))
		if err != nil || !g.Cluster() {
			t.Fatalf("open table: Authenticate(%q) = %v, %v; want a cluster-wide grant", tok, g, err)
		}
		for _, ns := range []string{"alice", "public", ""} {
			if err := g.Check(ns, true); err != nil {
				t.Errorf("open table: Check(%q, write) = %v", ns, err)
			}
		}
	}
	only, err := auth.New(auth.Options{ClusterToken: []byte("short")}) // the configuration checks its length
	if err != nil {
		t.Fatal(err)
	}
	if only.Open() {
		t.Fatal("Open() = true with a cluster token")
	}
	if _, err := only.Authenticate(nil); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("cluster-token table: no token: %v; want auth.ErrUnauthenticated", err)
	}
	if g, err := only.Authenticate([]byte("short")); err != nil || !g.Cluster() {
		t.Errorf("cluster-token table: the token: %v, %v", g, err)
	}
	var zero auth.Grant
	if err := zero.Check("alice", false); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("zero Grant: Check = %v; want auth.ErrForbidden", err)
	}
}

// TestNewErrors: bad options are refused with errors naming the tenants
// and namespaces, never a token.
func TestNewErrors(t *testing.T) {
	cases := []struct {
		name string
		o    auth.Options
		want []string
	}{
		{"tenant tokens without a cluster token",
			auth.Options{TenantTokens: map[string][]byte{"alice": []byte(aliceTok)}},
			[]string{"ClusterToken"}},
		{"two tenants, one token",
			auth.Options{ClusterToken: []byte(clusterTok), TenantTokens: map[string][]byte{"alice": []byte(aliceTok), "bob": []byte(aliceTok)}},
			[]string{`"alice"`, `"bob"`, "same token"}},
		{"tenant with the cluster token",
			auth.Options{ClusterToken: []byte(clusterTok), TenantTokens: map[string][]byte{"alice": []byte(clusterTok)}},
			[]string{`"alice"`, "cluster token"}},
		{"short tenant token",
			auth.Options{ClusterToken: []byte(clusterTok), TenantTokens: map[string][]byte{"alice": []byte("short-tok")}},
			[]string{`"alice"`, "shorter than 16"}},
		{"tenant token with a space",
			auth.Options{ClusterToken: []byte(clusterTok), TenantTokens: map[string][]byte{"alice": []byte("alice token 0123456789")}},
			[]string{`"alice"`, "spaces"}},
		{"bad tenant name",
			auth.Options{ClusterToken: []byte(clusterTok), TenantTokens: map[string][]byte{"al ice": []byte(aliceTok)}},
			[]string{`"al ice"`}},
		{"bad namespace name",
			auth.Options{Shared: []auth.Namespace{{Name: "pub/lic"}}},
			[]string{`"pub/lic"`}},
		{"namespace twice",
			auth.Options{Shared: []auth.Namespace{{Name: "public"}, {Name: "public"}}},
			[]string{`"public"`, "twice"}},
		{"writer without a token",
			auth.Options{ClusterToken: []byte(clusterTok), TenantTokens: map[string][]byte{"alice": []byte(aliceTok)},
				Shared: []auth.Namespace{{Name: "public", Writers: []string{"bob"}}}},
			[]string{`"public"`, `"bob"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := auth.New(c.o)
			if err == nil {
				t.Fatal("New accepted bad options")
			}
			if verr := c.o.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate = %v; want New's error %v", verr, err)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
			for _, tok := range [][]byte{c.o.ClusterToken, []byte(aliceTok), []byte(clusterTok)} {
				if len(tok) > 0 && strings.Contains(err.Error(), string(tok)) {
					t.Errorf("error %q contains a token", err)
				}
			}
		})
	}
}

// TestAdminHandler: loopback admin endpoints stay open; others require
// the cluster token as a bearer token, and refuse to start without one.
func TestAdminHandler(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secret metrics")) })
	if _, err := auth.AdminHandler("0.0.0.0:7481", nil, inner); !errors.Is(err, listen.ErrNoAuth) {
		t.Fatalf("AdminHandler on 0.0.0.0 without a token: %v; want listen.ErrNoAuth", err)
	}
	if _, err := auth.AdminHandler("bad address", []byte(clusterTok), inner); err == nil {
		t.Fatal("AdminHandler accepted a malformed address")
	}
	open, err := auth.AdminHandler("127.0.0.1:0", nil, inner)
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := auth.AdminHandler("0.0.0.0:7481", []byte(clusterTok), inner)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		h      http.Handler
		header string
		code   int
	}{
		{"loopback, no header", open, "", http.StatusOK},
		{"exposed, no header", guarded, "", http.StatusUnauthorized},
		{"exposed, wrong token", guarded, "Bearer wrong-token-0123456789", http.StatusUnauthorized},
		{"exposed, tenant token", guarded, "Bearer " + aliceTok, http.StatusUnauthorized},
		{"exposed, basic scheme", guarded, "Basic " + clusterTok, http.StatusUnauthorized},
		{"exposed, bare token", guarded, clusterTok, http.StatusUnauthorized},
		{"exposed, prefix", guarded, "Bearer " + clusterTok[:len(clusterTok)-1], http.StatusUnauthorized},
		{"exposed, empty bearer", guarded, "Bearer ", http.StatusUnauthorized},
		{"exposed, cluster token", guarded, "Bearer " + clusterTok, http.StatusOK},
		{"exposed, cluster token, lower-case scheme", guarded, "bearer " + clusterTok, http.StatusOK},
		{"empty token refuses all", auth.RequireBearer(nil, inner), "Bearer ", http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			rec := httptest.NewRecorder()
			c.h.ServeHTTP(rec, req)
			if rec.Code != c.code {
				t.Fatalf("status %d; want %d", rec.Code, c.code)
			}
			body := rec.Body.String()
			if c.code != http.StatusOK {
				if strings.Contains(body, "secret metrics") {
					t.Error("refused request reached the handler")
				}
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Error("401 without a WWW-Authenticate challenge")
				}
				if strings.Contains(body, clusterTok) {
					t.Error("refusal contains the token")
				}
			}
		})
	}
}
