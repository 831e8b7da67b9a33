package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/trace"
)

func TestReplayUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"neither local nor master", []string{"--trace", "x"}, "exactly one of"},
		{"both", []string{"--local", "2", "--master", "m:1"}, "exactly one of"},
		{"bad payload", []string{"--local", "2", "--payload", "big"}, "--payload"},
		{"bad prefetch", []string{"--local", "2", "--prefetch", "maybe"}, "--prefetch"},
		{"bad mode", []string{"--master", "m:1", "--mode", "cloud"}, "--mode"},
		{"bad speed", []string{"--master", "m:1", "--speed", "-1"}, "--speed"},
		{"unknown policy", []string{"--local", "2", "--policy", "nosuch"}, "nosuch"},
		{"negative window", []string{"--local", "2", "--from", "-3"}, "--from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), append([]string{"replay"}, tt.args...), &out, &errb); code != 2 {
				t.Fatalf("exit code %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Fatalf("stderr %q does not mention %q", errb.String(), tt.want)
			}
		})
	}
}

// TestReplayLocalCluster runs kvpool replay --local 2 (real processes: the
// test binary re-executed as kvpool) in local and global mode on a small
// generated trace and compares it with kvpool's simulator.
func TestReplayLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process replay in -short mode")
	}
	// cluster.Start runs os.Executable(), this test binary, which acts as
	// kvpool under asKvpoolEnv (see TestMain).
	t.Setenv(asKvpoolEnv, "1")
	o := tracegen.ChatOptions()
	o.Requests, o.Rate, o.SystemPrompts, o.ThinkTime = 100, 0.8, 4, 15*time.Second
	o.Input.Mean = 3000
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "gen.jsonl")
	writeTrace(t, path, reqs)

	hit := map[string]float64{}
	judged := true
	for _, mode := range []string{"local", "global"} {
		t.Run(mode, func(t *testing.T) {
			recs := filepath.Join(dir, mode+".csv")
			var out, errb bytes.Buffer
			args := []string{"replay", "--local", "2", "--trace", path, "--mode", mode, "--payload", "16KiB",
				"--speed", "25", "--ram-blocks", "4000", "--verify", "full", "--json", "--quiet", "--records", recs}
			if code := run(context.Background(), args, &out, &errb); code != 0 {
				t.Fatalf("kvpool replay exit %d: %s", code, errb.String())
			}
			var doc struct {
				Summary struct {
					sim.Summary
					Completed   int   `json:"completed"`
					Partial     bool  `json:"partial"`
					WrongBlocks int64 `json:"wrong_blocks"`
					KeptUp      bool  `json:"kept_up"`
				} `json:"summary"`
			}
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("JSON output: %v\n%s", err, out.String())
			}
			s := doc.Summary
			if s.Completed != len(reqs) || s.Partial || s.WrongBlocks != 0 {
				t.Fatalf("completed %d of %d, partial %v, %d wrong blocks", s.Completed, len(reqs), s.Partial, s.WrongBlocks)
			}
			if b, err := os.ReadFile(recs); err != nil || bytes.Count(b, []byte("\n")) != len(reqs)+1 {
				t.Fatalf("records file: %v, %d lines", err, bytes.Count(b, []byte("\n")))
			}
			if !s.KeptUp {
				// The run says so itself; its latencies and timing-dependent
				// hits are not comparable with the simulator then.
				t.Logf("%s: the machine could not keep up with the arrivals: live vs sim not judged", mode)
				judged = false
				return
			}
			sr, err := sim.Run(context.Background(), reqs, sim.Options{Instances: 2, RAMBlocks: 4000, Mode: sim.Mode(mode)})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: live hit %.4f TTFT mean %.3f s; sim hit %.4f TTFT mean %.3f s", mode,
				s.TokenHitRatio, s.TTFTMean, sr.Summary.TokenHitRatio, sr.Summary.TTFTMean)
			if d := math.Abs(s.TokenHitRatio - sr.Summary.TokenHitRatio); d > 0.05 {
				t.Errorf("live hit ratio %.4f vs sim %.4f", s.TokenHitRatio, sr.Summary.TokenHitRatio)
			}
			hit[mode] = s.TokenHitRatio
		})
	}
	if judged && (hit["global"] <= 0 || hit["global"] < hit["local"]) {
		t.Errorf("global hit ratio %.4f, local %.4f: want global > 0 and >= local", hit["global"], hit["local"])
	}
}

// TestReplayMasterWarm replays a window of a trace (--from/--to) twice
// against one running cluster (--master): each run reports the cluster's
// own capacity, not the flags' defaults, and the second, on nodes that
// already hold the first one's blocks, warns that the cluster is warm.
func TestReplayMasterWarm(t *testing.T) {
	if testing.Short() {
		t.Skip("live replay in -short mode")
	}
	const payload, ramBlocks = 16 << 10, 300
	c, err := cluster.StartInProcess(context.Background(), cluster.InProcessOptions{Nodes: 2,
		Node: func(i int, cfg *config.Node) {
			cfg.BlockSize = payload
			cfg.RAM.Bytes = ramBlocks * payload
			cfg.HeartbeatInterval = 20 * time.Millisecond
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	o := tracegen.ChatOptions()
	o.Requests, o.Rate = 60, 1
	o.Input.Mean = 2000
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gen.jsonl")
	writeTrace(t, path, reqs)
	to := float64(reqs[len(reqs)/2].Timestamp) / 1000
	for i, wantWarm := range []bool{false, true} {
		var out, errb bytes.Buffer
		args := []string{"replay", "--master", c.Master, "--trace", path, "--to", strconv.FormatFloat(to, 'f', 3, 64),
			"--payload", "16KiB", "--json", "--quiet"}
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errb.String())
		}
		var doc struct {
			Summary struct {
				Requests   int `json:"requests"`
				RAMBlocks  int `json:"ram_blocks"`
				WarmBlocks int `json:"warm_blocks"`
			} `json:"summary"`
		}
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatalf("JSON output: %v\n%s", err, out.String())
		}
		s := doc.Summary
		if want := sampledBefore(reqs, to); s.Requests != want {
			t.Errorf("run %d: %d requests replayed, want the %d before --to %g", i, s.Requests, want, to)
		}
		if s.RAMBlocks != ramBlocks || !strings.Contains(errb.String(), "2 live nodes, 300 RAM blocks each") {
			t.Errorf("run %d: summary RAM blocks %d, stderr %q; want the cluster's %d", i, s.RAMBlocks, errb.String(), ramBlocks)
		}
		if warned := strings.Contains(errb.String(), "WARNING") && strings.Contains(errb.String(), "warm cluster"); warned != wantWarm || (s.WarmBlocks > 0) != wantWarm {
			t.Errorf("run %d: warm blocks %d, warning %v; want warm %v (stderr %q)", i, s.WarmBlocks, warned, wantWarm, errb.String())
		}
	}
}

// sampledBefore counts the requests of reqs before trace second to.
func sampledBefore(reqs []trace.Request, to float64) int {
	n := 0
	for _, r := range reqs {
		if float64(r.Timestamp-reqs[0].Timestamp) < to*1000 {
			n++
		}
	}
	return n
}

// writeTrace writes reqs to path as a trace file.
func writeTrace(t *testing.T, path string, reqs []trace.Request) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewWriter(f)
	for _, r := range reqs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
