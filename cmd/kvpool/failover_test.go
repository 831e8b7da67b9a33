package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/lab/replay"
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

// TestFailoverKillLeaderDuringReplay: kill -9 of the leading master in the
// middle of a live replay. A standby leads within two election TTLs, the
// nodes re-register with it, the replay completes with no wrong block,
// and afterwards the new leader's index lists exactly what the nodes
// hold.
func TestFailoverKillLeaderDuringReplay(t *testing.T) {
	faultScenario(t)
	needEtcd(t)
	reqs := smallTrace(t, 100)
	var f failover
	cl, logs, s := replayUnderFaultWith(t, reqs, faultReplay{masters: 3}, func(ctx context.Context, cl *cluster.Cluster) {
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
	t.Logf("kill -9 of master-%d (epoch %d): master-%d led epoch %d after %v, index complete after %v; replay token hit ratio %.3f, %d fetch failures",
		f.from, f.epochs[0], f.to, f.epochs[1], f.newLeader.Round(time.Millisecond), f.index.Round(time.Millisecond), s.TokenHitRatio, s.FetchFailures)
	if bound := 2 * 2 * time.Second; f.newLeader > bound {
		t.Errorf("a new leader took %v after the kill; want at most two election TTLs (%v)", f.newLeader, bound)
	}
	_ = logs
	checkIndexMatchesNodes(t, cl, reqs)
}
