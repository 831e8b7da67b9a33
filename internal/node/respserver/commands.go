package respserver

import (
	"context"
	"slices"
	"strconv"
	"strings"
)

// command is one command the front serves: Redis's COMMAND INFO fields
// and COMMAND DOCS summary, and the function that runs it.
type command struct {
	name string
	// arity is Redis's: n > 0 exactly n arguments with the name, n < 0 at
	// least -n.
	arity int
	flags []string
	// firstKey, lastKey and step locate the key arguments (COMMAND INFO);
	// 0 when the command takes none.
	firstKey, lastKey, step int
	group, since, summary   string
	run                     func(c *conn, ctx context.Context, args [][]byte)
	// noAuth commands run before AUTH (AUTH, HELLO, QUIT).
	noAuth bool
	// long commands bound their pool calls themselves (FLUSHDB: a batch
	// at a time), not the whole command by RequestTimeout.
	long bool
	// write commands are refused on a namespace the grant only reads.
	write bool
	// subs are CLIENT's, COMMAND's and CONFIG's subcommands, for COMMAND
	// INFO and DOCS.
	subs []string
}

// newCommands returns the command table, by lower-case name, and the same
// commands sorted by name. A server builds it once and never changes it.
func newCommands() (map[string]*command, []*command) {
	list := []*command{
		{name: "ping", arity: -1, flags: []string{"fast"}, group: "connection", since: "1.0.0", summary: "Returns the server's liveliness response.", run: cmdPing, noAuth: false},
		{name: "echo", arity: 2, flags: []string{"fast"}, group: "connection", since: "1.0.0", summary: "Returns the given string.", run: cmdEcho},
		{name: "quit", arity: -1, flags: []string{"allow_busy", "fast"}, group: "connection", since: "1.0.0", summary: "Closes the connection.", run: cmdQuit, noAuth: true},
		{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, group: "connection", since: "6.0.0", summary: "Handshakes with the server (protocol 2 only).", run: cmdHello, noAuth: true},
		{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, group: "connection", since: "1.0.0", summary: "Authenticates the connection: binds it to a tenant.", run: cmdAuth, noAuth: true},
		{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, group: "connection", since: "1.0.0", summary: "Changes the selected database (0 only).", run: cmdSelect},
		{name: "client", arity: -2, flags: []string{"sentinel"}, group: "connection", since: "2.4.0", summary: "A container for client connection commands.", run: cmdClient,
			subs: []string{"setinfo", "setname", "getname", "id", "info", "list", "help"}},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, group: "server", since: "2.8.13", summary: "Returns detailed information about all commands.", run: cmdCommand,
			subs: []string{"count", "docs", "info", "list", "help"}},
		{name: "config", arity: -2, group: "server", since: "2.0.0", summary: "A container for server configuration commands.", run: cmdConfig,
			subs: []string{"get", "set", "resetstat", "help"}},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, group: "server", since: "1.0.0", summary: "Returns information and statistics about the server.", run: cmdInfo},
		{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, group: "server", since: "1.0.0", summary: "Returns the number of keys of the tenant.", run: cmdDBSize},
		{name: "flushdb", arity: -1, flags: []string{"write"}, group: "server", since: "1.0.0", summary: "Removes all keys of the tenant.", run: cmdFlushDB, write: true, long: true},
		{name: "get", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0", summary: "Returns the string value of a key.", run: cmdGet},
		{name: "set", arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0", summary: "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", run: cmdSet, write: true},
		{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1, group: "string", since: "1.0.0", summary: "Atomically returns the string values of one or more keys.", run: cmdMGet},
		{name: "mset", arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: -1, step: 2, group: "string", since: "1.0.1", summary: "Atomically creates or modifies the string values of one or more keys.", run: cmdMSet, write: true},
		{name: "strlen", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.2.0", summary: "Returns the length of a string value.", run: cmdStrlen},
		{name: "exists", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1, group: "generic", since: "1.0.0", summary: "Determines whether one or more keys exist.", run: cmdExists},
		{name: "del", arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: -1, step: 1, group: "generic", since: "1.0.0", summary: "Deletes one or more keys.", run: cmdDel, write: true},
		{name: "unlink", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: -1, step: 1, group: "generic", since: "4.0.0", summary: "Deletes one or more keys.", run: cmdDel, write: true},
		{name: "ttl", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "1.0.0", summary: "Returns the expiration time in seconds of a key.", run: cmdTTL},
		{name: "pttl", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "2.6.0", summary: "Returns the expiration time in milliseconds of a key.", run: cmdTTL},
		{name: "expire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "1.0.0", summary: "Sets the expiration time of a key in seconds.", run: cmdExpire, write: true},
		{name: "pexpire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "2.6.0", summary: "Sets the expiration time of a key in milliseconds.", run: cmdExpire, write: true},
		{name: "persist", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "2.2.0", summary: "Removes the expiration time of a key.", run: cmdPersist, write: true},
		{name: "type", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "1.0.0", summary: "Determines the type of value stored at a key.", run: cmdType},
		{name: "scan", arity: -2, flags: []string{"readonly"}, group: "generic", since: "2.8.0", summary: "Iterates over the key names of the tenant.", run: cmdScan},
		{name: "kvpool.prefix", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1, group: "kvpool", since: "kvpool 0.16", summary: "Returns the number of leading keys present (kvpool's own command).", run: cmdPrefix},
	}
	m := make(map[string]*command, len(list))
	for _, c := range list {
		m[c.name] = c
	}
	slices.SortFunc(list, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return m, list
}

// exec runs one command and writes its reply.
func (c *conn) exec(ctx context.Context, args [][]byte) {
	c.lower = append(c.lower[:0], args[0]...)
	for i, b := range c.lower {
		if 'A' <= b && b <= 'Z' {
			c.lower[i] = b + 'a' - 'A'
		}
	}
	cmd := c.s.cmds[string(c.lower)]
	switch {
	case cmd == nil:
		c.unknownCommand(args)
		return
	case !c.authed && !cmd.noAuth:
		c.fail("NOAUTH Authentication required.")
		return
	case cmd.arity > 0 && len(args) != cmd.arity, cmd.arity < 0 && len(args) < -cmd.arity:
		c.fail("ERR wrong number of arguments for '" + cmd.name + "' command")
		return
	case cmd.write && c.grant.Check(c.tenant, true) != nil:
		c.fail("NOPERM this connection may only read tenant " + strconv.Quote(c.tenant) + "; '" + cmd.name + "' writes")
		return
	}
	if cmd.long {
		cmd.run(c, ctx, args)
		return
	}
	rctx := newReqCtx(ctx, c.s.opts.RequestTimeout)
	defer rctx.end()
	cmd.run(c, rctx, args)
}

// unknownCommand answers as Redis 7 does: the name and the first
// arguments, each quoted and cut at 128 bytes.
func (c *conn) unknownCommand(args [][]byte) {
	var b strings.Builder
	b.WriteString("ERR unknown command '")
	b.WriteString(clip(args[0]))
	b.WriteString("', with args beginning with: ")
	for _, a := range args[1:] {
		if b.Len() > 4096 {
			break
		}
		b.WriteByte('\'')
		b.WriteString(clip(a))
		b.WriteString("' ")
	}
	c.fail(b.String())
}

// clip returns a as a string of at most 128 bytes, as Redis's %.128s.
func clip(a []byte) string {
	if len(a) > 128 {
		a = a[:128]
	}
	return string(a)
}

// fail writes an error reply and counts it.
func (c *conn) fail(msg string) {
	c.s.ctr.errors.Add(1)
	c.w.Error(msg)
}

// syntaxError is Redis's reply to arguments it cannot parse.
func (c *conn) syntaxError() { c.fail("ERR syntax error") }

// notInteger is Redis's reply to a number it cannot parse.
func (c *conn) notInteger() { c.fail("ERR value is not an integer or out of range") }

// parseInt parses a decimal int64 as Redis's string2ll does (no sign but
// '-', no spaces, no leading zeros but "0").
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) > 1 && (b[0] == '0' || (b[0] == '-' && (len(b) == 1 || b[1] == '0'))) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// equalFold reports whether b is s (lower-case ASCII) in any case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x := b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != s[i] {
			return false
		}
	}
	return true
}
