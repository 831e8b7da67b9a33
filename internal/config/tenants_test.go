package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/auth"
)

// writeTokensFile writes a tenant tokens file with mode perm and returns
// its path.
func writeTokensFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tenant-tokens")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // WriteFile's mode is filtered by the umask
		t.Fatal(err)
	}
	return p
}

const (
	aliceTok = "alice-token-0123456789"
	bobTok   = "bob-token-01234567890"
)

// TestParseTenantTokens: the file format, and errors that name file:line
// and tenants but never a token.
func TestParseTenantTokens(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    map[string]Secret
		errs    []string // substrings of the error; nil: no error
	}{
		{"two tenants with comments and blank lines",
			"# tenants\n\nalice " + aliceTok + "\n  bob\t" + bobTok + "   # the bob team\n#carol x\n",
			map[string]Secret{"alice": aliceTok, "bob": bobTok}, nil},
		{"empty file", "", map[string]Secret{}, nil},
		{"one field", "alice\n", nil, []string{"f:1:", "got 1 fields"}},
		{"three fields", "alice " + aliceTok + " extra\n", nil, []string{"f:1:", "got 3 fields"}},
		{"short token", "\nalice short\n", nil, []string{"f:2:", "shorter than 16"}},
		{"reversed fields", aliceTok + " alice\n", nil, []string{"f:1:", "shorter than 16", `"tenant token"`}},
		{"bad tenant name", "al/ice " + aliceTok + "\n", nil, []string{"f:1:", "tenant name"}},
		{"tenant twice", "alice " + aliceTok + "\nalice " + bobTok + "\n", nil, []string{"f:2:", `"alice"`, "line 1"}},
		{"token shared by two tenants", "alice " + aliceTok + "\nbob " + aliceTok + "\n", nil, []string{"f:2:", `"alice"`, `"bob"`, "same token"}},
		{"every bad line reported", "x\nalice short\nbob " + bobTok + "\n", nil, []string{"f:1:", "f:2:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTenantTokens("f", []byte(c.content))
			if c.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("got %d tenants %v; want %v", len(got), tenantNames(got), tenantNames(c.want))
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %q", c.content)
			}
			for _, want := range c.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
			for _, tok := range []string{aliceTok, bobTok} {
				if strings.Contains(err.Error(), tok) {
					t.Errorf("error %q contains a token", err)
				}
			}
		})
	}
}

// TestReadTenantTokensMode: a tokens file its group or others may access
// is refused, naming the path and the mode; mode 600 and 400 are read.
func TestReadTenantTokensMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	content := "alice " + aliceTok + "\n"
	cases := []struct {
		perm os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o640, false}, {0o644, false}, {0o604, false}, {0o620, false}, {0o666, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%04o", c.perm), func(t *testing.T) {
			p := writeTokensFile(t, content, c.perm)
			got, err := ReadTenantTokens(p)
			if c.ok {
				if err != nil || got["alice"] != aliceTok {
					t.Fatalf("ReadTenantTokens: %d tokens, %v", len(got), err)
				}
				return
			}
			if !errors.Is(err, ErrTokensFileMode) {
				t.Fatalf("ReadTenantTokens = %v; want ErrTokensFileMode", err)
			}
			for _, want := range []string{p, fmt.Sprintf("%04o", c.perm), "chmod 600"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
	if _, err := ReadTenantTokens(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v; want os.ErrNotExist", err)
	}
	if _, err := ReadTenantTokens(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v; want not a regular file", err)
	}
}

// TestParseSharedNamespaces: the shared_namespaces syntax.
func TestParseSharedNamespaces(t *testing.T) {
	cases := []struct {
		in   string
		want []auth.Namespace
		err  string
	}{
		{"", nil, ""},
		{"public", []auth.Namespace{{Name: "public"}}, ""},
		{" public:alice, bob ; docs ;", []auth.Namespace{{Name: "public", Writers: []string{"alice", "bob"}}, {Name: "docs"}}, ""},
		{"public,docs", nil, "separate namespaces with ';'"},
		{"public; public", nil, "twice"},
		{":alice", nil, "empty name"},
		{"public:", nil, "writer"},
		{"public:al/ice", nil, `writer "al/ice"`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseSharedNamespaces(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseSharedNamespaces = %v, %v; want an error mentioning %s", got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseSharedNamespaces = %v, %v; want %v", got, err, c.want)
			}
			again, err := ParseSharedNamespaces(FormatSharedNamespaces(got))
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("round trip through %q = %v, %v", FormatSharedNamespaces(got), again, err)
			}
		})
	}
}

