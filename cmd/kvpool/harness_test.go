package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
)

// This file holds what the multi-process tests of this package share:
// starting a cluster of the test binary acting as kvpool, and collecting
// its output.

// multiProcess skips t in -short mode and makes the test binary act as
// kvpool for the processes t starts.
func multiProcess(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	t.Setenv(asKvpoolEnv, "1")
}

// startCluster starts a cluster with o (Binary, output, stop timeout and,
// when zero, heartbeat and TTL filled in) and stops it at cleanup, logging
// its output if the test failed.
func startCluster(ctx context.Context, t *testing.T, o cluster.Options) (*cluster.Cluster, *cluster.Output) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logs := &cluster.Output{}
	o.Binary, o.Stdout, o.Stderr = exe, logs, logs
	if o.Heartbeat == 0 {
		o.Heartbeat = itHeartbeat
	}
	if o.NodeTTL == 0 {
		o.NodeTTL = itTTL
	}
	o.StopTimeout = 10 * time.Second
	cl, err := cluster.Start(ctx, o)
	if err != nil {
		t.Fatalf("start cluster: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
		if t.Failed() {
			t.Logf("cluster output:\n%s", logs.String())
		}
	})
	return cl, logs
}

// testPayload is the deterministic n-byte payload of block id (xorshift
// from the id), so a block read back from anywhere can be checked.
func testPayload(id uint64, n int) []byte {
	p := make([]byte, n)
	x := id*0x9e3779b97f4a7c15 | 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}
