package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/election"
)

// openElection opens the election of cluster on the etcd endpoints
// listed in urls (comma-separated), to campaign in or to ask who leads.
func openElection(urls, cluster string, ttl time.Duration, log *slog.Logger) (*election.Election, error) {
	eps, err := config.SplitURLs(urls)
	if err != nil {
		return nil, usageErrorf("--etcd: %v", err)
	}
	el, err := election.Open(election.Options{Endpoints: eps, Cluster: cluster, TTL: ttl, Logger: log})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return el, nil
}

// leaderAddr returns a masterclient Options.Leader asking el.
func leaderAddr(el *election.Election) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		l, err := el.Leader(ctx)
		return l.Value, err
	}
}
