package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/kvpool/kvpool/internal/netns"
)

// With Options.Netns every process has a network host of its own
// (package netns): the master is host "master", node i host "node-i".
// The cluster's port layout (Options.BasePort) numbers one port space;
// hostAddr maps each of its slots to the host and the port that serves
// it there.

// makeHosts makes the hosts: the master's, unshaped, and the nodes', with
// Options.Link.
func (c *Cluster) makeHosts(ctx context.Context) error {
	hosts := []string{"master"}
	for i := range c.opts.Nodes {
		hosts = append(hosts, fmt.Sprintf("node-%d", i))
	}
	removed, err := netns.CleanStale()
	for _, r := range removed {
		fmt.Fprintf(c.opts.Stderr, "[cluster] removed the stale network hosts %s (their owner is gone)\n", r)
	}
	if err != nil {
		fmt.Fprintf(c.opts.Stderr, "[cluster] %v\n", err) // not this cluster's problem: start anyway
	}
	n, err := netns.New(ctx, netns.Options{Hosts: hosts})
	if err != nil {
		return fmt.Errorf("cluster: network hosts (--netns): %w", err)
	}
	c.net = n
	for _, h := range n.Hosts()[1:] {
		if err := h.SetLink(ctx, c.opts.Link); err != nil {
			n.Close()
			c.net = nil
			return fmt.Errorf("cluster: network hosts (--netns): %w", err)
		}
	}
	return nil
}

// hostAddr returns the address of port slot i of the cluster's layout
// (cluster.go, Start: master j at 2j and 2j+1, node k at base+2k and
// base+2k+1, node k's Redis front at base+2·Nodes+k) on its process's
// host.
func (c *Cluster) hostAddr(i int) string {
	port := c.opts.BasePort
	if port == 0 {
		port = DefaultHostPort
	}
	base := 2 * c.opts.Masters
	var host string
	switch {
	case i < base:
		host = "master"
		port += i % 2
	case i < base+2*c.opts.Nodes:
		host = fmt.Sprintf("node-%d", (i-base)/2)
		port += (i - base) % 2
	default:
		host = fmt.Sprintf("node-%d", i-base-2*c.opts.Nodes)
		port += 2
	}
	return net.JoinHostPort(c.net.Host(host).Addr.String(), strconv.Itoa(port))
}

// hostSpawners starts a spawner on each host, for the process of its
// name.
func (c *Cluster) hostSpawners() error {
	c.spawners = map[string]*spawner{}
	for _, h := range c.net.Hosts() {
		s, err := newSpawnerIn(h.Path())
		if err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
		c.spawners[h.Name] = s
	}
	return nil
}

// spawnerOf returns the spawner of the process named name: on its own
// host with Options.Netns, else the cluster's.
func (c *Cluster) spawnerOf(name string) *spawner {
	if s, ok := c.spawners[name]; ok {
		return s
	}
	return c.spawn
}

// Net returns the cluster's network hosts with Options.Netns, else nil.
func (c *Cluster) Net() *netns.Net { return c.net }

// NodeHost returns node i's network host with Options.Netns, else nil.
func (c *Cluster) NodeHost(i int) *netns.Host {
	if c.net == nil || i < 0 || i >= len(c.Nodes) {
		return nil
	}
	return c.net.Host(c.Nodes[i].Name)
}

// SetNodeLink changes node i's link (Options.Netns): its rate, its delay,
// or whether it is cut off from the others.
func (c *Cluster) SetNodeLink(ctx context.Context, i int, l netns.Link) error {
	h := c.NodeHost(i)
	if h == nil {
		return fmt.Errorf("cluster: node %d has no network host of its own (Netns is off, or no such node)", i)
	}
	return h.SetLink(ctx, l)
}
