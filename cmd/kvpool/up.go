package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/election"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/netns"
)

// runUp implements `kvpool up`: a local cluster of one master and N nodes
// as separate processes, until interrupted.
func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("up", stderr)
	nodes := fs.Int("nodes", cluster.DefaultNodes, "number of nodes")
	ram := fs.String("ram", config.Size(cluster.DefaultRAMBytes).String(), "RAM tier budget per node")
	ssd := fs.String("ssd", "", "SSD tier capacity per node (e.g. 1GiB; empty or 0 = no SSD tier)")
	blockSize := fs.String("block-size", config.Size(cluster.DefaultBlockSize).String(),
		"typical object size the nodes' eviction policies are sized for; not a limit on object size (--max-object-bytes is)")
	maxObject := fs.String("max-object-bytes", config.DefaultMaxObjectBytes.String(),
		fmt.Sprintf("largest object each node stores (at most %v; less if a node's RAM keeps less)", config.MaxObjectBytesLimit))
	dataDir := fs.String("data-dir", "", "directory for the nodes' data (default: a temporary directory removed on exit)")
	md := master.DefaultOptions()
	heartbeat := fs.Duration("heartbeat", 0, fmt.Sprintf("node heartbeat interval (0 = the master's default, %v)", md.HeartbeatInterval))
	nodeTTL := fs.Duration("node-ttl", 0, fmt.Sprintf("master's node TTL (0 = its default, %v)", md.NodeTTL))
	basePort := fs.Int("base-port", 0, "first port (master data, master admin, two per node, then each node's Redis port); 0 picks free ports")
	respOn := fs.Bool("resp", true, "serve Redis clients (RESP2) on every node; --resp=false turns it off")
	quiet := fs.Bool("quiet", false, "do not show the processes' logs")
	masters := fs.Int("masters", 1, "number of masters; more than 1 also starts etcd (the etcd binary on PATH), on which they elect their leader")
	electionTTL := fs.Duration("election-ttl", 0, fmt.Sprintf("with --masters > 1: the masters' etcd lease, whole seconds (0 = the master's default, %v)", election.DefaultTTL))
	netnsOn := fs.Bool("netns", false, "put the master and every node on a network host of its own (a Linux network namespace on a private bridge; needs root and iproute2)")
	linkRate := fs.String("link-rate", "", "with --netns: every node's link rate, each direction, enforced by the kernel (e.g. 200MB/s, 1Gbps; empty or 0 = unshaped)")
	linkDelay := fs.Duration("link-delay", 0, "with --netns: one-way delay the kernel adds to every packet a node sends (0 = none; needs the kernel's netem qdisc)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool up [flags]\n\nStarts a local cluster: one master (or --masters, electing their leader on an\netcd it starts too) and --nodes node processes of this binary,\n"+
			"on loopback ports, and prints their addresses. Runs until SIGINT or SIGTERM,\n"+
			"then stops them.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, "nodes", "masters"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	opts := cluster.Options{Nodes: *nodes, DataDir: *dataDir, Heartbeat: *heartbeat, NodeTTL: *nodeTTL, BasePort: *basePort,
		RESP: *respOn, Stdout: stderr, Stderr: stderr, Masters: *masters, ElectionTTL: *electionTTL}
	if *quiet {
		opts.Stdout, opts.Stderr = nil, nil
	}
	for _, f := range []struct {
		flag, val string
		dst       *int64
	}{{"--ram", *ram, &opts.RAMBytes}, {"--block-size", *blockSize, &opts.BlockSize}, {"--max-object-bytes", *maxObject, &opts.MaxObjectBytes}, {"--ssd", *ssd, &opts.SSDBytes}} {
		if f.val == "" {
			continue
		}
		n, err := config.ParseSize(f.val)
		if err != nil {
			return usageErrorf("%s %q: %v", f.flag, f.val, err)
		}
		if n == 0 && f.flag != "--ssd" {
			return usageErrorf("%s %q: want a size > 0", f.flag, f.val)
		}
		*f.dst = int64(n)
	}
	opts.SSD = opts.SSDBytes > 0
	if err := netFlags(&opts, *netnsOn, *linkRate, *linkDelay); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return flagError(fs, err, nil)
	}
	// A reader gone from the pipe that takes up's output (kvpool up |
	// head) stops the cluster as Ctrl-C does, rather than killing up
	// with its processes and hosts still there.
	ctx, stopPipe := signal.NotifyContext(ctx, syscall.SIGPIPE)
	defer stopPipe()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster  %s (its nodes join only its master)\n", c.ID)
	if len(c.Masters) == 1 {
		fmt.Fprintf(stdout, "master   data %s  admin http://%s\n", c.Master.Addr, c.Master.AdminAddr)
	} else {
		lead, h, err := c.WaitLeader(ctx)
		if err != nil {
			c.Stop()
			return err
		}
		fmt.Fprintf(stdout, "etcd     %s\n", c.Etcd)
		for j, m := range c.Masters {
			role := "standby"
			if j == lead {
				role = fmt.Sprintf("leader, epoch %d", h.Epoch)
			}
			fmt.Fprintf(stdout, "%-8s data %s  admin http://%s  (%s)\n", m.Name, m.Addr, m.AdminAddr, role)
		}
	}
	for _, n := range c.Nodes {
		if n.RESPAddr != "" {
			fmt.Fprintf(stdout, "%-8s data %s  redis %s  admin http://%s  dir %s\n", n.Name, n.Addr, n.RESPAddr, n.AdminAddr, n.DataDir)
		} else {
			fmt.Fprintf(stdout, "%-8s data %s  admin http://%s  dir %s\n", n.Name, n.Addr, n.AdminAddr, n.DataDir)
		}
	}
	if c.TokenFile != "" {
		fmt.Fprintf(stdout, "token    %s (the processes listen beyond loopback): export %s=$(cat %s) for kvpool ctl and clients\n", c.TokenFile, envAuthToken, c.TokenFile)
	}
	if n := c.Net(); n != nil {
		fmt.Fprintf(stdout, "hosts    %s: one network namespace per process (ip netns list: %s…); node links %s\n", n.Prefix, n.Hosts()[0].NS[:strings.IndexByte(n.Hosts()[0].NS, '-')+1], describeLink(opts.Link))
	}
	fmt.Fprintf(stdout, "try: kvpool ctl --master %s nodes    (Ctrl-C stops the cluster)\n", c.Master.Addr)
	if len(c.Nodes) > 0 && c.Nodes[0].RESPAddr != "" {
		host, port, _ := net.SplitHostPort(c.Nodes[0].RESPAddr)
		fmt.Fprintf(stdout, "     redis-cli -h %s -p %s    (any node's redis port serves the whole pool)\n", host, port)
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping…")
	start := time.Now()
	if err := c.Stop(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stopped in %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// netFlags sets opts' network hosts from --netns, --link-rate and
// --link-delay, refusing a link flag without --netns and saying in one
// line why this machine cannot make hosts (exit status 2).
func netFlags(opts *cluster.Options, on bool, rate string, delay time.Duration) error {
	if rate != "" {
		r, err := config.ParseBandwidth(rate)
		if err != nil {
			return usageErrorf("--link-rate %q: %v", rate, err)
		}
		opts.Link.Rate = float64(r)
	}
	opts.Link.Delay = delay
	if !on {
		if opts.Link != (netns.Link{}) {
			return usageErrorf("--link-rate and --link-delay shape the links of network hosts: add --netns")
		}
		return nil
	}
	if err := netns.Available(); err != nil {
		return usageErrorf("--netns: %v", err)
	}
	if err := (netns.Link{Rate: opts.Link.Rate}).Validate(); err != nil {
		return usageErrorf("--link-rate %s: %v", rate, err)
	}
	if err := (netns.Link{Delay: delay}).Validate(); err != nil {
		return usageErrorf("--link-delay %v: %v", delay, err)
	}
	if opts.Link.Delay > 0 && !netns.HasNetem() {
		return usageErrorf("--link-delay %v: %v", delay, netns.ErrNoNetem)
	}
	opts.Netns = true
	return nil
}

// describeLink says what a node's link is, in flag terms.
func describeLink(l netns.Link) string {
	if l.Rate == 0 && l.Delay == 0 {
		return "unshaped"
	}
	out := "unshaped rate"
	if l.Rate > 0 {
		out = config.Bandwidth(l.Rate).String() + " each way (htb, shared fairly between the peers)"
	}
	if l.Delay > 0 {
		out += fmt.Sprintf(", +%v one way (netem)", l.Delay)
	}
	return out
}
