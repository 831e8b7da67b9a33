// Package election elects one leader among a kvpool cluster's masters on
// etcd, fences every term with an epoch, and tells anyone which master
// leads.
//
// It is etcd's own election (go.etcd.io/etcd/client/v3/concurrency): each
// candidate puts a key under the cluster's prefix, bound to a lease of its
// session, and the candidate whose key is oldest leads. A term's epoch is
// its key's creation revision, which etcd orders: a later leader's epoch
// is always larger, so a node or client that carries the highest epoch it
// has seen can refuse orders from an older term.
//
// Stepping down in time. A leader must stop acting as one before etcd
// can have expired its lease (after which another candidate may lead),
// even when it cannot reach etcd, or etcd is frozen, or its own process
// was: the etcd client's keep-alive stream says nothing about that. So a
// Term renews the lease itself, every third of its TTL, and records the
// time each renewal was sent: etcd extends the lease from when it receives
// the renewal, later than that, so the lease cannot expire at etcd before
// sent + TTL. Term.Valid is false from sent + TTL - TTL/10 of the last
// renewal that succeeded, and the term ends there (Done); a leader checks
// Valid before each order it gives. The tenth of the TTL covers the
// clocks of two machines running at slightly different rates and an
// order already checked when the term ends.
package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

const (
	// DefaultTTL is a session lease's time to live: 5 s. A leader that
	// dies is replaced within about that (plus one renewal interval at
	// most), and a leader cut off from etcd stops leading 0.5 s before.
	DefaultTTL = 5 * time.Second
	// MinTTL is the shortest TTL Options accept: 2 s, etcd's own minimum
	// lease (1.5 s with its default election timeout) rounded up to a
	// whole second.
	MinTTL = 2 * time.Second
)

// ErrNoLeader is returned by Leader when no candidate leads.
var ErrNoLeader = errors.New("election: no master leads")

// Options configure an Election. The zero value of a field means its
// default.
type Options struct {
	// Endpoints are etcd's client URLs (http://host:port); at least one.
	Endpoints []string
	// Cluster names the election: candidates of one cluster compete under
	// the prefix /kvpool/<Cluster>/master/. Required; no "/" in it.
	Cluster string
	// TTL is the lease of each candidate's session, in whole seconds
	// (DefaultTTL; at least MinTTL).
	TTL time.Duration
	// Logger receives the terms' beginnings and ends (slog.Default()).
	Logger *slog.Logger
	// Now is the clock (time.Now); tests replace it.
	Now func() time.Time
}

// Validate reports the first bad field, named as the flags name it.
func (o Options) Validate() error {
	if len(o.Endpoints) == 0 {
		return errors.New("election: no etcd endpoint (--etcd)")
	}
	for _, e := range o.Endpoints {
		if e == "" || strings.ContainsAny(e, " ,") {
			return fmt.Errorf("election: etcd endpoint %q: want one URL such as http://127.0.0.1:2379 (--etcd)", e)
		}
	}
	if o.Cluster == "" || strings.Contains(o.Cluster, "/") {
		return fmt.Errorf("election: cluster name %q: want a non-empty name without '/' (--cluster)", o.Cluster)
	}
	if o.TTL != 0 && (o.TTL < MinTTL || o.TTL%time.Second != 0) {
		return fmt.Errorf("election: TTL %v: want whole seconds, at least %v", o.TTL, MinTTL)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Election is one cluster's election, reached through one etcd client:
// masters campaign in it, nodes and clients ask it who leads. Safe for
// concurrent use.
type Election struct {
	opts   Options
	cli    *clientv3.Client
	prefix string
}

// Open connects to etcd (lazily: a call that needs etcd waits for it,
// within its context).
func Open(opts Options) (*Election, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: opts.Endpoints,
		Logger:    zap.NewNop(),
		// Without keep-alive pings a connection to a frozen etcd looks
		// healthy for as long as TCP does; renewals have their own
		// deadlines anyway (Term).
		DialKeepAliveTime:    opts.TTL / 2,
		DialKeepAliveTimeout: opts.TTL / 2,
	})
	if err != nil {
		return nil, fmt.Errorf("election: etcd client for %v: %w", opts.Endpoints, err)
	}
	// concurrency.NewElection adds the "/" before each candidate's key.
	return &Election{opts: opts, cli: cli, prefix: "/kvpool/" + opts.Cluster + "/master"}, nil
}

