package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/netns/netnstest"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// asKvpoolEnv makes the test binary act as the kvpool binary, so the
// multi-process test runs the code under test without a separate build:
// the binary is built once, by `go test`, and each cluster process is a
// re-execution of it.
const asKvpoolEnv = "KVPOOL_TEST_AS_BINARY"

func TestMain(m *testing.M) {
	if os.Getenv(asKvpoolEnv) == "1" {
		h, err := testHooks(os.Getenv(faultFSEnv), powerLoss)
		if err == nil {
			h.nodeBackend, err = corruptServed(os.Getenv(corruptServedEnv))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "kvpool (test binary): %v\n", err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := runWith(ctx, os.Args[1:], os.Stdout, os.Stderr, h)
		stop()
		os.Exit(code)
	}
	os.Exit(netnstest.Main(m))
}

// Integration parameters: a short heartbeat and TTL so the failure cases
// resolve in seconds.
const (
	itHeartbeat = 200 * time.Millisecond
	itTTL       = time.Second
	itBlock     = 16 << 10 // 16 KiB payloads
	itBlocks    = 1000
	itSolo      = 20 // blocks stored only on the node that is killed
)

// itPayload is block id's payload in the integration tests.
func itPayload(id uint64) []byte { return testPayload(id, itBlock) }

// replicaSets returns, for each id, its replicas as a sorted "node/tier"
// list, as the master's lookup (without lease) shows them.
func replicaSets(ctx context.Context, t *testing.T, c *client.Client, ids []uint64) map[uint64][]string {
	t.Helper()
	out := make(map[uint64][]string, len(ids))
	for _, id := range ids {
		pre, err := c.Lookup(ctx, []uint64{id})
		if err != nil {
			t.Fatalf("lookup %d: %v", id, err)
		}
		var set []string
		if pre.Len == 1 {
			for _, l := range pre.Replicas[0] {
				set = append(set, l.Node+"/"+l.Tier.String())
			}
		}
		slices.Sort(set)
		out[id] = set
	}
	return out
}

// settleBound bounds the wait for the index to agree with the nodes
// after a change: 100 heartbeats (20 s), for a demotion the master orders
// on one heartbeat and learns done on the next, on a machine that may run
// each step late.
const settleBound = 100 * itHeartbeat

// tierCounts counts the copies in sets per "node/tier".
func tierCounts(sets map[uint64][]string) map[string]int {
	n := map[string]int{}
	for _, set := range sets {
		for _, r := range set {
			n[r]++
		}
	}
	return n
}

// indexAgrees reads the index's replica sets of ids (every block the test
// stored) between two reads of the nodes' per-tier counters, and reports
// whether each read lists, per live node and tier, as many blocks as the
// index does (so that a demotion on either side of the index read shows as
// a disagreement); if not, it says where they differ.
func indexAgrees(ctx context.Context, t *testing.T, c *client.Client, ids []uint64) (map[uint64][]string, bool, string) {
	t.Helper()
	before := nodeTierCounts(ctx, t, c)
	sets := replicaSets(ctx, t, c, ids)
	after := nodeTierCounts(ctx, t, c)
	want := tierCounts(sets)
	for _, held := range []map[string]int{before, after} {
		if fmt.Sprint(held) != fmt.Sprint(want) {
			return sets, false, fmt.Sprintf("nodes hold %v, the index lists %v", held, want)
		}
	}
	return sets, true, ""
}

// nodeTierCounts asks every live node for its per-tier block counts, keyed
// "node/tier" (tiers holding nothing left out, as tierCounts does).
func nodeTierCounts(ctx context.Context, t *testing.T, c *client.Client) map[string]int {
	t.Helper()
	stats, err := c.NodeStats(ctx)
	if err != nil {
		t.Fatalf("node stats: %v", err)
	}
	n := map[string]int{}
	for _, ns := range stats {
		if !ns.Node.Live {
			continue
		}
		if ns.Err != nil {
			t.Fatalf("stats of node %s: %v", ns.Node.ID, ns.Err)
		}
		for _, ts := range ns.Tiers {
			if ts.Blocks > 0 {
				n[ns.Node.ID+"/"+ts.Name] = ts.Blocks
			}
		}
	}
	return n
}

// itNodeTimeout bounds one request to one node for the client that reads
// a killed node's blocks: it must give up on the dead node within it.
const itNodeTimeout = time.Second

// nodesOnly maps replica sets of "node/tier" entries to sorted node sets.
func nodesOnly(sets map[uint64][]string) map[uint64][]string {
	out := make(map[uint64][]string, len(sets))
	for id, set := range sets {
		nodes := make([]string, 0, len(set))
		for _, r := range set {
			node, _, _ := strings.Cut(r, "/")
			nodes = append(nodes, node)
		}
		slices.Sort(nodes)
		out[id] = nodes
	}
	return out
}

// eventually polls cond every 50 ms until it holds or timeout passes, and
// returns how long it took.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v: %s", what, timeout, why)
		}
	}
}

