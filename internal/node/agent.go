package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node/store"
)

// Agent tuning. Each constant says where its value comes from.
const (
	// minBackoff is the first wait after a failed call to the master; it
	// doubles per failure up to maxBackoff. 100 ms retries a master that
	// restarts in a blink almost at once.
	minBackoff = 100 * time.Millisecond
	// maxBackoff caps the wait: 10 s bounds how long a node stays out of
	// the index once its master is back, while one connection attempt
	// every 10 s per node costs a down master nothing.
	maxBackoff = 10 * time.Second
	// rpcTimeout bounds one Register or Heartbeat call. The largest
	// registration (masterproto's 2^21 items, 48 MiB) crosses a 1 Gbit/s
	// link in 0.4 s; a master slower than 10 s is stuck, and the node's
	// TTL (3 s by default) has lapsed anyway.
	rpcTimeout = 10 * time.Second
	// minBeatTimeout is the least a heartbeat waits for its answer. A
	// heartbeat waits at most the node TTL the master gave (at least
	// this, at most rpcTimeout): an answer later than that finds the node
	// dropped anyway, and a master frozen with the request (a stopped
	// leader whose successor is elected meanwhile) holds the node back
	// from the next leader for no longer than that.
	minBeatTimeout = time.Second
	// maxSSDHits bounds the distinct keys served from SSD kept for the next
	// beat: the master admits at most max_per_heartbeat promotions (16 by
	// default) per beat, so 65,536 candidates lose no information that
	// matters, and the list stays under 2 MiB.
	maxSSDHits = 1 << 16
	// maxResults bounds the task results kept while the master is
	// unreachable: the tasks of an unreachable master expire on its side
	// anyway (TaskTimeout), so older results only cost memory.
	maxResults = 1 << 16
	// recheckWait is how soon a beat follows one that left a departing
	// RAM copy to look at again (mark.leaving) while a Sync waits for it:
	// the copy leaves RAM when the store's eviction hook returns, within
	// microseconds of the event; 100 ms (minBackoff) is far beyond that
	// on a loaded host, and short next to the beat interval a Sync would
	// otherwise wait.
	recheckWait = minBackoff
)

// reportLimits bound what one REGISTER or heartbeat reports: at most
// items inventory or delta entries and bytes of them (names included).
// A node with more — 2M named objects of 50 bytes in two tiers are 4M
// entries, 300 MiB — registers with the first part of its inventory and
// reports the rest as additions in the heartbeats that follow at once,
// each within the same bounds, so that no frame exceeds the master's
// limits however many objects the node holds.
type reportLimits struct {
	items, bytes int
}

// defaultReportLimits are half the master protocol's default limits
// (masterproto.DefaultMaxItems entries, DefaultMaxFrame bytes): the other
// half is room for the frame's tenant table (at most 32767 tenants of 255
// bytes, 8 MiB), the SSD hits (maxSSDHits, counted against bytes) and the
// task results. A master configured with smaller limits than its defaults
// refuses a large node's reports.
func defaultReportLimits() reportLimits {
	return reportLimits{items: masterproto.DefaultMaxItems / 2, bytes: masterproto.DefaultMaxFrame / 2}
}

// reportCost is the worst case k takes in a report: an entry per tier.
func reportCost(k block.Key) (items, bytes int) { return 2, 2 * masterproto.ItemLen(k) }

// blockMeta is a block's size and checksum as the master indexes them.
type blockMeta struct {
	size int64
	sum  uint32
}

// mark is a dirty key: its tiers may have changed since the last report.
type mark struct {
	meta    blockMeta
	hasMeta bool // meta comes from an event (the newest copy)
	// leaving: an eviction was reported while the RAM copy was still
	// leaving RAM; a beat that still finds it in RAM looks again at the
	// next beat once (retried) rather than reporting it.
	leaving, retried bool
}

// merge folds an older mark o into m (m holds newer information).
func (m mark) merge(o mark) mark {
	if !m.hasMeta && o.hasMeta {
		m.meta, m.hasMeta = o.meta, true
	}
	m.leaving = m.leaving || o.leaving
	return m
}

