package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchCommand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stdout  string
		stderr  string
		jsonOut bool
	}{
		{name: "ram json", args: []string{"--target", "ram", "--block", "16KiB", "--count", "5", "--conns", "1", "--json"}, jsonOut: true},
		{name: "tcp table", args: []string{"--target", "tcp", "--block", "16KiB,32KiB", "--count", "5", "--conns", "2"}, stdout: "32KiB"},
		{name: "node named", args: []string{"--target", "node", "--named", "--block", "16KiB", "--count", "5", "--conns", "1"}, stdout: "node-ram-named"},
		{name: "named on tcp", args: []string{"--target", "tcp", "--named"}, code: 2, stderr: "--named"},
		{name: "block over 512MiB", args: []string{"--target", "tcp", "--block", "1GiB"}, code: 2, stderr: "--block"},
		{name: "neither", args: nil, code: 2, stderr: "--target"},
		{name: "both", args: []string{"--target", "ram", "--vs", "tcp"}, code: 2, stderr: "exactly one"},
		{name: "bad block", args: []string{"--target", "ram", "--block", "huge"}, code: 2, stderr: "--block"},
		{name: "bad target", args: []string{"--target", "tape"}, code: 2, stderr: "--target"},
		{name: "bad vs", args: []string{"--vs", "nfs"}, code: 2, stderr: "--vs"},
		{name: "bad data", args: []string{"--target", "ram", "--data", "-1"}, code: 2, stderr: "--data"},
		{name: "cluster vs tcp", args: []string{"--target", "cluster", "--vs", "tcp", "--block", "16KiB", "--count", "5", "--conns", "2", "--nodes", "2"}, stdout: "cluster-tcp"},
		{name: "cluster vs redis", args: []string{"--target", "cluster", "--vs", "redis"}, code: 2, stderr: "--vs tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append([]string{"bench"}, tc.args...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
				t.Fatalf("stdout %q stderr %q, want %q and %q", out.String(), errb.String(), tc.stdout, tc.stderr)
			}
			if tc.jsonOut {
				var rs []struct {
					Ops  int64 `json:"ops"`
					Spec struct {
						Target string `json:"target"`
					} `json:"spec"`
				}
				if err := json.Unmarshal(out.Bytes(), &rs); err != nil || len(rs) != 1 || rs[0].Ops != 5 || rs[0].Spec.Target != "ram" {
					t.Fatalf("JSON %q: %+v %v", out.String(), rs, err)
				}
			}
		})
	}
}
