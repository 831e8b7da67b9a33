package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"time"
)

// A cluster with several masters (Options.Masters) runs one etcd, which
// the masters campaign on for the leadership and the nodes ask who leads.
// This file starts it and finds, stops, freezes and restarts the
// masters and etcd, for `kvpool up --masters N` and the failover tests.

// startEtcd starts a single-member etcd with its data in dir, serving
// clients on client and its peer port on peer (host:port), and waits
// until it answers.
func (c *Cluster) startEtcd(ctx context.Context, dir, client, peer string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: make etcd's data directory: %w", err)
	}
	args := []string{
		"--name", "kvpool", "--data-dir", dir,
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", "kvpool=http://" + peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-level", "warn",
	}
	c.etcdArgs = args
	if err := c.spawnEtcd(); err != nil {
		return err
	}
	return c.waitEtcd(ctx)
}

// spawnEtcd starts etcd with its arguments.
func (c *Cluster) spawnEtcd() error {
	p, err := c.spawn.start("etcd", c.opts.EtcdBinary, c.etcdArgs, nil, c.opts.Stdout, c.opts.Stderr, &c.outMu)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.etcd = p
	c.mu.Unlock()
	return c.writeOwner()
}

// waitEtcd waits, within StartTimeout, until etcd's /health says true.
func (c *Cluster) waitEtcd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var last error
	for {
		if err := c.exitedEarly(); err != nil {
			return err
		}
		var h struct{ Health string }
		if last = c.getJSON(ctx, c.Etcd+"/health", &h); last == nil && h.Health == "true" {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("cluster: wait for etcd at %s: %w (last: %v)", c.Etcd, ctx.Err(), last)
		}
	}
}

// getJSON GETs url and decodes its JSON body into v.
func (c *Cluster) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// MasterHealth is what a master's /health says of its role.
type MasterHealth struct {
	Role          string `json:"role"`
	Epoch         uint64 `json:"epoch"`
	Leader        string `json:"leader"`
	IndexComplete bool   `json:"index_complete"`
	ClusterID     string `json:"cluster_id"`
}

// MasterHealthAt reads master j's /health.
func (c *Cluster) MasterHealthAt(ctx context.Context, j int) (MasterHealth, error) {
	if j < 0 || j >= len(c.Masters) {
		return MasterHealth{}, fmt.Errorf("cluster: master %d does not exist (the cluster has %d)", j, len(c.Masters))
	}
	var h MasterHealth
	err := c.getJSON(ctx, "http://"+c.Masters[j].AdminAddr+"/health", &h)
	if err == nil && h.ClusterID != c.ID {
		err = c.foreign(h.ClusterID)
	}
	return h, err
}

// LeaderIndex returns the index of the master that leads now, and its
// health, or an error when none does (or, impossibly, two claim one
// epoch).
func (c *Cluster) LeaderIndex(ctx context.Context) (int, MasterHealth, error) {
	lead, leadH := -1, MasterHealth{}
	var errs []error
	for j := range c.Masters {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := c.MasterHealthAt(hctx, j)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Masters[j].Name, err))
			continue
		}
		if h.Role != "leader" {
			continue
		}
		if lead >= 0 && h.Epoch == leadH.Epoch {
			return -1, MasterHealth{}, fmt.Errorf("cluster: %s and %s both lead epoch %d", c.Masters[lead].Name, c.Masters[j].Name, h.Epoch)
		}
		if lead < 0 || h.Epoch > leadH.Epoch {
			lead, leadH = j, h
		}
	}
	if lead < 0 {
		if len(errs) == 0 {
			return -1, MasterHealth{}, errors.New("cluster: no master leads (all stand by)")
		}
		return -1, MasterHealth{}, fmt.Errorf("cluster: no master leads: %w", errors.Join(errs...))
	}
	return lead, leadH, nil
}

