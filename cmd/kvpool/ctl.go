package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/client"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/listen"
	"github.com/kvpool/kvpool/internal/master/masterclient"
)

// ctlTimeout bounds one `kvpool ctl` command: 10 s, ample for one admin
// request on a live cluster, short enough not to hang a shell on a dead one.
const ctlTimeout = 10 * time.Second

// ctlIndexWait bounds how long put waits for the block to appear in the
// master's index: a few default heartbeats (1 s).
const ctlIndexWait = 5 * time.Second

// ctlCommand is one command of `kvpool ctl`: how many ID arguments its id
// form takes (-1: one or more), whether it has a named form (--key) and
// whether it takes a file.
type ctlCommand struct {
	ids   int
	named bool
	file  bool
	json  bool
}

// ctlCommands returns the commands of `kvpool ctl`.
func ctlCommands() map[string]ctlCommand {
	return map[string]ctlCommand{
		"nodes":  {},
		"leader": {},
		"stat":   {json: true},
		"get":    {ids: 1, named: true},
		"put":    {ids: 1, named: true, file: true},
		"query":  {ids: 1, named: true},
		"exists": {ids: -1, named: true},
		"del":    {ids: -1, named: true},
	}
}

const ctlCommandList = "nodes, leader, stat, get, put, query, exists, del"

// ctlOptions are the parsed flags and arguments of `kvpool ctl`.
type ctlOptions struct {
	client  client.Options
	timeout time.Duration
	// cmd is the command; ids its block IDs, or names its object names
	// (--key, the named form); file put's payload file ("-": stdin).
	cmd   string
	ids   []uint64
	names []string
	file  string
	json  bool
}

// keyFlag collects the names of repeated --key flags; check validates
// them after parsing (so a refused name is not echoed whole, as the flag
// package would).
type keyFlag []string

func (k *keyFlag) String() string { return strings.Join(*k, ",") }

func (k *keyFlag) Set(v string) error {
	*k = append(*k, v)
	return nil
}

