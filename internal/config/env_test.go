package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestEnvWarnings(t *testing.T) {
	environ := []string{
		"HOME=/home/x",
		"KVPOOL_RAM_BYTES=1GiB",
		"KVPOOL_TRACE_DIR=/traces",
		"KVPOOL_MASTER_NODE_TTL=5s",
		"KVPOOL_TEST_ANYTHING=1",
		"KVPOOL_FAULTS=1",
		"KVPOOL_RAM_BYTE=1GiB",
		"KVPOOL_TRACEDIR=/traces",
		"KVPOOL_NOTHING_LIKE_IT=1",
	}
	got := EnvWarnings(environ)
	want := []string{
		`environment: unknown variable KVPOOL_RAM_BYTE ignored (did you mean "KVPOOL_RAM_BYTES"?)`,
		`environment: unknown variable KVPOOL_TRACEDIR ignored (did you mean "KVPOOL_TRACE_DIR"?)`,
		`environment: unknown variable KVPOOL_NOTHING_LIKE_IT ignored`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("EnvWarnings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestKnownEnvComplete reads every Go file of the module for KVPOOL_
// names in string literals and checks that KnownEnv knows each, so that
// a variable read somewhere is never warned about as a typo.
func TestKnownEnvComplete(t *testing.T) {
	root := filepath.Join("..", "..")
	lit := regexp.MustCompile(`"(KVPOOL_[A-Z0-9_]+)"`)
	known := KnownEnv()
	notRead := map[string]bool{
		MasterEnvPrefix: true, // a prefix
		testEnvPrefix:   true, // a prefix
		"KVPOOL_X":      true, // an Origin's name in this package's tests
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			name := m[1]
			if notRead[name] || strings.HasPrefix(name, testEnvPrefix) {
				continue
			}
			if _, found := slices.BinarySearch(known, name); !found {
				t.Errorf("%s reads %s, which KnownEnv does not list", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
