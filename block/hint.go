package block

// Hint is what a caller knows about an access to a block beyond its key:
// the block's place in its request's prefix chain. Clients send it with
// hinted puts and touches, the node protocol carries it, the RAM tier
// passes it to its eviction policy, and the simulator's policies receive
// the same hint, so a chain-aware policy sees the same thing in the lab and
// in the store. The zero Hint (depth 0, no parent) is what a plain put or a
// read reports.
type Hint struct {
	// Depth is the block's position in its request's key list (0 =
	// first). The node protocol carries it as an unsigned 32-bit number
	// and a RAM tier clamps it before a policy sees it.
	Depth int
	// Parent is the block before this one in the chain, in the same terms
	// as the block's own key (a block ID in the same tenant in the store
	// and on the wire, a policy key inside a policy); meaningful only when
	// Depth > 0.
	Parent uint64
}
