package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/kvpool/kvpool/internal/listen"
)

// AdminHandler returns the handler an admin HTTP endpoint (/metrics,
// /health, /nodes, ...) bound at addr ("host:port") serves: h itself when
// addr is loopback, as before; otherwise h behind RequireBearer with the
// cluster token. A non-loopback addr without a cluster token is refused
// with an error wrapping listen.ErrNoAuth that names the address.
func AdminHandler(addr string, clusterToken []byte, h http.Handler) (http.Handler, error) {
	if err := listen.Check(addr, false); err == nil {
		return h, nil
	}
	if err := listen.Check(addr, len(clusterToken) > 0); err != nil {
		return nil, fmt.Errorf("auth: admin HTTP: %w", err)
	}
	return RequireBearer(clusterToken, h), nil
}

// RequireBearer wraps h so that it serves only requests carrying
// "Authorization: Bearer <token>"; others get 401 Unauthorized with a
// WWW-Authenticate challenge, and h never sees them. The comparison is of
// SHA-256 digests in constant time. An empty token refuses every request.
func RequireBearer(token []byte, h http.Handler) http.Handler {
	want := sha256.Sum256(token)
	empty := len(token) == 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if !ok || empty || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kvpool admin"`)
			http.Error(w, "unauthorized: this admin endpoint requires Authorization: Bearer <auth_token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the credentials of an "Authorization: Bearer x" header
// value (the scheme is case-insensitive, RFC 9110 §11.1).
func bearer(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}