// TestLoadTenantTokens: Load reads the tokens file named by any layer,
// validates it with the cluster token and the shared namespaces, and
// never shows a token in its errors or in the loaded configuration's
// formatting.
func TestLoadTenantTokens(t *testing.T) {
	good := writeTokensFile(t, "alice "+aliceTok+"\nbob "+bobTok+"\n", 0o600)
	cluster := map[string]string{"KVPOOL_AUTH_TOKEN": token}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range cluster {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	t.Run("env", func(t *testing.T) {
		l := mustLoad(t, src("", with("KVPOOL_TENANT_TOKENS_FILE", good, "KVPOOL_SHARED_NAMESPACES", "public:alice"), nil))
		if len(l.Node.TenantTokens) != 2 || l.Node.TenantTokens["bob"] != bobTok {
			t.Fatalf("TenantTokens: %d tenants", len(l.Node.TenantTokens))
		}
		tb, err := auth.New(l.Node.AuthOptions())
		if err != nil {
			t.Fatal(err)
		}
		g, err := tb.Authenticate([]byte(aliceTok))
		if err != nil || g.Check("public", true) != nil || g.Check("bob", false) == nil {
			t.Errorf("alice's grant: %v, %v", g, err)
		}
		if s := fmt.Sprintf("%v %+v %#v", l.Node, l.Node, l.Node); strings.Contains(s, aliceTok) || strings.Contains(s, bobTok) {
			t.Errorf("formatted configuration shows a tenant token: %s", s)
		}
	})
	t.Run("flag, relative to the work dir", func(t *testing.T) {
		s := src("", cluster, map[string]string{"tenant-tokens-file": filepath.Base(good)})
		s.WorkDir = filepath.Dir(good)
		l := mustLoad(t, s)
		if l.Node.TenantTokensFile != good || len(l.Node.TenantTokens) != 2 {
			t.Fatalf("TenantTokensFile %q, %d tenants", l.Node.TenantTokensFile, len(l.Node.TenantTokens))
		}
	})
	bad := []struct {
		name string
		s    Sources
		want []string
	}{
		{"no cluster token", src("", map[string]string{"KVPOOL_TENANT_TOKENS_FILE": good}, nil),
			[]string{"tenant_tokens_file", "auth_token"}},
		{"tenant with the cluster token", src("", with("KVPOOL_TENANT_TOKENS_FILE", writeTokensFile(t, "alice "+token+"\n", 0o600)), nil),
			[]string{"tenant_tokens_file", `"alice"`, "cluster token"}},
		{"world-readable file", src("", with("KVPOOL_TENANT_TOKENS_FILE", writeTokensFile(t, "alice "+aliceTok+"\n", 0o644)), nil),
			[]string{"tenant_tokens_file", "env KVPOOL_TENANT_TOKENS_FILE", "0644"}},
		{"bad line", src("tenant_tokens_file: "+writeTokensFile(t, "alice "+aliceTok+"\nbob\n", 0o600)+"\n", cluster, nil),
			[]string{"tenant_tokens_file", "file node.yaml:1", "tenant-tokens:2"}},
		{"writer without a token", src("", with("KVPOOL_TENANT_TOKENS_FILE", good, "KVPOOL_SHARED_NAMESPACES", "public:carol"), nil),
			[]string{"shared_namespaces", `"carol"`}},
		{"bad shared syntax", src("", nil, map[string]string{"shared-namespaces": "public,docs"}),
			[]string{"shared_namespaces", "flag --shared-namespaces"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.s)
			if err == nil {
				t.Fatal("Load accepted it")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
			for _, tok := range []string{aliceTok, bobTok, token} {
				if strings.Contains(err.Error(), tok) {
					t.Errorf("error %q contains a token", err)
				}
			}
		})
	}
}
