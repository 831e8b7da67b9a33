package master

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/policy"
)

// Master is the in-process state of the kvpool master: the global block
// index, node membership, placement, read leases, global eviction and
// promotion control. It holds no sockets and starts no goroutines; the
// caller drives Expire from its own ticker (Lookup also expires lazily).
//
// Concurrency: every method is safe for concurrent use. The locks, always
// taken in this order (a lock may be skipped, never taken out of order):
//
//  1. expireMu — serialises Expire (lazy callers use TryLock);
//  2. evictMu — serialises eviction passes (callers use TryLock);
//  3. nodesMu — the membership map;
//  4. node.mu — one node's state (inventory set, tasks, usage); never two
//     nodes' at once, but by Expire (the nodes it drops, taken under
//     nodesMu and held after it is released, while their replicas are
//     removed) and CheckInvariants;
//  5. sketchMu — the promotion count-min sketch (a leaf);
//  6. shard.mu — one index shard; never two shards at once;
//  7. polMu or lruMu — the eviction policy, or the LRU log of the
//     index's replicas (a leaf); or a chunk pool's mutex
//     (slabPool.mu, a leaf taken under a shard's write lock).
//
// A RAM replica enters and leaves the eviction policy under its shard's
// lock (polMu taken inside it), so whoever holds a shard's lock sees the
// policy agree with the shard: a handle in the policy names a RAM replica
// not under an eviction order, at the place the handle says. An eviction
// pass reads its victim under polMu alone, then locks the victim's shard
// and checks. CheckInvariants alone holds several node locks (in node ID
// order, under nodesMu). Lookup takes only shard read locks, one at a
// time, and polMu alone (between shard locks, and at the end) to record
// recency; a read lease is an atomic deadline on the replica extended
// under the shard's read lock.
type Master struct {
	opts Options
	// Durations in nanoseconds, for the hot paths.
	nodeTTL, leaseTTL, taskTimeout int64
	// epoch is the master's birth (unix ns), the origin of Master.ms;
	// leaseSpan is the furthest ahead a lease ends, in ms, and leaseShift
	// the width of a slot of the shards' lease counts (leases.go), log2
	// ms; recencyMs is RecencyResolution in ms, rounded up, at least 1.
	epoch      int64
	leaseSpan  uint32
	leaseShift uint8
	recencyMs  uint32
	// lastMs is the latest value of the index's clock (msNow), which
	// never steps back.
	lastMs atomic.Uint32
	// onDrop, set by tests, runs in Expire before each dropped node's
	// replicas are removed (that node's lock held, no other).
	onDrop func()
	// lru: the eviction policy is LRU, kept as a log of the index's
	// replicas' accesses (lrulog.go) under lruMu; pol is nil. Otherwise
	// pol is the policy, under polMu.
	lru    bool
	lruMu  sync.Mutex
	lruLog lruLog

	shards [numShards]shard
	slabs  slabs // the shards' chunks (index.go)

	expireMu sync.Mutex
	evictMu  sync.Mutex

	nodesMu sync.RWMutex
	nodes   map[meta.NodeID]*node
	// nextExpiry is a lower bound on the earliest deadline of a live node
	// (unix ns); Lookup runs Expire once the clock passes it.
	nextExpiry atomic.Int64

	// tenants interns the tenants of indexed keys; nodeTab numbers the
	// nodes (a replica names its node by number: nodeAt). nodeTab is
	// replaced, never changed in place, under nodesMu.
	tenants tenantTable
	nodeTab atomic.Pointer[[]*node]

	polMu  sync.Mutex
	pol    policy.Eviction // keys are replica handles (index.go)
	polSeq int64           // Access.Time of the policy's accesses

	// sketch counts SSD hits for promotion; nil until the first hit is
	// counted (it is 8 MiB at the default SketchKeys, more than the index
	// of a million keys needs, and a master whose nodes have no SSD never
	// counts one). sketchOpts are its options, validated by New.
	sketchMu   sync.Mutex
	sketch     *policy.CMS
	sketchOpts policy.CMSOptions

	nextTask, nextSession atomic.Uint64

	// Pool RAM over the live (not yet dropped) nodes: capacity, and the
	// slot-rounded bytes of RAM replicas not under an eviction order.
	poolRAMBytes, poolRAMUsed atomic.Int64

	// holdUntil: no eviction is ordered before this time (unix ns;
	// HoldEviction).
	holdUntil atomic.Int64

	c counters
}

