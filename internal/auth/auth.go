// Package auth decides who may read and write which tenant namespace.
//
// A Table is built from three things:
//
//   - the cluster token (the configuration's auth_token), held by nodes,
//     operators and trusted clients: a connection presenting it may act
//     for any tenant;
//   - per-tenant tokens: a connection presenting tenant T's token is bound
//     to T and may read and write T's namespace only;
//   - shared namespaces, an explicit opt-in (a public system prompt, say):
//     every authenticated connection may read them; only the cluster token
//     and the tenants listed as a namespace's writers may write them.
//
// Authenticate turns the token a connection presented into a Grant, and
// Grant.Check says whether that grant may read or write a namespace. The
// tenant of a request is therefore decided by the server from the
// connection's token, never taken on trust from the request.
//
// A Table with no token at all is open: every connection gets a grant for
// everything, as before per-tenant tokens existed (such a server must stay
// on loopback; see package listen).
//
// Tokens are secrets: no error, String or log attribute of this package
// contains one.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kvpool/kvpool/block"
)

// MinTokenLen is the shortest tenant token New accepts: 16 bytes, as the
// configuration requires of auth_token (16 bytes of random text is ≥ 96
// bits, out of reach of guessing over the network).
const MinTokenLen = 16

// Errors of the package, checked with errors.Is.
var (
	// ErrUnauthenticated: the token presented is missing or matches no
	// token of the table.
	ErrUnauthenticated = errors.New("unknown or missing auth token")
	// ErrForbidden: the grant does not allow the operation on the
	// namespace.
	ErrForbidden = errors.New("forbidden")
)

// Namespace is a shared namespace: readable by every authenticated
// connection, writable by the cluster token and by the tenants in Writers.
type Namespace struct {
	// Name is the namespace, a valid tenant name (block.Key.Validate).
	Name string
	// Writers are the tenants, each with a tenant token, that may write
	// the namespace besides the cluster token.
	Writers []string
}

// String formats the namespace as the configuration writes it:
// "public" or "public:alice,bob".
func (n Namespace) String() string {
	if len(n.Writers) == 0 {
		return n.Name
	}
	return n.Name + ":" + strings.Join(n.Writers, ",")
}

// Options configure a Table. The zero value is an open table.
type Options struct {
	// ClusterToken is the token of nodes, operators and trusted clients;
	// it may act for any tenant. Required when TenantTokens is not empty.
	ClusterToken []byte
	// TenantTokens maps a tenant to its token. Tokens are at least
	// MinTokenLen bytes without spaces or control characters, unique
	// across tenants and different from ClusterToken.
	TenantTokens map[string][]byte
	// Shared are the shared namespaces.
	Shared []Namespace
}

// Validate reports the first bad field. Its errors name tenants and
// namespaces, never a token.
func (o Options) Validate() error {
	_, err := New(o)
	return err
}

// kind is what a grant allows.
type kind uint8

const (
	kindNone    kind = iota // the zero Grant: nothing
	kindOpen                // an open table: everything
	kindCluster             // the cluster token: every tenant
	kindTenant              // a tenant token: its tenant and the shared namespaces
)

// Table authenticates tokens. It is immutable once built, so safe for
// concurrent use.
type Table struct {
	open       bool
	clusterSum [sha256.Size]byte
	// tenants maps the SHA-256 of each tenant token to its tenant. A map
	// lookup is not constant-time, but what its timing could reveal is
	// how the digest of the token presented relates to the stored
	// digests, and Go's map hash is randomly seeded per process: learning
	// a digest, or part of one, does not help find a token that hashes to
	// it (SHA-256 is preimage-resistant). The cluster token, one value,
	// is compared in constant time all the same.
	tenants map[[sha256.Size]byte]string
	shared  map[string]map[string]bool // namespace → its tenant writers
}

