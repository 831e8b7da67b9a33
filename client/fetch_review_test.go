package client_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/client"
)

// TestNewCallsConcurrentWithClose runs Access, Fetch, Locate, NodeStats and
// WaitIndexed from many goroutines (run with -race) while the client is
// closed under them: every block Fetch loads is the block put, every error
// after Close is ErrClosed-or-a-failure, nothing panics, hangs or leaks.
func TestNewCallsConcurrentWithClose(t *testing.T) {
	c := newCluster(t, 2)
	cl := newClient(t, c, client.Options{LocalNode: "n0"})
	ctx := context.Background()
	ids := seq(100, 8)
	if _, err := cl.Access(ctx, client.Chain(ids, payloads(ids)), client.AccessOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	half := make(chan struct{})
	var once sync.Once
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if i == 20 {
					once.Do(func() { close(half) })
				}
				switch (g + i) % 5 {
				case 0:
					res, err := cl.Fetch(ctx, client.Location{Node: "n0"}, ids, client.FetchOptions{})
					if err != nil {
						continue
					}
					for j, st := range res.Status {
						if st == client.Loaded && !bytes.Equal(res.Blocks[j], payload(ids[j], blockSize)) {
							t.Errorf("Fetch loaded block %d with bytes that are not its own", ids[j])
						}
					}
				case 1:
					res, err := cl.Access(ctx, client.Chain(ids, nil), client.AccessOptions{Node: "n0"})
					if err == nil && len(res.Status) != len(ids) {
						t.Errorf("Access: %d statuses for %d entries", len(res.Status), len(ids))
					}
				case 2:
					cl.Locate(ctx, ids[i%len(ids)])
				case 3:
					cl.NodeStats(ctx)
				case 4:
					cl.WaitIndexed(ctx, ids[:1], time.Millisecond)
				}
			}
		}()
	}
	<-half
	cl.Close()
	wg.Wait()
	if _, err := cl.Fetch(ctx, client.Location{Node: "n0"}, ids, client.FetchOptions{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Fetch after Close: %v, want ErrClosed", err)
	}
	if _, err := cl.WaitIndexed(ctx, ids, time.Millisecond); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("WaitIndexed after Close: %v, want ErrClosed", err)
	}
	if _, err := cl.Locate(ctx, 1); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Locate after Close: %v, want ErrClosed", err)
	}
}

// TestFetchNodeDiesMidCall: the node stops while it holds a Fetch's
// reads; Fetch returns every block Missing, and does not hang.
func TestFetchNodeDiesMidCall(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c, client.Options{})
	ids := seq(1, 4)
	put(t, cl, ids, client.PutOptions{})
	release := c.nodes[0].backend.hold()
	defer release()
	type out struct {
		res client.GetResult
		err error
	}
	done := make(chan out, 1)
	before := c.nodes[0].backend.reads.Load()
	go func() {
		res, err := cl.Fetch(context.Background(), client.Location{Node: "n0"}, ids, client.FetchOptions{})
		done <- out{res, err}
	}()
	for c.nodes[0].backend.reads.Load() == before {
		time.Sleep(time.Millisecond) // the read is in flight on the node
	}
	if err := c.nodes[0].stop(); err != nil {
		t.Fatal(err)
	}
	o := <-done
	// The node answers the blocks it was reading "unavailable" as it
	// stops (or the connection breaks): no block may come back Loaded.
	for i, st := range o.res.Status {
		if st != client.Missing {
			t.Fatalf("block %d %v from a node that stopped mid-call (err %v), want missing", ids[i], st, o.err)
		}
	}
}

// TestFetchAccessDeadlineOnSilentNode: a node that accepts and never
// answers; Fetch and Access with a short ctx end with the ctx's error,
// Fetch's blocks TimedOut.
func TestFetchAccessDeadlineOnSilentNode(t *testing.T) {
	c := newCluster(t, 0)
	if _, err := c.addBlackhole("hole"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c, client.Options{DialTimeout: time.Hour, RequestTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := cl.Fetch(ctx, client.Location{Node: "hole"}, []uint64{1, 2}, client.FetchOptions{})
	if err == nil || res.Status[0] != client.TimedOut || res.Status[1] != client.TimedOut {
		t.Fatalf("Fetch from a silent node: %v %v; want an error and TimedOut", res.Status, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fetch error %v does not say the deadline passed", err)
	}
	_, err = cl.Access(ctx, client.Chain([]uint64{1}, nil), client.AccessOptions{Node: "hole"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Access on a silent node after the deadline: %v", err)
	}
	if s := cl.Stats(); s.NodeFailures != 0 {
		t.Errorf("the caller's deadline marked the node down (%d failures)", s.NodeFailures)
	}
}

// TestStoppedNodeIsUnavailable: Fetch and Access to a node that has
// stopped fail with kvpool.ErrUnavailable, as calls to a master that
// cannot be reached do.
func TestStoppedNodeIsUnavailable(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c, client.Options{})
	ctx := context.Background()
	put(t, cl, []uint64{1}, client.PutOptions{})
	if err := c.nodes[0].stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Fetch(ctx, client.Location{Node: "n0"}, []uint64{1}, client.FetchOptions{}); !errors.Is(err, kvpool.ErrUnavailable) {
		t.Errorf("Fetch from a stopped node: %v, want kvpool.ErrUnavailable", err)
	}
	if _, err := cl.Access(ctx, client.Chain([]uint64{1}, nil), client.AccessOptions{Node: "n0"}); !errors.Is(err, kvpool.ErrUnavailable) {
		t.Errorf("Access on a stopped node: %v, want kvpool.ErrUnavailable", err)
	}
}

// TestCloseEndsFetchOnSilentNode: Close while a Fetch waits on a node
// that accepted and never answers (dial and request timeouts an hour):
// the Fetch returns, with ErrClosed, instead of waiting out the timeouts.
func TestCloseEndsFetchOnSilentNode(t *testing.T) {
	c := newCluster(t, 0)
	hole, err := c.addBlackhole("hole")
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c, client.Options{DialTimeout: time.Hour, RequestTimeout: time.Hour})
	done := make(chan error, 2)
	go func() {
		_, err := cl.Fetch(context.Background(), client.Location{Node: "hole"}, []uint64{1}, client.FetchOptions{})
		done <- err
	}()
	go func() {
		_, err := cl.Access(context.Background(), client.Chain([]uint64{1}, nil), client.AccessOptions{Node: "hole"})
		done <- err
	}()
	for hole.conns.Load() < 2 {
		runtime.Gosched() // both calls are waiting on the silent node
	}
	cl.Close()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, kvpool.ErrClosed) {
				t.Errorf("call interrupted by Close: %v, want kvpool.ErrClosed", err)
			}
		case <-time.After(time.Minute): // a hang, not a speed bound: the timeouts are an hour
			t.Fatal("a call on a silent node still waits a minute after Close")
		}
	}
	if n := cl.Stats().NodeFailures; n != 0 {
		t.Errorf("Close counted %d node failures; the node did not fail", n)
	}
}
