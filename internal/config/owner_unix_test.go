//go:build unix

package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestTenantTokensFileOwner: a tokens file another user owns is refused
// even with mode 0600 (another user could have written it); the process's
// own file is read.
func TestTenantTokensFileOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenant-tokens")
	if err := os.WriteFile(path, []byte("alice alice-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTenantTokens(path); err != nil {
		t.Fatalf("own 0600 file: %v", err)
	}
	if os.Getuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Skipf("chown: %v", err)
	}
	_, err := ReadTenantTokens(path)
	if !errors.Is(err, ErrTokensFileOwner) {
		t.Fatalf("file owned by uid 65534: %v; want ErrTokensFileOwner", err)
	}
}