// entry is what the master's index holds for one of the node's keys.
type entry struct {
	loc  store.Location
	meta blockMeta
}

// AgentStats count the agent's calls to the master.
type AgentStats struct {
	// Registers and Beats count successful calls; Failures failed ones
	// (either kind); Reregisters the registrations caused by the master
	// answering meta.ErrUnknownNode.
	Registers, Beats, Failures, Reregisters uint64
	// Syncs counts Sync calls; Kicked the heartbeats (or registrations)
	// begun before their interval because a Sync was waiting for one.
	// Concurrent Syncs share beats, so Kicked grows slower than Syncs.
	Syncs, Kicked uint64
	// Registered reports whether the node holds a live session.
	Registered bool
	// TasksDropped counts the master's tasks (promotions in flight, and
	// results not yet reported) dropped when the node registered again:
	// the new session's master never gave them.
	TasksDropped uint64
}

// agent keeps a master informed about one node's store and executes the
// master's orders. Its event hooks (onEvent, onPromotion, Consider) are
// called by the store from any goroutine, and so is Sync; register, beat
// and run are called by one goroutine at a time.
//
// Reports (registrations and heartbeats) are numbered in the order they
// take the dirty set (takeDirty). Report n covers every event emitted
// before it took the set when the master accepted it and it put no mark
// back for a later report (the rest of a report over the frame limits, a
// departing copy to look at again): synced is then at least n. A Sync
// called when begun was b waits for synced > b.
type agent struct {
	client   MasterClient
	interval time.Duration // the configured heartbeat interval
	log      *slog.Logger
	st       *store.Store
	info     meta.NodeInfo

	mu      sync.Mutex // guards the fields up to the blank line
	dirty   map[block.Key]mark
	hits    []block.Key
	hitSet  map[block.Key]struct{}
	results []meta.TaskResult
	promos  map[block.Key]uint64 // promotion task in flight per key
	// Sync's state (see the type comment): begun counts the reports that
	// took the dirty set, synced is the number of the last one that left
	// every earlier event reported, want the report number the waiting
	// Syncs need (synced < want: a Sync waits), progress is closed (and
	// then nil until the next Sync) whenever synced advances.
	begun, synced, want uint64
	progress            chan struct{}

	// Owned by the goroutine calling register and beat.
	reported   map[block.Key]entry
	session    meta.Session
	registered bool
	every      time.Duration // the beat interval in effect
	ttl        time.Duration // the master's node TTL (0 until registered)

	limits  reportLimits
	backlog bool // dirty keys were left out of the last report for size: beat again at once
	recheck bool // the last report put back a departing copy to look at again

	// kick wakes the run loop for a Sync (capacity 1: kicks coalesce).
	kick chan struct{}

	registers, beats, failures, reregisters atomic.Uint64
	tasksDropped                            atomic.Uint64
	syncs, kicked                           atomic.Uint64
	live                                    atomic.Bool
}

var _ store.Promoter = (*agent)(nil)

func newAgent(c MasterClient, interval time.Duration, log *slog.Logger) *agent {
	return &agent{
		client:   c,
		interval: interval,
		every:    interval,
		log:      log,
		dirty:    make(map[block.Key]mark),
		hitSet:   make(map[block.Key]struct{}),
		promos:   make(map[block.Key]uint64),
		reported: make(map[block.Key]entry),
		limits:   defaultReportLimits(),
		kick:     make(chan struct{}, 1),
	}
}

// attach gives the agent its store and identity and marks every block the
// store holds as dirty, so the first registration reports them. Call it
// before the store serves anything.
func (a *agent) attach(st *store.Store, info meta.NodeInfo) {
	a.st, a.info = st, info
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, it := range st.SSDItems() {
		m := mark{meta: blockMeta{int64(it.Size), it.Sum}, hasMeta: true}
		a.dirty[it.Key] = a.dirty[it.Key].merge(m)
	}
}

