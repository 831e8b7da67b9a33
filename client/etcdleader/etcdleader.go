// Package etcdleader finds the leading master of a kvpool cluster through
// etcd, for client.Options.Leader:
//
//	f, err := etcdleader.New([]string{"http://10.0.0.9:2379"}, "prod-1")
//	...
//	defer f.Close()
//	c, err := client.New(ctx, client.Options{Master: "10.0.0.1:7470,10.0.0.2:7470", Leader: f.Leader})
//
// The cluster is the masters' --cluster-id, under which they campaign.
// It is a package of its own so that a client that does not use etcd does
// not link etcd's client.
package etcdleader

import (
	"context"
	"log/slog"

	"github.com/kvpool/kvpool/internal/election"
)

// Finder asks etcd which master leads a cluster. Safe for concurrent use.
type Finder struct {
	el *election.Election
}

// New returns a Finder for cluster on the etcd endpoints (client URLs
// such as http://127.0.0.1:2379). It connects lazily: a Leader call waits
// for etcd within its context.
func New(endpoints []string, cluster string) (*Finder, error) {
	el, err := election.Open(election.Options{Endpoints: endpoints, Cluster: cluster, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	return &Finder{el: el}, nil
}

// Leader returns the control address of the master that leads the
// cluster, or an error when none does or etcd cannot be asked.
func (f *Finder) Leader(ctx context.Context) (string, error) {
	l, err := f.el.Leader(ctx)
	if err != nil {
		return "", err
	}
	return l.Value, nil
}

// Close closes the connection to etcd.
func (f *Finder) Close() error { return f.el.Close() }
