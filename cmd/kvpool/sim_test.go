package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simTrace writes a tiny trace: 12 requests, every other one repeating the
// previous one's prefix, half a second apart.
func simTrace(t *testing.T) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	var b strings.Builder
	for i := range 12 {
		ids := []string{fmt.Sprint(100 * (i / 2)), fmt.Sprint(100*(i/2) + 1)}
		if i%2 == 1 {
			ids = append(ids, fmt.Sprint(100*(i/2)+50+i))
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": 5, "hash_ids": [%s]}`+"\n",
			500*i, 512*len(ids), strings.Join(ids, ", "))
	}
	path = filepath.Join(dir, "tiny.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func runSimCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"sim"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestSimCommand(t *testing.T) {
	dir, path := simTrace(t)
	recs := filepath.Join(dir, "recs.csv")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"text", []string{"--trace", path, "--instances", "2", "--mode", "local"},
			0, []string{"token hit ratio", "local mode, cache-aware routing", "2 instances × 5859 RAM blocks", "TTFT"}, nil},
		{"by name in --trace-dir", []string{"--trace-dir", dir, "--trace", "tiny.jsonl", "--records", recs},
			0, []string{"(12 requests)", "records", recs}, nil},
		{"bad mode", []string{"--trace", path, "--mode", "both"}, 2, nil, []string{"--mode", "both"}},
		{"bad policy", []string{"--trace", path, "--policy", "lru+nope"}, 2, nil, []string{"--policy", "nope"}},
		{"zero rate", []string{"--trace", path, "--rate", "0"}, 2, nil, []string{"--rate 0"}},
		{"bad profile", []string{"--trace", path, "--profile", "gpt"}, 2, nil, []string{"--profile", "llama3-70b-8xa800"}},
		{"missing trace", []string{"--trace-dir", dir, "--trace", "nope"}, 2, nil, []string{"nope"}},
		{"stray argument", []string{"--trace", path, "extra"}, 2, nil, []string{"unexpected arguments"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runSimCmd(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}

	f, err := os.Open(recs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 13 || rows[0][0] != "id" || rows[0][13] != "ttft_s" {
		t.Errorf("records CSV: %d rows, header %v, err %v", len(rows), rows[0], err)
	}
}

func TestSimCommandJSON(t *testing.T) {
	_, path := simTrace(t)
	code, stdout, stderr := runSimCmd("--trace", path, "--json", "--goodput", "--instances", "1",
		"--ssd-blocks", "10", "--prefetch=false", "--routing", "rr", "--slo", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Trace   string         `json:"trace"`
		Summary map[string]any `json:"summary"`
		Goodput *struct {
			RateMultiplier float64 `json:"rate_multiplier"`
			RequestsPerSec float64 `json:"requests_per_s"`
		} `json:"goodput"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	s := out.Summary
	for field, want := range map[string]any{
		"requests": 12.0, "instances": 1.0, "ssd_blocks": 10.0, "prefetch": false, "routing": "rr",
		"mode": "global", "policy": "lru", "slo_s": 2.0,
	} {
		if s[field] != want {
			t.Errorf("summary %s = %v, want %v", field, s[field], want)
		}
	}
	// Six of the twelve requests reuse their predecessor's two blocks.
	if got := s["token_hit_ratio"]; got != 12.0/30 {
		t.Errorf("token_hit_ratio = %v, want %v", got, 12.0/30)
	}
	for _, k := range []string{"ttft_p99_s", "slo_attainment_10s", "bytes_ssd_write", "fetches_skipped", "duration_s"} {
		if _, ok := s[k]; !ok {
			t.Errorf("summary lacks %s", k)
		}
	}
	if out.Goodput == nil || !(out.Goodput.RateMultiplier > 0) || !(out.Goodput.RequestsPerSec > 0) {
		t.Errorf("goodput %+v, want positive multiplier and rate", out.Goodput)
	}
}
