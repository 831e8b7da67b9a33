package node

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/vfs"
)

// MasterClient is the node's view of its master: master.Master's Register
// and Heartbeat, across a network (package masterclient) or in process.
// Errors that mean "register again" wrap meta.ErrUnknownNode. It is used
// by one goroutine at a time.
type MasterClient interface {
	// Register announces the node with its full inventory and usage.
	Register(ctx context.Context, info meta.NodeInfo, inv meta.Inventory, usage meta.NodeUsage) (meta.RegisterReply, error)
	// Heartbeat reports the changes since the previous beat and returns
	// the node's tasks.
	Heartbeat(ctx context.Context, id meta.NodeID, s meta.Session, d meta.Delta, u meta.NodeUsage, ssdHits []block.Key, done []meta.TaskResult) (meta.HeartbeatReply, error)
}

// Options configure a Node beyond its configuration. The zero value is a
// standalone node logging nowhere with a fresh metrics registry.
type Options struct {
	// Logger receives the startup line and operational events (nil:
	// discarded).
	Logger *slog.Logger
	// Master connects the node to its master; nil runs it standalone
	// (the store's own promoter decides promotions).
	Master MasterClient
	// Registry is where the node registers its metrics and what /metrics
	// serves, so it must also be a prometheus.Gatherer (a
	// *prometheus.Registry is both); nil means a fresh registry.
	Registry prometheus.Registerer
	// StartupLine is the configuration's startup line
	// (config.Loaded.StartupLine, which knows where each value came
	// from); empty means one built from the configuration alone, every
	// value shown as a default.
	StartupLine string
	// WrapSSDFS, when set, wraps the filesystem under the SSD tier (below
	// its pacers): fault injection for tests (package errorfs), nil in
	// production. It is called once, when Run opens the store.
	WrapSSDFS func(vfs.FS) vfs.FS
	// WrapBackend, when set, wraps what the node protocol serves: fault
	// injection for tests (a copy corrupted on its way to another node),
	// nil in production. The wrapper must keep the optional interfaces of
	// the backend it wraps (nodeserver.AccessBackend, nodeserver.Syncer).
	WrapBackend func(nodeserver.Backend) nodeserver.Backend
	// Version is the kvpool version the Redis front's INFO and HELLO
	// report ("dev" when empty).
	Version string
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	if o.Registry != nil {
		if _, ok := o.Registry.(prometheus.Gatherer); !ok {
			return errors.New("node: Options.Registry is not a prometheus.Gatherer, so /metrics could not serve it (use a *prometheus.Registry)")
		}
	}
	return nil
}

// wrapSSDFS applies Options.WrapSSDFS (nil: nothing) to the SSD tier's
// filesystem, under the pacers of pfs when the tier is paced.
func wrapSSDFS(so *ssd.Options, pfs *pacedFS, wrap func(vfs.FS) vfs.FS) {
	if so == nil || wrap == nil {
		return
	}
	if pfs != nil {
		pfs.FS = wrap(pfs.FS)
		return
	}
	base := so.FS
	if base == nil {
		base = vfs.Default()
	}
	so.FS = wrap(base)
}
