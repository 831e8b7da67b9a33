package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/trace"
)

// tinyTraceDir writes two small generated traces under the published
// traces' file names and returns the directory.
func tinyTraceDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i, name := range []string{"conversation", "synthetic"} {
		o := tracegen.ChatOptions()
		o.Seed, o.Requests = uint64(10+i), 200
		f, err := os.Create(filepath.Join(dir, trace.FileName(name)))
		if err != nil {
			t.Fatal(err)
		}
		w := trace.NewWriter(f)
		if _, err := tracegen.Write(context.Background(), w, o); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runPolicyCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"policy"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPolicyWritesReport(t *testing.T) {
	dir := tinyTraceDir(t)
	out := filepath.Join(t.TempDir(), "rep")
	code, stdout, stderr := runPolicyCmd("--trace-dir", dir, "--out", out, "--quick", "--gen-requests", "0")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, f := range []string{"index.html", "report.md", "summary.json", "gap.csv", "noise.csv", "tenants.csv", "nodes.csv",
		"policy_gap_closed.svg", "policy_vs_best.svg", "policy_noise_hit_conversation.svg", "policy_noise_hit_synthetic.svg",
		"policy_noise_goodput_conversation.svg", "policy_tenants.svg", "policy_nodes_conversation.svg"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// --quick searches goodput on the first trace only.
	if _, err := os.Stat(filepath.Join(out, "policy_noise_goodput_synthetic.svg")); err == nil {
		t.Error("--quick searched goodput on the second trace")
	}
	for _, want := range []string{"| conversation | whole | 2000 |", "| synthetic | first (tuning) | 10000 |", "Jain", "report: " + filepath.Join(out, "index.html")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "goodput kvchain(perr=1,seed=1)") {
		t.Errorf("no progress line for the goodput at p = 1:\n%s", stderr)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Gap to Belady", "Robustness (a)", "Robustness (b)", "Robustness (c)", "Joint routing and placement",
		"with Algorithm 1's rejection"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks section %q", want)
		}
	}
}

func TestPolicyBadArguments(t *testing.T) {
	dir := tinyTraceDir(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"negative gen requests", []string{"--trace-dir", dir, "--gen-requests", "-5"}, 2, "--gen-requests -5"},
		{"unknown flag", []string{"--nope"}, 2, "nope"},
		{"extra argument", []string{"--trace-dir", dir, "extra"}, 2, "unexpected arguments"},
		{"empty trace list", []string{"--trace", ","}, 2, "no trace given"},
		{"missing trace", []string{"--trace", filepath.Join(dir, "absent.jsonl")}, 2, "absent.jsonl"},
		{"bad workers", []string{"--trace-dir", dir, "--trace", "conversation", "--workers", "-1"}, 2, "--workers -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runPolicyCmd(append(tt.args, "--out", t.TempDir(), "--quiet")...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}
