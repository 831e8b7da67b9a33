package masterserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/election"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/meta"
)

// A master with an election (Options.Election) serves only while it
// leads its cluster. Each term it wins is a reign: a fresh master.Master,
// whose index the nodes rebuild by registering (a node's heartbeat to a
// master that does not know its session is answered "re-register"), and
// the etcd term that fences it. Every request checks, before it is
// served, that its connection's reign is the current one and that the
// term is still valid (election.Term.Valid: the lease cannot have expired
// at etcd yet); otherwise it is answered not leader and the connection is
// closed, and the client finds the leader again. Between reigns the
// server stands by: it answers every HELLO not leader, naming the leader
// it last saw.
//
// The index is complete again when every node the previous leader had
// registered has registered here: the leader keeps the list of its live
// nodes in etcd (/kvpool/<cluster>/nodes/, written in transactions that
// apply only while its own term holds) and the next one reads it when its
// term begins. A node on the list that does not register within
// rebuildWindow is counted as lost. Until the index is complete the reign
// refuses reads of the index (LOOKUP, LOCATE, EXISTS, QUERY, KEYINFO,
// SCAN, COUNT) and EXPIRE with unavailable, so no client is told a block
// it stored is missing while its node has not re-registered yet;
// registrations, heartbeats and placements are served.

// reign is one term of leadership and the master that serves it.
type reign struct {
	m     *master.Master
	term  *election.Term // nil: a single master, leading for good
	epoch uint64
	began time.Time

	complete atomic.Bool
	// deadline is when the index counts as complete even if listed
	// nodes are missing.
	deadline time.Time

	mu      sync.Mutex
	expect  map[meta.NodeID]bool // listed by the previous leader → registered here
	missing int                  // listed nodes not registered yet
	listed  bool                 // expect was read from etcd
	// full are the nodes whose whole inventory is in the index (a report
	// with no backlog served), before expect is read too.
	full map[meta.NodeID]bool
	// written is the node list as etcd holds it (as far as this reign
	// knows: the previous leader's, then this one's writes; unknownAddr
	// after a write that failed, which may have applied); pending the
	// nodes being registered, recorded in etcd but maybe not yet in m.
	written map[meta.NodeID]string
	pending map[meta.NodeID]int

	// listMu serialises the node list's writes to etcd (syncMembers,
	// recordNode), each with the decision it carries out: a delete
	// decided from a snapshot of m must not land after a registration
	// that found the node listed (found by review). Taken before mu.
	listMu sync.Mutex
}

// unknownAddr marks a node in reign.written whose entry in etcd is
// unknown (a write failed, perhaps after it applied): the next write
// decision rewrites or deletes it.
const unknownAddr = "?"

// valid reports whether the reign may still serve.
func (r *reign) valid() bool { return r.term == nil || r.term.Valid() }

// current returns the reign requests may be served in, or nil while the
// server stands by.
func (s *Server) current() *reign { return s.cur.Load() }

// notLeader is the refusal of a standby or of a reign that ended.
func (s *Server) notLeader() error {
	l := s.leaderSeen()
	if l.Value == s.opts.Advertise && s.current() == nil {
		// Its own key, until etcd expires the lease of the term it left.
		return fmt.Errorf("masterserver: this master's term over cluster %s has ended and no other master leads it yet: %w", s.opts.ClusterID, meta.ErrNotLeader)
	}
	if l.Value == "" {
		return fmt.Errorf("masterserver: this master does not lead cluster %s and no master leads it now: %w", s.opts.ClusterID, meta.ErrNotLeader)
	}
	return fmt.Errorf("masterserver: this master does not lead cluster %s; the leader is %s (epoch %d): %w", s.opts.ClusterID, l.Value, l.Epoch, meta.ErrNotLeader)
}

// errRebuilding refuses a read of the index while it is being rebuilt.
func (r *reign) errRebuilding() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Errorf("masterserver: epoch %d began %v ago; the index is being rebuilt (%d of %d nodes of the previous leader registered, complete in at most %v): %w",
		r.epoch, time.Since(r.began).Round(time.Millisecond), len(r.expect)-r.missing, len(r.expect), time.Until(r.deadline).Round(time.Millisecond), kvpool.ErrUnavailable)
}

