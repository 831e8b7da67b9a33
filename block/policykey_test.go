package block

import "testing"

// TestPolicyKey pins the public policy key: nodes and the lab's
// simulations must agree on it, so a change shows up here.
func TestPolicyKey(t *testing.T) {
	for _, tc := range []struct {
		k    Key
		want uint64
	}{
		{Key{}, 0x8035f29acc108b3},
		{Key{ID: 1}, 0xaaa974b0ee7c4944},
		{Key{Tenant: "replay", ID: 42}, 0x28e0ac0261ea51de},
	} {
		if got := PolicyKey(tc.k); got != tc.want {
			t.Errorf("PolicyKey(%v) = %#x, want %#x", tc.k, got, tc.want)
		}
	}
}