func TestClusterMultiProcess(t *testing.T) {
	multiProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, _ := startCluster(ctx, t, cluster.Options{
		Nodes: 3, SSD: true,
		RAMBytes: 64 * itBlock, SSDBytes: 64 << 20, BlockSize: itBlock,
		Heartbeat: itHeartbeat, NodeTTL: itTTL,
	})

	// Writers and readers get a generous request timeout: a PUT that demotes
	// to SSD waits for a group fsync, slow on a loaded CI machine. The client
	// that reads a killed node's blocks uses a short one (itNodeTimeout).
	newClientTimeout := func(local string, timeout time.Duration) *client.Client {
		c, err := client.New(ctx, client.Options{Master: cl.Master.Addr, LocalNode: local, Replicas: 2,
			RequestTimeout: timeout, DialTimeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	newClient := func(local string) *client.Client { return newClientTimeout(local, 15*time.Second) }
	writer := newClient("node-0")

	// 1. Put 1,000 blocks with two replicas, and 20 only on node-1.
	// The 20 go first: local-first placement honours the hint only while
	// node-1's RAM is under the master's high watermark, which the 1,000
	// replicated blocks push every node past.
	solo := make([]uint64, itSolo)
	for i := range solo {
		solo[i] = uint64(2_000_000 + i)
		errs, err := writer.Put(ctx, solo[i:i+1], [][]byte{itPayload(solo[i])}, client.PutOptions{Replicas: 1, Hint: "node-1"})
		if err != nil || errs[0] != nil {
			t.Fatalf("put solo block %d: %v %v", solo[i], err, errs)
		}
	}
	ids := make([]uint64, itBlocks)
	payloads := make([][]byte, itBlocks)
	for i := range ids {
		ids[i] = uint64(1_000_000 + i)
		payloads[i] = itPayload(ids[i])
	}
	for at := 0; at < len(ids); at += 100 {
		errs, err := writer.Put(ctx, ids[at:at+100], payloads[at:at+100], client.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("put blocks %d..: %v", at, err)
		}
	}
	all := append(slices.Clone(ids), solo...)
	eventually(t, "every block indexed with its replicas", 20*time.Second, func() (bool, string) {
		sets := replicaSets(ctx, t, writer, all)
		for _, id := range ids {
			if len(sets[id]) < 2 {
				return false, fmt.Sprintf("block %d has replicas %v", id, sets[id])
			}
		}
		for _, id := range solo {
			if len(sets[id]) != 1 || !strings.HasPrefix(sets[id][0], "node-1/") {
				return false, fmt.Sprintf("solo block %d has replicas %v, want one on node-1", id, sets[id])
			}
		}
		return true, ""
	})

	// 2. Read every block back byte-identical from every replica, directly
	// from each node holding it, and through a reader on another node.
	pre, err := writer.Lookup(ctx, ids)
	if err != nil || pre.Len != len(ids) {
		t.Fatalf("lookup of all blocks: prefix %d, %v", pre.Len, err)
	}
	perNode := map[string][]uint64{}
	addrOf := map[string]string{}
	for _, e := range cl.Nodes {
		addrOf[e.Name] = e.Addr
	}
	for i, locs := range pre.Replicas {
		for _, l := range locs {
			perNode[l.Node] = append(perNode[l.Node], ids[i])
		}
	}
	for node, nids := range perNode {
		conn, err := nodeclient.Dial(ctx, addrOf[node], nodeclient.DialOptions{})
		if err != nil {
			t.Fatalf("dial %s: %v", node, err)
		}
		res, err := conn.MGet(ctx, nids, nil)
		conn.Close()
		if err != nil {
			t.Fatalf("mget %d blocks from %s: %v", len(nids), node, err)
		}
		for k, r := range res {
			if r.Err != nil || !bytes.Equal(r.Payload, itPayload(nids[k])) {
				t.Fatalf("block %d on %s: %v (%d bytes)", nids[k], node, r.Err, len(r.Payload))
			}
		}
	}
	reader := newClient("node-2")
	got, err := reader.Get(ctx, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix() != len(ids) {
		t.Fatalf("reader on node-2 loaded %d of %d blocks (%d missing, %d corrupt, %d timed out)", got.Prefix(), len(ids),
			got.Count(client.Missing), got.Count(client.Corrupt), got.Count(client.TimedOut))
	}
	for i := range ids {
		if !bytes.Equal(got.Blocks[i], payloads[i]) {
			t.Fatalf("block %d read from %s differs", ids[i], got.From[i].Node)
		}
	}

	// Settle: wait until the index agrees with what the nodes hold, so
	// demotions triggered by the puts have reached the index.
	settled := func() map[uint64][]string {
		var sets map[uint64][]string
		eventually(t, "index settles", settleBound, func() (bool, string) {
			var ok bool
			var why string
			sets, ok, why = indexAgrees(ctx, t, writer, all)
			return ok, why
		})
		return sets
	}
	before := settled()
	var ssdOnNode1 []uint64
	for id, set := range before {
		if slices.Contains(set, "node-1/ssd") {
			ssdOnNode1 = append(ssdOnNode1, id)
		}
	}
	t.Logf("%d blocks have an SSD replica on node-1 before it is killed", len(ssdOnNode1))

	// 3. kill -9 node-1: gets of its only-copy blocks miss within one
	// timeout, and within the TTL the index stops returning its replicas.
	lag := probeLag(ctx, t, cl)
	if err := cl.KillNode(1); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	res, err := newClientTimeout("node-0", itNodeTimeout).Get(gctx, solo, nil)
	gerr := gctx.Err()
	gcancel()
	if err != nil {
		t.Fatalf("get of node-1's blocks after kill -9: %v", err)
	}
	if gerr != nil || res.Count(client.Loaded) != 0 || res.Count(client.TimedOut) != 0 {
		t.Fatalf("get of node-1's blocks after kill -9: %d loaded, %d timed out, ctx %v; want all missing without hanging",
			res.Count(client.Loaded), res.Count(client.TimedOut), gerr)
	}
	eventually(t, "node-1's replicas leave the index", max(ttlBound(lag)-time.Since(killed), itTTL), func() (bool, string) {
		for id, set := range replicaSets(ctx, t, writer, all) {
			for _, r := range set {
				if len(r) > 7 && r[:7] == "node-1/" {
					return false, fmt.Sprintf("block %d still has %v", id, set)
				}
			}
		}
		return true, ""
	})
	t.Logf("node-1's replicas left the index %v after kill -9 (TTL %v)", time.Since(killed).Round(time.Millisecond), itTTL)

	// 4. Restart node-1 on its data directory: its SSD blocks come back.
	if err := cl.RestartNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	back := eventually(t, "node-1's SSD blocks back in the index", 10*time.Second, func() (bool, string) {
		sets := replicaSets(ctx, t, writer, ssdOnNode1)
		for _, id := range ssdOnNode1 {
			if !slices.ContainsFunc(sets[id], func(r string) bool { return len(r) > 7 && r[:7] == "node-1/" }) {
				return false, fmt.Sprintf("block %d: %v", id, sets[id])
			}
		}
		return true, ""
	})
	t.Logf("node-1's %d SSD blocks back in the index %v after its restart was seen live", len(ssdOnNode1), back.Round(time.Millisecond))

	// 5. Kill and restart the master: the index is rebuilt from the nodes'
	// registrations, no replica lost or invented.
	before = settled()
	if err := cl.KillMaster(); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	if err := cl.RestartMaster(ctx); err != nil {
		t.Fatal(err)
	}
	// Replicas are compared by node: the new master may legitimately order
	// a demotion (RAM→SSD) as soon as it sees the pool over its watermark,
	// which moves a replica between tiers without losing or inventing one.
	before = nodesOnly(before)
	var last map[uint64][]string
	rebuilt := eventually(t, "index rebuilt after master restart", 10*time.Second, func() (bool, string) {
		last = nodesOnly(replicaSets(ctx, t, writer, all))
		if fmt.Sprint(last) == fmt.Sprint(before) {
			return true, ""
		}
		for _, id := range all {
			if fmt.Sprint(last[id]) != fmt.Sprint(before[id]) {
				return false, fmt.Sprintf("block %d: %v before, %v now", id, before[id], last[id])
			}
		}
		return false, "differs"
	})
	t.Logf("index rebuilt %v after the master restarted (%v after it was started; heartbeat %v)",
		time.Since(restart).Round(time.Millisecond), rebuilt.Round(time.Millisecond), itHeartbeat)
}
