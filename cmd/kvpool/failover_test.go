package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/trace"
)

// The failover scenarios run three masters electing their leader on a
// real etcd (the etcd binary on PATH), a live replay through the public
// client, and kill or freeze masters and etcd under it.

// needEtcd skips t without the etcd binary, except under CI, which
// installs it (.ci/run) and so fails instead.
func needEtcd(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("etcd is not on PATH (.ci/run installs Debian's etcd-server): %v", err)
		}
		t.Skipf("etcd is not on PATH (install Debian's etcd-server as root to run this test): %v", err)
	}
}

// failover is what a fault measured about the change of leader.
type failover struct {
	from, to         int
	newLeader, index time.Duration // from the fault to a new leader, to its index complete
	epochs           [2]uint64
}

// awaitFailover waits until a master other than old leads with its index
// complete, and times the two steps from start.
func awaitFailover(ctx context.Context, t *testing.T, cl *cluster.Cluster, old int, oldEpoch uint64, start time.Time) failover {
	t.Helper()
	f := failover{from: old, to: -1, epochs: [2]uint64{oldEpoch}}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		j, h, err := cl.LeaderIndex(ctx)
		if err == nil && j != old && h.Epoch > oldEpoch {
			if f.to < 0 {
				f.to, f.newLeader, f.epochs[1] = j, time.Since(start), h.Epoch
			}
			if h.IndexComplete {
				f.index = time.Since(start)
				return f
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the masters' /health, bounded by the deadline
	}
	t.Fatalf("no other master led with its index complete within a minute of the fault (leader was master-%d, epoch %d)", old, oldEpoch)
	return f
}

// checkIndexMatchesNodes compares the leader's index with what the nodes
// hold, for every distinct block of reqs: each copy a node holds is
// indexed (nothing lost) and each indexed copy is on its node (nothing
// invented). A node reports its last changes with its next heartbeat, so
// the two may differ for a few heartbeats after the replay's last
// request; the comparison is repeated until they agree, within
// settleBound.
func checkIndexMatchesNodes(t *testing.T, cl *cluster.Cluster, reqs []trace.Request) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleBound)
	defer cancel()
	c := faultClient(ctx, t, cl, client.Options{Tenant: replay.DefaultTenant})
	var ids []uint64
	seen := map[uint64]bool{}
	for _, r := range reqs {
		for _, id := range r.HashIDs {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	deadline := time.Now().Add(settleBound)
	for {
		diffs, copies := indexAgainstNodes(ctx, t, c, cl, ids)
		if len(diffs) == 0 {
			t.Logf("index against the nodes: %d distinct blocks, %d copies held, all indexed, none indexed but not held", len(ids), copies)
			return
		}
		if time.Now().After(deadline) {
			for i, d := range diffs {
				if i == 10 {
					t.Errorf("… and %d more differences", len(diffs)-10)
					break
				}
				t.Error(d)
			}
			return
		}
		time.Sleep(5 * itHeartbeat) // the nodes' next reports, then compare again (bounded by the deadline)
	}
}

// indexAgainstNodes returns the differences between the index and the
// nodes' contents for ids, and the number of copies the nodes hold.
func indexAgainstNodes(ctx context.Context, t *testing.T, c *client.Client, cl *cluster.Cluster, ids []uint64) (diffs []string, copies int) {
	t.Helper()
	indexed := map[uint64][]string{}
	for _, id := range ids {
		locs, err := c.Locate(ctx, id)
		if err != nil {
			t.Fatalf("locate %d: %v", id, err)
		}
		for _, l := range locs {
			indexed[id] = append(indexed[id], l.Node)
		}
	}
	held := map[uint64][]string{}
	for _, e := range cl.Nodes {
		const batch = 64
		for i := 0; i < len(ids); i += batch {
			part := ids[i:min(i+batch, len(ids))]
			res, err := c.Fetch(ctx, client.Location{Node: e.Name, Addr: e.Addr}, part, client.FetchOptions{})
			if err != nil {
				t.Fatalf("fetch from %s: %v", e.Name, err)
			}
			for k, id := range part {
				switch res.Status[k] {
				case client.Loaded:
					held[id] = append(held[id], e.Name)
				case client.Missing:
				default:
					t.Fatalf("block %d from %s: %v", id, e.Name, res.Status[k])
				}
			}
		}
	}
	for _, id := range ids {
		copies += len(held[id])
		for _, n := range held[id] {
			if !slices.Contains(indexed[id], n) {
				diffs = append(diffs, fmt.Sprintf("block %d is on %s but the index does not list it there (index: %v)", id, n, indexed[id]))
			}
		}
		for _, n := range indexed[id] {
			if !slices.Contains(held[id], n) {
				diffs = append(diffs, fmt.Sprintf("the index lists block %d on %s, which does not hold it (held on %v)", id, n, held[id]))
			}
		}
	}
	return diffs, copies
}

// hitRatio returns the token hit ratio of the records arriving in
// [from, to) model seconds, and how many there were.
func hitRatio(recs []sim.Record, from, to float64) (float64, int) {
	hit, all, n := 0, 0, 0
	for _, r := range recs {
		if r.Arrival < from || r.Arrival >= to {
			continue
		}
		n++
		all += r.InputTokens
		for _, h := range r.HitTokens {
			hit += h
		}
	}
	if all == 0 {
		return 0, n
	}
	return float64(hit) / float64(all), n
}

// checkAfterFailover checks the cluster once a failover to epoch is over:
// every node live and following that epoch, and the index listing
// exactly what the nodes hold of reqs' blocks.
func checkAfterFailover(ctx context.Context, t *testing.T, cl *cluster.Cluster, reqs []trace.Request, epoch uint64) {
	t.Helper()
	if err := cl.WaitLive(ctx, len(cl.Nodes)); err != nil {
		t.Fatal(err)
	}
	nodesFollow(ctx, t, cl, epoch)
	checkIndexMatchesNodes(t, cl, reqs)
}

// nodesFollow checks that every node has followed the leader to epoch.
func nodesFollow(ctx context.Context, t *testing.T, cl *cluster.Cluster, epoch uint64) {
	t.Helper()
	for _, e := range cl.Nodes {
		waitForT(t, fmt.Sprintf("%s to follow epoch %d", e.Name, epoch), settleBound, func() bool {
			return nodeMetric(ctx, t, e.AdminAddr, "kvpool_node_master_epoch", "") == float64(epoch) &&
				nodeMetric(ctx, t, e.AdminAddr, "kvpool_node_master_registered", "") == 1
		})
	}
}

// waitForT polls cond every 20 ms until it holds, failing t after
// timeout.
func waitForT(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by the deadline
	}
}

