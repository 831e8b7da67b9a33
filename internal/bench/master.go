package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/meta"
)

// Master target shape. Each constant says where its value comes from.
const (
	// masterKeys is the index size: 4096 keys on 3 nodes, two replicas
	// each, as BenchmarkLookup32Loopback.
	masterKeys = 4096
	// masterNodes is the number of nodes registered in process.
	masterNodes = 3
	// masterItemSize is each replica's size in the index (64 KiB, the
	// fixture's; a lookup does not depend on it).
	masterItemSize = 64 << 10
)

// masterTarget is a master and its server in process on loopback, looked
// up through masterclient with leased batch lookups.
type masterTarget struct {
	srv    *masterserver.Server
	cancel context.CancelFunc
	done   chan error
	cl     *masterclient.Client
}

func (t *masterTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	// The registered nodes never heartbeat: a TTL longer than any run.
	m, err := master.New(master.Options{NodeTTL: time.Hour, HeartbeatInterval: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("create master: %w", err)
	}
	for i := range masterNodes {
		var inv meta.Inventory
		for id := range uint64(masterKeys) {
			if int(id)%masterNodes != i {
				inv = append(inv, meta.Item{Key: key(id), Tier: meta.Tier(1 + i%2), Size: masterItemSize, Sum: uint32(id)})
			}
		}
		info := meta.NodeInfo{ID: meta.NodeID(fmt.Sprintf("bench-node-%d", i)), Addr: fmt.Sprintf("127.0.0.1:%d", 7480+i), RAMBytes: 1 << 40, SSDBytes: 1 << 40}
		if _, err := m.Register(info, inv, meta.NodeUsage{}); err != nil {
			return nil, fmt.Errorf("register %s: %w", info.ID, err)
		}
	}
	srv, err := masterserver.New(m, masterserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("create master server: %w", err)
	}
	t.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the master: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.cancel, t.done = cancel, make(chan error, 1)
	go func() { t.done <- srv.Serve(runCtx, ln) }()
	cl, err := masterclient.Dial(ctx, ln.Addr().String(), masterclient.Options{Conns: spec.Conns})
	if err != nil {
		return nil, fmt.Errorf("dial master %s: %w", ln.Addr(), err)
	}
	t.cl = cl
	ws := make([]Worker, spec.Conns*spec.Depth)
	for i := range ws {
		ws[i] = &masterWorker{cl: cl, ids: make([]uint64, spec.Batch), next: uint64(i * spec.Batch)}
	}
	return ws, nil
}

func (t *masterTarget) Close() error {
	var errs []error
	if t.cl != nil {
		errs = append(errs, t.cl.Close())
	}
	if t.cancel != nil {
		t.cancel()
		if err := <-t.done; err != nil && !errors.Is(err, masterserver.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// masterWorker looks up consecutive runs of Batch keys (every one cached,
// so each lookup walks the whole batch) with a lease.
type masterWorker struct {
	cl   *masterclient.Client
	ids  []uint64
	next uint64
	res  masterclient.LookupResult
}

func (w *masterWorker) Do(ctx context.Context) (Op, error) {
	for i := range w.ids {
		w.ids[i] = (w.next + uint64(i)) % masterKeys
	}
	w.next += uint64(len(w.ids))
	if err := w.cl.Lookup(ctx, benchTenant, w.ids, true, &w.res); err != nil {
		return Op{}, fmt.Errorf("lookup %d keys from %d: %w", len(w.ids), w.ids[0], err)
	}
	if w.res.Hit != len(w.ids) {
		return Op{}, fmt.Errorf("lookup %d keys from %d: hit %d, want all", len(w.ids), w.ids[0], w.res.Hit)
	}
	return Op{Ops: int64(len(w.ids))}, nil
}
