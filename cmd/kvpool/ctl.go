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
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// ctlTimeout bounds one `kvpool ctl` command: 10 s, ample for one admin
// request on a live cluster, short enough not to hang a shell on a dead one.
const ctlTimeout = 10 * time.Second

// runCtl implements `kvpool ctl`: human admin commands against a running
// cluster.
// ctlIndexWait bounds how long put waits for the block to appear in the
// master's index: a few default heartbeats (1 s).
const ctlIndexWait = 5 * time.Second

func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ctl", stderr)
	masterAddr := fs.String("master", "", "master address host:port (required)")
	tenant := fs.String("tenant", "", "tenant namespace of the blocks")
	token := fs.String("token", os.Getenv("KVPOOL_AUTH_TOKEN"), "auth token (default: $KVPOOL_AUTH_TOKEN)")
	timeout := fs.Duration("timeout", ctlTimeout, "bound on the whole command")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool ctl --master ADDR [--tenant T] nodes | stat | get ID | put ID FILE|- | query ID")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *masterAddr == "" {
		return usageErrorf("--master is required")
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageErrorf("missing command (nodes, stat, get, put, query)")
	}
	want := map[string]int{"nodes": 1, "stat": 1, "get": 2, "put": 3, "query": 2}
	n, ok := want[rest[0]]
	if !ok {
		return usageErrorf("unknown command %q (nodes, stat, get, put, query)", rest[0])
	}
	if len(rest) != n {
		return usageErrorf("%s takes %d argument(s), got %d", rest[0], n-1, len(rest)-1)
	}
	var id uint64
	if n > 1 {
		v, err := strconv.ParseUint(rest[1], 0, 64)
		if err != nil {
			return usageErrorf("block ID %q: want a decimal or 0x-hex unsigned 64-bit number", rest[1])
		}
		id = v
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := client.New(ctx, client.Options{Master: *masterAddr, Tenant: *tenant, Token: *token})
	if err != nil {
		return err
	}
	defer c.Close()
	switch rest[0] {
	case "nodes":
		return ctlNodes(ctx, c, stdout)
	case "stat":
		return ctlStat(ctx, c, *tenant, *token, stdout)
	case "get":
		res, err := c.Get(ctx, []uint64{id}, nil)
		if err != nil {
			return err
		}
		if res.Status[0] != client.Loaded {
			return fmt.Errorf("get block %d of tenant %q: %v", id, *tenant, res.Status[0])
		}
		_, err = stdout.Write(res.Blocks[0])
		return err
	case "put":
		var data []byte
		if rest[2] == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(rest[2])
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
		// A stored block enters the master's index with its node's next
		// heartbeat; wait for it so that a get right after put finds it.
		visible := false
		for wait := time.Now().Add(ctlIndexWait); !visible && time.Now().Before(wait); {
			p, err := c.Lookup(ctx, []uint64{id})
			if err != nil {
				return err
			}
			if visible = p.Len == 1; !visible {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		if !visible {
			fmt.Fprintf(stdout, "stored block %d (%d bytes); not yet in the master's index after %v\n", id, len(data), ctlIndexWait)
			return nil
		}
		fmt.Fprintf(stdout, "stored block %d (%d bytes)\n", id, len(data))
		return nil
	default: // query
		pre, err := c.Lookup(ctx, []uint64{id})
		if err != nil {
			return err
		}
		if pre.Len == 0 {
			fmt.Fprintf(stdout, "block %d of tenant %q: not cached\n", id, *tenant)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tTIER\tSIZE\tCHECKSUM")
		for _, l := range pre.Replicas[0] {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%08x\n", l.Node, l.Tier, l.Size, l.Sum)
		}
		return tw.Flush()
	}
}

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

func ctlStat(ctx context.Context, c *client.Client, tenant, token string, stdout io.Writer) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tTIER\tBLOCKS\tBYTES\tHITS\tMISSES\tCORRUPT\tEVICTED")
	var firstErr error
	for _, n := range nodes {
		conn, err := nodeclient.Dial(ctx, n.Addr, nodeclient.DialOptions{Tenant: tenant, Token: []byte(token)})
		if err != nil {
			fmt.Fprintf(tw, "%s\t(unreachable: %v)\n", n.ID, err)
			firstErr = err
			continue
		}
		tiers, err := conn.Stats(ctx)
		conn.Close()
		if err != nil {
			fmt.Fprintf(tw, "%s\t(stats failed: %v)\n", n.ID, err)
			firstErr = err
			continue
		}
		for _, t := range tiers {
			s := t.Stats
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", n.ID, t.Name, s.Blocks, s.Bytes, s.Hits, s.Misses, s.Corruptions, s.Evicted)
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
