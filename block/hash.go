package block

// The hashes below are the store's only ones: every key hash, policy key,
// payload seed and sampling decision in the repository is built from them,
// so two parts that hash the same key always agree. Their values are fixed:
// they decide shard placement, eviction samples, generated payloads and
// trace subsamples, which golden files pin.

// FNV-1a 64-bit parameters: the published offset basis and prime
// (Fowler, Noll, Vo; draft-eastlake-fnv).
const (
	FNVOffset64 uint64 = 14695981039346656037
	FNVPrime64  uint64 = 1099511628211
)

// FNV1a returns the 64-bit FNV-1a hash of s: the hash of a tenant name or
// a node ID. It is fast on the short strings it is used for and needs no
// allocation; it is not keyed, so it offers no protection against chosen
// collisions.
func FNV1a(s string) uint64 {
	h := FNVOffset64
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= FNVPrime64
	}
	return h
}

// Golden64 is SplitMix64's increment, 2^64 divided by the golden ratio
// (rounded to odd): a generator adds it to its state before each Mix64,
// and multiplying by it spreads consecutive integers over 64 bits.
const Golden64 uint64 = 0x9e3779b97f4a7c15

// Mix64 is SplitMix64's finaliser (Steele, Lea and Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014): a bijection of
// 64-bit words with full avalanche, so nearby inputs land far apart and
// distinct inputs never collide.
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Hash returns k's 64-bit hash, Mix64(k.ID ^ FNV1a(k.Tenant)): what the
// master shards its index by. Within one tenant it is a bijection of the
// ID. A caller hashing many IDs of one tenant may compute FNV1a(k.Tenant)
// once and apply Mix64 itself; the result is the same.
func (k Key) Hash() uint64 { return Mix64(k.ID ^ FNV1a(k.Tenant)) }

// PolicyKey returns k's public policy key, Mix64(k.ID ^
// FNV1a(k.Tenant)*Golden64): the key a node's RAM tier opened without a key
// secret gives its eviction and admission policies, and the key the lab
// labels simulated accesses with so that the simulator's policies see what
// the nodes' policies see. Within one tenant it is a bijection of the ID.
// Anyone can compute it, and so construct another tenant's collisions; a
// RAM tier serving mutually distrusting tenants keys its policies with a
// secret instead.
func PolicyKey(k Key) uint64 { return Mix64(k.ID ^ FNV1a(k.Tenant)*Golden64) }
