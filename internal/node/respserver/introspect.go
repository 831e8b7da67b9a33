package respserver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

func cmdCommand(c *conn, _ context.Context, args [][]byte) {
	if len(args) == 1 {
		c.w.Array(len(c.s.sorted))
		for _, cmd := range c.s.sorted {
			c.commandInfo(cmd)
		}
		return
	}
	sub := args[1]
	switch {
	case equalFold(sub, "count"):
		c.w.Int(int64(len(c.s.cmds)))
	case equalFold(sub, "list"):
		c.w.Array(len(c.s.sorted))
		for _, cmd := range c.s.sorted {
			c.w.BulkString(cmd.name)
		}
	case equalFold(sub, "info"):
		names := args[2:]
		if len(names) == 0 {
			c.w.Array(len(c.s.sorted))
			for _, cmd := range c.s.sorted {
				c.commandInfo(cmd)
			}
			return
		}
		c.w.Array(len(names))
		for _, n := range names {
			if cmd := c.s.cmds[strings.ToLower(string(n))]; cmd != nil {
				c.commandInfo(cmd)
			} else {
				c.w.Null()
			}
		}
	case equalFold(sub, "docs"):
		list := c.s.sorted
		if len(args) > 2 {
			list = nil
			for _, n := range args[2:] {
				if cmd := c.s.cmds[strings.ToLower(string(n))]; cmd != nil {
					list = append(list, cmd)
				}
			}
		}
		c.w.Array(2 * len(list))
		for _, cmd := range list {
			c.w.BulkString(cmd.name)
			c.commandDocs(cmd)
		}
	case equalFold(sub, "help"):
		c.help("COMMAND", "(no subcommand)", "COUNT", "DOCS [<command-name> ...]", "INFO [<command-name> ...]", "LIST")
	default:
		c.fail("ERR unknown subcommand '" + clip(sub) + "'. Try COMMAND HELP.")
	}
}

// commandInfo writes one COMMAND INFO entry: name, arity, flags, first
// key, last key, step, ACL categories, tips, key specs, subcommands.
func (c *conn) commandInfo(cmd *command) {
	c.w.Array(10)
	c.w.BulkString(cmd.name)
	c.w.Int(int64(cmd.arity))
	c.w.Array(len(cmd.flags))
	for _, f := range cmd.flags {
		c.w.Simple(f)
	}
	c.w.Int(int64(cmd.firstKey))
	c.w.Int(int64(cmd.lastKey))
	c.w.Int(int64(cmd.step))
	cats := []string{"@" + cmd.group}
	if slices.Contains(cmd.flags, "write") {
		cats = append(cats, "@write")
	} else if slices.Contains(cmd.flags, "readonly") {
		cats = append(cats, "@read")
	}
	c.w.Array(len(cats))
	for _, a := range cats {
		c.w.Simple(a)
	}
	c.w.Array(0) // tips
	c.w.Array(0) // key specs
	c.w.Array(len(cmd.subs))
	for _, s := range cmd.subs {
		c.w.Array(10)
		c.w.BulkString(cmd.name + "|" + s)
		c.w.Int(-2)
		c.w.Array(0)
		c.w.Int(0)
		c.w.Int(0)
		c.w.Int(0)
		c.w.Array(1)
		c.w.Simple("@" + cmd.group)
		c.w.Array(0)
		c.w.Array(0)
		c.w.Array(0)
	}
}

// commandDocs writes one COMMAND DOCS entry, a map as RESP2 flattens one.
func (c *conn) commandDocs(cmd *command) {
	n := 6
	if len(cmd.subs) > 0 {
		n += 2
	}
	c.w.Array(n)
	c.w.BulkString("summary")
	c.w.BulkString(cmd.summary)
	c.w.BulkString("since")
	c.w.BulkString(cmd.since)
	c.w.BulkString("group")
	c.w.BulkString(cmd.group)
	if len(cmd.subs) > 0 {
		c.w.BulkString("subcommands")
		c.w.Array(2 * len(cmd.subs))
		for _, s := range cmd.subs {
			c.w.BulkString(cmd.name + "|" + s)
			c.w.Array(6)
			c.w.BulkString("summary")
			c.w.BulkString(strings.ToUpper(cmd.name) + " " + strings.ToUpper(s))
			c.w.BulkString("since")
			c.w.BulkString(cmd.since)
			c.w.BulkString("group")
			c.w.BulkString(cmd.group)
		}
	}
}