// leaderSeen returns the leader as this server last saw it.
func (s *Server) leaderSeen() election.Leader {
	if r := s.current(); r != nil && r.term != nil {
		return election.Leader{Value: s.opts.Advertise, Epoch: int64(r.epoch)}
	}
	if l := s.seen.Load(); l != nil {
		return *l
	}
	return election.Leader{}
}

// askLeader reads the leader from etcd at once when this standby knows
// none (it has just started, or its last poll found none), so that its
// refusal can name it: within a short bound, the HELLO waiting for it.
func (s *Server) askLeader() {
	if s.opts.Election == nil {
		return
	}
	if l := s.seen.Load(); l != nil && l.Value != "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), askLeaderTimeout)
	defer cancel()
	if l, err := s.opts.Election.Leader(ctx); err == nil {
		s.seen.Store(&l)
		s.seenAt.Store(int64(time.Since(s.started)))
	}
}

// askLeaderTimeout bounds askLeader: 500 ms, hundreds of etcd round trips.
const askLeaderTimeout = 500 * time.Millisecond

// lead campaigns for leadership until ctx ends or stop is closed, serving
// each term won as a reign.
func (s *Server) lead(ctx context.Context, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
		case <-s.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.watchLeader(ctx) }()
	defer wg.Wait()

	el := s.opts.Election
	first := s.m
	for ctx.Err() == nil {
		term, err := el.Campaign(ctx, s.opts.Advertise)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("masterserver: campaign failed; retrying", "cluster", el.Cluster(), "err", err)
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		m := first
		first = nil
		if m == nil {
			if m, err = master.New(s.m.Options()); err != nil {
				// Cannot happen: the same options made s.m.
				s.log.Error("masterserver: new master for the term", "err", err)
				term.Abandon()
				return
			}
		}
		r := s.beginReign(ctx, m, term)
		s.tend(ctx, r)
		s.cur.Store(nil)
		s.seen.Store(nil) // itself, until the next poll
		s.metrics.leading.Set(0)
		if ctx.Err() != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), el.TTL())
			if err := term.Resign(rctx); err != nil {
				s.log.Warn("masterserver: resign", "epoch", r.epoch, "err", err)
			}
			rcancel()
			s.log.Info("masterserver: resigned", "cluster", el.Cluster(), "epoch", r.epoch)
			return
		}
		s.log.Warn("masterserver: no longer leading; standing by", "cluster", el.Cluster(), "epoch", r.epoch, "led_for", time.Since(r.began).Round(time.Millisecond), "reason", term.Err())
		term.Abandon()
	}
}

// beginReign makes m, under term, the master that serves, and starts
// finding out which nodes the index waits for.
func (s *Server) beginReign(ctx context.Context, m *master.Master, term *election.Term) *reign {
	mo := m.Options()
	// The predecessor's read leases are unknown here: no eviction until
	// they have lapsed.
	m.HoldEviction(mo.LeaseTTL)
	now := time.Now()
	r := &reign{m: m, term: term, epoch: uint64(term.Epoch), began: now,
		deadline: now.Add(rebuildWindow(mo)), written: map[meta.NodeID]string{}, pending: map[meta.NodeID]int{}, full: map[meta.NodeID]bool{}}
	prev := s.seen.Load()
	s.cur.Store(r)
	s.metrics.leading.Set(1)
	s.metrics.epoch.Set(float64(r.epoch))
	s.metrics.terms.Inc()
	var gap time.Duration
	if at := s.seenAt.Load(); prev != nil && prev.Value != "" && at != 0 {
		gap = now.Sub(s.started.Add(time.Duration(at)))
	}
	s.log.Info("masterserver: leading", "cluster", s.opts.Election.Cluster(), "epoch", r.epoch, "advertise", s.opts.Advertise, "previous_leader_last_seen_ago", gap.Round(time.Millisecond))
	s.failoverFrom.Store(int64(gap))
	return r
}

// tend keeps r's index completeness and node list in etcd up to date
// every maintenance interval until its term ends or ctx does.
func (s *Server) tend(ctx context.Context, r *reign) {
	s.loadExpected(ctx, r)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-r.term.Done():
			return
		case <-ctx.Done():
			return
		case <-t.C:
			s.checkComplete(r)
			s.syncMembers(ctx, r)
		}
	}
}

