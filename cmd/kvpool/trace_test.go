package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/tracefetch"
	"github.com/kvpool/kvpool/trace/tracetest"
)

// runKV runs "kvpool args..." and returns the exit code and outputs.
func runKV(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTraceCommands(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "gen.jsonl")
	code, _, stderr := runKV(t, "trace", "gen", "--requests", "40", "--seed", "3", "--turns", "3", "-o", gen)
	if code != 0 || !strings.Contains(stderr, "wrote 40 requests") {
		t.Fatalf("gen: exit %d, stderr %q", code, stderr)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	good := `{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [0]}`
	if err := os.WriteFile(bad, []byte(good+"\n"+good+"\n"+`{"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": [0]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(dir, "sample.jsonl")

	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		checkJSON  bool
		wantSample int // lines expected in sample.jsonl; 0 = not checked
	}{
		{name: "validate good", args: []string{"validate", gen}, stdout: []string{"OK " + gen + ": 40 requests"}},
		{name: "validate bad", args: []string{"validate", bad}, code: 1, stderr: []string{bad + ":3: hash_ids has 1 ids, want ceil(600/512) = 2"}},
		{name: "validate lenient", args: []string{"validate", "--lenient", bad}, code: 1,
			stdout: []string{"2 good requests; skipped 1 bad lines: hash_ids count mismatch: 1 (first at line 3)"}},
		{name: "stats text", args: []string{"stats", gen}, stdout: []string{"requests", "40", "infinite-cache token hit ratio", "reuse distance"}},
		{name: "stats json, flag after file", args: []string{"stats", gen, "--json"}, checkJSON: true},
		{name: "stats bad", args: []string{"stats", bad}, code: 1, stderr: []string{bad + ":3:"}},
		{name: "stats lenient", args: []string{"stats", "--lenient", bad}, stdout: []string{"requests"}, stderr: []string{"skipped 1 bad lines"}},
		{name: "stats by name with --trace-dir", args: []string{"stats", "--trace-dir", dir, "gen.jsonl"}, stdout: []string{"40"}},
		{name: "stats missing", args: []string{"stats", "--trace-dir", dir, "nope"}, code: 1, stderr: []string{"kvpool trace fetch", "--trace-dir " + dir}},
		{name: "sample", args: []string{"sample", "--first", "7", "--scale", "0.5", "-o", sample, gen}, stderr: []string{"wrote 7 requests"}, wantSample: 7},
		{name: "sample bad flag", args: []string{"sample", "--families", "2", gen}, code: 2, stderr: []string{"--families"}},
		{name: "gen to stdout", args: []string{"gen", "--requests", "3"}, stdout: []string{`{"timestamp": 0, "input_length": `}},
		{name: "gen bad option", args: []string{"gen", "--turns", "0.5"}, code: 2, stderr: []string{"--turns"}},
		{name: "fetch unknown name", args: []string{"fetch", "--name", "nope", "--dir", dir}, code: 2, stderr: []string{`unknown trace "nope"`}},
		{name: "no subcommand", args: nil, code: 2, stderr: []string{"subcommands:"}},
		{name: "unknown subcommand", args: []string{"frob"}, code: 2, stderr: []string{`unknown subcommand "frob"`}},
		{name: "help", args: []string{"stats", "-h"}, stderr: []string{"usage: kvpool trace stats"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runKV(t, append([]string{"trace"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.checkJSON {
				var v struct{ Requests int }
				if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.Requests != 40 {
					t.Errorf("JSON stdout: %v, requests %d", err, v.Requests)
				}
			}
			if tt.wantSample > 0 {
				b, err := os.ReadFile(sample)
				if err != nil || strings.Count(string(b), "\n") != tt.wantSample {
					t.Errorf("sample file: %v, %d lines", err, strings.Count(string(b), "\n"))
				}
			}
		})
	}
	// A failed write leaves no output file behind.
	out := filepath.Join(dir, "never.jsonl")
	if code, _, _ := runKV(t, "trace", "sample", "-o", out, bad); code != 1 {
		t.Fatalf("sample of a bad file: exit %d, want 1", code)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "*never*")); len(ents) != 0 {
		t.Fatalf("failed sample left %v", ents)
	}
}

// TestTraceFetchCommand serves the published conversation trace (from
// $KVPOOL_TRACE_DIR, see trace/tracetest) from a local server standing in
// for GitHub.
func TestTraceFetchCommand(t *testing.T) {
	src := tracetest.Path(t, "conversation_trace.jsonl")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+tracefetch.PinnedCommit+"/"+tracefetch.TracePath+"/conversation_trace.jsonl" {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, src)
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "traces")
	code, stdout, stderr := runKV(t, "trace", "fetch", "--name", "conversation", "--dir", dir, "--base-url", srv.URL)
	if code != 0 || !strings.Contains(stdout, "installed "+filepath.Join(dir, "conversation_trace.jsonl")) || !strings.Contains(stdout, "sha256 verified") {
		t.Fatalf("fetch: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, stdout, _ = runKV(t, "trace", "fetch", "--name", "conversation", "--dir", dir, "--base-url", srv.URL)
	if code != 0 || !strings.Contains(stdout, "already present") {
		t.Fatalf("second fetch: exit %d, stdout %s", code, stdout)
	}
	code, _, stderr = runKV(t, "trace", "fetch", "--name", "synthetic", "--dir", dir, "--base-url", srv.URL)
	if code != 1 || !strings.Contains(stderr, "404") {
		t.Fatalf("fetch of a file the server lacks: exit %d, stderr %s", code, stderr)
	}
}
