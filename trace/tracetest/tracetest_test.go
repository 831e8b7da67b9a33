package tracetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/trace"
	"github.com/kvpool/kvpool/trace/tracetest"
)

func TestEnvIsTheCommandLines(t *testing.T) {
	if tracetest.Env != trace.EnvTraceDir {
		t.Fatalf("tracetest.Env = %q, trace.EnvTraceDir = %q", tracetest.Env, trace.EnvTraceDir)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x_trace.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, env, file string
		want            string // "" means an error containing each of errs
		errs            []string
	}{
		{"found", dir, "x_trace.jsonl", filepath.Join(dir, "x_trace.jsonl"), nil},
		{"unset", "", "x_trace.jsonl", "", []string{"x_trace.jsonl", "$KVPOOL_TRACE_DIR is not set", "README", "kvpool trace fetch"}},
		{"relative", "traces", "x_trace.jsonl", "", []string{"relative", "absolute"}},
		{"missing dir", filepath.Join(dir, "none"), "x_trace.jsonl", "", []string{"none", "absolute path"}},
		{"missing file", dir, "y_trace.jsonl", "", []string{"y_trace.jsonl", "README"}},
		{"a directory", dir, "sub", "", []string{"not a regular file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tracetest.Env, tt.env)
			got, err := tracetest.Find(tt.file)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("Find = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Find = %q, want an error", got)
			}
			for _, w := range tt.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestPathAndDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x_trace.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tracetest.Env, dir)
	if got := tracetest.Path(t, "x_trace.jsonl"); got != filepath.Join(dir, "x_trace.jsonl") {
		t.Fatalf("Path = %q", got)
	}
	if got := tracetest.Dir(t); got != dir {
		t.Fatalf("Dir = %q, want %q", got, dir)
	}
}

// TestSkips runs Path and Dir in subtests that must end skipped, not
// failed and not run on.
func TestSkips(t *testing.T) {
	t.Setenv(tracetest.Env, "")
	for name, f := range map[string]func(t *testing.T){
		"Path": func(t *testing.T) { tracetest.Path(t, "x_trace.jsonl") },
		"Dir":  func(t *testing.T) { tracetest.Dir(t) },
	} {
		var ran bool
		t.Run(name, func(t *testing.T) {
			f(t)
			ran = true
		})
		if ran {
			t.Errorf("%s without $%s did not skip", name, tracetest.Env)
		}
	}
}