// configParams are the parameters CONFIG GET answers, as Redis names
// them; values that depend on the server are filled in by configValue.
var configParams = []string{
	"appendonly", "bind", "databases", "maxclients", "maxmemory", "maxmemory-policy",
	"port", "proto-max-bulk-len", "save", "timeout",
}

func cmdConfig(c *conn, ctx context.Context, args [][]byte) {
	sub := args[1]
	switch {
	case equalFold(sub, "get"):
		if len(args) < 3 {
			c.fail("ERR wrong number of arguments for 'config|get' command")
			return
		}
		var pairs []string
		for _, p := range configParams {
			for _, pat := range args[2:] {
				if globMatch(pat, []byte(p), true) {
					pairs = append(pairs, p, c.configValue(ctx, p))
					break
				}
			}
		}
		c.w.Array(len(pairs))
		for _, s := range pairs {
			c.w.BulkString(s)
		}
	case equalFold(sub, "set"):
		if len(args) < 4 || len(args)%2 != 0 {
			c.fail("ERR wrong number of arguments for 'config|set' command")
			return
		}
		// Nothing is settable at run time: kvpool's settings live in its
		// configuration file and flags.
		c.fail("ERR Unknown option or number of arguments for CONFIG SET - '" + clip(args[2]) + "'")
	case equalFold(sub, "help"):
		c.help("CONFIG", "GET <pattern>")
	default:
		c.fail("ERR unknown subcommand '" + clip(sub) + "'. Try CONFIG HELP.")
	}
}

// configValue is one CONFIG GET value.
func (c *conn) configValue(ctx context.Context, p string) string {
	o := &c.s.opts
	switch p {
	case "appendonly":
		return "no"
	case "bind":
		return strings.Split(c.sc.LocalAddr().String(), ":")[0]
	case "databases":
		return "1"
	case "maxclients":
		return strconv.Itoa(o.MaxConns)
	case "maxmemory", "maxmemory-policy":
		inf, err := o.Backend.Info(ctx, c.tenant)
		if err != nil {
			return ""
		}
		if p == "maxmemory" {
			return strconv.FormatInt(inf.MaxBytes, 10)
		}
		return inf.Policy
	case "port":
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		return strconv.Itoa(c.s.port)
	case "proto-max-bulk-len":
		return strconv.Itoa(o.Limits.MaxBulk)
	case "save":
		return ""
	case "timeout":
		return strconv.Itoa(int(o.IdleTimeout / time.Second))
	}
	return ""
}

// infoSections are INFO's sections in the order "INFO" prints them.
var infoSections = []string{"server", "clients", "memory", "stats", "keyspace", "kvpool"}

func cmdInfo(c *conn, ctx context.Context, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		s := strings.ToLower(string(a))
		switch s {
		case "all", "everything", "default":
			for _, n := range infoSections {
				want[n] = true
			}
		default:
			want[s] = true
		}
	}
	if len(want) == 0 {
		for _, n := range infoSections {
			want[n] = true
		}
	}
	inf, err := c.s.opts.Backend.Info(ctx, c.tenant)
	if err != nil {
		c.backendError(err)
		return
	}
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
	section := func(name string) bool {
		if !want[strings.ToLower(name)] {
			return false
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		return true
	}
	st := c.s.Stats()
	if section("Server") {
		line("redis_version", redisVersion)
		line("redis_mode", "standalone")
		line("kvpool_version", c.s.opts.Version)
		line("kvpool_node", inf.Node)
		line("tcp_port", c.configValue(ctx, "port"))
		up := c.s.opts.Now().Sub(c.s.start)
		line("uptime_in_seconds", int64(up/time.Second))
		line("uptime_in_days", int64(up/(24*time.Hour)))
	}
	if section("Clients") {
		line("connected_clients", st.Open)
		line("maxclients", c.s.opts.MaxConns)
		line("rejected_connections", st.Refused)
	}
	if section("Memory") {
		line("used_memory", inf.UsedBytes)
		line("used_memory_human", human(inf.UsedBytes))
		line("maxmemory", inf.MaxBytes)
		line("maxmemory_human", human(inf.MaxBytes))
		line("maxmemory_policy", inf.Policy)
		line("kvpool_eviction_policy", inf.PolicyKvpool)
	}
	if section("Stats") {
		line("total_connections_received", st.Accepted)
		line("total_commands_processed", st.Commands)
		line("total_error_replies", st.Errors)
		line("keyspace_hits", inf.HitsLocalRAM+inf.HitsLocalSSD+inf.HitsRemote)
		line("keyspace_misses", inf.Misses)
		line("evicted_keys", evictions(inf.Tiers))
	}
	if section("Keyspace") && inf.Keys > 0 {
		fmt.Fprintf(&b, "db0:keys=%d,expires=%d,avg_ttl=0\r\n", inf.Keys, inf.Expires)
	}
	if section("kvpool") {
		line("kvpool_nodes", inf.Nodes)
		line("kvpool_tenant", strconv.Quote(c.tenant))
		gets := inf.HitsLocalRAM + inf.HitsLocalSSD + inf.HitsRemote + inf.Misses
		line("kvpool_hits_local_ram", inf.HitsLocalRAM)
		line("kvpool_hits_local_ssd", inf.HitsLocalSSD)
		line("kvpool_hits_remote", inf.HitsRemote)
		line("kvpool_misses", inf.Misses)
		line("kvpool_hit_ratio_local_ram", ratio(inf.HitsLocalRAM, gets))
		line("kvpool_hit_ratio_local_ssd", ratio(inf.HitsLocalSSD, gets))
		line("kvpool_hit_ratio_remote", ratio(inf.HitsRemote, gets))
		line("kvpool_corrupt_copies", inf.CorruptCopies)
		line("kvpool_reads_without_master", inf.OwnReads)
		line("kvpool_sets_in_place", inf.InPlaceSets)
		line("kvpool_sets_coalesced", st.CoalescedSets)
		line("kvpool_promotions", inf.Promotions)
		for _, t := range inf.Tiers {
			fmt.Fprintf(&b, "kvpool_tier_%s:objects=%d,bytes=%d,capacity=%d,hits=%d,misses=%d,evictions=%d,corruptions=%d\r\n",
				t.Name, t.Objects, t.Bytes, t.Capacity, t.Hits, t.Misses, t.Evictions, t.Corruptions)
		}
	}
	c.w.BulkString(b.String())
}

