package auth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvpool/kvpool/internal/auth"
)

// Review tests (adversarial review of admin bearer auth and grants).

// TestReviewRequireBearerEdgeCases: only a single well-formed
// "Bearer <cluster token>" passes; tokens smuggled elsewhere (query
// string, cookie, a second Authorization header behind a wrong first one,
// a tab separator, trailing fields) do not, and an empty configured token
// refuses even a request whose credentials are empty too.
func TestReviewRequireBearerEdgeCases(t *testing.T) {
	reached := 0
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ })
	guarded := auth.RequireBearer([]byte(clusterTok), inner)
	cases := []struct {
		name    string
		h       http.Handler
		target  string
		headers [][2]string
		ok      bool
	}{
		{"token in the query string", guarded, "/metrics?token=" + clusterTok, nil, false},
		{"token in a cookie", guarded, "/metrics", [][2]string{{"Cookie", "token=" + clusterTok}}, false},
		{"wrong header first, right second", guarded, "/metrics",
			[][2]string{{"Authorization", "Bearer wrong"}, {"Authorization", "Bearer " + clusterTok}}, false},
		{"tab separator", guarded, "/metrics", [][2]string{{"Authorization", "Bearer\t" + clusterTok}}, false},
		{"trailing field", guarded, "/metrics", [][2]string{{"Authorization", "Bearer " + clusterTok + " x"}}, false},
		{"token twice", guarded, "/metrics", [][2]string{{"Authorization", "Bearer " + clusterTok + clusterTok}}, false},
		{"scheme only", guarded, "/metrics", [][2]string{{"Authorization", "Bearer"}}, false},
		{"tenant token", guarded, "/metrics", [][2]string{{"Authorization", "Bearer " + bobTok}}, false},
		{"empty configured token, empty credentials", auth.RequireBearer([]byte{}, inner), "/metrics",
			[][2]string{{"Authorization", "Bearer  "}}, false},
		{"empty configured token, any credentials", auth.RequireBearer([]byte{}, inner), "/metrics",
			[][2]string{{"Authorization", "Bearer x"}}, false},
		{"upper-case scheme, extra spaces", guarded, "/metrics",
			[][2]string{{"Authorization", "BEARER   " + clusterTok + "  "}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := reached
			req := httptest.NewRequest(http.MethodGet, c.target, nil)
			for _, h := range c.headers {
				req.Header.Add(h[0], h[1])
			}
			rec := httptest.NewRecorder()
			c.h.ServeHTTP(rec, req)
			if got := reached > before; got != c.ok || (rec.Code == http.StatusOK) != c.ok {
				t.Fatalf("status %d, handler reached %v; want allowed %v", rec.Code, got, c.ok)
			}
		})
	}
}

// TestReviewGrantEdgeCases: the zero Grant and a refused token's Grant
// may do nothing; a tenant token never gains another tenant through a
// shared namespace's writer list naming it (writing "public" does not
// make alice able to read "bob").
func TestReviewGrantEdgeCases(t *testing.T) {
	tb := testTable(t)
	var zero auth.Grant
	if zero.Check("alice", false) == nil || zero.Check("public", false) == nil || zero.Cluster() {
		t.Fatal("the zero Grant may read")
	}
	g, err := tb.Authenticate([]byte("not-a-token-0123456789"))
	if err == nil || g.Check("public", false) == nil || g.Cluster() {
		t.Fatalf("a wrong token's grant may read: %v, %v", g, err)
	}
	carol, err := tb.Authenticate([]byte(carolTok))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"alice", "bob", "", "Public"} {
		if err := carol.Check(ns, false); !errors.Is(err, auth.ErrForbidden) {
			t.Errorf("carol (writer of public) reads %q: %v; want ErrForbidden", ns, err)
		}
	}
	if carol.Cluster() {
		t.Error("a tenant token's grant is a cluster grant")
	}
}