// check refuses an empty name and one over block.MaxNameLen bytes.
func (k keyFlag) check() error {
	for i, v := range k {
		switch {
		case v == "":
			return usageErrorf("--key %d is empty (names are 1 to %d bytes)", i+1, block.MaxNameLen)
		case len(v) > block.MaxNameLen:
			return usageErrorf("--key %d (%q…) is a name of %d bytes, over the limit of %d bytes", i+1, v[:16], len(v), block.MaxNameLen)
		}
	}
	return nil
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
	if o.cmd == "leader" {
		return ctlLeader(ctx, o, stdout)
	}
	c, err := client.New(ctx, o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	switch o.cmd {
	case "nodes":
		return ctlNodes(ctx, c, stdout)
	case "stat":
		if o.json {
			return ctlStatJSON(ctx, c, stdout)
		}
		return ctlStat(ctx, c, stdout)
	case "get":
		return ctlGet(ctx, c, o, stdout)
	case "put":
		return ctlPut(ctx, c, o, stdout)
	case "exists":
		return ctlExists(ctx, c, o, stdout)
	case "del":
		return ctlDel(ctx, c, o, stdout)
	default: // query
		return ctlQuery(ctx, c, o, stdout)
	}
}

// parseCtl parses the flags and arguments of `kvpool ctl`: the global
// flags, the command, then the command's flags (--key, --json) and
// arguments.
func parseCtl(args []string, stderr io.Writer) (ctlOptions, error) {
	fs := newFlagSet("ctl", stderr)
	var o ctlOptions
	fs.StringVar(&o.client.Master, "master", "", "master address host:port, or a cluster's masters comma-separated (required)")
	fs.StringVar(&o.client.Tenant, "tenant", "", "tenant namespace of the blocks and objects")
	fs.StringVar(&o.client.Token, "token", os.Getenv(envAuthToken), "auth token (default: $KVPOOL_AUTH_TOKEN)")
	fs.DurationVar(&o.timeout, "timeout", ctlTimeout, "bound on the whole command")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool ctl --master ADDR [--tenant T] COMMAND\n\n"+
			"commands:\n"+
			"  nodes                          list the nodes\n"+
			"  leader                         say which of the --master list leads, at which epoch\n"+
			"  stat [--json]                  every node's per-tier counters (objects, payload and held bytes)\n"+
			"  get ID | get --key NAME        write a block or named object to stdout, bytes exact\n"+
			"  put ID FILE|- | put --key NAME FILE|-\n"+
			"                                 store a file (or stdin) as a block or named object\n"+
			"  query ID | query --key NAME    list the replicas of a block or object\n"+
			"  exists ID... | exists --key NAME...\n"+
			"                                 say which blocks or objects are stored\n"+
			"  del ID... | del --key NAME...  delete blocks or objects from every node holding them\n\n"+
			"Admin commands against a running cluster, through the public client. A name\n"+
			"(--key, repeatable) is 1 to 1024 bytes; an object is at most the nodes'\n"+
			"--max-object-bytes (default 64 MiB).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, "timeout"); err != nil {
		return o, err
	}
	if o.client.Master == "" {
		return o, usageErrorf("--master is required")
	}
	for a := range strings.SplitSeq(o.client.Master, ",") {
		if host, port, err := listen.SplitAddr(strings.TrimSpace(a)); err != nil || host == "" || port == 0 {
			return o, usageErrorf("--master %q: want the master's host:port, such as 127.0.0.1:7470, or several comma-separated", o.client.Master)
		}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return o, usageErrorf("missing command (%s)", ctlCommandList)
	}
	o.cmd = rest[0]
	cmd, ok := ctlCommands()[o.cmd]
	if !ok {
		return o, usageErrorf("unknown command %q (%s)", o.cmd, ctlCommandList)
	}
	cfs := newFlagSet("ctl "+o.cmd, stderr)
	var keys keyFlag
	if cmd.named {
		cfs.Var(&keys, "key", "the object's name (1 to 1024 bytes): the named form of the command; repeatable for exists and del")
	}
	if cmd.json {
		cfs.BoolVar(&o.json, "json", false, "print the counters as JSON")
	}
	cfs.Usage = fs.Usage
	if err := parseFlags(cfs, rest[1:]); err != nil {
		return o, err
	}
	if err := keys.check(); err != nil {
		return o, err
	}
	o.names = keys
	args = cfs.Args()
	if cmd.file {
		if len(args) == 0 {
			return o, usageErrorf("%s needs a FILE (or - for stdin) after the ID or --key NAME", o.cmd)
		}
		o.file, args = args[len(args)-1], args[:len(args)-1]
	}
	switch {
	case cmd.ids == 0 && len(args) > 0:
		return o, usageErrorf("%s takes no arguments, got %q", o.cmd, args)
	case len(keys) > 0 && len(args) > 0:
		return o, usageErrorf("%s: give IDs or --key names, not both (got --key %q and %q)", o.cmd, keys[0], args)
	case len(keys) > 1 && cmd.ids == 1:
		return o, usageErrorf("%s takes one --key, got %d", o.cmd, len(keys))
	case cmd.ids != 0 && len(keys) == 0 && len(args) == 0:
		return o, usageErrorf("%s needs a block ID or --key NAME", o.cmd)
	case cmd.ids == 1 && len(args) > 1:
		return o, usageErrorf("%s takes one block ID, got %d arguments", o.cmd, len(args))
	}
	for _, a := range args {
		v, err := strconv.ParseUint(a, 0, 64)
		if err != nil {
			return o, usageErrorf("block ID %q: want a decimal or 0x-hex unsigned 64-bit number (or --key NAME for a named object)", a)
		}
		o.ids = append(o.ids, v)
	}
	return o, nil
}

// ctlLeader says, for each master of the --master list, whether it leads
// (and at which epoch) or which leader it sends clients to; it fails when
// none leads.
func ctlLeader(ctx context.Context, o ctlOptions, stdout io.Writer) error {
	addrs, err := masterclient.ParseAddrs(o.client.Master)
	if err != nil {
		return usageErrorf("--master: %v", err)
	}
	leader := ""
	var epoch uint64
	for _, a := range addrs {
		mc, err := masterclient.Dial(ctx, a, masterclient.Options{Token: []byte(o.client.Token), Follow: true, Conns: 1})
		switch {
		case err != nil:
			fmt.Fprintf(stdout, "%-22s  %v\n", a, err)
		case mc.Addr() == a && mc.Epoch() == 0:
			fmt.Fprintf(stdout, "%-22s  leads (a master without an election)\n", a)
			leader = a
		case mc.Addr() == a:
			fmt.Fprintf(stdout, "%-22s  leads epoch %d\n", a, mc.Epoch())
			leader, epoch = a, max(epoch, mc.Epoch())
		default:
			fmt.Fprintf(stdout, "%-22s  stands by; the leader is %s (epoch %d)\n", a, mc.Addr(), mc.Epoch())
			if leader == "" {
				leader, epoch = mc.Addr(), mc.Epoch()
			}
		}
		if mc != nil {
			mc.Close()
		}
	}
	if leader == "" {
		return fmt.Errorf("ctl leader: no master of %s leads", o.client.Master)
	}
	fmt.Fprintf(stdout, "leader %s epoch %d\n", leader, epoch)
	return nil
}

