package etcdleader_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/client/etcdleader"
	"github.com/kvpool/kvpool/internal/election"
	"github.com/kvpool/kvpool/internal/etcdtest"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterserver"
)

// TestClientFindsTheLeaderThroughEtcd: a client given no master address,
// only a Finder on etcd, reaches the master that leads the cluster.
func TestClientFindsTheLeaderThroughEtcd(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	el, err := election.Open(election.Options{Endpoints: []string{etcd.Endpoint}, Cluster: "c-1", TTL: election.MinTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer el.Close()
	m, err := master.New(master.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := masterserver.New(m, masterserver.Options{ClusterID: "c-1", Election: el, Advertise: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx, ln) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
		s.Close()
	}()

	f, err := etcdleader.New([]string{etcd.Endpoint}, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var addr string
	for addr == "" && ctx.Err() == nil { // the master campaigns in the background
		addr, _ = f.Leader(ctx)
		time.Sleep(20 * time.Millisecond) // a poll, bounded by ctx
	}
	if addr != ln.Addr().String() {
		t.Fatalf("etcd names %q as leader; want the master at %s", addr, ln.Addr())
	}
	c, err := client.New(ctx, client.Options{Leader: f.Leader})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Nodes(ctx); err != nil {
		t.Fatalf("nodes through the leader etcd named: %v", err)
	}

	if _, err := etcdleader.New(nil, "c-1"); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("New without endpoints: %v; want an error naming etcd", err)
	}
}
