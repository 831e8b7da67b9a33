package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/netns"
	"github.com/kvpool/kvpool/internal/netns/netnstest"
)

// namespacesOf returns the namespaces of Net prefix ("kvp<N>-") that exist now.
func namespacesOf(prefix string) []string {
	var out []string
	for _, l := range netns.Leftovers() {
		if name, ok := strings.CutPrefix(l, "namespace "); ok && strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// TestUpNetns: up --netns puts the master and each node on a host of its
// own, ctl reaches them with the token up names, and after a kill -9 of up
// its processes are gone and the next run's cleanup removes the hosts.
func TestUpNetns(t *testing.T) {
	multiProcess(t)
	netnstest.Require(t)
	tmp := t.TempDir()
	up := startUp(t, tmp, "up", "--netns", "--nodes", "2", "--link-rate", "50MB/s", "--resp=false", "--quiet")
	try := up.waitLine(t, "try:", 2*time.Minute)
	out := up.out()
	var hosts, tokenFile string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && f[0] == "hosts":
			hosts = strings.TrimSuffix(f[1], ":")
		case len(f) > 1 && f[0] == "token":
			tokenFile = f[1]
		}
	}
	if hosts == "" || tokenFile == "" || !strings.Contains(out, "50 MB/s each way (htb") {
		t.Fatalf("up printed no hosts, token file or link rate:\n%s", out)
	}
	master := strings.Fields(try)[4]
	if !strings.HasPrefix(master, strings.TrimSuffix(hosts, "0/24")) {
		t.Errorf("the master %s is not on the hosts' subnet %s", master, hosts)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ctl", "--master", master, "--token", strings.TrimSpace(string(tok)), "nodes"}, &stdout, &stderr); code != 0 {
		t.Fatalf("ctl nodes: exit %d: %s", code, stderr.String())
	}
	if got := strings.Count(stdout.String(), " true"); got != 2 {
		t.Errorf("ctl nodes lists %d live nodes, want 2:\n%s", got, stdout.String())
	}
	// Without the token the master refuses, in so many words.
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"ctl", "--master", master, "--token", "", "nodes"}, &stdout, &stderr); code == 0 {
		t.Errorf("ctl nodes without the token: exit 0:\n%s", stdout.String())
	}

	num := strings.Split(hosts, ".")[2]
	prefix := "kvp" + num + "-"
	if got := namespacesOf(prefix); len(got) != 4 {
		t.Fatalf("namespaces %q; want the switch, the master's and two nodes'", got)
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "kvpool-cluster-*", "owner.json"))
	if len(dirs) != 1 {
		t.Fatalf("owner files %v; want one", dirs)
	}
	b, err := os.ReadFile(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	var owner struct{ Children []int }
	if err := json.Unmarshal(b, &owner); err != nil || len(owner.Children) != 3 {
		t.Fatalf("owner file %s (%v); want 3 children", b, err)
	}
	if err := syscall.Kill(up.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	up.wait(t, time.Minute)
	eventually(t, "up's master and nodes are gone", 30*time.Second, func() (bool, string) {
		for _, pid := range owner.Children {
			if !procGone(pid) {
				return false, "process " + strconv.Itoa(pid) + " still runs"
			}
		}
		return true, ""
	})
	// The hosts outlive their owner until the next run cleans up.
	removed, err := netns.CleanStale()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(removed, func(s string) bool { return strings.HasPrefix(s, "kvp"+num+" ") }) {
		t.Errorf("CleanStale removed %q; want net %s", removed, num)
	}
	if got := namespacesOf(prefix); len(got) > 0 {
		t.Errorf("namespaces %q left after the cleanup", got)
	}
}

// TestNetnsPartition: with each node on its own host, a client on node-0's
// host reads node-1's blocks across two kernel links; cutting node-1 off
// makes the master drop it after its TTL (the partition is real: the
// process runs on) and the client fall back without wrong bytes; healing
// brings it back with its blocks.
func TestNetnsPartition(t *testing.T) {
	multiProcess(t)
	netnstest.Require(t)
	ctx := t.Context()
	c, _ := startCluster(ctx, t, cluster.Options{Nodes: 2, Netns: true, Link: netns.Link{Rate: 20e6}, RESP: false})
	h0 := c.NodeHost(0)
	cl, err := client.New(ctx, client.Options{Master: c.Master.Addr, Token: c.Token, Dial: h0.DialContext,
		DialTimeout: time.Second, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	onNode1 := putOnNode(t, c, cl, 1, 1000, 40)
	got, err := cl.Get(ctx, onNode1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range onNode1 {
		if got.Status[i] != client.Loaded || !bytes.Equal(got.Blocks[i], itPayload(id)) {
			t.Fatalf("block %d read across the links: %v, or its bytes differ", id, got.Status[i])
		}
	}

	if err := c.SetNodeLink(ctx, 1, netns.Link{Rate: 20e6, Down: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the master drops the cut-off node", time.Minute, func() (bool, string) {
		ns, err := c.NodeList(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range ns {
			if s.ID == c.Nodes[1].Name && s.Live {
				return false, "node-1 still live"
			}
		}
		return true, ""
	})
	if alive, _ := c.NodeAlive(1); !alive {
		t.Fatal("node-1's process died; the partition should leave it running")
	}
	// Whatever comes back is right; node-1's blocks are simply missing.
	got, err = cl.Get(ctx, onNode1, nil)
	if err != nil && !errors.Is(err, kvpool.ErrUnavailable) {
		t.Fatalf("get during the partition: %v", err)
	}
	for i, id := range onNode1 {
		if i < len(got.Status) && got.Status[i] == client.Loaded && !bytes.Equal(got.Blocks[i], itPayload(id)) {
			t.Fatalf("block %d read during the partition differs", id)
		}
	}

	if err := c.SetNodeLink(ctx, 1, netns.Link{Rate: 20e6}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-1's blocks are readable again", time.Minute, func() (bool, string) {
		got, err := cl.Get(ctx, onNode1, nil)
		if err != nil {
			return false, err.Error()
		}
		for i, id := range onNode1 {
			if got.Status[i] != client.Loaded || !bytes.Equal(got.Blocks[i], itPayload(id)) {
				return false, "block " + strconv.FormatUint(id, 10) + " missing or different"
			}
		}
		return true, ""
	})
}

// TestBadNetFlags: what only a machine that can make hosts gets past
// --netns to judge, said in the user's flags.
func TestBadNetFlags(t *testing.T) {
	netnstest.Require(t)
	for _, c := range []struct {
		cmd  string
		args []string
		flag string
	}{
		{"up", []string{"--netns", "--link-rate", "1kB/s"}, "--link-rate"},
		{"up", []string{"--netns", "--link-delay", "1h"}, "--link-delay"},
		{"up", []string{"--netns", "--masters", "3"}, "--masters"},
		{"bench", []string{"--target", "ram", "--netns"}, "--netns"},
		{"bench", []string{"--target", "cluster", "--netns", "--named"}, "--named"},
		{"bench", []string{"--target", "cluster", "--netns", "--link-rate", "1kB/s"}, "--link-rate"},
	} {
		t.Run(c.cmd+" "+strings.Join(c.args, " "), func(t *testing.T) {
			code, stderr := runCancelled(c.cmd, c.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			checkFlagMessage(t, lastLine(stderr), c.flag)
			t.Log(lastLine(stderr))
		})
	}
	if !netns.HasNetem() {
		code, stderr := runCancelled("up", "--netns", "--link-delay", "2ms")
		if code != 2 || !strings.Contains(stderr, "netem") {
			t.Errorf("up --netns --link-delay 2ms without netem: exit %d, stderr:\n%s\nwant 2 and a word about netem", code, stderr)
		}
	}
}

// TestBenchNetns: bench --target cluster --netns runs the cluster as
// processes on their own hosts, reads every remote node's blocks across
// kernel-shaped links and reports each source's goodput against the link
// rate (the rate itself is a benchmark's business, BENCHMARKS.md).
func TestBenchNetns(t *testing.T) {
	multiProcess(t)
	netnstest.Require(t)
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"bench", "--target", "cluster", "--netns", "--link-rate", "40MB/s",
		"--data", "16MiB", "--duration", "1s", "--conns", "2", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res []struct {
		Ops   int64    `json:"ops"`
		Bytes int64    `json:"bytes"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res) != 1 {
		t.Fatalf("json %v (%d results):\n%s", err, len(res), stdout.String())
	}
	notes := strings.Join(res[0].Notes, "\n")
	if res[0].Ops == 0 || res[0].Bytes == 0 {
		t.Errorf("nothing read: %+v", res[0])
	}
	for _, want := range []string{"links 40.0 MB/s each way", "from node-1 (", "from node-2 (", "of node-0's ingress link"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// TestReplayNetKernel: replay --net kernel puts each node and its worker
// on a host of their own: the global mode's remote reads cross kernel
// links, every hit is verified, and the cluster's hosts are gone after.
func TestReplayNetKernel(t *testing.T) {
	multiProcess(t)
	netnstest.Require(t)
	o := tracegen.ChatOptions()
	o.Requests, o.Rate, o.SystemPrompts, o.ThinkTime = 60, 0.8, 4, 15*time.Second
	o.Input.Mean = 3000
	reqs, err := tracegen.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gen.jsonl")
	writeTrace(t, path, reqs)
	var out, errb bytes.Buffer
	args := []string{"replay", "--local", "2", "--net", "kernel", "--trace", path, "--mode", "global", "--payload", "16KiB",
		"--speed", "25", "--ram-blocks", "4000", "--verify", "full", "--json", "--quiet"}
	if code := run(t.Context(), args, &out, &errb); code != 0 {
		t.Fatalf("kvpool replay exit %d: %s", code, errb.String())
	}
	var doc struct {
		Summary struct {
			Completed           int   `json:"completed"`
			WrongBlocks         int64 `json:"wrong_blocks"`
			VerifiedHits        int64 `json:"verified_hits"`
			LiveBytesReadRemote int64 `json:"live_bytes_read_remote"`
			FetchFailures       int64 `json:"fetch_failures"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.String())
	}
	s := doc.Summary
	if s.Completed != len(reqs) || s.WrongBlocks != 0 || s.FetchFailures != 0 {
		t.Fatalf("completed %d of %d, %d wrong blocks, %d fetch failures", s.Completed, len(reqs), s.WrongBlocks, s.FetchFailures)
	}
	if s.VerifiedHits == 0 || s.LiveBytesReadRemote == 0 {
		t.Errorf("%d verified hits, %d bytes read from other nodes: the global mode read nothing across the links", s.VerifiedHits, s.LiveBytesReadRemote)
	}
	m := regexp.MustCompile(`master 10\.213\.(\d+)\.`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("the replay's cluster is not on network hosts:\n%s", errb.String())
	}
	if left := namespacesOf("kvp" + m[1] + "-"); len(left) > 0 {
		t.Errorf("hosts left after the replay: %q", left)
	}
}

// TestNetnsSlowAndDeadLink: the client against a node whose link the
// kernel slows to a crawl, then cuts off while the master still lists it
// live: a Get bounded by its caller's (recompute) deadline returns what
// arrived verified and the rest TimedOut, never wrong bytes; a call to the
// cut-off node fails, the client marks it down and skips it (no second
// wait) until DownRetry; healed, every block loads again.
func TestNetnsSlowAndDeadLink(t *testing.T) {
	multiProcess(t)
	netnstest.Require(t)
	ctx := t.Context()
	// A node TTL far above the test's steps: the master keeps listing the
	// cut-off node live, so only the client's own marking protects it.
	c, _ := startCluster(ctx, t, cluster.Options{Nodes: 2, Netns: true, NodeTTL: time.Minute, Heartbeat: 200 * time.Millisecond})
	cl, err := client.New(ctx, client.Options{Master: c.Master.Addr, Token: c.Token, Dial: c.NodeHost(0).DialContext,
		DialTimeout: time.Second, RequestTimeout: time.Second, DownRetry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	remote := putOnNode(t, c, cl, 1, 5000, 64)

	// Slow: 64 KiB/s for 16 KiB blocks, four blocks a second; a Get
	// given 300 ms gets at most a few of them.
	if err := c.SetNodeLink(ctx, 1, netns.Link{Rate: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	got, err := cl.Get(short, remote, nil)
	cancel()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get over a slow link: %v", err)
	}
	timedOut := 0
	for i, id := range remote {
		switch got.Status[i] {
		case client.Loaded:
			if !bytes.Equal(got.Blocks[i], itPayload(id)) {
				t.Fatalf("block %d over a slow link differs", id)
			}
		case client.TimedOut:
			timedOut++
		}
	}
	if timedOut == 0 {
		t.Errorf("every one of %d blocks arrived within 300 ms over a 64 KiB/s link: the link is not slow", len(remote))
	}

	// Dead: packets dropped. The first call waits out its timeout and
	// marks the node down; the next skips it.
	if err := c.SetNodeLink(ctx, 1, netns.Link{Down: true}); err != nil {
		t.Fatal(err)
	}
	before := cl.Stats()
	got, _ = cl.Get(ctx, remote[:1], nil)
	if got.Status[0] == client.Loaded {
		t.Fatal("a block loaded from a cut-off node")
	}
	mid := cl.Stats()
	if mid.NodeFailures == before.NodeFailures {
		t.Fatalf("no node failure counted after a call to a cut-off node (stats %+v)", mid)
	}
	got, _ = cl.Get(ctx, remote[:1], nil)
	after := cl.Stats()
	if got.Status[0] == client.Loaded || after.NodeFailures != mid.NodeFailures || after.Skipped == mid.Skipped {
		t.Errorf("second get: %v, node failures %d → %d, skipped %d → %d; want the down node skipped, not called",
			got.Status[0], mid.NodeFailures, after.NodeFailures, mid.Skipped, after.Skipped)
	}

	// Healed: a new client (the old one holds node-1 down for a minute)
	// reads everything.
	if err := c.SetNodeLink(ctx, 1, netns.Link{}); err != nil {
		t.Fatal(err)
	}
	fresh, err := client.New(ctx, client.Options{Master: c.Master.Addr, Token: c.Token, Dial: c.NodeHost(0).DialContext})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	eventually(t, "node-1's blocks load after healing", time.Minute, func() (bool, string) {
		got, err := fresh.Get(ctx, remote, nil)
		if err != nil {
			return false, err.Error()
		}
		for i, id := range remote {
			if got.Status[i] != client.Loaded || !bytes.Equal(got.Blocks[i], itPayload(id)) {
				return false, "block " + strconv.FormatUint(id, 10) + ": " + got.Status[i].String()
			}
		}
		return true, ""
	})
}

// putOnNode puts blocks first … first+n−1 through cl with node i as the
// placement hint, waits until the index lists every one, and returns
// those placed on node i (failing t when none are: there would be
// nothing to test).
func putOnNode(t *testing.T, c *cluster.Cluster, cl *client.Client, i int, first uint64, n int) []uint64 {
	t.Helper()
	ctx := t.Context()
	ids := make([]uint64, n)
	payloads := make([][]byte, n)
	for k := range ids {
		ids[k] = first + uint64(k)
		payloads[k] = itPayload(ids[k])
	}
	name := c.Nodes[i].Name
	if _, err := cl.Put(ctx, ids, payloads, client.PutOptions{Hint: name}); err != nil {
		t.Fatal(err)
	}
	// The nodes' heartbeats bring the blocks into the index.
	var on []uint64
	eventually(t, "the blocks are indexed", time.Minute, func() (bool, string) {
		sets := replicaSets(ctx, t, cl, ids)
		on = on[:0]
		indexed := 0
		for _, id := range ids {
			if len(sets[id]) > 0 {
				indexed++
			}
			if slices.ContainsFunc(sets[id], func(r string) bool { return strings.HasPrefix(r, name+"/") }) {
				on = append(on, id)
			}
		}
		return indexed == n, strconv.Itoa(indexed) + " indexed"
	})
	if len(on) == 0 {
		t.Fatalf("no block placed on %s", name)
	}
	return on
}