// node is one registered node. The atomics are read without mu (by Lookup
// and Place) and written under it.
type node struct {
	id     meta.NodeID
	idHash uint64
	num    uint16 // the node's number plus one (Master.nodeAt), for life
	// deadline is lastHeartbeat + NodeTTL in unix ns while the node is
	// alive, 0 after it is dropped. A node past its deadline is invisible
	// to readers even before Expire drops it.
	deadline  atomic.Int64
	ramUsed   atomic.Int64 // slot-rounded bytes of RAM replicas not evicting
	ramBytes  atomic.Int64
	slot      atomic.Int64 // info.BlockSize
	promoWant atomic.Int64 // slot-rounded bytes of admitted, unfinished promotions

	mu       sync.Mutex
	info     meta.NodeInfo
	session  meta.Session
	alive    bool // registered and not dropped
	removed  bool // deleted from the membership map: re-resolve the ID
	lastHB   time.Time
	reported meta.NodeUsage
	// ramCount and ssdCount are the node's replicas in the index. The
	// index is the only record of which they are: a walk of the shards
	// (nodeItems) lists them, so a key costs no per-node entry.
	ramCount int
	ssdCount int
	evicting int
	ssdUsed  int64

	tasks       map[uint64]*task
	evictQ      []uint64 // undelivered eviction orders (IDs; closed ones skipped)
	promoQ      []uint64 // undelivered promotions, oldest first
	evictByKey  map[block.Key]uint64
	promoByKey  map[block.Key]uint64
	promoQueued int // live entries of promoQ
	inflight    int // tasks delivered and not closed
}

// task is a task of a node and its state.
type task struct {
	meta.Task
	delivered bool
	deadline  int64 // unix ns after which a delivered task expires
	charge    int64 // promotion: the RAM it will take (counted in node.promoWant)
}

func newNode(id meta.NodeID) *node {
	return &node{
		id:         id,
		idHash:     block.Mix64(block.FNV1a(string(id))),
		tasks:      make(map[uint64]*task),
		evictByKey: make(map[block.Key]uint64),
		promoByKey: make(map[block.Key]uint64),
	}
}

// New returns an empty master: it learns the cluster purely from Register
// calls, so a restarted master is rebuilt by its nodes re-registering.
func New(opts Options) (*Master, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	var pol policy.Eviction
	lru := o.Eviction == "lru"
	if !lru {
		var err error
		if pol, err = policy.NewEviction(o.Eviction, o.PolicyCapacity); err != nil {
			return nil, fmt.Errorf("master: build eviction policy: %w", err)
		}
	}
	skOpts := policy.CMSOptions{Threshold: o.Promotion.Threshold}
	if err := skOpts.Validate(); err != nil {
		return nil, fmt.Errorf("master: promotion sketch: %w", err)
	}
	m := &Master{
		opts:        o,
		nodeTTL:     int64(o.NodeTTL),
		leaseTTL:    int64(o.LeaseTTL),
		taskTimeout: int64(o.Promotion.TaskTimeout),
		epoch:       o.Clock.Now().UnixNano(),
		leaseSpan:   uint32((o.LeaseTTL+time.Millisecond-1)/time.Millisecond) + 2,
		recencyMs:   uint32(max(1, (o.RecencyResolution+time.Millisecond-1)/time.Millisecond)),
		lru:         lru,
		nodes:       make(map[meta.NodeID]*node),
		pol:         pol,
		sketchOpts:  skOpts,
	}
	m.leaseShift = leaseShiftFor(m.leaseSpan)
	for i := range m.shards {
		m.shards[i].si = uint8(i)
		m.shards[i].tenants = &m.tenants
		m.shards[i].slabs = &m.slabs
	}
	m.nodeTab.Store(new([]*node))
	m.nextExpiry.Store(math.MaxInt64)
	// Sessions start from the clock so that two incarnations of the master
	// hand out different sessions: a node heartbeating a restarted master
	// with an old session is told to re-register.
	// Task IDs likewise, so a result a node sends for a task of the
	// previous incarnation never closes a task of this one.
	start := uint64(o.Clock.Now().UnixNano())
	m.nextSession.Store(start)
	m.nextTask.Store(start)
	return m, nil
}

// Options returns the options in effect (defaults filled in).
func (m *Master) Options() Options { return m.opts }

// now returns the clock's time and its unix nanoseconds.
func (m *Master) now() (time.Time, int64) {
	t := m.opts.Clock.Now()
	return t, t.UnixNano()
}

