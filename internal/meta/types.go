package meta

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// Errors returned by the master and by the validation of these types,
// checked with errors.Is.
var (
	// ErrUnknownNode: the node is not registered, was dropped (silent for
	// the TTL), or re-registered under a newer session. The node must call
	// master.Master.Register again with its full inventory.
	ErrUnknownNode = errors.New("unknown node or session: re-register")
	// ErrNoNodes: no live node can take a placement.
	ErrNoNodes = errors.New("no live nodes")
	// ErrNotLeader: the master does not lead its cluster's current term
	// (it stands by, its term ended, or the caller has seen a newer one);
	// the caller goes to the leader. It is a kvpool.ErrUnavailable.
	ErrNotLeader = fmt.Errorf("not the leader: %w", kvpool.ErrUnavailable)
	// ErrBadRequest: an argument is malformed (the message says which and
	// where). Nothing was changed. It is the protocols' bad request
	// (frame.ErrBadRequest), so the master's and the wire's are one.
	ErrBadRequest = frame.ErrBadRequest
)

// badRequest wraps ErrBadRequest with what was wrong and where.
func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}

// NodeID names a node. It is chosen by the node and stable across its
// restarts (a node that comes back re-registers under the same ID).
type NodeID string

// MaxNodeIDLen is the longest NodeID accepted (bytes).
const MaxNodeIDLen = 128

// MaxClusterIDLen is the longest cluster ID accepted (bytes).
const MaxClusterIDLen = 64

// CheckClusterID reports whether id can name a cluster: empty (no cluster
// ID) or at most MaxClusterIDLen bytes of letters, digits, '.', '_' and
// '-'. A cluster ID ties a node to the master it was started for: the
// master protocol's HELLO carries it both ways (package masterproto).
func CheckClusterID(id string) error {
	if len(id) > MaxClusterIDLen {
		return fmt.Errorf("cluster ID of %d bytes, limit %d", len(id), MaxClusterIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("cluster ID %q: byte %q at %d (allowed: letters, digits, . _ -)", id, c, i)
		}
	}
	return nil
}

// Session identifies one registration of a node. The master's Register
// hands out a new session every time; a heartbeat carrying any other
// session is refused with ErrUnknownNode.
type Session uint64

// Tier is a storage tier of a node.
type Tier uint8

// The tiers. The zero Tier is invalid, so a forgotten field is an error
// rather than a silent RAM replica. The master's Lookup sorts RAM before
// SSD: the order of these constants.
const (
	TierRAM Tier = 1
	TierSSD Tier = 2
)

