// Package tracetest locates the published traces for tests, as
// net/http/httptest serves HTTP tests: one place that knows where the
// traces are, so every test finds them the same way.
//
// The published traces (conversation_trace.jsonl, synthetic_trace.jsonl)
// are not part of the repository. A test that needs one asks this package,
// which looks only in the directory $KVPOOL_TRACE_DIR names. When the
// variable is unset, or the file is not there, the test is skipped with a
// message saying how to set it; the README's test command sets it. The
// directory must be an absolute path, because go test runs each package in
// its own directory.
//
// The package depends on nothing but the standard library, so the trace
// package's own tests can use it.
package tracetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Env is the environment variable naming the directory of the published
// traces; it is the same variable as trace.EnvTraceDir, which the command
// line searches.
const Env = "KVPOOL_TRACE_DIR"

// howTo tells the reader of a skip message how to make the test run.
const howTo = "set " + Env + " to the absolute path of a directory holding the published traces, " +
	"as the README's test command does (\"go run ./cmd/kvpool trace fetch\" downloads them into ./traces; " +
	"then " + Env + "=$PWD/traces go test ./...)"

// dir returns the directory $KVPOOL_TRACE_DIR names, or an error saying
// why it cannot be used (unset, relative, not a directory) and how to set
// it.
func dir() (string, error) {
	d := os.Getenv(Env)
	if d == "" {
		return "", fmt.Errorf("$%s is not set; %s", Env, howTo)
	}
	if !filepath.IsAbs(d) {
		return "", fmt.Errorf("$%s=%s is a relative path, which each package's test would resolve in its own directory; %s", Env, d, howTo)
	}
	st, err := os.Stat(d)
	if err != nil {
		return "", fmt.Errorf("$%s=%s: %w; %s", Env, d, err, howTo)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("$%s=%s is not a directory; %s", Env, d, howTo)
	}
	return d, nil
}

// Find returns the path of the published trace file (a file name such as
// "conversation_trace.jsonl"; trace.FileName maps a short name to it) in
// the directory $KVPOOL_TRACE_DIR names, or an error saying why it is not
// there and how to make it so. A test that can go on without the trace
// (on a generated one, say) uses Find; one that cannot uses Path.
func Find(file string) (string, error) {
	d, err := dir()
	if err != nil {
		return "", fmt.Errorf("tracetest: find %s: %w", file, err)
	}
	p := filepath.Join(d, file)
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("tracetest: find %s: %w; %s", file, err, howTo)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("tracetest: find %s: %s is not a regular file; %s", file, p, howTo)
	}
	return p, nil
}

// Path returns the path of the published trace file, like Find, or skips
// tb with Find's error when the trace is not available.
func Path(tb testing.TB, file string) string {
	tb.Helper()
	p, err := Find(file)
	if err != nil {
		tb.Skip(err)
	}
	return p
}

// Dir returns the directory $KVPOOL_TRACE_DIR names, or skips tb saying
// why it cannot be used (unset, relative, not a directory) and how to set
// it. A test that walks every published trace uses Dir; one that needs a
// given trace uses Path.
func Dir(tb testing.TB) string {
	tb.Helper()
	d, err := dir()
	if err != nil {
		tb.Skip("tracetest: " + err.Error())
	}
	return d
}