// rebuildWindow is how long a new leader waits for the nodes the previous
// one listed before it counts its index complete without them: two node
// TTLs and a heartbeat. A live node finds the new leader within a
// heartbeat (its agent retries a failover at that pace), or, when its
// last heartbeat went to a leader that froze, once that heartbeat times
// out after a node TTL; the second TTL is slack for a loaded machine. A
// node still missing then was dead or cut off, and the previous leader
// would have dropped it by then too. Reads wait meanwhile: a lookup
// answered before a live node re-registered would call its blocks
// absent.
func rebuildWindow(mo master.Options) time.Duration {
	return 2*mo.NodeTTL + mo.HeartbeatInterval
}

// loadExpected reads the previous leader's node list from etcd.
func (s *Server) loadExpected(ctx context.Context, r *reign) {
	var (
		list map[string]string
		err  error
	)
	// Until the rebuild deadline: a failover often comes with a slow
	// etcd, and without the list the nodes that never come back would
	// stay listed for good.
	for {
		lctx, cancel := context.WithTimeout(ctx, s.opts.Election.TTL())
		list, err = s.opts.Election.List(lctx, "nodes")
		cancel()
		if err == nil || ctx.Err() != nil || !r.valid() || !time.Now().Before(r.deadline) {
			break
		}
		sleepCtx(ctx, s.interval)
	}
	r.listMu.Lock()
	defer r.listMu.Unlock()
	r.mu.Lock()
	if err != nil {
		r.mu.Unlock()
		s.log.Warn("masterserver: could not read the previous leader's nodes; the index counts as complete at the deadline", "epoch", r.epoch, "deadline", r.deadline, "err", err)
		return
	}
	r.expect = make(map[meta.NodeID]bool, len(list))
	for id, addr := range list {
		r.expect[meta.NodeID(id)] = false
		if _, ok := r.written[meta.NodeID(id)]; !ok {
			// What etcd holds: so that a listed node that never comes
			// back is deleted once the index is complete without it.
			r.written[meta.NodeID(id)] = addr
		}
	}
	r.missing = len(r.expect)
	for id := range r.full {
		r.markLocked(id)
	}
	r.listed = true
	r.mu.Unlock()
	s.checkComplete(r)
}

// markLocked records that node registered in r.
func (r *reign) markLocked(id meta.NodeID) {
	if seen, ok := r.expect[id]; ok && !seen {
		r.expect[id] = true
		r.missing--
	}
}

// registered records that node's whole inventory is in r's index (a
// REGISTER or HEARTBEAT served that left nothing for later).
func (s *Server) registered(r *reign, id meta.NodeID) {
	if r.term == nil || r.complete.Load() {
		return
	}
	r.mu.Lock()
	r.full[id] = true
	r.markLocked(id)
	r.mu.Unlock()
	s.checkComplete(r)
}

// checkComplete marks r's index complete when every listed node has
// registered or the deadline has passed, and says so.
func (s *Server) checkComplete(r *reign) {
	if r.term == nil || r.complete.Load() {
		return
	}
	r.mu.Lock()
	done := r.listed && r.missing == 0
	late := !done && !time.Now().Before(r.deadline)
	var lost []string
	if late {
		for id, seen := range r.expect {
			if !seen {
				lost = append(lost, string(id))
			}
		}
		sort.Strings(lost)
	}
	n := len(r.expect)
	r.mu.Unlock()
	if !done && !late {
		return
	}
	if !r.complete.CompareAndSwap(false, true) {
		return
	}
	took := time.Since(r.began)
	s.metrics.rebuild.Set(took.Seconds())
	s.metrics.failover.Set((time.Duration(s.failoverFrom.Load()) + took).Seconds())
	s.metrics.lostNodes.Add(float64(len(lost)))
	if late {
		s.log.Warn("masterserver: index complete at its deadline; nodes of the previous leader did not register", "epoch", r.epoch, "took", took.Round(time.Millisecond), "registered", n-len(lost), "listed", n, "missing", lost)
		return
	}
	s.log.Info("masterserver: index complete", "epoch", r.epoch, "took", took.Round(time.Millisecond), "nodes", n)
}

