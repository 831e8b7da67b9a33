package config

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzLoadFile: any file content, read as YAML or JSON, either fails to
// load with an error or gives a configuration that passes Validate — it
// never panics, and the auth token never shows in the formatted result.
// The seed corpus is in testdata/fuzz/FuzzLoadFile.
func FuzzLoadFile(f *testing.F) {
	f.Add([]byte("ram:\n  bytes: 4GiB\n"), false)
	f.Add([]byte(`{"ssd": {"enabled": true, "path": "/d"}}`), true)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "node.yaml"
		if asJSON {
			name = "node.json"
		}
		l, err := Load(Sources{
			File:     name,
			ReadFile: func(string) ([]byte, error) { return data, nil },
			WorkDir:  "/work",
		})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := l.Node.Validate(); err != nil {
			t.Fatalf("Load succeeded with an invalid configuration: %v", err)
		}
		line := l.StartupLine()
		if tok := l.Node.AuthToken.Reveal(); tok != "" {
			for _, out := range []string{line, fmt.Sprintf("%+v", l.Node), fmt.Sprintf("%#v", l.Node), strings.Join(l.Warnings, "\n")} {
				if strings.Contains(out, tok) {
					t.Fatalf("the auth token %q shows in %q", tok, out)
				}
			}
		}
	})
}
