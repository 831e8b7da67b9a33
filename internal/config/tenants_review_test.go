package config

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// Review tests (adversarial review of the tenant tokens file): edge cases
// of the format and of the file's permissions.

// TestReviewTokensFileEdgeCases: Windows line endings, a '#' inside a
// token, a '#' field after the token, a line longer than bufio's default
// 64 KiB and a tab separator all parse as the format says; a carriage
// return never ends up in a token (a token that silently gained a '\r'
// would lock its tenant out).
func TestReviewTokensFileEdgeCases(t *testing.T) {
	long := strings.Repeat("L", 100<<10)
	cases := []struct {
		name    string
		content string
		want    map[string]Secret
	}{
		{"CRLF line endings", "# tenants\r\nalice " + aliceTok + "\r\n\r\nbob " + bobTok + "\r\n",
			map[string]Secret{"alice": aliceTok, "bob": bobTok}},
		{"CRLF, no final newline", "alice " + aliceTok + "\r\nbob " + bobTok,
			map[string]Secret{"alice": aliceTok, "bob": bobTok}},
		{"'#' inside a token", "alice abc#def-0123456789\n",
			map[string]Secret{"alice": "abc#def-0123456789"}},
		{"'#' comment field after the token", "alice " + aliceTok + " #bob " + bobTok + "\n",
			map[string]Secret{"alice": aliceTok}},
		{"line longer than 64 KiB", "alice " + long + "\nbob " + bobTok + "\n",
			map[string]Secret{"alice": Secret(long), "bob": bobTok}},
		{"tab separator", "alice\t" + aliceTok + "\n",
			map[string]Secret{"alice": aliceTok}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTenantTokens("f", []byte(c.content))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got tenants %v; want %v", tenantNames(got), tenantNames(c.want))
			}
			for name, tok := range got {
				if strings.ContainsAny(tok.Reveal(), "\r\n\t ") {
					t.Errorf("tenant %q: token contains whitespace", name)
				}
			}
		})
	}
	// Errors caused by a CRLF file still name the line and hide the token.
	_, err := ParseTenantTokens("f", []byte("alice "+aliceTok+"\r\nbob\r\n"))
	if err == nil || !strings.Contains(err.Error(), "f:2:") || strings.Contains(err.Error(), aliceTok) {
		t.Fatalf("CRLF file with a bad line 2: %v", err)
	}
}

// TestReviewTokensFileSymlink: the mode checked is the target's, so a
// symlink to a 0600 file is read and a symlink (itself 0777) to a
// world-readable file is refused. (The owner is not checked: a 0600 file
// owned by another user is read if the process can open it, unlike ssh,
// which also wants the key owned by the user.)
func TestReviewTokensFileSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	cases := []struct {
		name string
		perm os.FileMode
		ok   bool
	}{
		{"to a 0600 file", 0o600, true},
		{"to a 0644 file", 0o644, false},
		{"to a 0640 file", 0o640, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := writeTokensFile(t, "alice "+aliceTok+"\n", c.perm)
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			got, err := ReadTenantTokens(link)
			if c.ok {
				if err != nil || got["alice"] != aliceTok {
					t.Fatalf("ReadTenantTokens(symlink %s) = %d tenants, %v", c.name, len(got), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ReadTenantTokens(symlink %s) accepted a file others may read", c.name)
			}
			if strings.Contains(err.Error(), aliceTok) {
				t.Errorf("error %q contains the token", err)
			}
		})
	}
	// A directory named as the tokens file is refused, not read.
	if _, err := ReadTenantTokens(t.TempDir()); err == nil {
		t.Fatal("ReadTenantTokens accepted a directory")
	}
}