// stats returns the agent's counters.
func (a *agent) stats() AgentStats {
	return AgentStats{
		Registers: a.registers.Load(), Beats: a.beats.Load(),
		Failures: a.failures.Load(), Reregisters: a.reregisters.Load(),
		Syncs: a.syncs.Load(), Kicked: a.kicked.Load(),
		Registered: a.live.Load(), TasksDropped: a.tasksDropped.Load(),
	}
}

// onEvent is the store's OnEvent: it marks the key dirty.
func (a *agent) onEvent(e store.Event) {
	var m mark
	switch e.Kind {
	case store.EventPut, store.EventWriteAround, store.EventPromoted:
		m.meta, m.hasMeta = blockMeta{int64(e.Size), e.Sum}, true
	case store.EventDemoted:
		m.meta, m.hasMeta, m.leaving = blockMeta{int64(e.Size), e.Sum}, true, true
	case store.EventDropped:
		m.leaving = true
	}
	a.mu.Lock()
	old, ok := a.dirty[e.Key]
	if ok {
		if e.Kind == store.EventPut || e.Kind == store.EventPromoted {
			old.leaving = false // a newer RAM copy: nothing is leaving
		}
		m = m.merge(old)
	}
	a.dirty[e.Key] = m
	a.mu.Unlock()
}

// onPromotion is the store's OnPromotion: it turns the outcome of a
// promotion the master asked for into a task result for the next beat.
func (a *agent) onPromotion(r store.PromotionResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok := a.promos[r.Key]
	if !ok {
		return
	}
	delete(a.promos, r.Key)
	ok = r.Outcome == store.Completed || r.Outcome == store.AlreadyInRAM
	a.addResultLocked(meta.TaskResult{ID: id, OK: ok, Bytes: int64(r.Bytes)})
}

func (a *agent) addResultLocked(r meta.TaskResult) {
	if len(a.results) < maxResults {
		a.results = append(a.results, r)
	}
}

// Consider records an SSD hit for the master, which decides promotions;
// the node never promotes on its own (store.Skip).
func (a *agent) Consider(k block.Key, _ store.Load) store.Verdict {
	a.mu.Lock()
	if _, dup := a.hitSet[k]; !dup && len(a.hits) < maxSSDHits {
		a.hitSet[k] = struct{}{}
		a.hits = append(a.hits, k)
	}
	a.mu.Unlock()
	return store.Skip
}

// takeDirty empties the dirty set and returns it, with the number of the
// report it begins.
func (a *agent) takeDirty() (map[block.Key]mark, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.dirty
	a.dirty = make(map[block.Key]mark, len(d))
	a.begun++
	return d, a.begun
}

// takeDirtyWithin empties the dirty set and returns it split in two: the
// keys whose report fits in items entries and bytes bytes (at worst, an
// entry per tier: reportCost), and the rest, to be put back.
func (a *agent) takeDirtyWithin(items, bytes int) (d, rest map[block.Key]mark, n uint64) {
	d, n = a.takeDirty()
	taken := 0
	for k, m := range d {
		ni, nb := reportCost(k)
		if (items >= ni && bytes >= nb) || taken == 0 { // at least one: the backlog always shrinks
			items, bytes, taken = items-ni, bytes-nb, taken+1
			continue
		}
		if rest == nil {
			rest = make(map[block.Key]mark)
		}
		rest[k] = m
		delete(d, k)
	}
	return d, rest, n
}

// restoreDirty puts marks back into the dirty set (newer marks win).
func (a *agent) restoreDirty(d map[block.Key]mark) {
	if len(d) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, m := range d {
		if cur, ok := a.dirty[k]; ok {
			m = cur.merge(m)
		}
		a.dirty[k] = m
	}
}

