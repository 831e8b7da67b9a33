package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyTrace writes a four-request trace: the third request repeats the
// first (2 blocks, 700 tokens), the others are new.
func tinyTrace(t *testing.T) string {
	t.Helper()
	lines := []string{
		`{"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]}`,
		`{"timestamp": 1, "input_length": 512, "output_length": 5, "hash_ids": [3]}`,
		`{"timestamp": 2, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]}`,
		`{"timestamp": 3, "input_length": 1024, "output_length": 5, "hash_ids": [4, 5]}`,
	}
	path := filepath.Join(t.TempDir(), "tiny.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runHitrateCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"hitrate"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestHitrateJSON(t *testing.T) {
	path := tinyTrace(t)
	code, stdout, stderr := runHitrateCmd(t, "--trace", path, "--capacity", "10", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	want := map[string]any{
		"trace": path, "policy": "lru", "capacity": 10.0, "nodes": 1.0, "routing": "rr",
		"requests": 4.0, "hit_tokens": 700.0, "input_tokens": 2936.0, "hit_blocks": 2.0, "blocks": 7.0, "accesses": 7.0,
		"token_hit_ratio": 700.0 / 2936, "block_hit_ratio": 2.0 / 7,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestHitrateText(t *testing.T) {
	path := tinyTrace(t)
	code, stdout, stderr := runHitrateCmd(t, "--trace", path, "--capacity", "1", "--policy", "s3fifo+second-hit", "--nodes", "2", "--routing", "affinity")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"trace            " + path, "policy           s3fifo+second-hit", "× 2 nodes (routing affinity)", "token hit ratio"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestHitrateListPolicies(t *testing.T) {
	code, stdout, _ := runHitrateCmd(t, "--list-policies")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for _, want := range []string{"lru", "fifo", "lfu", "s3fifo", "arc", "mooncake", "belady", "lru+second-hit", "lru+cms"} {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("--list-policies lacks %q:\n%s", want, stdout)
		}
	}
}

func TestHitrateSweep(t *testing.T) {
	path := tinyTrace(t)
	csvPath := filepath.Join(t.TempDir(), "sweep.csv")
	code, _, stderr := runHitrateCmd(t, "--trace", path, "--policy", "lru,belady", "--sweep", "0,1,10", "--out", csvPath)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	data, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	want := "trace,policy,capacity,nodes,routing,token_hit_ratio,block_hit_ratio\n" +
		path + ",lru,0,1,rr,0.000000,0.000000\n" +
		path + ",lru,1,1,rr,0.000000,0.000000\n" +
		path + ",lru,10,1,rr,0.238420,0.285714\n" +
		path + ",belady,0,1,rr,0.000000,0.000000\n" +
		// Belady keeps key 1 through [3] (with one block it bypasses 2 and 3).
		path + ",belady,1,1,rr,0.174387,0.142857\n" +
		path + ",belady,10,1,rr,0.238420,0.285714\n"
	if string(data) != want {
		t.Fatalf("CSV\n%s\nwant\n%s", data, want)
	}
}

func TestHitrateBadArgs(t *testing.T) {
	path := tinyTrace(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--trace", path, "--policy", "lruu"}, 2, `unknown eviction policy "lruu"`},
		{[]string{"--trace", path, "--capacity", "-1"}, 2, "--capacity -1"},
		{[]string{"--trace", path, "--nodes", "0"}, 2, "--nodes 0"},
		{[]string{"--trace", path, "--routing", "random"}, 2, `--routing: unknown routing "random"`},
		{[]string{"--trace", path, "--policy", "lru,arc"}, 2, "use --sweep"},
		{[]string{"--trace", path, "--out", "x.csv"}, 2, "--out needs --sweep"},
		{[]string{"--trace", path, "--sweep", "10,ten"}, 2, `capacity "ten"`},
		{[]string{"--trace", path, "extra"}, 2, "unexpected arguments"},
		{[]string{"--trace", filepath.Join(t.TempDir(), "none.jsonl")}, 2, "not found"},
	}
	for _, tt := range tests {
		code, _, stderr := runHitrateCmd(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}