// Register adds a node, or re-registers one that restarted, lost its
// session or was dropped. The node sends its FULL inventory: afterwards the
// index holds exactly inv for this node (replicas it held before and still
// holds keep their leases and recency; the others are removed). Tasks of
// the previous session are closed (promotions count as expired; eviction
// orders are withdrawn and their replicas return to the eviction policy).
// Nothing changes when an argument is invalid.
func (m *Master) Register(info meta.NodeInfo, inv meta.Inventory, usage meta.NodeUsage) (meta.RegisterReply, error) {
	if err := info.Validate(); err != nil {
		return meta.RegisterReply{}, fmt.Errorf("master: register node %q: %w", info.ID, err)
	}
	if err := validateUsage(usage); err != nil {
		return meta.RegisterReply{}, fmt.Errorf("master: register node %q: %w", info.ID, err)
	}
	want, err := inventorySet(inv)
	if err != nil {
		return meta.RegisterReply{}, fmt.Errorf("master: register node %q: %w", info.ID, err)
	}
	now, nowNs := m.now()
	n, err := m.lockNodeForRegister(info.ID)
	if err != nil {
		return meta.RegisterReply{}, fmt.Errorf("master: register node %q: %w", info.ID, err)
	}
	wasAlive := n.alive
	m.closeAllTasks(n)
	if wasAlive && info.BlockSize != n.info.BlockSize {
		// Slot rounding changes: recount every RAM replica from scratch.
		m.removeAll(n)
	}
	if wasAlive {
		m.poolRAMBytes.Add(info.RAMBytes - n.info.RAMBytes)
	} else {
		n.alive = true
		m.poolRAMBytes.Add(info.RAMBytes)
		m.poolRAMUsed.Add(n.ramUsed.Load())
	}
	n.info = info
	n.ramBytes.Store(info.RAMBytes)
	n.slot.Store(info.BlockSize)
	for _, ik := range m.nodeItems(n) {
		if _, ok := want[ik]; !ok {
			m.removeReplica(n, ik)
		}
	}
	for i := range inv {
		m.addReplica(n, &inv[i])
	}
	n.session = meta.Session(m.nextSession.Add(1))
	n.lastHB, n.reported = now, usage
	deadline := nowNs + m.nodeTTL
	n.deadline.Store(deadline)
	reply := meta.RegisterReply{Session: n.session, HeartbeatInterval: m.opts.HeartbeatInterval, NodeTTL: m.opts.NodeTTL}
	n.mu.Unlock()
	m.c.registers.Add(1)
	m.lowerNextExpiry(deadline)
	m.evict()
	return reply, nil
}

// lockNodeForRegister returns the node named id, created if needed, with
// its mu held. It fails when MaxNodes nodes are known.
func (m *Master) lockNodeForRegister(id meta.NodeID) (*node, error) {
	for {
		m.nodesMu.Lock()
		n := m.nodes[id]
		if n == nil {
			n = newNode(id)
			if !m.numberNode(n) {
				m.nodesMu.Unlock()
				return nil, fmt.Errorf("%w: the master knows %d nodes already (at most %d)", kvpool.ErrFull, len(m.nodes), MaxNodes)
			}
			m.nodes[id] = n
		}
		m.nodesMu.Unlock()
		n.mu.Lock()
		if !n.removed {
			return n, nil
		}
		n.mu.Unlock() // Expire deleted it meanwhile: look again
	}
}

// MaxNodes is the most nodes a master knows at once (live, and dropped
// ones not yet forgotten): a replica names its node in 16 bits.
const MaxNodes = 1<<16 - 1

// numberNode gives n the lowest free node number. nodesMu is held.
func (m *Master) numberNode(n *node) bool {
	old := *m.nodeTab.Load()
	for i, o := range old {
		if o == nil {
			tab := slices.Clone(old)
			tab[i] = n
			n.num = uint16(i + 1)
			m.nodeTab.Store(&tab)
			return true
		}
	}
	if len(old) >= MaxNodes {
		return false
	}
	tab := append(slices.Clip(old), n)
	n.num = uint16(len(tab))
	m.nodeTab.Store(&tab)
	return true
}

// forgetNode frees the number of n, which Expire deleted from the
// membership map and which has no replica. nodesMu is held.
func (m *Master) forgetNode(n *node) {
	tab := slices.Clone(*m.nodeTab.Load())
	tab[n.num-1] = nil
	m.nodeTab.Store(&tab)
}