// reconcile looks up the current tiers of the dirty keys and returns the
// delta from base (what the master holds) to them, the new entries
// (loc 0: gone), and the marks to look at again at the next beat.
func (a *agent) reconcile(d map[block.Key]mark, base map[block.Key]entry) (meta.Delta, map[block.Key]entry, map[block.Key]mark) {
	var delta meta.Delta
	updates := make(map[block.Key]entry, len(d))
	var later map[block.Key]mark
	if len(d) == 0 {
		return delta, updates, later
	}
	keys := make([]block.Key, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	locs := a.st.Locate(keys)
	for i, k := range keys {
		m, loc := d[k], locs[i]
		if m.leaving && !m.retried && loc&store.InRAM != 0 {
			m.retried = true
			if later == nil {
				later = make(map[block.Key]mark)
			}
			later[k] = m
			continue
		}
		old := base[k]
		md := old.meta
		switch {
		case loc == 0:
		case m.hasMeta:
			md = m.meta
		case old.loc == 0:
			it, ok := a.st.SSDItem(k)
			if !ok {
				// In RAM with no event saying what it holds: cannot
				// happen (every RAM copy arrives by an event with its
				// size); leave it out rather than report a wrong size.
				a.log.Warn("node agent: block in RAM without a reported size; not indexed", "key", k.String())
				continue
			}
			md = blockMeta{int64(it.Size), it.Sum}
		}
		next := entry{loc: loc, meta: md}
		diff(&delta, k, old, next)
		updates[k] = next
	}
	return delta, updates, later
}

// diff appends to d the change of key k from old to next.
func diff(d *meta.Delta, k block.Key, old, next entry) {
	const r, s = store.InRAM, store.InSSD
	same := old.meta == next.meta
	switch {
	case old.loc == next.loc && same:
		return
	case old.loc == r && next.loc == s && same:
		d.Moved = append(d.Moved, meta.Move{Key: k, From: meta.TierRAM, To: meta.TierSSD})
		return
	case old.loc == s && next.loc == r && same:
		d.Moved = append(d.Moved, meta.Move{Key: k, From: meta.TierSSD, To: meta.TierRAM})
		return
	}
	for _, t := range [...]struct {
		loc store.Location
		t   meta.Tier
	}{{r, meta.TierRAM}, {s, meta.TierSSD}} {
		was, now := old.loc&t.loc != 0, next.loc&t.loc != 0
		switch {
		case now && (!was || !same):
			d.Added = append(d.Added, meta.Item{Key: k, Tier: t.t, Size: next.meta.size, Sum: next.meta.sum})
		case was && !now:
			d.Removed = append(d.Removed, meta.ItemKey{Key: k, Tier: t.t})
		}
	}
}

// apply sets the entries of updates in m (deleting those gone).
func apply(m map[block.Key]entry, updates map[block.Key]entry) {
	for k, e := range updates {
		if e.loc == 0 {
			delete(m, k)
		} else {
			m[k] = e
		}
	}
}

// usage is the store's own account of its tiers.
func (a *agent) usage() meta.NodeUsage {
	st := a.st.Stats()
	return meta.NodeUsage{RAMUsed: st.RAM.Bytes, SSDUsed: st.SSD.Bytes}
}

// register sends the full inventory and starts a new session. The tasks
// of an earlier session are void (the master closed them).
func (a *agent) register(ctx context.Context) error {
	d, n := a.takeDirty()
	_, updates, later := a.reconcile(d, a.reported)
	next := make(map[block.Key]entry, len(a.reported)+len(updates))
	for k, e := range a.reported {
		next[k] = e
	}
	apply(next, updates)
	inv := make(meta.Inventory, 0, min(len(next), a.limits.items))
	// What does not fit in one frame is left out of next and reported as
	// additions by the heartbeats that follow (dirty, with its meta).
	var rest map[block.Key]mark
	items, bytes := 0, 0
	for k, e := range next {
		ni, nb := 0, 0
		for _, t := range [...]store.Location{store.InRAM, store.InSSD} {
			if e.loc&t != 0 {
				ni, nb = ni+1, nb+masterproto.ItemLen(k)
			}
		}
		if (items+ni > a.limits.items || bytes+nb > a.limits.bytes) && len(inv) > 0 {
			if rest == nil {
				rest = make(map[block.Key]mark)
			}
			rest[k] = mark{meta: e.meta, hasMeta: true}
			continue
		}
		items, bytes = items+ni, bytes+nb
		if e.loc&store.InRAM != 0 {
			inv = append(inv, meta.Item{Key: k, Tier: meta.TierRAM, Size: e.meta.size, Sum: e.meta.sum})
		}
		if e.loc&store.InSSD != 0 {
			inv = append(inv, meta.Item{Key: k, Tier: meta.TierSSD, Size: e.meta.size, Sum: e.meta.sum})
		}
	}
	for k := range rest {
		delete(next, k)
	}
	cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	usage := a.usage()
	usage.Backlog = len(rest) > 0
	reply, err := a.client.Register(cctx, a.info, inv, usage)
	cancel()
	if err != nil {
		a.restoreDirty(d)
		a.failures.Add(1)
		return fmt.Errorf("node: register %q with %d blocks: %w", a.info.ID, len(inv), err)
	}
	a.reported, a.session, a.registered, a.ttl = next, reply.Session, true, reply.NodeTTL
	a.live.Store(true)
	a.registers.Add(1)
	a.restoreDirty(later)
	a.restoreDirty(rest)
	a.backlog, a.recheck = len(rest) > 0, len(later) > 0
	a.accepted(n)
	a.mu.Lock()
	// The master of this session never gave these tasks, and the results
	// of the last one's are of no use to it: dropped, and counted (a
	// failover or a master restart loses its promotions in flight).
	a.tasksDropped.Add(uint64(len(a.promos) + len(a.results)))
	a.results = nil
	clear(a.promos)
	a.mu.Unlock()
	a.setInterval(reply.HeartbeatInterval)
	a.log.Info("node agent: registered with the master", "node", string(a.info.ID), "session", uint64(reply.Session),
		"blocks", len(inv), "pending", len(rest), "heartbeat", a.every.String(), "ttl", reply.NodeTTL.String())
	return nil
}

// setInterval beats at the configured interval, or faster when the master
// asks for it (its TTL is counted in its own intervals).
func (a *agent) setInterval(fromMaster time.Duration) {
	a.every = a.interval
	if fromMaster > 0 && fromMaster < a.every {
		a.every = fromMaster
	}
}

// beat sends one heartbeat and executes the tasks of its reply. On
// meta.ErrUnknownNode it registers again with the full inventory.
func (a *agent) beat(ctx context.Context) error {
	if !a.registered {
		return a.register(ctx)
	}
	a.mu.Lock()
	hits, results := a.hits, a.results
	a.hits, a.results = nil, nil
	clear(a.hitSet)
	a.mu.Unlock()
	// SSD hits take at most a quarter of the bytes (65,536 hits of 1 KiB
	// names would fill a frame alone); the rest wait for the next beat.
	room, hitBytes := a.limits.bytes, 0
	for i, k := range hits {
		if hitBytes += masterproto.HitLen(k); hitBytes > a.limits.bytes/4 && i > 0 {
			a.restoreHits(hits[i:])
			hits = hits[:i]
			break
		}
	}
	for _, k := range hits {
		room -= masterproto.HitLen(k)
	}
	d, rest, n := a.takeDirtyWithin(a.limits.items, room)
	delta, updates, later := a.reconcile(d, a.reported)

	cctx, cancel := context.WithTimeout(ctx, min(max(a.ttl, minBeatTimeout), rpcTimeout))
	usage := a.usage()
	usage.Backlog = len(rest) > 0
	reply, err := a.client.Heartbeat(cctx, a.info.ID, a.session, delta, usage, hits, results)
	cancel()
	if err != nil {
		a.restoreDirty(d)
		a.restoreDirty(rest)
		a.restoreHits(hits)
		if errors.Is(err, meta.ErrUnknownNode) {
			a.tasksDropped.Add(uint64(len(results))) // results for a master that is gone
			a.registered = false
			a.live.Store(false)
			a.reregisters.Add(1)
			a.log.Warn("node agent: the master does not know this node (restarted, or the node was silent past its TTL); registering again",
				"node", string(a.info.ID), "err", err)
			return a.register(ctx)
		}
		a.restoreResults(results)
		a.failures.Add(1)
		return fmt.Errorf("node: heartbeat of %q: %w", a.info.ID, err)
	}
	apply(a.reported, updates)
	a.restoreDirty(later)
	a.restoreDirty(rest)
	a.backlog, a.recheck = len(rest) > 0, len(later) > 0
	a.beats.Add(1)
	a.accepted(n)
	if reply.HeartbeatInterval > 0 {
		a.setInterval(reply.HeartbeatInterval)
	}
	a.execute(ctx, reply.Tasks)
	return nil
}

func (a *agent) restoreHits(hits []block.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range hits {
		if _, dup := a.hitSet[k]; !dup && len(a.hits) < maxSSDHits {
			a.hitSet[k] = struct{}{}
			a.hits = append(a.hits, k)
		}
	}
}

func (a *agent) restoreResults(rs []meta.TaskResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.results = append(rs, a.results...)
	if len(a.results) > maxResults {
		a.results = a.results[len(a.results)-maxResults:]
	}
}

// execute runs the master's tasks: eviction orders now (their effect
// reaches the master in the next beat's delta, with the result), and
// promotions on the store's worker (results when they finish).
func (a *agent) execute(ctx context.Context, tasks []meta.Task) {
	for _, t := range tasks {
		switch t.Kind {
		case meta.TaskDemote, meta.TaskDrop:
			var err error
			if t.Kind == meta.TaskDemote {
				err = a.st.Demote(ctx, t.Key)
			} else {
				err = a.st.DropRAM(ctx, t.Key)
			}
			// Not in RAM: it left already, and the delta says how.
			ok := err == nil || errors.Is(err, kvpool.ErrNotFound)
			if !ok {
				a.log.Warn("node agent: eviction order failed", "task", t.ID, "kind", t.Kind.String(), "key", t.Key.String(), "err", err)
			}
			a.mu.Lock()
			a.addResultLocked(meta.TaskResult{ID: t.ID, OK: ok})
			a.mu.Unlock()
		case meta.TaskPromote:
			a.mu.Lock()
			a.promos[t.Key] = t.ID
			a.mu.Unlock()
			n, err := a.st.Promote(ctx, []block.Key{t.Key})
			if n == 1 {
				continue
			}
			a.mu.Lock()
			if id, ok := a.promos[t.Key]; ok && id == t.ID {
				delete(a.promos, t.Key)
				a.addResultLocked(meta.TaskResult{ID: t.ID, OK: false})
			}
			a.mu.Unlock()
			a.log.Debug("node agent: promotion not queued", "task", t.ID, "key", t.Key.String(), "err", err)
		default:
			a.log.Warn("node agent: unknown task kind; refused", "task", t.ID, "kind", t.Kind.String())
			a.mu.Lock()
			a.addResultLocked(meta.TaskResult{ID: t.ID, OK: false})
			a.mu.Unlock()
		}
	}
}

// accepted records that the master accepted report n. The report covers
// every event emitted before it took the dirty set unless it put marks
// back for a later report (a.backlog, a.recheck, just set by the caller).
func (a *agent) accepted(n uint64) {
	if a.backlog || a.recheck {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > a.synced {
		a.synced = n
		if a.progress != nil {
			close(a.progress)
			a.progress = nil
		}
	}
}

// syncPending reports whether a Sync waits for a report not yet accepted.
func (a *agent) syncPending() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.synced < a.want
}

// Sync returns nil once the master has accepted a report (a heartbeat, or
// the registration when the node has none yet) that covers every store
// event emitted before the call: one that took the dirty set after the
// call and put no mark back for a later beat. It wakes the run loop at
// once rather than waiting for the heartbeat interval; concurrent Syncs
// share the beats they wait for (those waiting when a beat takes the dirty
// set are all served by it, later ones by the next). While the master is
// unreachable the run loop retries on its backoff, and Sync returns ctx's
// error when ctx ends.
//
// The store reports its changes synchronously: store.Put, Delete and the
// other calls that change a key's tiers call Options.OnEvent (onEvent,
// which marks the key dirty under a.mu) before they return. A write that
// returned before Sync was called has therefore marked its key before
// Sync reads a.begun under the same lock: the mark is either in the dirty
// set, which the next report takes whole, or in the hands of a report
// already begun, which on failure puts it back before the next one takes
// the set (reports run one at a time on the run goroutine). Either way a
// report numbered above a.begun includes it.
func (a *agent) Sync(ctx context.Context) error {
	a.mu.Lock()
	a.syncs.Add(1) // under a.mu: a counted Sync has its target
	target := a.begun + 1
	a.want = max(a.want, target)
	for a.synced < target {
		if a.progress == nil {
			a.progress = make(chan struct{})
		}
		progress := a.progress
		a.mu.Unlock()
		select {
		case a.kick <- struct{}{}:
		default: // a kick is pending already
		}
		select {
		case <-progress:
		case <-ctx.Done():
			a.mu.Lock()
			done := a.synced >= target // served as ctx ended
			a.mu.Unlock()
			if done {
				return nil
			}
			return fmt.Errorf("node: sync with the master: %w", ctx.Err())
		}
		a.mu.Lock()
	}
	a.mu.Unlock()
	return nil
}

// run registers and heartbeats until ctx ends, retrying with capped,
// jittered exponential backoff while the master is unreachable. A Sync
// waiting for a report wakes it before the interval (but not during a
// backoff: an unreachable master is retried at the backoff's pace).
func (a *agent) run(ctx context.Context) {
	var backoff time.Duration
	failures := 0
	for {
		err := a.beat(ctx) // registers first when needed
		if ctx.Err() != nil {
			return
		}
		wait, kick := a.every, a.kick
		switch {
		case err != nil:
			kick = nil
		case a.backlog:
			wait = 0 // the rest of a report too large for one frame
		case a.syncPending() && a.recheck:
			// The beat left a departing copy to look at again; give it
			// time to leave RAM.
			wait, kick = min(wait, recheckWait), nil
		case a.syncPending():
			wait, kick = 0, nil // a Sync came while the beat was in flight
			a.kicked.Add(1)
		}
		if err != nil {
			failures++
			limit := maxBackoff
			if errors.Is(err, meta.ErrNotLeader) {
				// The cluster's masters answer, but none leads yet (a
				// failover): the next leader is due within an election
				// TTL, and a standby's refusal costs it nothing, so the
				// node follows the change within a heartbeat.
				limit = max(a.every, minBackoff)
			}
			backoff = min(max(2*backoff, minBackoff), limit)
			wait = backoff/2 + rand.N(backoff/2+1) // equal jitter: nodes spread out
			switch {
			case failures != 1 && failures%10 != 0:
			case errors.Is(err, kvpool.ErrUnauthorized):
				// A wrong token or cluster ID: this node is not the
				// master's; the operator must fix the configuration.
				a.log.Error("node agent: the master refused this node (token or cluster ID); not registered", "node", string(a.info.ID),
					"attempt", failures, "retry_in", wait.String(), "err", err)
			default:
				a.log.Warn("node agent: master unreachable; the data plane keeps serving", "attempt", failures, "retry_in", wait.String(), "err", err)
			}
		} else if failures > 0 {
			a.log.Info("node agent: master reachable again", "failed_attempts", failures)
			failures, backoff = 0, 0
		}
		if !a.await(ctx, wait, kick) {
			return
		}
	}
}

// await waits d, or until a kick finds a Sync waiting for a report (nil
// kick: no early wake). It returns false when ctx ends first.
func (a *agent) await(ctx context.Context, d time.Duration, kick <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-kick:
			if a.syncPending() { // else a Sync that an earlier beat served
				a.kicked.Add(1)
				return true
			}
		}
	}
}
