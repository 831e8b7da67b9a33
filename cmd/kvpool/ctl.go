package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/listen"
)

// ctlTimeout bounds one `kvpool ctl` command: 10 s, ample for one admin
// request on a live cluster, short enough not to hang a shell on a dead one.
const ctlTimeout = 10 * time.Second

// ctlIndexWait bounds how long put waits for the block to appear in the
// master's index: a few default heartbeats (1 s).
const ctlIndexWait = 5 * time.Second

// ctlArgs returns the commands of `kvpool ctl` with their argument
// counts (the command itself included).
func ctlArgs() map[string]int {
	return map[string]int{"nodes": 1, "stat": 1, "get": 2, "put": 3, "query": 2}
}

// ctlOptions are the parsed flags and arguments of `kvpool ctl`.
type ctlOptions struct {
	client  client.Options
	timeout time.Duration
	// cmd is the command; id its block ID and file put's payload file
	// ("-": stdin).
	cmd  string
	id   uint64
	file string
}

// runCtl implements `kvpool ctl`: human admin commands against a running
// cluster, through the public client.
func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseCtl(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c, err := client.New(ctx, o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	switch o.cmd {
	case "nodes":
		return ctlNodes(ctx, c, stdout)
	case "stat":
		return ctlStat(ctx, c, stdout)
	case "get":
		return ctlGet(ctx, c, o.id, stdout)
	case "put":
		return ctlPut(ctx, c, o.id, o.file, stdout)
	default: // query
		return ctlQuery(ctx, c, o.id, stdout)
	}
}

// parseCtl parses the flags and arguments of `kvpool ctl`.
func parseCtl(args []string, stderr io.Writer) (ctlOptions, error) {
	fs := newFlagSet("ctl", stderr)
	var o ctlOptions
	fs.StringVar(&o.client.Master, "master", "", "master address host:port (required)")
	fs.StringVar(&o.client.Tenant, "tenant", "", "tenant namespace of the blocks")
	fs.StringVar(&o.client.Token, "token", os.Getenv(envAuthToken), "auth token (default: $KVPOOL_AUTH_TOKEN)")
	fs.DurationVar(&o.timeout, "timeout", ctlTimeout, "bound on the whole command")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool ctl --master ADDR [--tenant T] nodes | stat | get ID | put ID FILE|- | query ID\n\n"+
			"Admin commands against a running cluster, through the public client: list the\n"+
			"nodes, print every node's per-tier counters, read or store one block, or list\n"+
			"the replicas of a block.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, "timeout"); err != nil {
		return o, err
	}
	if o.client.Master == "" {
		return o, usageErrorf("--master is required")
	}
	if host, port, err := listen.SplitAddr(o.client.Master); err != nil || host == "" || port == 0 {
		return o, usageErrorf("--master %q: want the master's host:port, such as 127.0.0.1:7470", o.client.Master)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return o, usageErrorf("missing command (nodes, stat, get, put, query)")
	}
	n, ok := ctlArgs()[rest[0]]
	if !ok {
		return o, usageErrorf("unknown command %q (nodes, stat, get, put, query)", rest[0])
	}
	if len(rest) != n {
		return o, usageErrorf("%s takes %d argument(s), got %d", rest[0], n-1, len(rest)-1)
	}
	o.cmd = rest[0]
	if n > 1 {
		v, err := strconv.ParseUint(rest[1], 0, 64)
		if err != nil {
			return o, usageErrorf("block ID %q: want a decimal or 0x-hex unsigned 64-bit number", rest[1])
		}
		o.id = v
	}
	if n > 2 {
		o.file = rest[2]
	}
	return o, nil
}

// ctlGet writes block id's payload to stdout.
func ctlGet(ctx context.Context, c *client.Client, id uint64, stdout io.Writer) error {
	res, err := c.Get(ctx, []uint64{id}, nil)
	if err != nil {
		return err
	}
	if res.Status[0] != client.Loaded {
		return fmt.Errorf("get block %d of tenant %q: %v", id, c.Tenant(), res.Status[0])
	}
	_, err = stdout.Write(res.Blocks[0])
	return err
}

// ctlPut stores file ("-": stdin) as block id and waits for it to enter
// the master's index, so that a get right after put finds it.
func ctlPut(ctx context.Context, c *client.Client, id uint64, file string, stdout io.Writer) error {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return fmt.Errorf("read payload of block %d: %w", id, err)
	}
	errs, err := c.Put(ctx, []uint64{id}, [][]byte{data}, client.PutOptions{})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return errs[0]
	}
	visible, err := c.WaitIndexed(ctx, []uint64{id}, ctlIndexWait)
	if err != nil {
		return err
	}
	if !visible {
		fmt.Fprintf(stdout, "stored block %d (%d bytes); not yet in the master's index after %v\n", id, len(data), ctlIndexWait)
		return nil
	}
	fmt.Fprintf(stdout, "stored block %d (%d bytes)\n", id, len(data))
	return nil
}

// ctlQuery lists the replicas of block id.
func ctlQuery(ctx context.Context, c *client.Client, id uint64, stdout io.Writer) error {
	locs, err := c.Locate(ctx, id)
	if err != nil {
		return err
	}
	if len(locs) == 0 {
		fmt.Fprintf(stdout, "block %d of tenant %q: not cached\n", id, c.Tenant())
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tTIER\tSIZE\tCHECKSUM")
	for _, l := range locs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%08x\n", l.Node, l.Tier, l.Size, l.Sum)
	}
	return tw.Flush()
}

// ctlNodes lists the nodes the master knows.
func ctlNodes(ctx context.Context, c *client.Client, stdout io.Writer) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDR\tLIVE")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%v\n", n.ID, n.Addr, n.Live)
	}
	return tw.Flush()
}

// ctlStat prints every node's per-tier counters; it fails, after printing
// the rest, when some node did not answer.
func ctlStat(ctx context.Context, c *client.Client, stdout io.Writer) error {
	stats, err := c.NodeStats(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tTIER\tBLOCKS\tBYTES\tHITS\tMISSES\tCORRUPT\tEVICTED")
	var firstErr error
	for _, n := range stats {
		switch {
		case n.Err != nil && !n.Reached:
			fmt.Fprintf(tw, "%s\t(unreachable: %v)\n", n.Node.ID, n.Err)
		case n.Err != nil:
			fmt.Fprintf(tw, "%s\t(stats failed: %v)\n", n.Node.ID, n.Err)
		}
		if n.Err != nil && firstErr == nil {
			firstErr = n.Err
		}
		for _, s := range n.Tiers {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", n.Node.ID, s.Name, s.Blocks, s.Bytes, s.Hits, s.Misses, s.Corruptions, s.Evicted)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if firstErr != nil {
		return fmt.Errorf("stat: some nodes did not answer: %w", firstErr)
	}
	return nil
}