// Close closes the etcd client; terms still running end.
func (e *Election) Close() error { return e.cli.Close() }

// Leader is who leads a cluster: the value its master campaigned with
// (its address) and its term's epoch.
type Leader struct {
	Value string
	Epoch int64
}

// Leader returns the current leader, or ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	resp, err := e.cli.Get(ctx, e.prefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return Leader{}, fmt.Errorf("election: ask etcd %v who leads cluster %q: %w", e.opts.Endpoints, e.opts.Cluster, err)
	}
	if len(resp.Kvs) == 0 {
		return Leader{}, fmt.Errorf("%w cluster %q", ErrNoLeader, e.opts.Cluster)
	}
	kv := resp.Kvs[0]
	return Leader{Value: string(kv.Value), Epoch: kv.CreateRevision}, nil
}

// Campaign blocks until value leads the cluster, or ctx ends (then it
// withdraws and returns ctx's error). The Term it returns must be ended
// with Resign or Abandon.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	ttl := e.opts.TTL
	grant, err := e.cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("election: lease from etcd %v: %w", e.opts.Endpoints, err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	sess, err := concurrency.NewSession(e.cli, concurrency.WithLease(grant.ID), concurrency.WithContext(sctx))
	if err != nil {
		cancel()
		e.revoke(grant.ID)
		return nil, fmt.Errorf("election: session on etcd %v: %w", e.opts.Endpoints, err)
	}
	el := concurrency.NewElection(sess, e.prefix)
	if err := el.Campaign(ctx, value); err != nil {
		cancel()
		sess.Orphan()
		// The session's own revoke would use its cancelled context: the
		// candidate key, left up to a TTL, could stand first in line.
		e.revoke(grant.ID)
		return nil, fmt.Errorf("election: campaign in cluster %q: %w", e.opts.Cluster, err)
	}
	t := &Term{
		Epoch: el.Rev(),
		Value: value,
		e:     e,
		sess:  sess,
		el:    el,
		key:   el.Key(),
		stop:  cancel,
		done:  make(chan struct{}),
	}
	// The first renewal after winning sets the deadline: the lease may
	// have run short while the campaign waited.
	if err := t.renew(ctx); err != nil {
		t.end(err)
		t.Abandon()
		return nil, fmt.Errorf("election: won cluster %q at epoch %d but could not renew the lease: %w", e.opts.Cluster, t.Epoch, err)
	}
	t.wg.Add(2)
	go t.keep(sctx)
	go t.watchKey(sctx)
	e.opts.Logger.Info("election: leading", "cluster", e.opts.Cluster, "value", value, "epoch", t.Epoch, "ttl", ttl)
	return t, nil
}

func (e *Election) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.TTL)
	defer cancel()
	e.cli.Revoke(ctx, id) // best effort: the lease expires by itself
}

// Term is one leader's term. It ends (Done) when the leader must stop
// leading: its lease may expire at etcd before another renewal lands
// (see the package comment), etcd lost it, its key was deleted, or it was
// resigned or abandoned. A term that ends on its own stops keeping its
// lease alive at once, so that another candidate can lead; its leader
// still calls Abandon (or Resign) to let go of it. A Term is not safe for
// concurrent Resign and Abandon calls; Valid, Done and Err are.
type Term struct {
	// Epoch is the term's epoch: its election key's creation revision.
	Epoch int64
	// Value is what the leader campaigned with.
	Value string

	e    *Election
	sess *concurrency.Session
	el   *concurrency.Election
	key  string             // the leader key (el's own is not safe to read while Resign runs)
	stop context.CancelFunc // ends keep, watchKey and the session's keep-alive
	wg   sync.WaitGroup

	mu    sync.Mutex
	valid time.Time // Valid until then
	err   error     // why the term ended
	done  chan struct{}
}