// New checks o and builds its table. Errors name the field, the tenants
// and the namespaces involved, never a token.
func New(o Options) (*Table, error) {
	t := &Table{
		open:    len(o.ClusterToken) == 0 && len(o.TenantTokens) == 0,
		tenants: make(map[[sha256.Size]byte]string, len(o.TenantTokens)),
		shared:  make(map[string]map[string]bool, len(o.Shared)),
	}
	if len(o.TenantTokens) > 0 && len(o.ClusterToken) == 0 {
		return nil, errors.New("auth: Options.TenantTokens is set without Options.ClusterToken: nodes and operators authenticate with the cluster token (auth_token); set one")
	}
	t.clusterSum = sha256.Sum256(o.ClusterToken)
	names := make([]string, 0, len(o.TenantTokens))
	for name := range o.TenantTokens {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic errors: the same pair is named every time
	for _, name := range names {
		tok := o.TenantTokens[name]
		if err := (block.Key{Tenant: name}).Validate(); err != nil {
			return nil, fmt.Errorf("auth: Options.TenantTokens: tenant %q: %w", name, err)
		}
		if err := CheckToken(tok); err != nil {
			return nil, fmt.Errorf("auth: Options.TenantTokens: token of tenant %q: %w", name, err)
		}
		sum := sha256.Sum256(tok)
		if sum == t.clusterSum {
			return nil, fmt.Errorf("auth: Options.TenantTokens: tenant %q has the cluster token (auth_token) as its token; a tenant token must be its own", name)
		}
		if other, dup := t.tenants[sum]; dup {
			return nil, fmt.Errorf("auth: Options.TenantTokens: tenants %q and %q have the same token; each tenant needs its own", other, name)
		}
		t.tenants[sum] = name
	}
	for i, ns := range o.Shared {
		if err := (block.Key{Tenant: ns.Name}).Validate(); err != nil {
			return nil, fmt.Errorf("auth: Options.Shared[%d]: namespace %q: %w", i, ns.Name, err)
		}
		if _, dup := t.shared[ns.Name]; dup {
			return nil, fmt.Errorf("auth: Options.Shared[%d]: namespace %q is listed twice", i, ns.Name)
		}
		// Sharing a tenant's own namespace, or the default one, would
		// publish blocks that their owners stored as private.
		if ns.Name == "" {
			return nil, fmt.Errorf("auth: Options.Shared[%d]: the default (empty) namespace cannot be shared; name a namespace of its own, such as \"public\"", i)
		}
		if _, ok := o.TenantTokens[ns.Name]; ok {
			return nil, fmt.Errorf("auth: Options.Shared[%d]: namespace %q is tenant %q's own namespace; sharing it would publish that tenant's blocks: share a namespace of its own, such as \"public\"", i, ns.Name, ns.Name)
		}
		w := make(map[string]bool, len(ns.Writers))
		for _, name := range ns.Writers {
			if _, ok := o.TenantTokens[name]; !ok {
				return nil, fmt.Errorf("auth: Options.Shared[%d]: namespace %q: writer %q has no tenant token, so it could never write; add it to the tenant tokens or remove it", i, ns.Name, name)
			}
			w[name] = true
		}
		t.shared[ns.Name] = w
	}
	return t, nil
}

// CheckToken reports whether tok is acceptable as a tenant token: at least
// MinTokenLen bytes, without spaces or control characters. Its error never
// contains the token.
func CheckToken(tok []byte) error {
	if len(tok) < MinTokenLen {
		return fmt.Errorf("%d bytes, shorter than %d (guessable); use a random token", len(tok), MinTokenLen)
	}
	for _, c := range tok {
		if c <= ' ' || c == 0x7f {
			return errors.New("contains spaces or control characters")
		}
	}
	if tok[0] == '#' {
		return errors.New("begins with '#': a comment where the token should be?")
	}
	return nil
}

// Open reports whether the table has no token at all, so that every
// connection is allowed everything.
func (t *Table) Open() bool { return t.open }

// Authenticate returns the grant of a connection that presented token:
// everything when the table is open, every tenant for the cluster token,
// one tenant (and the shared namespaces) for a tenant token. Otherwise it
// returns an error wrapping ErrUnauthenticated that says whether the token
// was missing or wrong, never what it was.
func (t *Table) Authenticate(token []byte) (Grant, error) {
	if t.open {
		return Grant{t: t, kind: kindOpen}, nil
	}
	// Comparing digests keeps the comparison's time independent of the
	// token's length as well as its bytes.
	sum := sha256.Sum256(token)
	if subtle.ConstantTimeCompare(sum[:], t.clusterSum[:]) == 1 {
		return Grant{t: t, kind: kindCluster}, nil
	}
	if name, ok := t.tenants[sum]; ok {
		return Grant{t: t, kind: kindTenant, tenant: name}, nil
	}
	if len(token) == 0 {
		return Grant{}, fmt.Errorf("no auth token: %w", ErrUnauthenticated)
	}
	return Grant{}, fmt.Errorf("wrong auth token: %w", ErrUnauthenticated)
}

// Grant is what an authenticated connection may do. The zero Grant may do
// nothing. A Grant is a small value, safe to copy and to use concurrently.
type Grant struct {
	t      *Table
	kind   kind
	tenant string
}

// Cluster reports whether the grant acts for every tenant: the cluster
// token, or any connection to an open table. Node-role requests (register,
// heartbeat) require it.
func (g Grant) Cluster() bool { return g.kind == kindOpen || g.kind == kindCluster }

// Tenant returns the tenant a tenant token binds the grant to, and false
// for a cluster, open or zero grant.
func (g Grant) Tenant() (string, bool) { return g.tenant, g.kind == kindTenant }

// String describes the grant for logs: "open", "cluster", "tenant \"a\""
// or "none". It never contains a token.
func (g Grant) String() string {
	switch g.kind {
	case kindOpen:
		return "open"
	case kindCluster:
		return "cluster"
	case kindTenant:
		return fmt.Sprintf("tenant %q", g.tenant)
	}
	return "none"
}

// Check returns nil when the grant may read (write false) or write (write
// true) namespace ns, and otherwise an error wrapping ErrForbidden that
// names the grant's tenant, the namespace and the operation.
func (g Grant) Check(ns string, write bool) error {
	op := "read"
	if write {
		op = "write"
	}
	switch g.kind {
	case kindOpen, kindCluster:
		return nil
	case kindTenant:
		if ns == g.tenant {
			return nil
		}
		if writers, ok := g.t.shared[ns]; ok {
			if !write || writers[g.tenant] {
				return nil
			}
			return fmt.Errorf("tenant %q may not %s shared namespace %q (not one of its writers): %w", g.tenant, op, ns, ErrForbidden)
		}
		return fmt.Errorf("tenant %q may not %s namespace %q: %w", g.tenant, op, ns, ErrForbidden)
	}
	return fmt.Errorf("unauthenticated connection may not %s namespace %q: %w", op, ns, ErrForbidden)
}
