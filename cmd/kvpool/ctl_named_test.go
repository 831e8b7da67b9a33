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

	"github.com/kvpool/kvpool/internal/cluster"
)

// ctlRun runs `kvpool ctl --master addr --tenant t args...` in-process
// and returns its exit code, stdout and stderr.
func ctlRun(ctx context.Context, addr string, args ...string) (int, []byte, string) {
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"ctl", "--master", addr, "--tenant", "t"}, args...), &out, &errb)
	return code, out.Bytes(), errb.String()
}

// TestCtlNamed runs the ctl forms against a real two-node cluster (the
// test binary as master and nodes): put, get, query, exists and del of
// named objects beside the id forms, byte-exact gets to stdout, a
// too-large object refused in the user's terms, and stat --json with
// objects, payload and held bytes per node and tier.
func TestCtlNamed(t *testing.T) {
	multiProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const block = 64 << 10
	cl, _ := startCluster(ctx, t, cluster.Options{Nodes: 2, RAMBytes: 256 * block, BlockSize: block,
		ExtraNodeArgs: []string{"--max-object-bytes", "1MiB"}})
	if err := cl.WaitLive(ctx, 2); err != nil {
		t.Fatal(err)
	}
	addr := cl.Master.Addr
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	meta := []byte("28 bytes of chunk metadata..")
	kv := testPayload(7, 48<<10)
	metaName := "meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16meta"
	kvName := "meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16kv_bytes"

	steps := []struct {
		args []string
		file []byte // payload of put's FILE
		code int
		out  string // substring of stdout
	}{
		{args: []string{"put", "--key", metaName}, file: meta, out: "stored object"},
		{args: []string{"put", "--key", kvName}, file: kv, out: "(49152 bytes)"},
		{args: []string{"put", "42"}, file: []byte("chain block 42"), out: "stored block 42"},
		{args: []string{"exists", "--key", metaName, "--key", "never stored", "--key", kvName}, out: "\"never stored\": absent"},
		{args: []string{"exists", "42", "43"}, out: "block 43: absent"},
		{args: []string{"query", "--key", kvName}, out: "CHECKSUM"},
		{args: []string{"query", "--key", "never stored"}, out: "not cached"},
	}
	for _, s := range steps {
		args := s.args
		if s.file != nil {
			args = append(args, write("payload", s.file))
		}
		code, out, errs := ctlRun(ctx, addr, args...)
		if code != s.code || !strings.Contains(string(out), s.out) {
			t.Fatalf("ctl %q: exit %d, stdout %q, stderr %q; want exit %d and %q", s.args, code, out, errs, s.code, s.out)
		}
	}
	for _, g := range []struct {
		args []string
		want []byte
	}{
		{[]string{"get", "--key", metaName}, meta},
		{[]string{"get", "--key", kvName}, kv},
		{[]string{"get", "42"}, []byte("chain block 42")},
	} {
		code, out, errs := ctlRun(ctx, addr, g.args...)
		if code != 0 || !bytes.Equal(out, g.want) {
			t.Fatalf("ctl %q: exit %d, %d bytes (want %d), stderr %q", g.args, code, len(out), len(g.want), errs)
		}
	}
	if code, _, errs := ctlRun(ctx, addr, "get", "--key", "never stored"); code != 1 || !strings.Contains(errs, "missing") {
		t.Errorf("get of an absent name: exit %d, stderr %q", code, errs)
	}

	// An object over the nodes' limit (--max-object-bytes 1MiB here) is
	// refused with its size, the limit and the node setting that raises
	// it.
	big := write("big", make([]byte, 1<<20+1))
	code, _, errs := ctlRun(ctx, addr, "put", "--key", "too big", big)
	if code != 1 || !strings.Contains(errs, "1048577 bytes") || !strings.Contains(errs, "1048576 bytes") || !strings.Contains(errs, "--max-object-bytes") {
		t.Errorf("put of a too-large object: exit %d, stderr %q", code, errs)
	}

	// stat --json: per node and tier, objects, payload and held bytes.
	st, out := statOf(ctx, t, addr)
	t.Logf("stat --json:\n%s", out)
	objects, payload := 0, int64(0)
	for _, n := range st.Nodes {
		for _, tr := range n.Tiers {
			objects += tr.Objects
			payload += tr.PayloadBytes
			if tr.HeldBytes != 0 && tr.HeldBytes < tr.PayloadBytes {
				t.Errorf("node %s %s: held %d bytes < payload %d", n.Node, tr.Tier, tr.HeldBytes, tr.PayloadBytes)
			}
		}
	}
	if len(st.Nodes) != 2 || objects != 3 || payload != int64(len(meta)+len(kv)+len("chain block 42")) {
		t.Errorf("stat --json: %d nodes, %d objects, %d payload bytes; want 2, 3, %d\n%s", len(st.Nodes), objects, payload, len(meta)+len(kv)+len("chain block 42"), out)
	}

	// del of names and ids; a second del says the object is not stored.
	if code, out, errs := ctlRun(ctx, addr, "del", "--key", metaName, "--key", kvName); code != 0 || strings.Count(string(out), "deleted") != 2 {
		t.Fatalf("del --key: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := ctlRun(ctx, addr, "del", "42"); code != 0 || !strings.Contains(string(out), "deleted block 42") {
		t.Fatalf("del 42: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := ctlRun(ctx, addr, "get", "--key", metaName); code != 1 {
		t.Errorf("get after del: exit %d, stderr %q", code, errs)
	}
	eventually(t, "the deletes reach the master's index", 10*time.Second, func() (bool, string) {
		_, out, _ := ctlRun(ctx, addr, "exists", "--key", metaName, "--key", kvName)
		return strings.Count(string(out), "absent") == 2, string(out)
	})
	if code, _, errs := ctlRun(ctx, addr, "del", "--key", metaName); code != 1 || !strings.Contains(errs, "not stored") {
		t.Errorf("second del: exit %d, stderr %q", code, errs)
	}
}

// statJSON is what `ctl stat --json` reports that the tests check.
type statJSON struct {
	Nodes []struct {
		Node  string
		Tiers []struct {
			Tier         string
			Objects      int
			PayloadBytes int64 `json:"payload_bytes"`
			HeldBytes    int64 `json:"held_bytes"`
		}
	}
}

// statOf runs `ctl stat --json` against master and parses it.
func statOf(ctx context.Context, t *testing.T, master string) (statJSON, []byte) {
	t.Helper()
	code, out, errs := ctlRun(ctx, master, "stat", "--json")
	if code != 0 {
		t.Fatalf("stat --json: exit %d, %s", code, errs)
	}
	var st statJSON
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("stat --json: %v\n%s", err, out)
	}
	return st, out
}
