package master

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
)

// simNode is a node driven by one goroutine: it keeps its own inventory,
// carries out the master's orders, changes its inventory at random and
// now and then re-registers.
type simNode struct {
	id    meta.NodeID
	inv   modelNode
	sess  meta.Session
	tasks []meta.Task
	rng   *rand.Rand
}

// step carries out the pending tasks and one random change, and
// heartbeats the result.
func (n *simNode) step(m *Master, nIDs int) error {
	var d meta.Delta
	var done []meta.TaskResult
	for _, tk := range n.tasks {
		ramK, ssdK := meta.ItemKey{Key: tk.Key, Tier: meta.TierRAM}, meta.ItemKey{Key: tk.Key, Tier: meta.TierSSD}
		switch tk.Kind {
		case meta.TaskDrop:
			if _, ok := n.inv[ramK]; ok {
				d.Removed = append(d.Removed, ramK)
				done = append(done, meta.TaskResult{ID: tk.ID, OK: true})
			}
		case meta.TaskDemote:
			if _, ok := n.inv[ramK]; ok {
				d.Moved = append(d.Moved, meta.Move{Key: tk.Key, From: meta.TierRAM, To: meta.TierSSD})
				done = append(done, meta.TaskResult{ID: tk.ID, OK: true})
			}
		case meta.TaskPromote:
			it, ok := n.inv[ssdK]
			_, inRAM := n.inv[ramK]
			if ok && !inRAM {
				it.Tier = meta.TierRAM
				d.Added = append(d.Added, it)
			}
			done = append(done, meta.TaskResult{ID: tk.ID, OK: ok && !inRAM, Bytes: it.Size})
		}
	}
	n.inv.apply(d)
	extra := randDelta(n.rng, nIDs)
	var hits []block.Key
	for range n.rng.IntN(4) {
		hits = append(hits, randItem(n.rng, nIDs).Key)
	}
	d.Added = append(d.Added, extra.Added...)
	d.Removed = append(d.Removed, extra.Removed...)
	d.Moved = append(d.Moved, extra.Moved...)
	n.inv.apply(meta.Delta{Added: extra.Added, Removed: extra.Removed, Moved: extra.Moved})
	r, err := m.Heartbeat(n.id, n.sess, d, meta.NodeUsage{}, hits, done)
	if errors.Is(err, meta.ErrUnknownNode) {
		return n.register(m)
	}
	if err != nil {
		return err
	}
	n.tasks = r.Tasks
	return nil
}

func (n *simNode) register(m *Master) error {
	r, err := m.Register(meta.NodeInfo{ID: n.id, Addr: "h:1", RAMBytes: 3000, SSDBytes: 1 << 20, BlockSize: 100}, n.inv.inventory(), meta.NodeUsage{})
	n.sess, n.tasks = r.Session, nil
	return err
}

// checkLookup verifies what a reader can check on its own: the prefix
// length, the per-block order, no replica listed twice.
func checkLookup(r *meta.LookupResult, ids []uint64) error {
	if r.Hit > len(ids) || len(r.Ends) != r.Hit {
		return fmt.Errorf("hit %d of %d ids, %d ends", r.Hit, len(ids), len(r.Ends))
	}
	for i := range r.Hit {
		b := r.Block(i)
		if len(b) == 0 {
			return fmt.Errorf("prefix block %d has no replicas", i)
		}
		for j := 1; j < len(b); j++ {
			if !replicaLess(&b[j-1], &b[j]) {
				return fmt.Errorf("block %d: replicas %v out of order or repeated", i, b)
			}
		}
	}
	return nil
}

// TestConcurrent runs nodes, readers, placements and invariant checks at
// once (meant for -race), then compares the index with the nodes' own
// inventories.
func TestConcurrent(t *testing.T) {
	m, err := New(Options{NodeTTL: time.Hour, HeartbeatInterval: time.Second, LeaseTTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const (
		nNodes   = 4
		nReaders = 3
		nIDs     = 40
		beats    = 1000
		reads    = 5000
	)
	nodes := make([]*simNode, nNodes)
	for i := range nodes {
		nodes[i] = &simNode{id: meta.NodeID(fmt.Sprint("n", i)), inv: modelNode{}, rng: rand.New(rand.NewPCG(uint64(i), 1))}
		nodes[i].inv.apply(meta.Delta{Added: randInventory(nodes[i].rng, nIDs)})
		if err := nodes[i].register(m); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, nNodes+nReaders+1)
	var wg, checker sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			for i := range beats {
				if i%50 == 49 {
					if err := n.register(m); err != nil {
						errs <- err
						return
					}
					continue
				}
				if err := n.step(m, nIDs); err != nil {
					errs <- fmt.Errorf("node %s beat %d: %w", n.id, i, err)
					return
				}
			}
		})
	}
	for r := range nReaders {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			var res meta.LookupResult
			var pl meta.Placement
			var ex []bool
			for range reads {
				tenant := modelTenants[rng.IntN(2)]
				start := uint64(rng.IntN(nIDs))
				ids := []uint64{start, start + 1, start + 2, start + 3}
				if err := m.Lookup(tenant, ids, rng.IntN(2) == 0, &res); err != nil {
					errs <- err
					return
				}
				if err := checkLookup(&res, ids); err != nil {
					errs <- fmt.Errorf("lookup %s %v: %w", tenant, ids, err)
					return
				}
				var err error
				if ex, err = m.Exists(tenant, ids, ex); err != nil || len(ex) != len(ids) {
					errs <- fmt.Errorf("exists: %v, %d answers", err, len(ex))
					return
				}
				if err := m.Place(tenant, ids, 2, "n1", meta.Strategy(1+rng.IntN(3)), &pl); err != nil || len(pl.Nodes) != 2*len(ids) {
					errs <- fmt.Errorf("place: %v, %d nodes", err, len(pl.Nodes))
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	checker.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := m.CheckInvariants(); err != nil {
				errs <- err
				return
			}
			_ = m.Stats()
			_ = m.Nodes()
		}
	})
	wg.Wait()
	close(stop)
	checker.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	var want []row
	for _, n := range nodes {
		want = append(want, rowsOf(n.id, n.inv.inventory())...)
	}
	slices.SortFunc(want, rowCmp)
	if d := diffRows(dump(m), want); d != "" {
		t.Fatalf("index differs from the nodes' inventories:\n%s", d)
	}
	st := m.Stats()
	if st.EvictFreed == 0 || st.Promotion.Admitted == 0 {
		t.Errorf("the run exercised too little: %d evictions, %d promotions", st.EvictFreed, st.Promotion.Admitted)
	}
	t.Logf("lookups %d, evict attempts %d freed %d confirmed %d, promotions %+v", st.Lookups, st.EvictAttempts, st.EvictFreed, st.EvictConfirmed, st.Promotion)
}
