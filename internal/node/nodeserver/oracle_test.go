package nodeserver_test

// Regression test from the review of per-tenant tokens: policy-key collisions.

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/tier/ram"
)

// TestNoCrossTenantExistenceOracle: bob, with his own tenant token and
// only his own namespace, learns whether alice holds a block of her
// choosing in the node's RAM: he stores a block of his whose policy key
// collides with hers (one XOR, no search) and then touches it. The
// answers must not depend on alice's blocks.
func TestNoCrossTenantExistenceOracle(t *testing.T) {
	alice := block.Key{Tenant: "alice", ID: 0xfeed}
	bobID := ram.PublicCollision(alice, "bob")
	if ram.PolicyKey(alice) != ram.PolicyKey(block.Key{Tenant: "bob", ID: bobID}) {
		t.Fatal("no collision")
	}
	for _, ssd := range []bool{false, true} {
		t.Run(fmt.Sprintf("ssd %v", ssd), func(t *testing.T) {
			probe := func(aliceHolds bool) string {
				addr := startTenantNodeWith(t, func(cfg *config.Node) {
					cfg.SSD.Enabled = ssd
					if !ssd {
						cfg.SSD.Path = ""
					}
					cfg.TenantTokens = map[string]config.Secret{"alice": aliceToken, "bob": bobToken}
				})
				ctx := context.Background()
				if aliceHolds {
					a := mustDial(t, addr, "alice", aliceToken)
					if err := a.Put(ctx, alice.ID, []byte("alice's secret prefix")); err != nil {
						t.Fatal(err)
					}
				}
				bob := mustDial(t, addr, "bob", bobToken)
				errs, err := bob.MAccess(ctx, []uint64{bobID, bobID},
					[]wire.Hint{{}, {Touch: true}}, [][]byte{[]byte("bob's probe"), nil})
				return fmt.Sprintf("%v %v", errs, err)
			}
			without, with := probe(false), probe(true)
			if without != with {
				t.Fatalf("bob's put+touch of his own block %016x: %q when alice holds %v, %q when she does not",
					bobID, with, alice, without)
			}
		})
	}
}
