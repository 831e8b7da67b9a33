package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/node"
	"github.com/kvpool/kvpool/internal/option"
)

// inProcessPoll is how often StartInProcess asks the master whether every
// node is live: 10 ms, as short as the shortest heartbeat an in-process
// cluster is given in tests, so the wait ends about when the last node's
// first heartbeat lands.
const inProcessPoll = 10 * time.Millisecond

// InProcessOptions configure StartInProcess. The zero value of each field
// means its default.
type InProcessOptions struct {
	// Nodes is the number of nodes (DefaultNodes, at most 64).
	Nodes int
	// Node, when set, adjusts node i's configuration before it starts. It
	// receives config.Defaults() with both listeners on 127.0.0.1:0 and
	// NodeName "node-<i>".
	Node func(i int, cfg *config.Node)
	// HighWatermark and LowWatermark are the master's pool eviction
	// watermarks (0: the master's defaults).
	HighWatermark, LowWatermark float64
	// StartTimeout bounds the wait until the master lists every node live
	// (DefaultStartTimeout).
	StartTimeout time.Duration
}

// InProcess is a master and nodes running in this process and serving on
// loopback: a cluster for tests that need neither a kvpool binary nor
// separate processes. Close stops it; it is safe for concurrent use.
type InProcess struct {
	// Master is the master's protocol address (what nodes and clients
	// dial).
	Master string

	cancel context.CancelFunc
	srv    *masterserver.Server
	wg     sync.WaitGroup
	stops  []func() error
	once   sync.Once
	err    error
}

// StartInProcess starts a master and o.Nodes nodes in this process and
// waits, within o.StartTimeout and ctx, until the master lists every node
// live. On failure everything started is stopped.
func StartInProcess(ctx context.Context, o InProcessOptions) (*InProcess, error) {
	switch {
	case o.Nodes < 0 || o.Nodes > maxNodes:
		return nil, fmt.Errorf("cluster: %w", option.Errorf("Nodes", "%d: want 0 to %d (0 means the default, %d)", o.Nodes, maxNodes, DefaultNodes))
	case o.Nodes == 0:
		o.Nodes = DefaultNodes
	}
	switch {
	case o.StartTimeout < 0:
		return nil, fmt.Errorf("cluster: %w", option.Errorf("StartTimeout", "%v: want >= 0", o.StartTimeout))
	case o.StartTimeout == 0:
		o.StartTimeout = DefaultStartTimeout
	}
	m, err := master.New(master.Options{HighWatermark: o.HighWatermark, LowWatermark: o.LowWatermark})
	if err != nil {
		return nil, fmt.Errorf("cluster: in-process master: %w", err)
	}
	srv, err := masterserver.New(m, masterserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("cluster: in-process master server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("cluster: listen for the in-process master: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c := &InProcess{Master: ln.Addr().String(), cancel: cancel, srv: srv}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); srv.Serve(runCtx, ln) }()
	for i := range o.Nodes {
		if err := c.startNode(ctx, runCtx, i, o); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, o.StartTimeout)
	defer wcancel()
	if err := c.waitLive(wctx, o.Nodes); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// startNode starts node i and waits until it serves.
func (c *InProcess) startNode(ctx, runCtx context.Context, i int, o InProcessOptions) error {
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.NodeName = fmt.Sprintf("node-%d", i)
	if o.Node != nil {
		o.Node(i, &cfg)
	}
	mc, err := masterclient.Dial(ctx, c.Master, masterclient.Options{})
	if err != nil {
		return fmt.Errorf("cluster: in-process node %d: dial the master: %w", i, err)
	}
	n, err := node.New(cfg, node.Options{Master: mc})
	if err != nil {
		mc.Close()
		return fmt.Errorf("cluster: in-process node %d: %w", i, err)
	}
	nctx, ncancel := context.WithCancel(runCtx)
	done := make(chan error, 1)
	go func() { done <- n.Run(nctx) }()
	select {
	case <-n.Ready():
	case err := <-done:
		ncancel()
		mc.Close()
		return fmt.Errorf("cluster: in-process node %d stopped before serving: %w", i, err)
	case <-ctx.Done():
		ncancel()
		<-done
		mc.Close()
		return fmt.Errorf("cluster: in-process node %d: %w", i, ctx.Err())
	}
	c.stops = append(c.stops, func() error {
		ncancel()
		err := <-done
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return errors.Join(err, mc.Close())
	})
	return nil
}

// waitLive polls the master until it lists n nodes live or ctx ends.
func (c *InProcess) waitLive(ctx context.Context, n int) error {
	mc, err := masterclient.Dial(ctx, c.Master, masterclient.Options{})
	if err != nil {
		return fmt.Errorf("cluster: dial the in-process master: %w", err)
	}
	defer mc.Close()
	tick := time.NewTicker(inProcessPoll)
	defer tick.Stop()
	for {
		ns, err := mc.Nodes(ctx)
		live := 0
		for _, s := range ns {
			if s.Alive {
				live++
			}
		}
		if err == nil && live == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d of %d in-process nodes live (last error %v): %w", live, n, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// Close stops the nodes, then the master, and waits for them. Later calls
// return the first call's result.
func (c *InProcess) Close() error {
	c.once.Do(func() {
		var errs []error
		for _, stop := range c.stops {
			errs = append(errs, stop())
		}
		c.cancel()
		c.wg.Wait()
		errs = append(errs, c.srv.Close())
		c.err = errors.Join(errs...)
	})
	return c.err
}