// WaitLeader waits, within StartTimeout and ctx, until a master leads
// with its index complete, and returns its index and health.
func (c *Cluster) WaitLeader(ctx context.Context) (int, MasterHealth, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		j, h, err := c.LeaderIndex(ctx)
		if err == nil && h.IndexComplete {
			return j, h, nil
		}
		if err == nil {
			err = fmt.Errorf("%s leads epoch %d, its index still being rebuilt", c.Masters[j].Name, h.Epoch)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return -1, MasterHealth{}, fmt.Errorf("cluster: wait for a leader: %w (last: %v)", ctx.Err(), err)
		}
	}
}

// leaderAdmin returns the admin address of the master to read the node
// list from: the only master, or the one that leads (the first master's
// when none does, which lists no nodes).
func (c *Cluster) leaderAdmin(ctx context.Context) string {
	if len(c.Masters) == 1 {
		return c.Master.AdminAddr
	}
	if j, _, err := c.LeaderIndex(ctx); err == nil {
		return c.Masters[j].AdminAddr
	}
	return c.Masters[0].AdminAddr
}

// RestartMasterAt stops master j cleanly (SIGTERM: a leader resigns, so
// a standby leads at once; SIGKILL after StopTimeout) and starts it
// again; it does not wait for anything else.
func (c *Cluster) RestartMasterAt(j int) error {
	p, err := c.masterProc(j)
	if err != nil {
		return err
	}
	if err := p.stop(c.opts.StopTimeout); err != nil && !p.exited() {
		return fmt.Errorf("cluster: stop %s: %w", p.name, err)
	}
	return c.startMaster(j)
}

// PauseMasterAt freezes master j with SIGSTOP (ResumeMasterAt undoes it).
func (c *Cluster) PauseMasterAt(j int) error {
	p, err := c.masterProc(j)
	if err != nil {
		return err
	}
	return c.pause(p)
}

// ResumeMasterAt sends master j SIGCONT.
func (c *Cluster) ResumeMasterAt(j int) error {
	p, err := c.masterProc(j)
	if err != nil {
		return err
	}
	return resume(p)
}

// etcdProc returns the etcd process.
func (c *Cluster) etcdProc() (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.etcd == nil:
		return nil, errors.New("cluster: no etcd (one master)")
	case c.stopped:
		return nil, errors.New("cluster: stopped")
	}
	return c.etcd, nil
}

// PauseEtcd freezes etcd with SIGSTOP (ResumeEtcd undoes it).
func (c *Cluster) PauseEtcd() error {
	p, err := c.etcdProc()
	if err != nil {
		return err
	}
	return c.pause(p)
}

// ResumeEtcd sends etcd SIGCONT.
func (c *Cluster) ResumeEtcd() error {
	p, err := c.etcdProc()
	if err != nil {
		return err
	}
	return resume(p)
}

// RestartEtcd stops etcd (SIGTERM) and starts it again on its data, and
// waits until it answers.
func (c *Cluster) RestartEtcd(ctx context.Context) error {
	p, err := c.etcdProc()
	if err != nil {
		return err
	}
	if err := p.stop(c.opts.StopTimeout); err != nil && !p.exited() {
		return fmt.Errorf("cluster: stop etcd: %w", err)
	}
	if err := c.spawnEtcd(); err != nil {
		return err
	}
	return c.waitEtcd(ctx)
}

// pause sends p SIGSTOP and waits until it is seen stopped.
func (c *Cluster) pause(p *proc) error {
	if p.exited() {
		return fmt.Errorf("cluster: pause %s: it has exited", p.name)
	}
	p.signal(syscall.SIGSTOP)
	// kill(2) only queues the signal: wait until the process is seen
	// stopped, so no request the caller sends next is still answered.
	if err := p.waitState(c.opts.StopTimeout, 'T', 't'); err != nil {
		return fmt.Errorf("cluster: pause %s: %w", p.name, err)
	}
	return nil
}

// resume sends p SIGCONT.
func resume(p *proc) error {
	if p.exited() {
		return fmt.Errorf("cluster: resume %s: it has exited", p.name)
	}
	p.signal(syscall.SIGCONT)
	return nil
}