// nodeAt returns the node of number num (plus one), as replicas name it.
func (m *Master) nodeAt(num uint16) *node { return (*m.nodeTab.Load())[num-1] }

func (m *Master) lowerNextExpiry(deadline int64) {
	for {
		cur := m.nextExpiry.Load()
		if deadline >= cur || m.nextExpiry.CompareAndSwap(cur, deadline) {
			return
		}
	}
}

// Heartbeat keeps a node alive and exchanges state with it: it applies the
// node's inventory delta, records its usage report, closes the tasks in
// done, counts its SSD hits for promotion, expires its tasks that were not
// acknowledged within TaskTimeout, runs an eviction pass if the pool is over
// its high watermark, and returns the node's pending tasks.
//
// An unknown node, a stale session, or a node that has already missed its
// TTL gets an error wrapping ErrUnknownNode (the node must re-register with
// its full inventory). Every argument is validated before anything
// changes; a bad one is an error wrapping ErrBadRequest that names it.
func (m *Master) Heartbeat(id meta.NodeID, session meta.Session, delta meta.Delta, usage meta.NodeUsage, ssdHits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error) {
	if err := validateHeartbeat(&delta, usage, ssdHits, done); err != nil {
		return meta.HeartbeatReply{}, fmt.Errorf("master: heartbeat from node %q: %w", id, err)
	}
	now, nowNs := m.now()
	m.nodesMu.RLock()
	n := m.nodes[id]
	m.nodesMu.RUnlock()
	if n == nil {
		return meta.HeartbeatReply{}, fmt.Errorf("master: heartbeat from node %q: %w", id, meta.ErrUnknownNode)
	}
	n.mu.Lock()
	if err := m.checkSessionLocked(n, session, nowNs); err != nil {
		n.mu.Unlock()
		return meta.HeartbeatReply{}, err
	}
	n.lastHB, n.reported = now, usage
	n.deadline.Store(nowNs + m.nodeTTL)
	m.applyDelta(n, &delta)
	m.applyResults(n, done)
	m.expireTasks(n, nowNs)
	if !m.opts.Promotion.Disabled {
		m.considerPromotions(n, ssdHits)
	}
	n.mu.Unlock()
	m.c.heartbeats.Add(1)

	m.evict() // orders for this node go out in this very reply

	n.mu.Lock()
	defer n.mu.Unlock()
	if n.removed || !n.alive || n.session != session {
		return meta.HeartbeatReply{}, fmt.Errorf("master: heartbeat from node %q session %d: re-registered meanwhile: %w", id, session, meta.ErrUnknownNode)
	}
	return meta.HeartbeatReply{Tasks: m.deliverTasks(n, nowNs), HeartbeatInterval: m.opts.HeartbeatInterval}, nil
}

// checkSessionLocked refuses a heartbeat of a dropped node or a stale
// session, and drops a node whose heartbeat comes after its TTL (it has
// been invisible since; it must re-register its inventory).
func (m *Master) checkSessionLocked(n *node, session meta.Session, nowNs int64) error {
	if n.removed || !n.alive {
		return fmt.Errorf("master: heartbeat from node %q: dropped: %w", n.id, meta.ErrUnknownNode)
	}
	if n.session != session {
		return fmt.Errorf("master: heartbeat from node %q: session %d, current %d: %w", n.id, session, n.session, meta.ErrUnknownNode)
	}
	if n.deadline.Load() < nowNs {
		m.dropNode(n)
		return fmt.Errorf("master: heartbeat from node %q: silent for more than %v, dropped: %w", n.id, m.opts.NodeTTL, meta.ErrUnknownNode)
	}
	return nil
}

// Expire drops every node whose last heartbeat is older than NodeTTL, with
// all its replicas and tasks (its undelivered and unacknowledged tasks count
// as expired), expires the live nodes' tasks not acknowledged within
// TaskTimeout, and forgets dropped nodes. It returns the number of nodes
// dropped. Call it from a ticker; Lookup also runs it when a node's TTL has
// passed.
func (m *Master) Expire() int {
	m.expireMu.Lock()
	defer m.expireMu.Unlock()
	return m.expireLocked()
}

