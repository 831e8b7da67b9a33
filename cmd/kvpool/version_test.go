package main

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/kvpool/kvpool", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}}
	want := "kvpool   github.com/kvpool/kvpool v1.2.3\nrevision abc123 (modified)\ntime     2026-01-02T03:04:05Z\ngo       go1.99 linux/arm64\n"
	if got := versionText(info); got != want {
		t.Errorf("versionText =\n%s\nwant\n%s", got, want)
	}
	code, out, stderr := runKV(t, "version")
	if code != 0 || !strings.Contains(out, "github.com/kvpool/kvpool") || !strings.Contains(out, "go ") {
		t.Errorf("kvpool version: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestTraceInputErrors checks what a trace that is no trace gets: an
// empty file fails validation, and a directory is said to be one.
func TestTraceInputErrors(t *testing.T) {
	dir := t.TempDir()
	empty := dir + "/empty.jsonl"
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runKV(t, "trace", "validate", empty); code != 1 || !strings.Contains(stderr, "empty trace") {
		t.Errorf("trace validate of an empty file: exit %d, stderr %q; want 1 and \"empty trace\"", code, stderr)
	}
	if code, _, stderr := runKV(t, "hitrate", "--trace", dir); code != 2 || !strings.Contains(stderr, "is a directory") {
		t.Errorf("hitrate --trace DIR: exit %d, stderr %q; want 2 and \"is a directory\"", code, stderr)
	}
}