// TestFailoverKillLeaderDuringReplay: kill -9 of the leading master in the
// middle of a live replay. A standby leads within two election TTLs, the
// nodes re-register with it, the replay completes with no wrong block,
// and afterwards the new leader's index lists exactly what the nodes
// hold.
func TestFailoverKillLeaderDuringReplay(t *testing.T) {
	faultScenario(t)
	needEtcd(t)
	reqs := smallTrace(t, 100)
	var (
		f        failover
		recs     []sim.Record
		injected time.Duration
	)
	fr := faultReplay{masters: 3, records: &recs, injected: &injected}
	cl, _, s := replayUnderFaultWith(t, reqs, fr, func(ctx context.Context, cl *cluster.Cluster) {
		j, h, err := cl.WaitLeader(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		start := time.Now()
		if err := cl.KillMasterAt(j); err != nil {
			t.Error(err)
			return
		}
		f = awaitFailover(ctx, t, cl, j, h.Epoch, start)
	})
	// The replay runs at Speed 25: model seconds = live seconds × 25.
	const speed = 25
	at := injected.Seconds() * speed
	before, nb := hitRatio(recs, 0, at)
	during, nd := hitRatio(recs, at, at+f.index.Seconds()*speed)
	after, na := hitRatio(recs, at+f.index.Seconds()*speed, 1e18)
	t.Logf("kill -9 of master-%d (epoch %d): master-%d led epoch %d after %v, index complete after %v; token hit ratio %.3f before (%d requests), %.3f during the failover (%d), %.3f after (%d); %d fetch failures, %d put failures",
		f.from, f.epochs[0], f.to, f.epochs[1], f.newLeader.Round(time.Millisecond), f.index.Round(time.Millisecond),
		before, nb, during, nd, after, na, s.FetchFailures, s.PutFailures)
	if bound := 2 * 2 * time.Second; f.newLeader > bound {
		t.Errorf("a new leader took %v after the kill; want at most two election TTLs (%v)", f.newLeader, bound)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleBound)
	defer cancel()
	checkAfterFailover(ctx, t, cl, reqs, f.epochs[1])
}

// TestFailoverPausedLeader: the leader is frozen (SIGSTOP) under a live
// replay until a standby has replaced it, then thawed. It finds its term
// over and stands by: it refuses a client that does not follow leaders,
// naming the new leader, and every node stays with the new epoch (a node
// never goes back to an older one, so it takes no order from the thawed
// master).
func TestFailoverPausedLeader(t *testing.T) {
	faultScenario(t)
	needEtcd(t)
	reqs := smallTrace(t, 100)
	var f failover
	old := -1
	cl, _, _ := replayUnderFaultWith(t, reqs, faultReplay{masters: 3}, func(ctx context.Context, cl *cluster.Cluster) {
		j, h, err := cl.WaitLeader(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		old = j
		start := time.Now()
		if err := cl.PauseMasterAt(j); err != nil {
			t.Error(err)
			return
		}
		f = awaitFailover(ctx, t, cl, j, h.Epoch, start)
		if err := cl.ResumeMasterAt(j); err != nil {
			t.Error(err)
		}
	})
	if old < 0 {
		return
	}
	t.Logf("SIGSTOP of master-%d (epoch %d): master-%d led epoch %d after %v, index complete after %v",
		f.from, f.epochs[0], f.to, f.epochs[1], f.newLeader.Round(time.Millisecond), f.index.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleBound)
	defer cancel()
	waitForT(t, "the thawed master to stand by", settleBound, func() bool {
		h, err := cl.MasterHealthAt(ctx, old)
		return err == nil && h.Role == "standby" && h.Leader == cl.Masters[f.to].Addr
	})
	_, err := masterclient.Dial(ctx, cl.Masters[old].Addr, masterclient.Options{ClusterID: cl.ID})
	if !errors.Is(err, meta.ErrNotLeader) || !strings.Contains(err.Error(), cl.Masters[f.to].Addr) {
		t.Errorf("dial the thawed master: %v; want not leader, naming %s", err, cl.Masters[f.to].Addr)
	}
	checkAfterFailover(ctx, t, cl, reqs, f.epochs[1])
}

// TestFailoverPausedEtcd (Mooncake #2253): etcd is frozen under a live
// replay. The leader steps down once it can no longer renew its lease,
// before etcd could expire it; no master leads while etcd stays frozen;
// once etcd is thawed a leader is elected again, every node registers
// with it (none was dropped for good), and the index matches the nodes.
func TestFailoverPausedEtcd(t *testing.T) {
	faultScenario(t)
	needEtcd(t)
	reqs := smallTrace(t, 100)
	const ttl = 2 * time.Second
	var stepDown, relead time.Duration
	var epoch uint64
	cl, _, _ := replayUnderFaultWith(t, reqs, faultReplay{masters: 3}, func(ctx context.Context, cl *cluster.Cluster) {
		if _, _, err := cl.WaitLeader(ctx); err != nil {
			t.Error(err)
			return
		}
		start := time.Now()
		if err := cl.PauseEtcd(); err != nil {
			t.Error(err)
			return
		}
		for {
			if _, _, err := cl.LeaderIndex(ctx); err != nil {
				stepDown = time.Since(start)
				break
			}
			if time.Since(start) > time.Minute {
				t.Error("a master still leads a minute after etcd froze")
				break
			}
			time.Sleep(20 * time.Millisecond) // polling /health, bounded above
		}
		// Frozen for longer than a lease, so that etcd, thawed, may
		// expire the leases.
		time.Sleep(ttl) // the fault's duration, not a wait for a condition
		if _, _, err := cl.LeaderIndex(ctx); err == nil {
			t.Error("a master leads while etcd is frozen")
		}
		thawed := time.Now()
		if err := cl.ResumeEtcd(); err != nil {
			t.Error(err)
			return
		}
		_, h, err := cl.WaitLeader(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		relead, epoch = time.Since(thawed), h.Epoch
	})
	t.Logf("SIGSTOP of etcd: the leader stood down after %v (lease %v); after SIGCONT a master led epoch %d with its index complete in %v", stepDown.Round(time.Millisecond), ttl, epoch, relead.Round(time.Millisecond))
	if stepDown > ttl {
		t.Errorf("the leader stood down %v after etcd froze; want within the lease (%v)", stepDown, ttl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleBound)
	defer cancel()
	checkAfterFailover(ctx, t, cl, reqs, epoch)
}

// TestFailoverEtcdRestart: etcd is stopped and started again on its data;
// the masters converge on one leader and every node follows it.
func TestFailoverEtcdRestart(t *testing.T) {
	faultScenario(t)
	needEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, _ := startCluster(ctx, t, cluster.Options{Nodes: 2, Masters: 3, ElectionTTL: 2 * time.Second, RAMBytes: 8 << 20, BlockSize: itBlock})
	if _, _, err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.RestartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	// The leader may have stood down while etcd was away (a new term
	// follows) or kept its term: either way the masters must settle on
	// one leader, whose epoch then holds over ten samples a heartbeat
	// apart (LeaderIndex fails if two masters lead one epoch).
	var h cluster.MasterHealth
	stable, deadline := 0, time.Now().Add(settleBound)
	for stable < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("the masters did not settle on one leader within %v of the etcd restart", settleBound)
		}
		_, h2, err := cl.LeaderIndex(ctx)
		switch {
		case err != nil && strings.Contains(err.Error(), "both lead"):
			t.Fatal(err)
		case err != nil || !h2.IndexComplete:
			stable = 0
		case h2.Epoch != h.Epoch:
			h, stable = h2, 1
		default:
			stable++
		}
		time.Sleep(itHeartbeat) // sampling over heartbeats, bounded by the deadline
	}
	t.Logf("after the etcd restart the masters settled on epoch %d", h.Epoch)
	if err := cl.WaitLive(ctx, len(cl.Nodes)); err != nil {
		t.Fatal(err)
	}
	nodesFollow(ctx, t, cl, h.Epoch)
}

// TestFailoverRollingRestart: every master is restarted in turn (SIGTERM:
// a leader resigns) under a live replay, waiting for a leader with a
// complete index after each; the replay completes with no wrong block and
// the index matches the nodes.
func TestFailoverRollingRestart(t *testing.T) {
	faultScenario(t)
	needEtcd(t)
	reqs := smallTrace(t, 150)
	var epochs []uint64
	cl, _, s := replayUnderFaultWith(t, reqs, faultReplay{masters: 3}, func(ctx context.Context, cl *cluster.Cluster) {
		for j := range cl.Masters {
			if err := cl.RestartMasterAt(j); err != nil {
				t.Error(err)
				return
			}
			_, h, err := cl.WaitLeader(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			epochs = append(epochs, h.Epoch)
		}
	})
	t.Logf("rolling restart of 3 masters: leader epochs %v; %d fetch failures, %d put failures", epochs, s.FetchFailures, s.PutFailures)
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleBound)
	defer cancel()
	j, h, err := cl.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("master-%d leads epoch %d", j, h.Epoch)
	checkAfterFailover(ctx, t, cl, reqs, h.Epoch)
}

// linInput and linOutput are one operation of the linearizability
// history: a put of a block (acknowledged once stored and indexed), or a
// lookup of whether it exists.
type linInput struct {
	put bool
	id  uint64
}

type linOutput struct {
	present bool // a lookup's answer
	unknown bool // a put that failed: it may or may not take effect
}

// presenceModel is a set of blocks, one partition per block: a put makes
// its block present (an unacknowledged one at any time from its call on,
// its return being at infinity), a lookup must see the block's state. The
// cluster evicts nothing in this test (its RAM holds every block), so a
// block once present stays present.
var presenceModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[uint64][]porcupine.Operation{}
		var order []uint64
		for _, op := range h {
			id := op.Input.(linInput).id
			if _, ok := by[id]; !ok {
				order = append(order, id)
			}
			by[id] = append(by[id], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, id := range order {
			out = append(out, by[id])
		}
		return out
	},
	Init: func() any { return false },
	Step: func(state, input, output any) (bool, any) {
		in, out := input.(linInput), output.(linOutput)
		if in.put {
			return true, true
		}
		return out.present == state.(bool), state
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch {
		case in.put && out.unknown:
			return fmt.Sprintf("put(%d) failed", in.id)
		case in.put:
			return fmt.Sprintf("put(%d)", in.id)
		}
		return fmt.Sprintf("exists(%d) -> %v", in.id, out.present)
	},
}

// reducePresenceHistory drops the puts that change nothing a linearization
// under presenceModel must explain, so the check stays small however many
// puts fail while there is no leader (each one fails fast and returns at
// infinity, and a block's failed puts overlap one another, which porcupine
// explores subset by subset). Per block, let first be the earliest return
// of an acknowledged put: the block is present from first on in every
// linearization, so a put called at or after it is a no-op wherever it
// goes. Of the failed puts called before first, the earliest stands in for
// all: each may take effect at any time from its call on, and the others
// can go last. The reduced history is linearizable exactly when the whole
// one is (TestReducePresenceHistory checks this against porcupine).
func reducePresenceHistory(h []porcupine.Operation) []porcupine.Operation {
	first := map[uint64]int64{}
	for _, op := range h {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if !in.put || out.unknown {
			continue
		}
		if r, ok := first[in.id]; !ok || op.Return < r {
			first[in.id] = op.Return
		}
	}
	failed := map[uint64]int{} // block -> index in h of its earliest failed put
	for i, op := range h {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if !in.put || !out.unknown {
			continue
		}
		if r, ok := first[in.id]; ok && op.Call >= r {
			continue
		}
		if j, ok := failed[in.id]; !ok || op.Call < h[j].Call {
			failed[in.id] = i
		}
	}
	out := make([]porcupine.Operation, 0, len(h))
	for i, op := range h {
		in, o := op.Input.(linInput), op.Output.(linOutput)
		if in.put {
			if r, ok := first[in.id]; ok && op.Call >= r {
				continue
			}
			if o.unknown && failed[in.id] != i {
				continue
			}
		}
		out = append(out, op)
	}
	return out
}

// TestReducePresenceHistory checks on random small histories of one block
// that reducePresenceHistory keeps porcupine's verdict, and that it drops
// something where there is something to drop.
func TestReducePresenceHistory(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	dropped, bad := 0, 0
	for range 3000 {
		var h []porcupine.Operation
		for ci := range 1 + rng.IntN(4) {
			at := int64(rng.IntN(5))
			for range rng.IntN(4) {
				call := at + int64(rng.IntN(3))
				ret := call + 1 + int64(rng.IntN(6))
				at = ret + 1
				in := linInput{put: rng.IntN(2) == 0, id: 1}
				var out linOutput
				if in.put {
					out.unknown = rng.IntN(2) == 0
					if out.unknown {
						ret = math.MaxInt64 / 2
						at = math.MaxInt64 / 2
					}
				} else {
					out.present = rng.IntN(2) == 0
				}
				h = append(h, porcupine.Operation{ClientId: ci, Input: in, Call: call, Output: out, Return: ret})
				if at == math.MaxInt64/2 {
					break // a failed put is its client's last operation
				}
			}
		}
		r := reducePresenceHistory(h)
		want := porcupine.CheckOperations(presenceModel, h)
		if got := porcupine.CheckOperations(presenceModel, r); got != want {
			t.Fatalf("linearizable: %v for the history, %v once reduced\nhistory: %+v\nreduced: %+v", want, got, h, r)
		}
		if len(r) < len(h) {
			dropped++
		}
		if !want {
			bad++
		}
	}
	if dropped == 0 || bad == 0 {
		t.Fatalf("of 3000 random histories, %d were reduced and %d were not linearizable: the generator does not cover both", dropped, bad)
	}
}

// TestFailoverLinearizable records what clients see of the master (puts
// acknowledged once indexed, lookups answered) across two failovers, kill
// -9 of the leader each time, and checks the history is linearizable
// with porcupine: no acknowledged block is ever reported absent, none is
// reported present before its put began. Lookups that fail (no leader,
// the index being rebuilt) observe nothing and are left out; puts that
// fail may have taken effect and are kept as such.
func TestFailoverLinearizable(t *testing.T) {
	faultScenario(t)
	needEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, _ := startCluster(ctx, t, cluster.Options{Nodes: 3, Masters: 3, ElectionTTL: 2 * time.Second, RAMBytes: 16 << 20, BlockSize: 4 << 10})
	if _, _, err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	const (
		clients = 4
		blocks  = 40
	)
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		acked   int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ci := range clients {
		c := faultClient(ctx, t, cl, client.Options{Tenant: "lin", DialTimeout: 2 * time.Second})
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := 1 + rng.Uint64N(blocks)
				in := linInput{put: rng.IntN(4) == 0, id: id}
				call := time.Since(start).Nanoseconds()
				var out linOutput
				keep := true
				octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
				if in.put {
					errs, err := c.Put(octx, []uint64{id}, [][]byte{testPayload(id, 1024)}, client.PutOptions{})
					ok := err == nil && errs[0] == nil
					if ok {
						ok, err = c.WaitIndexed(octx, []uint64{id}, 2*time.Second)
						ok = ok && err == nil
					}
					out.unknown = !ok
				} else {
					present, err := c.Exists(octx, []uint64{id})
					if err != nil {
						keep = false // observed nothing
					} else {
						out.present = present[0]
					}
				}
				ocancel()
				ret := time.Since(start).Nanoseconds()
				if out.unknown {
					ret = math.MaxInt64 / 2 // may take effect at any time from its call on
				}
				if keep {
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: ci, Input: in, Call: call, Output: out, Return: ret})
					if in.put && !out.unknown {
						acked++
					}
					mu.Unlock()
				}
			}
		})
	}
	var fs []failover
	for range 2 {
		time.Sleep(1500 * time.Millisecond) // load before the fault: the schedule, not a wait
		j, h, err := cl.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		if err := cl.KillMasterAt(j); err != nil {
			t.Fatal(err)
		}
		fs = append(fs, awaitFailover(ctx, t, cl, j, h.Epoch, at))
		if err := cl.RestartMasterAt(j); err != nil { // back as a standby
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // load after the last failover
	close(stop)
	wg.Wait()
	for _, f := range fs {
		t.Logf("kill -9 of master-%d (epoch %d): master-%d led epoch %d after %v, index complete after %v", f.from, f.epochs[0], f.to, f.epochs[1], f.newLeader.Round(time.Millisecond), f.index.Round(time.Millisecond))
	}
	lookups := 0
	for _, op := range history {
		if !op.Input.(linInput).put {
			lookups++
		}
	}
	if acked == 0 || lookups == 0 {
		t.Fatalf("the history has %d acknowledged puts and %d answered lookups: nothing to check", acked, lookups)
	}
	reduced := reducePresenceHistory(history)
	t.Logf("history: %d operations, %d puts acknowledged, %d lookups answered; %d operations to check once puts that change nothing are dropped", len(history), acked, lookups, len(reduced))
	res, info := porcupine.CheckOperationsVerbose(presenceModel, reduced, time.Minute)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Fatalf("porcupine could not decide on %d operations within a minute", len(reduced))
	default:
		path := filepath.Join(t.TempDir(), "history.html")
		if f, err := os.Create(path); err == nil {
			porcupine.Visualize(presenceModel, info, f)
			f.Close()
		}
		t.Fatalf("the history is not linearizable (visualization: %s)", path)
	}
}
