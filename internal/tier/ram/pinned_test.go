package ram

import (
	"testing"

	"github.com/kvpool/kvpool/block"
)

// TestPolicyKeyPinned pins the public policy keys: sampled policies and
// the promotion sketch depend on their values, so a change would change
// what the store evicts.
func TestPolicyKeyPinned(t *testing.T) {
	for _, c := range []struct {
		k    block.Key
		want uint64
	}{
		{block.Key{}, 0x8035f29acc108b3},
		{block.Key{Tenant: "acme", ID: 42}, 0x77be7dc5857315e8},
		{block.Key{Tenant: "t", ID: 1 << 63}, 0x48aa82e6c112fb81},
	} {
		if got := PolicyKey(c.k); got != c.want {
			t.Errorf("PolicyKey(%v) = %#x, want %#x", c.k, got, c.want)
		}
	}
}
