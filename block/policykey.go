package block

// PolicyKey returns the public policy key of k: the 64-bit hash of its
// tenant and ID that a node's RAM tier opened without a key secret gives
// its eviction and admission policies. The tenant name is hashed with
// FNV-1a and mixed into the ID with SplitMix64's finaliser, a bijection,
// so IDs of one tenant never collide. Anyone can compute it, and so
// construct another tenant's collisions; a RAM tier serving mutually
// distrusting tenants keys its policies with a secret instead.
//
// The lab labels simulated accesses with it so that the simulator's
// policies see the keys the nodes' policies see.
func PolicyKey(k Key) uint64 {
	t := uint64(14695981039346656037) // FNV-1a offset basis
	for i := 0; i < len(k.Tenant); i++ {
		t ^= uint64(k.Tenant[i])
		t *= 1099511628211 // FNV-1a prime
	}
	z := k.ID ^ t*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