func (m *Master) expireLocked() int {
	_, nowNs := m.now()
	var dropped []*node
	next := int64(math.MaxInt64)
	m.nodesMu.Lock()
	for id, n := range m.nodes {
		n.mu.Lock()
		if n.alive && n.deadline.Load() < nowNs {
			// Dead from here on, to readers and to the pool's
			// accounting; its lock is held until its replicas are gone.
			m.markDropped(n)
			dropped = append(dropped, n)
			continue
		}
		if n.alive {
			m.expireTasks(n, nowNs)
			next = min(next, n.deadline.Load())
		} else {
			m.forget(id, n)
		}
		n.mu.Unlock()
	}
	m.nextExpiry.Store(next)
	m.nodesMu.Unlock()
	if len(dropped) == 0 {
		return 0
	}
	// Removing a node's replicas walks the whole index (seconds at tens
	// of millions of keys): it runs without the membership lock, so the
	// other nodes' heartbeats and registrations go on meanwhile instead
	// of waiting past their own TTLs. Each dropped node's lock, held
	// since it was marked, keeps it from re-registering (and the
	// invariants from being checked) while its replicas are half gone.
	for _, n := range dropped {
		if m.onDrop != nil {
			m.onDrop()
		}
		m.removeAll(n)
		n.mu.Unlock()
	}
	m.nodesMu.Lock()
	for _, n := range dropped {
		n.mu.Lock()
		if !n.alive { // not registered again meanwhile
			m.forget(n.id, n)
		}
		n.mu.Unlock()
	}
	m.nodesMu.Unlock()
	m.evict() // the pool shrank
	return len(dropped)
}

// forget deletes dropped node n, which has no replica left, from the
// membership map and frees its number. nodesMu and n.mu are held.
func (m *Master) forget(id meta.NodeID, n *node) {
	n.removed = true
	delete(m.nodes, id)
	m.forgetNode(n)
}

// maybeExpire runs Expire if a node's deadline may have passed and no one
// else is expiring.
func (m *Master) maybeExpire(nowNs int64) {
	if nowNs > m.nextExpiry.Load() && m.expireMu.TryLock() {
		m.expireLocked()
		m.expireMu.Unlock()
	}
}

// dropNode marks n dead and removes its replicas and tasks. n.mu is held.
func (m *Master) dropNode(n *node) {
	m.markDropped(n)
	m.removeAll(n)
}

// markDropped closes n's tasks and marks it dead: its replicas are
// invisible from here on (visible checks the node's deadline) and its RAM
// leaves the pool's totals, but they stay indexed until removeAll. n.mu
// is held.
func (m *Master) markDropped(n *node) {
	m.closeAllTasks(n)
	n.alive = false
	n.deadline.Store(0)
	m.poolRAMBytes.Add(-n.info.RAMBytes)
	m.poolRAMUsed.Add(-n.ramUsed.Load()) // removeAll then leaves the pool alone (addRAMUsed)
	m.c.nodesDropped.Add(1)
}

// charge is the RAM a replica of key k and size bytes occupies on n: its
// name and payload in whole chunks of the node's BlockSize
// (meta.Footprint).
func charge(n *node, k block.Key, size int64) int64 {
	return meta.Footprint(k, size, n.info.BlockSize)
}

// addRAMUsed changes n's indexed RAM usage (and the pool's while n is
// alive). n.mu is held.
func (m *Master) addRAMUsed(n *node, d int64) {
	n.ramUsed.Add(d)
	if n.alive {
		m.poolRAMUsed.Add(d)
	}
}

// polInsert puts replica r of s, handle h, in the eviction order as its
// most recent member. s.mu is held for writing.
func (m *Master) polInsert(s *shard, h uint64, r *replica) {
	if m.lru {
		m.lruMu.Lock()
		m.lruPush(lruLink(h), r)
		m.lruMu.Unlock()
		return
	}
	m.polMu.Lock()
	m.polSeq++
	m.pol.Insert(policy.Access{Key: h, Time: m.polSeq})
	m.polMu.Unlock()
}

// polRemove takes replica r of s, handle h, out of the eviction order.
// s.mu is held for writing.
func (m *Master) polRemove(s *shard, h uint64, r *replica) {
	if m.lru {
		m.lruMu.Lock()
		m.lruUnlink(r)
		m.lruMu.Unlock()
		return
	}
	m.polMu.Lock()
	if m.pol.Contains(h) {
		m.pol.Remove(h)
	}
	m.polMu.Unlock()
}

// nowMs returns the clock in Master.ms.
func (m *Master) nowMs() uint32 {
	_, ns := m.now()
	return m.msNow(ns)
}

// keyPlace is where a key lives in the index: its shard, its hash, and its
// tenant's number plus one (0: a tenant the index has never held).
type keyPlace struct {
	s   *shard
	h   uint64
	tid uint32
}

