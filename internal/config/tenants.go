package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/auth"
)

// maxTenantTokensFileSize bounds the tenant tokens file: 4 MiB is tens of
// thousands of tenants at ~80 bytes a line; past it, it is the wrong file.
const maxTenantTokensFileSize = 4 << 20

// ErrTokensFileMode is wrapped by ReadTenantTokens's error for a file that
// its group or other users may access.
var ErrTokensFileMode = errors.New("tenant tokens file is accessible to group or others")

// ErrTokensFileOwner is wrapped by ReadTenantTokens's error for a file that
// another user owns.
var ErrTokensFileOwner = errors.New("tenant tokens file is owned by another user")

// ReadTenantTokens reads a tenant tokens file: one "tenant token" line per
// tenant, blank lines and lines starting with '#' ignored, and a '#' field
// after the token starting a comment. Tenant names are as block.Key.Validate
// allows; tokens are at least auth.MinTokenLen bytes, one per tenant.
//
// Like ssh with a private key, it refuses a file that its group or other
// users may read, write or execute (any of mode 077), with an error wrapping
// ErrTokensFileMode that names the path and the mode. Every other error names
// the file and line, never a token.
func ReadTenantTokens(path string) (map[string]Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: read tenant tokens file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat() // of the file opened, so a swap after the check does not matter
	if err != nil {
		return nil, fmt.Errorf("config: read tenant tokens file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("config: tenant tokens file %s: not a regular file (%v)", path, st.Mode().Type())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("config: %s: mode %04o: %w; run chmod 600 %s", path, perm, ErrTokensFileMode, path)
	}
	if uid, other := ownedByOther(st); other {
		return nil, fmt.Errorf("config: %s: owned by uid %d, not by this process's uid %d: %w; another user could have written it", path, uid, os.Getuid(), ErrTokensFileOwner)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTenantTokensFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: read tenant tokens file %s: %w", path, err)
	}
	if len(data) > maxTenantTokensFileSize {
		return nil, fmt.Errorf("config: tenant tokens file %s: more than %d bytes; is it the right file?", path, maxTenantTokensFileSize)
	}
	return ParseTenantTokens(path, data)
}

// ParseTenantTokens parses the contents of a tenant tokens file (see
// ReadTenantTokens) named name in errors. Errors name name:line and the
// tenants involved, never a token; all bad lines are reported at once
// (errors.Join), up to the same limit as the configuration file.
func ParseTenantTokens(name string, data []byte) (map[string]Secret, error) {
	out := make(map[string]Secret)
	lineOf := make(map[string]int)     // tenant → its line
	byToken := make(map[string]string) // token → its tenant
	var errs []error
	bad := func(line int, format string, a ...any) {
		if len(errs) < maxFileErrors {
			errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...)))
		} else if len(errs) == maxFileErrors {
			errs = append(errs, fmt.Errorf("%s: too many errors; stopped reporting", name))
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxTenantTokensFileSize+1)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 && !(len(f) > 2 && strings.HasPrefix(f[2], "#")) {
			// The line is not echoed: it may hold a token.
			bad(line, "want \"tenant token\" (2 fields, then an optional # comment), got %d fields", len(f))
			continue
		}
		tenant, tok := f[0], f[1]
		if err := auth.CheckToken([]byte(tok)); err != nil {
			// The tenant is not named either: with the fields reversed
			// it would be the token.
			bad(line, "token: %v (the line is \"tenant token\")", err)
			continue
		}
		if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
			bad(line, "tenant name: %v", err)
			continue
		}
		if prev, dup := lineOf[tenant]; dup {
			bad(line, "tenant %q already has a token (line %d)", tenant, prev)
			continue
		}
		if other, dup := byToken[tok]; dup {
			bad(line, "tenant %q has the same token as tenant %q (line %d); each tenant needs its own", tenant, other, lineOf[other])
			continue
		}
		lineOf[tenant], byToken[tok], out[tenant] = line, tenant, Secret(tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config: tenant tokens file %s: %w", name, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: tenant tokens file: %w", errors.Join(errs...))
	}
	return out, nil
}

// ParseSharedNamespaces reads the shared_namespaces setting: namespaces
// separated by ';', each a name optionally followed by ':' and its
// writers separated by ',' — "public" or "public:alice,bob; docs". Spaces
// around names are ignored; "" is no shared namespace. Names are checked
// as tenant names; whether each writer has a token is checked with the
// tokens (auth.New).
func ParseSharedNamespaces(s string) ([]auth.Namespace, error) {
	var out []auth.Namespace
	seen := make(map[string]bool)
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, writers, hasWriters := strings.Cut(part, ":")
		ns := auth.Namespace{Name: strings.TrimSpace(name)}
		if ns.Name == "" {
			return nil, fmt.Errorf("namespace %q: empty name", part)
		}
		if err := (block.Key{Tenant: ns.Name}).Validate(); err != nil {
			hint := ""
			if strings.Contains(ns.Name, ",") {
				hint = " (separate namespaces with ';', writers with ',')"
			}
			return nil, fmt.Errorf("namespace %q: %v%s", ns.Name, err, hint)
		}
		if seen[ns.Name] {
			return nil, fmt.Errorf("namespace %q is listed twice", ns.Name)
		}
		seen[ns.Name] = true
		if hasWriters {
			for w := range strings.SplitSeq(writers, ",") {
				w = strings.TrimSpace(w)
				if err := (block.Key{Tenant: w}).Validate(); err != nil || w == "" {
					if err == nil {
						err = errors.New("empty name")
					}
					return nil, fmt.Errorf("namespace %q: writer %q: %v", ns.Name, w, err)
				}
				ns.Writers = append(ns.Writers, w)
			}
		}
		out = append(out, ns)
	}
	return out, nil
}

// FormatSharedNamespaces writes namespaces as ParseSharedNamespaces reads
// them.
func FormatSharedNamespaces(ns []auth.Namespace) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = n.String()
	}
	return strings.Join(parts, "; ")
}

// AuthOptions returns the auth table options of the configuration: the
// cluster token (auth_token), the tenant tokens and the shared
// namespaces.
func (n Node) AuthOptions() auth.Options {
	return AuthOptions(n.AuthToken, n.TenantTokens, n.SharedNamespaces)
}

// AuthOptions builds auth options from a cluster token, tenant tokens (as
// ReadTenantTokens returns them) and shared namespaces, for a process (the
// master) that does not load a Node configuration.
func AuthOptions(cluster Secret, tenants map[string]Secret, shared []auth.Namespace) auth.Options {
	o := auth.Options{Shared: shared}
	if cluster != "" {
		o.ClusterToken = []byte(cluster.Reveal())
	}
	if len(tenants) > 0 {
		o.TenantTokens = make(map[string][]byte, len(tenants))
		for name, tok := range tenants {
			o.TenantTokens[name] = []byte(tok.Reveal())
		}
	}
	return o
}

// tenantNames returns the tenants with tokens, sorted.
func tenantNames(tenants map[string]Secret) []string {
	out := make([]string, 0, len(tenants))
	for name := range tenants {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
