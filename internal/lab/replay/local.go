package replay

import (
	"context"
	"fmt"
	"io"

	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/trace"
)

// RunLocal starts a local cluster of n nodes sized and paced for opts
// (ClusterOptions), replays reqs against it with Run, opts.Master set to
// the cluster's master, and stops the cluster. Its processes' logs, and a
// line naming the master, go to stderr (nil: discarded); so does an
// error stopping the cluster, which does not fail a replay that has its
// result. It also returns the master's address.
func RunLocal(ctx context.Context, n int, reqs []trace.Request, opts Options, stderr io.Writer) (*Result, string, error) {
	co := ClusterOptions(n, opts)
	co.Stderr = stderr
	c, err := cluster.Start(ctx, co)
	if err != nil {
		return nil, "", fmt.Errorf("replay: start a local cluster of %d nodes: %w", n, err)
	}
	defer func() {
		if serr := c.Stop(); serr != nil && stderr != nil {
			fmt.Fprintf(stderr, "kvpool replay: stop the local cluster: %v\n", serr)
		}
	}()
	opts = Attach(c, opts)
	if stderr != nil {
		fmt.Fprintf(stderr, "kvpool replay: local cluster of %d nodes, master %s\n", n, c.Master.Addr)
	}
	res, err := Run(ctx, reqs, opts)
	return res, c.Master.Addr, err
}