// what names the command's object in messages: block 12 or object "name".
func (o ctlOptions) what(i int) string {
	if o.names != nil {
		return "object " + strconv.Quote(o.names[i])
	}
	return fmt.Sprintf("block %d", o.ids[i])
}

// ctlGet writes one block's or named object's payload to stdout.
func ctlGet(ctx context.Context, c *client.Client, o ctlOptions, stdout io.Writer) error {
	var res client.GetResult
	var err error
	if o.names != nil {
		res, err = c.GetNamed(ctx, o.names, nil)
	} else {
		res, err = c.Get(ctx, o.ids, nil)
	}
	if err != nil {
		return err
	}
	if res.Status[0] != client.Loaded {
		return fmt.Errorf("get %s of tenant %q: %v", o.what(0), c.Tenant(), res.Status[0])
	}
	_, err = stdout.Write(res.Blocks[0])
	return err
}

// ctlPut stores file ("-": stdin) as one block or named object and waits
// for it to enter the master's index, so that a get right after put finds
// it.
func ctlPut(ctx context.Context, c *client.Client, o ctlOptions, stdout io.Writer) error {
	data, err := readPayload(o.file, os.Stdin, int64(config.MaxObjectBytesLimit))
	if err != nil {
		return fmt.Errorf("read payload of %s: %w", o.what(0), err)
	}
	var errs []error
	if o.names != nil {
		errs, err = c.PutNamed(ctx, o.names, [][]byte{data}, client.PutOptions{})
	} else {
		errs, err = c.Put(ctx, o.ids, [][]byte{data}, client.PutOptions{})
	}
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		return fmt.Errorf("put %s (%d bytes from %s): %w", o.what(0), len(data), o.file, err)
	}
	var visible bool
	if o.names != nil {
		visible, err = c.WaitIndexedNamed(ctx, o.names, ctlIndexWait)
	} else {
		visible, err = c.WaitIndexed(ctx, o.ids, ctlIndexWait)
	}
	if err != nil {
		return err
	}
	if !visible {
		fmt.Fprintf(stdout, "stored %s (%d bytes); not yet in the master's index after %v\n", o.what(0), len(data), ctlIndexWait)
		return nil
	}
	fmt.Fprintf(stdout, "stored %s (%d bytes)\n", o.what(0), len(data))
	return nil
}

// readPayload reads file ("-": stdin) whole, refusing one over limit
// bytes (the most any node takes) before reading it, or as soon as more
// arrives from a pipe: a 5 GiB file is not read into memory only for
// every node to refuse it.
func readPayload(file string, stdin io.Reader, limit int64) ([]byte, error) {
	tooLarge := func(n string) error {
		return fmt.Errorf("%s is %s, more than %v, the largest object a node takes (node flag --max-object-bytes, at most %v): %w",
			file, n, config.Size(limit), config.MaxObjectBytesLimit, kvpool.ErrTooLarge)
	}
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
			return nil, tooLarge(fmt.Sprintf("%d bytes (%v)", fi.Size(), config.Size(fi.Size())))
		}
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge("over " + strconv.FormatInt(limit, 10) + " bytes")
	}
	return data, nil
}

// ctlExists prints, for each block or object, whether the master's index
// lists it on a live node.
func ctlExists(ctx context.Context, c *client.Client, o ctlOptions, stdout io.Writer) error {
	var present []bool
	var err error
	if o.names != nil {
		present, err = c.ExistsNamed(ctx, o.names)
	} else {
		present, err = c.Exists(ctx, o.ids)
	}
	if err != nil {
		return err
	}
	for i, p := range present {
		state := "absent"
		if p {
			state = "present"
		}
		fmt.Fprintf(stdout, "%s: %s\n", o.what(i), state)
	}
	return nil
}