// keyAt returns k's place; with intern, k's tenant is given a number if it
// has none.
func (m *Master) keyAt(k block.Key, intern bool) keyPlace {
	h := k.Hash()
	var tid uint32
	if intern {
		tid = m.tenants.intern(k.Tenant)
	} else {
		tid = m.tenants.id(k.Tenant)
	}
	return keyPlace{s: m.shardOf(h), h: h, tid: tid}
}

// entryOf returns k's entry plus one in p.s, or 0. p.s.mu is held.
func (p keyPlace) entryOf(k block.Key) uint32 { return p.s.lookup(p.tid, p.h, k.ID, k.Name) }

// addReplica indexes it on n, or updates the size and checksum of the
// replica already there. n.mu is held.
func (m *Master) addReplica(n *node, it *meta.Item) {
	p := m.keyAt(it.Key, true)
	s := p.s
	s.mu.Lock()
	e1 := p.entryOf(it.Key)
	if e1 != 0 {
		if r, _ := s.findRep(e1-1, n.num, it.Tier); r != nil {
			old, evicting := r.size(), r.evicting()
			r.setSize(it.Size)
			r.sum = it.Sum
			s.mu.Unlock()
			switch {
			case it.Tier == meta.TierSSD:
				n.ssdUsed += it.Size - old
			case !evicting: // an evicting replica no longer counts
				m.addRAMUsed(n, charge(n, it.Key, it.Size)-charge(n, it.Key, old))
			}
			return
		}
	} else {
		ei, ok := s.insert(p.tid, p.h, it.Key.ID, it.Key.Name)
		if !ok {
			s.mu.Unlock()
			m.c.indexFull.Add(1)
			return
		}
		e1 = ei + 1
	}
	r, h := s.addRep(e1-1, newReplica(n.num, it))
	if r == nil {
		if !hasReps(s.ent(e1 - 1)) {
			s.removeKey(e1 - 1)
		}
		s.mu.Unlock()
		m.c.indexFull.Add(1)
		return
	}
	if it.Tier == meta.TierRAM {
		// Recorded long enough ago that the next leased lookup records
		// its access.
		atomic.StoreUint32(&r.touched, m.nowMs()-m.recencyMs)
		m.polInsert(s, h, r)
	}
	s.mu.Unlock()
	if it.Tier == meta.TierRAM {
		n.ramCount++
		m.c.ramReplicas.Add(1)
		m.addRAMUsed(n, charge(n, it.Key, it.Size))
	} else {
		n.ssdCount++
		n.ssdUsed += it.Size
		m.c.ssdReplicas.Add(1)
	}
}

// takeReplica deletes n's replica ik from its shard (and from the eviction
// policy) and returns its size and whether it was evicting.
func (m *Master) takeReplica(n *node, ik meta.ItemKey) (size int64, evicting, ok bool) {
	p := m.keyAt(ik.Key, false)
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e1 := p.entryOf(ik.Key)
	if e1 == 0 {
		return 0, false, false
	}
	r, h := s.findRep(e1-1, n.num, ik.Tier)
	if r == nil {
		return 0, false, false
	}
	// Field by field: the links may be moving (lruMu).
	size, evicting = r.size(), r.evicting()
	if r.tier() == meta.TierRAM && !evicting {
		m.polRemove(s, h, r)
	}
	m.dropLease(s, r)
	s.dropRep(e1-1, h) // a key SET again starts without a TTL
	return size, evicting, true
}

// removeReplica removes n's replica ik from the index; false if the index
// does not hold it. n.mu is held.
func (m *Master) removeReplica(n *node, ik meta.ItemKey) bool {
	size, evicting, ok := m.takeReplica(n, ik)
	if !ok {
		return false
	}
	if ik.Tier == meta.TierRAM {
		n.ramCount--
		m.c.ramReplicas.Add(-1)
		if evicting {
			n.evicting--
			m.closeEviction(n, ik.Key)
		} else {
			m.addRAMUsed(n, -charge(n, ik.Key, size))
		}
	} else {
		n.ssdCount--
		n.ssdUsed -= size
		m.c.ssdReplicas.Add(-1)
	}
	return true
}

// removeAll removes every replica of n: a walk of every shard, O(index),
// in runs of removeRun entries under the shard's write lock, so lookups
// of the shard wait for one run at most. n.mu is held, and keeps n from
// gaining a replica meanwhile.
func (m *Master) removeAll(n *node) {
	for i := range m.shards {
		if n.ramCount+n.ssdCount == 0 {
			return
		}
		s := &m.shards[i]
		for from := uint32(0); ; from += removeRun {
			if !m.removeRunOf(n, s, from) {
				break
			}
		}
	}
}

