package respserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvpool/kvpool/block"
)

// redisVersion is the Redis version the front answers as (HELLO, INFO):
// the one whose replies it reproduces.
const redisVersion = "7.0.0"

func cmdPing(c *conn, _ context.Context, args [][]byte) {
	switch len(args) {
	case 1:
		c.w.Simple("PONG")
	case 2:
		c.w.Bulk(args[1])
	default:
		c.fail("ERR wrong number of arguments for 'ping' command")
	}
}

func cmdEcho(c *conn, _ context.Context, args [][]byte) { c.w.Bulk(args[1]) }

func cmdQuit(c *conn, _ context.Context, _ [][]byte) {
	c.w.Simple("OK")
	c.quit = true
}

func cmdSelect(c *conn, _ context.Context, args [][]byte) {
	n, ok := parseInt(args[1])
	switch {
	case !ok || n < -1<<31 || n > 1<<31-1:
		c.notInteger()
	case n != 0:
		// One database: tenants, not database numbers, separate data.
		c.fail("ERR DB index is out of range")
	default:
		c.w.Simple("OK")
	}
}

func cmdAuth(c *conn, _ context.Context, args [][]byte) {
	ok := false
	switch len(args) {
	case 2:
		ok = c.auth(nil, args[1])
	case 3:
		ok = c.auth(args[1], args[2])
	default:
		c.syntaxError()
	}
	if ok {
		c.w.Simple("OK")
	}
}

// auth checks a password (a kvpool token) and binds the connection to a
// tenant: the one its tenant token names, or for the cluster token the
// user name given ("default" or none: the default tenant). It answers the
// error itself and reports whether it succeeded.
func (c *conn) auth(user, password []byte) bool {
	tab := c.s.srv.Auth()
	if tab.Open() {
		// As Redis 7 without a password: the user "default" (exactly:
		// the name is case-sensitive) takes any password; a password
		// alone is an error; any other user is a wrong pair.
		switch {
		case user == nil:
			c.fail("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		case string(user) == "default":
			return true
		default:
			c.wrongPass()
		}
		return false
	}
	g, err := tab.Authenticate(password)
	if err != nil {
		c.wrongPass()
		return false
	}
	// "default" is the user redis-py and LMCache send when none is
	// configured: it means the token's own tenant (the default tenant for
	// the cluster token).
	tenant := ""
	if user != nil && string(user) != "default" {
		tenant = string(user)
	} else if t, ok := g.Tenant(); ok {
		tenant = t
	}
	if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
		c.wrongPass()
		return false
	}
	if err := g.Check(tenant, false); err != nil {
		c.wrongPass()
		return false
	}
	c.authed, c.grant, c.tenant = true, g, tenant
	return true
}

func (c *conn) wrongPass() {
	c.fail("WRONGPASS invalid username-password pair or user is disabled.")
}

func cmdHello(c *conn, _ context.Context, args [][]byte) {
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.fail("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 {
			// RESP3 is not served: clients fall back to RESP2.
			c.fail("NOPROTO unsupported protocol version")
			return
		}
	}
	var user, pass, name []byte
	for i := 2; i < len(args); i++ {
		switch {
		case equalFold(args[i], "auth") && i+2 < len(args):
			user, pass = args[i+1], args[i+2]
			i += 2
		case equalFold(args[i], "setname") && i+1 < len(args):
			name = args[i+1]
			i++
		default:
			c.fail("ERR Syntax error in HELLO option '" + clip(args[i]) + "'")
			return
		}
	}
	if pass != nil && !c.auth(user, pass) {
		return
	}
	if !c.authed {
		c.fail("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if name != nil {
		if !validClientName(name) {
			c.fail("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		c.name = string(name)
	}
	c.w.Array(14)
	c.w.BulkString("server")
	c.w.BulkString("redis")
	c.w.BulkString("version")
	c.w.BulkString(redisVersion)
	c.w.BulkString("proto")
	c.w.Int(2)
	c.w.BulkString("id")
	c.w.Int(c.id)
	c.w.BulkString("mode")
	c.w.BulkString("standalone")
	c.w.BulkString("role")
	c.w.BulkString("master")
	c.w.BulkString("modules")
	c.w.Array(0)
}

// validClientName is Redis's rule: printable ASCII without spaces.
func validClientName(b []byte) bool {
	for _, x := range b {
		if x < '!' || x > '~' {
			return false
		}
	}
	return true
}

func cmdClient(c *conn, _ context.Context, args [][]byte) {
	sub := args[1]
	arity := func(n int) bool {
		if len(args) != n {
			c.fail("ERR wrong number of arguments for 'client|" + strings.ToLower(string(sub)) + "' command")
			return false
		}
		return true
	}
	switch {
	case equalFold(sub, "setinfo"):
		if !arity(4) {
			return
		}
		switch attr := args[2]; {
		case equalFold(attr, "lib-name"):
			if !validClientName(args[3]) {
				c.fail("ERR lib-name cannot contain spaces, newlines or special characters.")
				return
			}
			c.libName = string(args[3])
		case equalFold(attr, "lib-ver"):
			if !validClientName(args[3]) {
				c.fail("ERR lib-ver cannot contain spaces, newlines or special characters.")
				return
			}
			c.libVer = string(args[3])
		default:
			c.fail("ERR Unrecognized option '" + clip(attr) + "'")
			return
		}
		c.w.Simple("OK")
	case equalFold(sub, "setname"):
		if !arity(3) {
			return
		}
		if !validClientName(args[2]) {
			c.fail("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		c.name = string(args[2])
		c.w.Simple("OK")
	case equalFold(sub, "getname"):
		if !arity(2) {
			return
		}
		if c.name == "" {
			c.w.Null()
		} else {
			c.w.BulkString(c.name)
		}
	case equalFold(sub, "id"):
		if !arity(2) {
			return
		}
		c.w.Int(c.id)
	case equalFold(sub, "info"):
		if !arity(2) {
			return
		}
		c.w.BulkString(c.infoLine() + "\n")
	case equalFold(sub, "list"):
		// Only this connection: listing others' would show their tenants.
		c.w.BulkString(c.infoLine() + "\n")
	case equalFold(sub, "help"):
		c.help("CLIENT", "SETINFO <LIB-NAME|LIB-VER> <value>", "SETNAME <name>", "GETNAME", "ID", "INFO", "LIST")
	default:
		c.fail("ERR unknown subcommand '" + clip(sub) + "'. Try CLIENT HELP.")
	}
}

// infoLine is this connection as CLIENT INFO shows one.
func (c *conn) infoLine() string {
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s db=0 lib-name=%s lib-ver=%s tenant=%s",
		c.id, c.remote, c.sc.LocalAddr().String(), c.name, c.libName, c.libVer, strconv.Quote(c.tenant))
}

// help answers a HELP subcommand as Redis formats one.
func (c *conn) help(cmd string, lines ...string) {
	c.w.Array(1 + len(lines) + 2)
	c.w.Simple(cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		c.w.Simple(l)
	}
	c.w.Simple("HELP")
	c.w.Simple("    Prints this help.")
}
