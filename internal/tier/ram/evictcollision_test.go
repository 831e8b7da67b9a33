package ram

import (
	"errors"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
)

// TestPutOverEvictingCopyChecksCollision holds an eviction of alice's
// block open (OnEvict blocks, as a slow demotion does), lets mallory
// store a block whose public policy key collides with alice's (alice's
// entry has left the policy), and then Puts alice's key again. The Put
// must not insert a second policy entry under the same key: before the
// fix it did, the policy held the key twice, and eviction later looped
// forever. Check verifies that the policy and the slot maps agree.
func TestPutOverEvictingCopyChecksCollision(t *testing.T) {
	alice := block.Key{Tenant: "alice", ID: 1}
	mallory := block.Key{Tenant: "mallory", ID: PublicCollision(alice, "mallory")}
	evicting, release := make(chan struct{}), make(chan struct{})
	o := small(64, 3)
	o.OnEvict = func(ev Evicted) {
		if ev.Key == alice {
			close(evicting)
			<-release
		}
	}
	r := mustOpen(t, o)
	put(t, r, alice, []byte("alice v1"))
	put(t, r, key(2), []byte("two"))
	put(t, r, key(3), []byte("three"))
	done := make(chan error, 1)
	go func() { // needs a slot: evicts alice (least recent) and blocks in OnEvict
		p := []byte("four")
		done <- r.Put(ctx, key(4), p, block.Checksum(key(4), p))
	}()
	<-evicting
	put(t, r, mallory, []byte("mallory's block")) // evicts key 2; alice's entry is out of the policy
	p := []byte("alice v2")
	err := r.Put(ctx, alice, p, block.Checksum(alice, p)) // evicts key 3, drops the evicting copy
	if err != nil && !errors.Is(err, ErrNotAdmitted) {
		t.Fatalf("Put of alice over her evicting copy: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the evicting Put: %v", err)
	}
	if cerr := r.Check(); cerr != nil { // Check waits for operations in flight
		t.Fatalf("after the Put over the evicting copy (Put: %v): %v", err, cerr)
	}
	mustGet(t, r, mallory, []byte("mallory's block"))
	if got, _, gerr := r.Get(ctx, alice, nil); gerr == nil && string(got) != "alice v2" {
		t.Fatalf("alice reads %q, want her latest bytes or a miss", got)
	} else if gerr != nil && !errors.Is(gerr, kvpool.ErrNotFound) {
		t.Fatal(gerr)
	}
}