// removeRun is how many entries removeAll walks under one hold of a
// shard's write lock: about a tenth of a millisecond.
const removeRun = 1024

// removeRunOf removes n's replicas from s's entries from to from +
// removeRun, and reports whether s has entries past them. n.mu is held.
func (m *Master) removeRunOf(n *node, s *shard, from uint32) bool {
	var ramGone, ssdGone, ramBytes int64
	s.mu.Lock()
	end := min(from+removeRun, s.nEnts)
	for ei := from; ei < end; ei++ {
		e := s.ent(ei)
		if e.tenant == 0 {
			continue // free
		}
		for {
			r, h := s.findNodeRep(ei, n.num)
			if r == nil {
				break
			}
			var k block.Key
			ram, evicting := r.tier() == meta.TierRAM, r.evicting()
			if ram {
				k = s.keyOf(e) // before the replica and maybe the key go
				if !evicting {
					m.polRemove(s, h, r)
				}
			}
			size := r.size()
			m.dropLease(s, r)
			s.dropRep(ei, h)
			switch {
			case !ram:
				ssdGone++
				n.ssdUsed -= size
			case evicting:
				ramGone++
				n.evicting--
				m.closeEviction(n, k)
			default:
				ramGone++
				ramBytes += charge(n, k, size)
			}
			if e.tenant == 0 {
				break // that was the key's last replica
			}
		}
	}
	more := end < s.nEnts
	s.mu.Unlock()
	n.ramCount -= int(ramGone)
	n.ssdCount -= int(ssdGone)
	m.c.ramReplicas.Add(-ramGone)
	m.c.ssdReplicas.Add(-ssdGone)
	m.addRAMUsed(n, -ramBytes)
	return more
}

// nodeItems lists n's replicas: a walk of every shard, O(index), taken
// only when n has replicas (a node re-registering or being dropped).
// n.mu is held, so the list stays true until it is released.
func (m *Master) nodeItems(n *node) []meta.ItemKey {
	want := n.ramCount + n.ssdCount
	if want == 0 {
		return nil
	}
	out := make([]meta.ItemKey, 0, want)
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		for ei := range s.entries() {
			for r := range s.replicas(ei) {
				if r.node == n.num {
					out = append(out, meta.ItemKey{Key: s.keyOf(s.ent(ei)), Tier: r.tier()})
				}
			}
		}
		s.mu.RUnlock()
	}
	return out
}

// hasReplica reports whether the index holds n's replica of k in tier t.
func (m *Master) hasReplica(n *node, k block.Key, t meta.Tier) bool {
	p := m.keyAt(k, false)
	p.s.mu.RLock()
	defer p.s.mu.RUnlock()
	e1 := p.entryOf(k)
	if e1 == 0 {
		return false
	}
	r, _ := p.s.findRep(e1-1, n.num, t)
	return r != nil
}

// moveReplica moves n's replica of mv.Key between tiers; false if the
// index does not hold the source. n.mu is held.
func (m *Master) moveReplica(n *node, mv *meta.Move) bool {
	from := meta.ItemKey{Key: mv.Key, Tier: mv.From}
	if !m.hasReplica(n, mv.Key, mv.From) {
		return false
	}
	if m.hasReplica(n, mv.Key, mv.To) {
		return m.removeReplica(n, from) // merged into the copy already there
	}
	p := m.keyAt(mv.Key, false)
	s := p.s
	s.mu.Lock()
	e1 := p.entryOf(mv.Key)
	var r *replica
	var h uint64
	if e1 != 0 {
		r, h = s.findRep(e1-1, n.num, mv.From)
	}
	if r == nil {
		s.mu.Unlock()
		return false // unreachable: n.mu is held since hasReplica
	}
	oldSize, oldEvicting := r.size(), r.evicting()
	switch {
	case mv.To == meta.TierRAM:
		r.setTier(mv.To)
		m.polInsert(s, h, r)
	case !oldEvicting:
		m.polRemove(s, h, r)
	}
	r.setTier(mv.To)
	r.setEvicting(false)
	s.mu.Unlock()
	if mv.To == meta.TierSSD {
		n.ramCount--
		n.ssdCount++
		n.ssdUsed += oldSize
		m.c.ramReplicas.Add(-1)
		m.c.ssdReplicas.Add(1)
		if oldEvicting {
			n.evicting--
			m.closeEviction(n, mv.Key)
		} else {
			m.addRAMUsed(n, -charge(n, mv.Key, oldSize))
		}
	} else {
		n.ssdCount--
		n.ssdUsed -= oldSize
		m.c.ssdReplicas.Add(-1)
		m.c.ramReplicas.Add(1)
		n.ramCount++
		m.addRAMUsed(n, charge(n, mv.Key, oldSize))
	}
	return true
}

