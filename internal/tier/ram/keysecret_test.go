package ram

import (
	"testing"

	"github.com/kvpool/kvpool/block"
)

// TestKeySecretRemovesCollisionOracle: without a secret anyone can build a
// block ID whose policy key collides with another tenant's block, and the
// outcome of a Put then depends on whether that block is resident (an
// existence probe across tenants, found in review). With Options.KeySecret
// the same construction no longer collides and the Put's outcome does not
// depend on the other tenant's blocks.
func TestKeySecretRemovesCollisionOracle(t *testing.T) {
	alice := block.Key{Tenant: "alice", ID: 4242}
	bob := block.Key{Tenant: "bob", ID: PublicCollision(alice, "bob")}
	if PolicyKey(alice) != PolicyKey(bob) {
		t.Fatal("the construction does not collide under the public key")
	}
	for _, tt := range []struct {
		name   string
		secret []byte
		oracle bool // whether bob's Put depends on alice's block
	}{
		{"public key", nil, true},
		{"keyed", []byte("a secret the tenants never see"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			outcome := func(aliceHolds bool) error {
				o := small(64, 8)
				o.KeySecret = tt.secret
				r := mustOpen(t, o)
				if got, want := r.PolicyKey(alice) == PolicyKey(alice), tt.secret == nil; got != want {
					t.Errorf("RAM.PolicyKey equals the public PolicyKey: %v, want %v", got, want)
				}
				if aliceHolds {
					put(t, r, alice, reviewPayload(alice, 32))
				}
				p := reviewPayload(bob, 32)
				err := r.Put(ctx, bob, p, block.Checksum(bob, p))
				if err := r.Check(); err != nil {
					t.Fatal(err)
				}
				return err
			}
			without, with := outcome(false), outcome(true)
			if differs := (without == nil) != (with == nil); differs != tt.oracle {
				t.Errorf("bob's Put: %v with alice's block resident, %v without; outcome differs = %v, want %v",
					with, without, differs, tt.oracle)
			}
		})
	}
}

// TestHugeHintDepthIsClamped: a hint's depth comes from a client (a u32
// on the wire); the policies see at most MaxHintDepth.
func TestHugeHintDepthIsClamped(t *testing.T) {
	o := small(32, 8)
	o.Eviction = "kvchain"
	r := mustOpen(t, o)
	k := block.Key{Tenant: "bob", ID: 1}
	p := []byte("x")
	for _, d := range []int{1 << 31, -5, MaxHintDepth + 1} {
		if _, err := r.Insert(ctx, k, p, block.Checksum(k, p), InsertOptions{Hint: block.Hint{Depth: d, Parent: 9}}); err != nil {
			t.Fatalf("depth %d: %v", d, err)
		}
		r.mu.Lock()
		a := r.accessLocked(1, "bob", block.Hint{Depth: d, Parent: 9})
		r.mu.Unlock()
		if a.Depth < 0 || a.Depth > MaxHintDepth {
			t.Errorf("hint depth %d reaches the policy as %d; want it in [0, %d]", d, a.Depth, MaxHintDepth)
		}
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}
