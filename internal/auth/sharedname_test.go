package auth_test

// Regression test from the review of per-tenant tokens.

import (
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/auth"
)

// TestBugSharedNamespaceNamedAfterATenant: a shared namespace with the
// name of a tenant that has its own token turns that tenant's private
// namespace into a public one: every tenant token reads it, and the tenant
// writes it without being listed as a writer (contradicting "only the
// cluster token and the tenants listed as a namespace's writers may write
// them"). New should refuse the configuration.
func TestSharedNamespaceNamedAfterATenant(t *testing.T) {
	for _, name := range []string{"alice", ""} {
		_, err := auth.New(auth.Options{
			ClusterToken: []byte(clusterTok),
			TenantTokens: map[string][]byte{"alice": []byte(aliceTok), "bob": []byte(bobTok)},
			Shared:       []auth.Namespace{{Name: name}},
		})
		if err == nil || !strings.Contains(err.Error(), "Options.Shared[0]") {
			t.Errorf("New with shared namespace %q = %v; want a refusal naming Options.Shared[0]", name, err)
		}
	}
	tb, err := auth.New(auth.Options{
		ClusterToken: []byte(clusterTok),
		TenantTokens: map[string][]byte{"alice": []byte(aliceTok), "bob": []byte(bobTok)},
		Shared:       []auth.Namespace{{Name: "alice"}},
	})
	if err != nil {
		return // refused: the fix
	}
	bob, _ := tb.Authenticate([]byte(bobTok))
	alice, _ := tb.Authenticate([]byte(aliceTok))
	t.Fatalf("New accepted shared namespace \"alice\" while alice has a token: bob reads alice's namespace (%v), alice writes a shared namespace she is not a writer of (%v)",
		bob.Check("alice", false) == nil, alice.Check("alice", true) == nil)
}

// TestTokenLooksLikeComment: a tokens-file line whose "token" is a
// comment ("alice #todo-generate-a-token") must not make the comment a
// valid token.
func TestTokenLooksLikeComment(t *testing.T) {
	if err := auth.CheckToken([]byte("#todo-generate-a-token")); err == nil || !strings.Contains(err.Error(), "'#'") {
		t.Fatalf("CheckToken of a comment = %v; want a refusal naming '#'", err)
	}
	if err := auth.CheckToken([]byte("a#perfectly-valid-token")); err != nil {
		t.Fatalf("CheckToken of a token with an inner '#' = %v; want nil", err)
	}
}