// applyDelta applies a validated delta in order. n.mu is held.
func (m *Master) applyDelta(n *node, d *meta.Delta) {
	for i := range d.Added {
		m.addReplica(n, &d.Added[i])
	}
	for _, ik := range d.Removed {
		if !m.removeReplica(n, ik) {
			m.c.deltaUnknown.Add(1)
		}
	}
	for i := range d.Moved {
		if !m.moveReplica(n, &d.Moved[i]) {
			m.c.deltaUnknown.Add(1)
		}
	}
}

// inventorySet validates inv and returns its replica set.
func inventorySet(inv meta.Inventory) (map[meta.ItemKey]struct{}, error) {
	set := make(map[meta.ItemKey]struct{}, len(inv))
	for i := range inv {
		it := &inv[i]
		if err := validateItem(it); err != nil {
			return nil, fmt.Errorf("inventory[%d]: %w", i, err)
		}
		ik := meta.ItemKey{Key: it.Key, Tier: it.Tier}
		if _, dup := set[ik]; dup {
			return nil, badRequest("inventory[%d]: %v in %v listed twice", i, it.Key, it.Tier)
		}
		set[ik] = struct{}{}
	}
	return set, nil
}

func validateKey(k block.Key) error {
	if err := k.Validate(); err != nil {
		return fmt.Errorf("%w: key %v: %w", meta.ErrBadRequest, k, err)
	}
	return nil
}

func validateTier(k block.Key, t meta.Tier) error {
	if !t.Valid() {
		return badRequest("key %v: %v is not a tier (want ram or ssd)", k, t)
	}
	return nil
}

func validateItem(it *meta.Item) error {
	if err := validateKey(it.Key); err != nil {
		return err
	}
	if err := validateTier(it.Key, it.Tier); err != nil {
		return err
	}
	if it.Size < 0 || it.Size > meta.MaxItemSize {
		return badRequest("key %v: size %d (want 0 to %d)", it.Key, it.Size, int64(meta.MaxItemSize))
	}
	return nil
}

func validateUsage(u meta.NodeUsage) error {
	if u.RAMUsed < 0 || u.SSDUsed < 0 {
		return badRequest("usage %+v is negative", u)
	}
	return nil
}

func validateHeartbeat(d *meta.Delta, usage meta.NodeUsage, ssdHits []block.Key, done []meta.TaskResult) error {
	if err := validateUsage(usage); err != nil {
		return err
	}
	for i := range d.Added {
		if err := validateItem(&d.Added[i]); err != nil {
			return fmt.Errorf("delta.Added[%d]: %w", i, err)
		}
	}
	for i, ik := range d.Removed {
		if err := validateKey(ik.Key); err != nil {
			return fmt.Errorf("delta.Removed[%d]: %w", i, err)
		}
		if err := validateTier(ik.Key, ik.Tier); err != nil {
			return fmt.Errorf("delta.Removed[%d]: %w", i, err)
		}
	}
	for i, mv := range d.Moved {
		if err := validateKey(mv.Key); err != nil {
			return fmt.Errorf("delta.Moved[%d]: %w", i, err)
		}
		if err := validateTier(mv.Key, mv.From); err != nil {
			return fmt.Errorf("delta.Moved[%d].From: %w", i, err)
		}
		if err := validateTier(mv.Key, mv.To); err != nil {
			return fmt.Errorf("delta.Moved[%d].To: %w", i, err)
		}
		if mv.From == mv.To {
			return badRequest("delta.Moved[%d]: key %v moves from %v to itself", i, mv.Key, mv.From)
		}
	}
	for i, k := range ssdHits {
		if err := validateKey(k); err != nil {
			return fmt.Errorf("ssdHits[%d]: %w", i, err)
		}
	}
	for i, r := range done {
		if r.Bytes < 0 {
			return badRequest("done[%d]: task %d: bytes %d is negative", i, r.ID, r.Bytes)
		}
	}
	return nil
}
