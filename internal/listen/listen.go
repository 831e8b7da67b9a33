// Package listen holds the rule every kvpool server applies before it
// binds an address: listeners bind to 127.0.0.1 by default; binding
// elsewhere requires an authentication token.
//
// A loopback address (127.0.0.0/8, ::1, "localhost") is reachable only from
// the machine itself, so a server there may run without a token. Any other
// address — a routable IP, the unspecified address (0.0.0.0, ::, or an
// empty host, meaning every interface), or a host name, which may resolve
// to anything — lets other hosts connect, so the server must be started
// with a token that every connection has to present. Check does no I/O
// (it never resolves a name).
package listen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ErrNoAuth is wrapped by the error Check returns for an address reachable
// from other hosts when no authentication token is set.
var ErrNoAuth = errors.New("binding beyond loopback requires an authentication token")

// Check returns nil when addr ("host:port") binds loopback interfaces only,
// or when hasAuth reports that the server requires an authentication token
// on every connection. Otherwise it returns an error wrapping ErrNoAuth
// that names addr, says why it is reachable from other hosts, and gives
// both fixes: set a token, or bind 127.0.0.1 with the same port. A
// malformed addr is an error whatever hasAuth says.
func Check(addr string, hasAuth bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen: address %q: %w", addr, err)
	}
	why := exposure(host)
	if why == "" || hasAuth {
		return nil
	}
	return fmt.Errorf("listen: %s %s, reachable from other hosts: %w; set one (--auth-token or $KVPOOL_AUTH_TOKEN) or listen on %s",
		addr, why, ErrNoAuth, net.JoinHostPort("127.0.0.1", port))
}

// exposure returns "" when host is loopback-only, else why it is not.
func exposure(host string) string {
	if host == "" {
		return "binds every interface"
	}
	if strings.EqualFold(host, "localhost") {
		return ""
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "names a host that may resolve beyond loopback (use an IP address)"
	}
	ip = ip.WithZone("").Unmap()
	switch {
	case ip.IsLoopback():
		return ""
	case ip.IsUnspecified():
		return "binds every interface"
	default:
		return "is not a loopback address"
	}
}

// SplitAddr splits addr ("host:port") into its host and port, and fails
// unless the port is a number in 0–65535. It does no I/O.
func SplitAddr(addr string) (host string, port uint16, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: want host:port (%w)", addr, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: port %q is not a number in 0–65535", addr, p)
	}
	return host, uint16(n), nil
}
