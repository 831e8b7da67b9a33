package respserver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// gatedStore is a store function that records the values it is given and
// blocks each call until the test releases it.
type gatedStore struct {
	mu      sync.Mutex
	stored  []string
	started chan string
	release chan error
}

func newGatedStore() *gatedStore {
	return &gatedStore{started: make(chan string, 16), release: make(chan error)}
}

func (g *gatedStore) store(_ context.Context, v []byte) error {
	g.mu.Lock()
	g.stored = append(g.stored, string(v))
	g.mu.Unlock()
	g.started <- string(v)
	return <-g.release
}

func (g *gatedStore) values() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.stored)
}

// waiting polls until the key's waiting batch holds n SETs.
func waiting(t *testing.T, g *setGroups, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		g.mu.Lock()
		grp := g.m[groupKey{"t", "k"}]
		got := 0
		if grp != nil && grp.next != nil {
			got = grp.next.n
		}
		g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting batch holds %d SETs; want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSetGroupsCoalesce: SETs that arrive while one is stored wait as one
// batch; the last value to arrive is stored once for all, each is
// answered with that store's error, and a SET arriving once the batch's
// store began is not answered by it.
func TestSetGroupsCoalesce(t *testing.T) {
	var g setGroups
	gs := newGatedStore()
	results := make(map[string]chan error)
	set := func(v string) {
		ch := make(chan error, 1)
		results[v] = ch
		go func() { ch <- g.set(context.Background(), "t", "k", []byte(v), gs.store) }()
	}
	set("v0")
	if v := <-gs.started; v != "v0" {
		t.Fatalf("first store of %q; want v0", v)
	}
	for i, v := range []string{"v1", "v2", "v3"} {
		set(v)
		waiting(t, &g, i+1)
	}
	gs.release <- nil // v0 stored
	if err := <-results["v0"]; err != nil {
		t.Fatalf("SET v0: %v", err)
	}
	if v := <-gs.started; v != "v3" {
		t.Fatalf("the batch stored %q; want the last to arrive, v3", v)
	}
	// A SET arriving now must not be answered by the store under way.
	set("v4")
	waiting(t, &g, 1)
	boom := errors.New("pool down")
	gs.release <- boom
	for _, v := range []string{"v1", "v2", "v3"} {
		if err := <-results[v]; !errors.Is(err, boom) {
			t.Errorf("SET %s answered %v; want the batch's error %v", v, err, boom)
		}
	}
	select {
	case err := <-results["v4"]:
		t.Fatalf("SET v4 answered (%v) by a store that began before it arrived", err)
	default:
	}
	if v := <-gs.started; v != "v4" {
		t.Fatalf("stored %q; want v4", v)
	}
	gs.release <- nil
	if err := <-results["v4"]; err != nil {
		t.Fatalf("SET v4: %v", err)
	}
	if got, want := gs.values(), []string{"v0", "v3", "v4"}; !slices.Equal(got, want) {
		t.Errorf("stored %q; want %q", got, want)
	}
	if n := g.coalesced.Load(); n != 2 {
		t.Errorf("coalesced = %d; want 2 (v1 and v2, answered by v3's store)", n)
	}
	g.mu.Lock()
	left := len(g.m)
	g.mu.Unlock()
	if left != 0 {
		t.Errorf("%d groups left after every SET was answered; want 0", left)
	}
}

// TestSetGroupsKeysApart: SETs of different keys never wait for each
// other.
func TestSetGroupsKeysApart(t *testing.T) {
	var g setGroups
	gs := newGatedStore()
	done := make(chan error, 1)
	go func() { done <- g.set(context.Background(), "t", "a", []byte("x"), gs.store) }()
	<-gs.started
	other := make(chan error, 1)
	go func() {
		other <- g.set(context.Background(), "t", "b", []byte("y"), func(context.Context, []byte) error { return nil })
	}()
	if err := <-other; err != nil {
		t.Fatalf("SET b while a is being stored: %v", err)
	}
	gs.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
