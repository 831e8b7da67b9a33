package ram

import (
	"testing"

	"github.com/kvpool/kvpool/block"
)

// TestPolicyKeyIsBlocks checks that the public policy key (block's) is the
// RAM's unkeyed hash: its tenant part and mix, as the keyed path uses them.
func TestPolicyKeyIsBlocks(t *testing.T) {
	for _, k := range []block.Key{{}, {ID: 1}, {Tenant: "replay", ID: 42}, {Tenant: "alice", ID: 1 << 63}} {
		if got, want := block.PolicyKey(k), mixKey(k.ID, tenantKey(nil, k.Tenant)); got != want {
			t.Errorf("block.PolicyKey(%v) = %#x, the RAM's unkeyed hash %#x", k, got, want)
		}
	}
}