// String returns "ram", "ssd" or "tier(N)".
func (t Tier) String() string {
	switch t {
	case TierRAM:
		return "ram"
	case TierSSD:
		return "ssd"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Valid reports whether t is one of the tiers.
func (t Tier) Valid() bool { return t == TierRAM || t == TierSSD }

// MaxItemSize bounds Item.Size and NodeInfo.BlockSize (1 TiB): far above
// any block (a model-unit block is 160 MiB), and small enough that sums over
// millions of replicas cannot overflow int64.
const MaxItemSize = 1 << 40

// Replica is one copy of a block as a reader sees it.
type Replica struct {
	// Node holds the copy.
	Node NodeID
	// Tier is where on the node.
	Tier Tier
	// Size is the block's length in bytes.
	Size int64
	// Sum is the block's checksum (block.Checksum) as the node reported it.
	Sum uint32
}

// ReplicaStatus is a replica as the admin key query shows it.
type ReplicaStatus struct {
	Replica
	// NodeAlive is false for a replica of a node that has missed its TTL
	// but has not been dropped yet (readers never see those).
	NodeAlive bool
	// Evicting is true once the master has ordered the copy demoted or
	// dropped; readers no longer see it.
	Evicting bool
	// LeaseUntil is the end of the replica's read lease (zero if it never
	// had one).
	LeaseUntil time.Time
}

// KeyInfo is what the master knows of one named key (master.Master.KeyInfo):
// the key query of the Redis front (TTL, EXISTS, TYPE).
type KeyInfo struct {
	// Present is true when the index holds a replica of the key in any
	// state: hidden by its expiry, on a node past its TTL not yet dropped,
	// or under an eviction order.
	Present bool
	// Visible is true when readers see the key: Locate returns a replica
	// of it and its expiry, if any, is still ahead. Visible implies
	// Present.
	Visible bool
	// ExpireAt is the key's expiry in unix milliseconds on the master's
	// clock, 0 for none. It is reported for a hidden key too (at or before
	// now: it has expired).
	ExpireAt int64
	// Holders are the distinct nodes with a replica of the key, hidden
	// ones included, sorted by ID; nil for an absent key.
	Holders []NodeID
}

// NodeInfo describes a node at registration.
type NodeInfo struct {
	// ID names the node (required, at most MaxNodeIDLen bytes).
	ID NodeID
	// Addr is the node's data-plane address, host:port (required).
	Addr string
	// RAMBytes and SSDBytes are the tiers' capacities; SSDBytes 0 means the
	// node has no SSD tier (the master then orders drops, not demotions).
	RAMBytes, SSDBytes int64
	// BlockSize is the node's RAM chunk size in bytes: a RAM replica of n
	// payload bytes under a name of l bytes occupies ceil((l+n)/BlockSize)
	// chunks (at least one) of the node's RAM budget (Footprint). 0
	// counts replicas at their exact size.
	BlockSize int64
}

// Validate reports the first bad field.
func (ni NodeInfo) Validate() error {
	switch {
	case ni.ID == "":
		return badRequest("NodeInfo.ID is empty")
	case len(ni.ID) > MaxNodeIDLen:
		return badRequest("NodeInfo.ID is %d bytes, limit %d", len(ni.ID), MaxNodeIDLen)
	case ni.Addr == "":
		return badRequest("NodeInfo.Addr of node %q is empty (want host:port)", ni.ID)
	case ni.RAMBytes < 0:
		return badRequest("NodeInfo.RAMBytes of node %q is %d (want >= 0)", ni.ID, ni.RAMBytes)
	case ni.SSDBytes < 0:
		return badRequest("NodeInfo.SSDBytes of node %q is %d (want >= 0)", ni.ID, ni.SSDBytes)
	case ni.BlockSize < 0 || ni.BlockSize > MaxItemSize:
		return badRequest("NodeInfo.BlockSize of node %q is %d (want 0 to %d)", ni.ID, ni.BlockSize, int64(MaxItemSize))
	}
	if _, _, err := net.SplitHostPort(ni.Addr); err != nil {
		return badRequest("NodeInfo.Addr of node %q: %v", ni.ID, err)
	}
	return nil
}

// NodeUsage is a node's own account of its tiers, sent with every
// registration and heartbeat. The master shows it (NodeStatus.Reported);
// its decisions use the usage implied by the index (see the package
// documentation).
type NodeUsage struct {
	RAMUsed, SSDUsed int64
	// Backlog says the report leaves part of the node's inventory for the
	// heartbeats that follow (it did not fit the protocol's frame): the
	// master's index is not yet all the node holds. A new leader counts
	// its index complete only once each node's backlog is empty.
	Backlog bool
}

// ItemKey names one replica on a node: a block in a tier.
type ItemKey struct {
	Key  block.Key
	Tier Tier
}

// Item is one block a node holds.
type Item struct {
	Key  block.Key
	Tier Tier
	// Size is the block's length in bytes (0 to MaxItemSize).
	Size int64
	// Sum is the block's checksum.
	Sum uint32
}

// Inventory is everything a node holds, sent at registration. A block may
// appear once per tier.
type Inventory []Item

// Move reports that a node moved a block between its tiers (a demotion
// RAM→SSD, or a promotion SSD→RAM that kept no SSD copy).
type Move struct {
	Key      block.Key
	From, To Tier
}

// Delta is the change in a node's inventory since its previous heartbeat.
// It is applied in order: Added, then Removed, then Moved.
type Delta struct {
	// Added blocks; an item already indexed for the node is updated (size
	// and checksum), keeping its lease and recency.
	Added []Item
	// Removed replicas; one the index does not hold is ignored (and counted
	// in the master's Stats.DeltaUnknown).
	Removed []ItemKey
	// Moved replicas; one the index does not hold is ignored (and counted),
	// and a move onto a tier that already holds the block merges the two.
	Moved []Move
}

// TaskKind says what a Task asks a node to do.
type TaskKind uint8

// The task kinds.
const (
	// TaskDemote: move the block from RAM to SSD (an eviction order for a
	// node with an SSD tier).
	TaskDemote TaskKind = 1
	// TaskDrop: delete the block's RAM copy (an eviction order for a node
	// without SSD).
	TaskDrop TaskKind = 2
	// TaskPromote: copy the block from SSD to RAM.
	TaskPromote TaskKind = 3
)

// String returns "demote", "drop", "promote" or "task(N)".
func (k TaskKind) String() string {
	switch k {
	case TaskDemote:
		return "demote"
	case TaskDrop:
		return "drop"
	case TaskPromote:
		return "promote"
	}
	return fmt.Sprintf("task(%d)", uint8(k))
}

// Task is an order for a node, delivered in a heartbeat reply.
type Task struct {
	// ID names the task in TaskResult; unique within a master's lifetime.
	ID   uint64
	Kind TaskKind
	Key  block.Key
}

// TaskResult is a node's report on a task, sent in a later heartbeat.
//
// An eviction order (demote, drop) is confirmed by the inventory delta
// that reflects it (Removed or Moved RAM→SSD); its TaskResult only closes
// the task, and one with OK false or without the matching delta gives the
// replica back to the eviction policy. A promotion's TaskResult is its only
// confirmation; the new RAM copy arrives in the delta as usual.
type TaskResult struct {
	ID uint64
	OK bool
	// Bytes moved by a completed promotion (counted in
	// master_promotion_completed_bytes_total).
	Bytes int64
}

// RegisterReply tells a node how to keep its registration alive.
type RegisterReply struct {
	// Session must accompany every heartbeat.
	Session Session
	// HeartbeatInterval is how often the node should heartbeat.
	HeartbeatInterval time.Duration
	// NodeTTL is how long the master waits for a heartbeat before it drops
	// the node and all its replicas.
	NodeTTL time.Duration
}

// HeartbeatReply carries the node's pending tasks: every queued eviction
// order (oldest first), then at most the master's
// Options.Promotion.MaxPerHeartbeat promotions (oldest first).
type HeartbeatReply struct {
	Tasks []Task
	// HeartbeatInterval repeats the configured interval.
	HeartbeatInterval time.Duration
}

// NodeStatus is one node as the admin /nodes endpoint shows it.
type NodeStatus struct {
	Info    NodeInfo
	Session Session
	// Alive is false for a node that has missed its TTL but has not been
	// dropped by the master's Expire yet.
	Alive bool
	// LastHeartbeat is when the master last heard from the node
	// (registration counts), and HeartbeatAge how long ago that was.
	LastHeartbeat time.Time
	HeartbeatAge  time.Duration
	// Reported is the node's own usage report; Indexed the usage implied by
	// the index (RAM: slot-rounded bytes of replicas not being evicted),
	// which the master's decisions use.
	Reported, Indexed NodeUsage
	// RAMReplicas and SSDReplicas count the node's replicas in the index.
	RAMReplicas, SSDReplicas int
	// Evicting counts RAM replicas under an eviction order.
	Evicting int
	// PromotionsQueued counts admitted promotions not yet handed out;
	// TasksInFlight the tasks handed out and not yet acknowledged.
	PromotionsQueued, TasksInFlight int
}

// LookupResult receives the master's Lookup. Its slices are reused from
// call to call, so a caller that keeps one LookupResult per goroutine
// allocates nothing in steady state.
type LookupResult struct {
	// Hit is the length of the prefix found: ids[:Hit] are present on live
	// nodes, ids[Hit] (if any) is not.
	Hit int
	// Replicas holds the replicas of the Hit prefix blocks, block after
	// block; within a block, RAM before SSD, then by node ID.
	Replicas []Replica
	// Ends[i] is where block i's replicas end in Replicas (they start at
	// Ends[i-1], or 0).
	Ends []int
}

// Block returns the replicas of prefix block i (0 <= i < Hit).
func (r *LookupResult) Block(i int) []Replica {
	start := 0
	if i > 0 {
		start = r.Ends[i-1]
	}
	return r.Replicas[start:r.Ends[i]]
}

// Reset empties r keeping its storage.
func (r *LookupResult) Reset() {
	r.Hit = 0
	r.Replicas = r.Replicas[:0]
	r.Ends = r.Ends[:0]
}

// Object is a new object as a placement sees it: its key (a chain key or
// a named one) and its payload length in bytes.
type Object struct {
	Key block.Key
	// Size is the payload length (0 to MaxItemSize). A node's RAM holds
	// it, with its name, in whole chunks of the node's BlockSize (see
	// Footprint).
	Size int64
}

// Footprint is the RAM an object of key k and size bytes takes on a node
// whose RAM chunk size is blockSize: the name (stored in front of the
// payload) and the payload, rounded up to whole chunks, at least one; 0
// blockSize counts the bytes exactly.
func Footprint(k block.Key, size, blockSize int64) int64 {
	b := int64(len(k.Name)) + size
	if blockSize <= 0 {
		return b
	}
	return max(1, (b+blockSize-1)/blockSize) * blockSize
}

// MaxReplicas bounds the replicas a placement (master.Master.Place) may
// ask for per block.
const MaxReplicas = 64

// Placement receives the master's Place: the nodes chosen for each new block.
type Placement struct {
	// PerBlock is the number of distinct nodes chosen per block: the
	// replicas asked for, or fewer when fewer nodes are live (Degraded).
	PerBlock int
	// Degraded is true when fewer live nodes than the replicas asked for
	// exist; every live node then gets a copy.
	Degraded bool
	// Nodes lists the choices block after block: block i goes to
	// Nodes[i*PerBlock:(i+1)*PerBlock], the first the preferred one.
	Nodes []NodeID
}

// Block returns the nodes chosen for block i.
func (p *Placement) Block(i int) []NodeID {
	return p.Nodes[i*p.PerBlock : (i+1)*p.PerBlock]
}

// Strategy chooses the nodes for new blocks (see master.Master.Place).
type Strategy uint8

// The placement strategies.
const (
	// StrategyDefault means the master's configured default
	// (master.Options.Placement).
	StrategyDefault Strategy = iota
	// LocalFirst puts the first copy on the hint node when it has room (the
	// copy keeps it at or under the master's HighWatermark), the others on the least
	// used nodes. It is the default: a prefill worker stores what it
	// computed on its own node, the cheapest place to read it back from.
	LocalFirst
	// LeastUsed picks the nodes with the lowest RAM usage fraction, ties
	// broken by node ID.
	LeastUsed
	// Hash picks nodes by rendezvous (highest-random-weight) hashing of
	// the block key over the live nodes: a node leaving moves only the
	// blocks that had it among their choices.
	Hash
)

var strategyNames = [...]string{StrategyDefault: "default", LocalFirst: "local-first", LeastUsed: "least-used", Hash: "hash"}

// String returns the strategy's name as ParseStrategy reads it.
func (s Strategy) String() string {
	if int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// ParseStrategy reads "local-first", "least-used" or "hash" ("" and
// "default" are StrategyDefault).
func ParseStrategy(s string) (Strategy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default":
		return StrategyDefault, nil
	case "local-first":
		return LocalFirst, nil
	case "least-used":
		return LeastUsed, nil
	case "hash":
		return Hash, nil
	}
	return 0, fmt.Errorf("meta: unknown placement strategy %q (valid: local-first, least-used, hash)", s)
}