func evictions(ts []TierInfo) uint64 {
	var n uint64
	for _, t := range ts {
		n += t.Evictions
	}
	return n
}

func ratio(a, b uint64) string {
	if b == 0 {
		return "0.0000"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 4, 64)
}

// human formats bytes as Redis's *_human fields do ("1.50M").
func human(n int64) string {
	const units = "BKMGTPE"
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10) + "B"
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + string(units[i])
}

// globMatch is Redis's glob-style pattern match (stringmatchlen): '*',
// '?', '[...]' with ranges and '^', and '\' escapes; nocase folds ASCII.
// Patterns come from clients, so it runs in O(len(pattern)·len(s)): on a
// mismatch it goes back only to the last '*' (every other token matches
// exactly one byte), never recursing.
func globMatch(pattern, s []byte, nocase bool) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if pi < len(pattern) && pattern[pi] == '*' {
			for pi < len(pattern) && pattern[pi] == '*' {
				pi++
			}
			if pi == len(pattern) {
				return true
			}
			star, mark = pi, si
			continue
		}
		if pi < len(pattern) {
			if n, ok := matchOne(pattern[pi:], s[si], nocase); ok {
				pi += n
				si++
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		pi, si = star, mark
	}
	for pi < len(pattern) && pattern[pi] == '*' {
		pi++
	}
	return pi == len(pattern)
}

// matchOne matches byte b against the token at the start of p (not '*')
// and returns the token's length.
func matchOne(p []byte, b byte, nocase bool) (int, bool) {
	fold := func(x byte) byte {
		if nocase && 'A' <= x && x <= 'Z' {
			return x + 'a' - 'A'
		}
		return x
	}
	switch p[0] {
	case '?':
		return 1, true
	case '\\':
		if len(p) >= 2 {
			return 2, fold(p[1]) == fold(b)
		}
		return 1, b == '\\'
	case '[':
		i := 1
		not := i < len(p) && p[i] == '^'
		if not {
			i++
		}
		match := false
		for i < len(p) && p[i] != ']' {
			switch {
			case p[i] == '\\' && i+1 < len(p):
				match = match || fold(p[i+1]) == fold(b)
				i += 2
			case i+2 < len(p) && p[i+1] == '-':
				lo, hi := fold(p[i]), fold(p[i+2])
				if lo > hi {
					lo, hi = hi, lo
				}
				x := fold(b)
				match = match || (lo <= x && x <= hi)
				i += 3
			default:
				match = match || fold(p[i]) == fold(b)
				i++
			}
		}
		if i < len(p) {
			i++ // ']'
		}
		return i, match != not
	}
	return 1, fold(p[0]) == fold(b)
}