// ctlDel deletes blocks or objects from every node the index lists them
// on; it fails, after reporting the rest, when some could not be deleted
// (or were not stored).
func ctlDel(ctx context.Context, c *client.Client, o ctlOptions, stdout io.Writer) error {
	var errs []error
	var err error
	if o.names != nil {
		errs, err = c.DeleteNamed(ctx, o.names)
	} else {
		errs, err = c.Delete(ctx, o.ids)
	}
	if err != nil {
		return err
	}
	var failed []error
	for i, e := range errs {
		switch {
		case e == nil:
			fmt.Fprintf(stdout, "deleted %s\n", o.what(i))
		case errors.Is(e, kvpool.ErrNotFound):
			failed = append(failed, fmt.Errorf("del %s of tenant %q: not stored", o.what(i), c.Tenant()))
		default:
			failed = append(failed, fmt.Errorf("del %s: %w", o.what(i), e))
		}
	}
	return errors.Join(failed...)
}

// ctlQuery lists the replicas of one block or named object.
func ctlQuery(ctx context.Context, c *client.Client, o ctlOptions, stdout io.Writer) error {
	var locs []client.Location
	var err error
	if o.names != nil {
		locs, err = c.LocateNamed(ctx, o.names[0])
	} else {
		locs, err = c.Locate(ctx, o.ids[0])
	}
	if err != nil {
		return err
	}
	if len(locs) == 0 {
		fmt.Fprintf(stdout, "%s of tenant %q: not cached\n", o.what(0), c.Tenant())
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
	fmt.Fprintln(tw, "NODE\tTIER\tOBJECTS\tPAYLOAD_BYTES\tHELD_BYTES\tHITS\tMISSES\tCORRUPT\tEVICTED")
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
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", n.Node.ID, s.Name, s.Blocks, s.Bytes, s.HeldBytes, s.Hits, s.Misses, s.Corruptions, s.Evicted)
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

// ctlNodeJSON is one node of `ctl stat --json`.
type ctlNodeJSON struct {
	Node  string `json:"node"`
	Addr  string `json:"addr"`
	Live  bool   `json:"live"`
	Error string `json:"error,omitempty"`
	// Tiers are the node's tiers, RAM first.
	Tiers []ctlTierJSON `json:"tiers"`
}

// ctlTierJSON is one tier of a node in `ctl stat --json`: objects held,
// payload bytes (the sum of their lengths) and held bytes (the tier's
// space they occupy, names and metadata included).
type ctlTierJSON struct {
	Tier          string `json:"tier"`
	Objects       int    `json:"objects"`
	PayloadBytes  int64  `json:"payload_bytes"`
	HeldBytes     int64  `json:"held_bytes"`
	CapacityBytes int64  `json:"capacity_bytes"`
	Hits          uint64 `json:"hits"`
	Misses        uint64 `json:"misses"`
	Evicted       uint64 `json:"evicted"`
	Corruptions   uint64 `json:"corruptions"`
	IOErrors      uint64 `json:"io_errors"`
}

// ctlStatJSON prints every node's per-tier counters as one JSON object
// {"nodes": [...]}; like ctlStat it fails, after printing, when some node
// did not answer (its "error" says why).
func ctlStatJSON(ctx context.Context, c *client.Client, stdout io.Writer) error {
	stats, err := c.NodeStats(ctx)
	if err != nil {
		return err
	}
	out := struct {
		Nodes []ctlNodeJSON `json:"nodes"`
	}{Nodes: []ctlNodeJSON{}}
	var firstErr error
	for _, n := range stats {
		j := ctlNodeJSON{Node: n.Node.ID, Addr: n.Node.Addr, Live: n.Node.Live, Tiers: []ctlTierJSON{}}
		if n.Err != nil {
			j.Error = n.Err.Error()
			if firstErr == nil {
				firstErr = n.Err
			}
		}
		for _, s := range n.Tiers {
			j.Tiers = append(j.Tiers, ctlTierJSON{Tier: s.Name, Objects: s.Blocks, PayloadBytes: s.Bytes, HeldBytes: s.HeldBytes,
				CapacityBytes: s.CapacityBytes, Hits: s.Hits, Misses: s.Misses, Evicted: s.Evicted, Corruptions: s.Corruptions, IOErrors: s.IOErrors})
		}
		out.Nodes = append(out.Nodes, j)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	if firstErr != nil {
		return fmt.Errorf("stat: some nodes did not answer: %w", firstErr)
	}
	return nil
}