// Done is closed when the term has ended.
func (t *Term) Done() <-chan struct{} { return t.done }

// Err says why the term ended (nil while it runs).
func (t *Term) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Valid reports whether the leader may still act: the term has not ended
// and its lease cannot have expired at etcd (with a tenth of the TTL to
// spare).
func (t *Term) Valid() bool {
	now := t.e.opts.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err == nil && now.Before(t.valid)
}

// left is how long the term stays valid.
func (t *Term) left() time.Duration {
	now := t.e.opts.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.valid.Sub(now)
}

// renew renews the lease once and moves the validity forward from the
// time the renewal was sent.
func (t *Term) renew(ctx context.Context) error {
	sent := t.e.opts.Now()
	resp, err := t.e.cli.KeepAliveOnce(ctx, t.sess.Lease())
	if err != nil {
		return err
	}
	ttl := time.Duration(resp.TTL) * time.Second
	t.mu.Lock()
	if until := sent.Add(ttl - t.e.opts.TTL/10); until.After(t.valid) {
		t.valid = until
	}
	t.mu.Unlock()
	return nil
}

// watchKey ends the term when its leader key is deleted (by an operator,
// or etcd revoking the lease), until ctx ends. It watches from the
// revision after the key's creation, so that a deletion before the watch
// is open is seen too (a review found terms outliving their key that
// way), and runs apart from keep: opening a watch waits for etcd, which
// may not answer.
func (t *Term) watchKey(ctx context.Context) {
	defer t.wg.Done()
	rev := t.Epoch + 1
	for ctx.Err() == nil {
		for wr := range t.e.cli.Watch(ctx, t.key, clientv3.WithRev(rev)) {
			if wr.CompactRevision != 0 {
				// Events from rev on were compacted away: look at the key.
				r, err := t.e.cli.Get(ctx, t.key)
				if err != nil {
					break // watch again from rev
				}
				if len(r.Kvs) == 0 || r.Kvs[0].CreateRevision != t.Epoch {
					t.end(fmt.Errorf("election: epoch %d: the leader key %s was deleted", t.Epoch, t.key))
					return
				}
				rev = r.Header.Revision + 1
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					t.end(fmt.Errorf("election: epoch %d: the leader key %s was deleted", t.Epoch, t.key))
					return
				}
			}
			rev = wr.Header.Revision + 1
		}
	}
}

// keep renews the lease every third of the TTL and ends the term when it
// is no longer valid, the lease is gone, or ctx ends.
func (t *Term) keep(ctx context.Context) {
	defer t.wg.Done()
	ttl := t.e.opts.TTL
	every := ttl / 3
	next := time.NewTimer(every)
	defer next.Stop()
	for {
		left := t.left()
		if left <= 0 {
			t.end(fmt.Errorf("election: epoch %d: no lease renewal acknowledged by etcd for %v; stepping down before etcd may expire the lease", t.Epoch, ttl-ttl/10))
			return
		}
		expire := time.NewTimer(left)
		select {
		case <-ctx.Done():
			expire.Stop()
			return
		case <-t.sess.Done():
			expire.Stop()
			t.end(fmt.Errorf("election: epoch %d: the session's lease is no longer kept alive", t.Epoch))
			return
		case <-t.done:
			expire.Stop()
			return
		case <-expire.C:
			// loop: left <= 0 ends the term
		case <-next.C:
			expire.Stop()
			// A renewal etcd does not answer must not hold the term past
			// its validity: it gives up then, and the loop ends the term.
			rctx, cancel := context.WithTimeout(ctx, min(every, max(t.left(), time.Millisecond)))
			err := t.renew(rctx)
			cancel()
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				t.end(fmt.Errorf("election: epoch %d: etcd no longer has the lease: %w", t.Epoch, err))
				return
			}
			if err != nil && ctx.Err() == nil {
				t.e.opts.Logger.Warn("election: lease renewal failed; retrying", "cluster", t.e.opts.Cluster, "epoch", t.Epoch, "err", err)
			}
			next.Reset(every)
		}
	}
}

