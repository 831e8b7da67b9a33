package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/lab/validate"
)

// liveTestSetup skips live tests where they cannot run and makes cluster
// processes re-executions of this test binary (see TestMain).
func liveTestSetup(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("live cluster runs skipped in -short mode")
	}
	t.Setenv(asKvpoolEnv, "1")
}

// TestDemoGenerated runs kvpool demo on one minute of a generated trace:
// four arms, each on its own cluster of re-executed test binaries. The
// demo must PASS, or be INCONCLUSIVE when this (busy) machine did not keep
// up; its exit code, summary.json and the top of its report agree on the
// verdict.
func TestDemoGenerated(t *testing.T) {
	liveTestSetup(t)
	dir := filepath.Join(t.TempDir(), "report")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"demo", "--generated", "--window", "1m", "--payload", "16KiB", "--out", dir, "--quiet"}, &out, &errb)
	if code != validate.ExitPass && code != validate.ExitInconclusive {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	t.Logf("demo output:\n%s", out.String())
	for _, arm := range []string{"| recompute |", "| local rr |", "| local cache-aware |", "| global cache-aware |"} {
		if !strings.Contains(out.String(), arm) {
			t.Errorf("table lacks the row %q", arm)
		}
	}
	for _, f := range []string{"index.html", "report.md", "summary.json", "summary.csv", "live_hit_ratio.svg", "live_ttft.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("report file %s: %v", f, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Partial bool             `json:"partial"`
		Verdict validate.Verdict `json:"verdict"`
		Trace   struct {
			Generated bool `json:"generated"`
		} `json:"trace"`
		Arms []struct {
			Live struct {
				WrongBlocks  int64 `json:"wrong_blocks"`
				VerifiedHits int64 `json:"verified_hits"`
				Completed    int   `json:"completed"`
				Requests     int   `json:"requests"`
			} `json:"live"`
		} `json:"arms"`
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Partial || !sum.Trace.Generated || len(sum.Arms) != 4 {
		t.Fatalf("summary: partial %v, generated %v, %d arms", sum.Partial, sum.Trace.Generated, len(sum.Arms))
	}
	for i, a := range sum.Arms {
		if a.Live.WrongBlocks != 0 || a.Live.Completed == 0 {
			t.Errorf("arm %d: %d wrong blocks, %d completed", i, a.Live.WrongBlocks, a.Live.Completed)
		}
		if i > 0 && a.Live.VerifiedHits == 0 {
			t.Errorf("arm %d: no verified hits", i)
		}
	}
	if sum.Verdict.ExitCode() != code {
		t.Errorf("summary.json verdict %s, exit code %d", sum.Verdict, code)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(md), "Trace:")
	if !strings.Contains(head, "**"+string(sum.Verdict)+"**: ") || !strings.Contains(out.String(), string(sum.Verdict)+": ") {
		t.Errorf("the verdict %s is not stated at the top of report.md (%q) or in the table output", sum.Verdict, head)
	}
}

// TestReportDirNotADirectory gives --out a path that cannot be a
// directory (a file, or a path under one): refused at once with exit 2
// naming --out, before a trace is read or a cluster started. The context
// is already cancelled, so a command that did start would stop at once,
// write its (partial) report and fail on the directory instead.
func TestReportDirNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"demo", "--generated", "--window", "10s", "--quiet", "--out", file},
		{"demo", "--generated", "--window", "10s", "--quiet", "--out", filepath.Join(file, "sub")},
		{"compare", "--sim", "--quiet", "--out", file},
		{"policy", "--quick", "--quiet", "--out", file},
		{"demo", "--generated", "--window", "10s", "--quiet", "--out", ""},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(ctx, args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--out") {
				t.Fatalf("exit code %d, stderr %q: want 2 naming --out", code, errb.String())
			}
			if data, err := os.ReadFile(file); err != nil || string(data) != "mine\n" {
				t.Fatalf("the file given as --out was changed: %q, %v", data, err)
			}
		})
	}
}

func TestDemoUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad payload", []string{"--payload", "huge"}, "--payload"},
		{"bad rate", []string{"--rate", "-1"}, "--rate"},
		{"bad nodes", []string{"--nodes", "-2"}, "--nodes"},
		{"bad speed", []string{"--speed", "-5"}, "--speed"},
		{"extra args", []string{"now"}, "unexpected"},
		{"typo'd trace: no fallback", []string{"--trace", "conversaton", "--trace-dir", "/nonexistent"}, "--trace conversaton"},
		{"unreadable trace path", []string{"--trace", "/nonexistent/dir/x.jsonl"}, "/nonexistent/dir/x.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), append([]string{"demo"}, tt.args...), &out, &errb); code != 2 {
				t.Fatalf("exit code %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Fatalf("stderr %q does not mention %q", errb.String(), tt.want)
			}
		})
	}
}
