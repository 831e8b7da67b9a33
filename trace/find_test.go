package trace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	// Layout: work/ is the working directory; the same file exists in
	// several places so the test shows which one wins.
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(good1+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	work := filepath.Join(root, "work")
	flagDir := filepath.Join(root, "flag")
	envDir := filepath.Join(root, "env")
	mk("flag/conversation_trace.jsonl")
	mk("env/conversation_trace.jsonl")
	mk("env/synthetic_trace.jsonl")
	mk("work/traces/conversation_trace.jsonl")
	mk("work/traces/synthetic_trace.jsonl")
	mk("shared/traces/toolagent_trace.jsonl")
	mk("shared/traces/mine.jsonl")
	mk("work/local.jsonl")
	explicit := mk("elsewhere/x.jsonl")

	envSet := func(k string) string {
		if k == EnvTraceDir {
			return envDir
		}
		return ""
	}
	envUnset := func(string) string { return "" }

	tests := []struct {
		name   string
		trace  string
		dir    string
		getenv func(string) string
		want   string // relative to root; "" means not found
	}{
		{"flag dir wins", "conversation", flagDir, envSet, "flag/conversation_trace.jsonl"},
		{"env next", "conversation", "", envSet, "env/conversation_trace.jsonl"},
		{"flag dir without the file falls through to env", "synthetic", flagDir, envSet, "env/synthetic_trace.jsonl"},
		{"./traces next", "synthetic", "", envUnset, "work/traces/synthetic_trace.jsonl"},
		{"full file name", "synthetic_trace.jsonl", "", envUnset, "work/traces/synthetic_trace.jsonl"},
		{"not in ../shared/traces (the caller passes it)", "mine.jsonl", "", envUnset, ""},
		{"short name not in ../shared/traces either", "toolagent", "", envSet, ""},
		{"file in working directory as is", "local.jsonl", flagDir, envSet, "work/local.jsonl"},
		{"explicit path as is", explicit, flagDir, envSet, "elsewhere/x.jsonl"},
		{"missing", "nope", flagDir, envSet, ""},
		{"missing explicit path", filepath.Join(root, "nope.jsonl"), "", envSet, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Finder{Getenv: tt.getenv, WorkDir: work}.Find(tt.trace, tt.dir)
			if tt.want == "" {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("Find = %q, %v; want ErrNotFound", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tt.want); got != want {
				t.Fatalf("Find = %q, want %q", got, want)
			}
		})
	}
}

func TestFindErrorListsPlaces(t *testing.T) {
	for _, tt := range []struct {
		name   string
		getenv func(string) string
		want   []string
	}{
		{"env set", func(string) string { return "/e" }, []string{"--trace-dir /d", "$KVPOOL_TRACE_DIR=/e", "./traces", "kvpool trace fetch", "kvpool trace gen", "conversation_trace.jsonl"}},
		{"env unset", func(string) string { return "" }, []string{"--trace-dir /d", "$KVPOOL_TRACE_DIR not set", "./traces"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Finder{Getenv: tt.getenv, WorkDir: t.TempDir()}.Find("conversation", "/d")
			if err == nil {
				t.Fatal("found a trace in an empty directory")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "shared") {
				t.Errorf("error %q names a place outside the caller's search path", err)
			}
		})
	}
	if _, err := Find("", ""); err == nil {
		t.Error("Find of an empty name succeeded")
	}
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"conversation": "conversation_trace.jsonl",
		"synthetic":    "synthetic_trace.jsonl",
		"toolagent":    "toolagent_trace.jsonl",
		"other.jsonl":  "other.jsonl",
	} {
		if got := FileName(in); got != want {
			t.Errorf("FileName(%q) = %q, want %q", in, got, want)
		}
	}
}