// end ends the term with err (the first reason wins) and stops keeping
// its lease alive, so that etcd expires it and another candidate can lead
// even if the leader never calls Resign or Abandon (a term that stepped
// down while etcd was frozen would otherwise hold the election once etcd
// answers again).
func (t *Term) end(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	t.err = err
	close(t.done)
	t.stop()
	t.e.opts.Logger.Warn("election: term ended", "cluster", t.e.opts.Cluster, "epoch", t.Epoch, "reason", err)
}

// errResigned and errAbandoned end terms their leader ended.
var (
	errResigned  = errors.New("election: resigned")
	errAbandoned = errors.New("election: abandoned")
)

// Resign ends the term and lets another candidate lead at once: it
// deletes the leader key and revokes the lease.
func (t *Term) Resign(ctx context.Context) error {
	t.end(errResigned)
	err := t.el.Resign(ctx)
	if _, rerr := t.e.cli.Revoke(ctx, t.sess.Lease()); err == nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
		err = rerr
	}
	t.stop()
	t.wg.Wait()
	t.sess.Orphan()
	if err != nil {
		return fmt.Errorf("election: resign epoch %d: %w", t.Epoch, err)
	}
	return nil
}

// Abandon ends the term without telling etcd: the lease expires there by
// itself, within its TTL (what a leader that cannot reach etcd can do).
func (t *Term) Abandon() {
	t.end(errAbandoned)
	t.stop()
	t.wg.Wait()
	t.sess.Orphan()
}

// Margin is how long before etcd may expire a term's lease its leader
// stops acting: a tenth of the TTL. An answer a leader gave to a request
// sent less than Margin ago was given within its term, whatever happened
// to the leader since; a node trusts an order no older than that.
func (e *Election) Margin() time.Duration { return e.opts.TTL / 10 }

// TTL returns the session lease's time to live.
func (e *Election) TTL() time.Duration { return e.opts.TTL }

// Cluster returns the cluster the election is for.
func (e *Election) Cluster() string { return e.opts.Cluster }

// dataKey is the key of name under the cluster's data prefix kind
// ("nodes"): /kvpool/<cluster>/<kind>/<name>.
func (e *Election) dataKey(kind, name string) string {
	return "/kvpool/" + e.opts.Cluster + "/" + kind + "/" + name
}

// List returns the keys under the cluster's data prefix kind, by name,
// with their values.
func (e *Election) List(ctx context.Context, kind string) (map[string]string, error) {
	p := e.dataKey(kind, "")
	resp, err := e.cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("election: list %s of cluster %q on etcd %v: %w", kind, e.opts.Cluster, e.opts.Endpoints, err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), p)] = string(kv.Value)
	}
	return out, nil
}

// ErrNotLeading is returned by Term.Write when the term's leader key is
// gone: the write was not made.
var ErrNotLeading = errors.New("election: the term no longer leads")

// Write sets (value non-nil) and deletes (value nil) keys under the
// cluster's data prefix kind in one transaction that applies only while
// the term's leader key still exists with the term's epoch: a leader
// whose term has ended at etcd cannot write over its successor's.
func (t *Term) Write(ctx context.Context, kind string, set map[string]*string) error {
	ops := make([]clientv3.Op, 0, len(set))
	for name, v := range set {
		if v == nil {
			ops = append(ops, clientv3.OpDelete(t.e.dataKey(kind, name)))
		} else {
			ops = append(ops, clientv3.OpPut(t.e.dataKey(kind, name), *v))
		}
	}
	resp, err := t.e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.Epoch)).
		Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("election: epoch %d: write %s: %w", t.Epoch, kind, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("election: epoch %d: write %s: %w", t.Epoch, kind, ErrNotLeading)
	}
	return nil
}