// syncMembers writes r's live nodes to etcd, for the next leader: the
// changes since the last write, at most every interval.
func (s *Server) syncMembers(ctx context.Context, r *reign) {
	if r.term == nil || !r.valid() {
		return
	}
	r.listMu.Lock()
	defer r.listMu.Unlock()
	want := map[meta.NodeID]string{}
	for _, ns := range r.m.Nodes() {
		want[ns.Info.ID] = ns.Info.Addr
	}
	r.mu.Lock()
	set := map[string]*string{}
	for id, addr := range want {
		if cur, ok := r.written[id]; !ok || cur != addr {
			set[string(id)] = &addr
		}
	}
	// A node leaves the list once it is gone from the index, but not
	// while the index is being rebuilt (a listed node may register yet)
	// nor while it is being registered.
	if r.complete.Load() {
		for id := range r.written {
			if _, ok := want[id]; !ok && r.pending[id] == 0 {
				set[string(id)] = nil
			}
		}
	}
	r.mu.Unlock()
	if len(set) == 0 {
		return
	}
	// etcd takes at most 128 operations per transaction by default.
	const perTxn = 100
	for len(set) > 0 {
		part := map[string]*string{}
		for k, v := range set {
			part[k] = v
			delete(set, k)
			if len(part) == perTxn {
				break
			}
		}
		wctx, cancel := context.WithTimeout(ctx, s.interval*4)
		err := r.term.Write(wctx, "nodes", part)
		cancel()
		if err != nil {
			r.mu.Lock()
			for k := range part {
				r.written[meta.NodeID(k)] = unknownAddr // it may have applied
			}
			r.mu.Unlock()
			if !errors.Is(err, election.ErrNotLeading) && ctx.Err() == nil {
				s.log.Warn("masterserver: could not record the nodes in etcd; retrying", "epoch", r.epoch, "err", err)
			}
			return
		}
		r.mu.Lock()
		for k, v := range part {
			if v == nil {
				delete(r.written, meta.NodeID(k))
			} else {
				r.written[meta.NodeID(k)] = *v
			}
		}
		r.mu.Unlock()
	}
}

// recordTimeout bounds recording a registering node in etcd: 2 s. A
// master that cannot write to etcd that fast is about to lose its term.
const recordTimeout = 2 * time.Second

// recordNode records in etcd, before a REGISTER is served, that node id
// (at addr) is one of r's, so that a successor waits for it to register
// before answering reads (loadExpected): a node whose blocks were
// acknowledged through this leader is never missed by the next one. done
// must be called once the registration has been applied (or failed).
func (s *Server) recordNode(r *reign, id meta.NodeID, addr string) (done func(), err error) {
	if r.term == nil {
		return func() {}, nil
	}
	r.listMu.Lock()
	defer r.listMu.Unlock()
	r.mu.Lock()
	r.pending[id]++
	cur, ok := r.written[id]
	r.mu.Unlock()
	done = func() {
		r.mu.Lock()
		if r.pending[id]--; r.pending[id] == 0 {
			delete(r.pending, id)
		}
		r.mu.Unlock()
	}
	if ok && cur == addr {
		return done, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	a := addr
	if err := r.term.Write(ctx, "nodes", map[string]*string{string(id): &a}); err != nil {
		r.mu.Lock()
		r.written[id] = unknownAddr // it may have applied
		r.mu.Unlock()
		done()
		if errors.Is(err, election.ErrNotLeading) {
			return nil, fmt.Errorf("masterserver: register node %s: %v: %w", id, err, meta.ErrNotLeader)
		}
		return nil, fmt.Errorf("masterserver: register node %s: record it in etcd for the next leader: %v: %w", id, err, kvpool.ErrUnavailable)
	}
	r.mu.Lock()
	r.written[id] = addr
	r.mu.Unlock()
	return done, nil
}

// watchLeader keeps s.seen, the leader as etcd names it, while the server
// stands by (a standby names it to the clients it refuses).
func (s *Server) watchLeader(ctx context.Context) {
	every := min(s.m.Options().HeartbeatInterval/2, 500*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if r := s.current(); r == nil || r.term == nil {
			lctx, cancel := context.WithTimeout(ctx, every*2)
			l, err := s.opts.Election.Leader(lctx)
			cancel()
			switch {
			case err == nil:
				s.seen.Store(&l)
				s.seenAt.Store(int64(time.Since(s.started)))
			case errors.Is(err, election.ErrNoLeader):
				s.seen.Store(&election.Leader{})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
