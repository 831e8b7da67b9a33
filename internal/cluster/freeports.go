package cluster

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// FreePortRange returns a base port P such that P to P+n-1 on host were
// all free at the moment of the check, for a cluster started with
// Options.BasePort. Another program may take one of them later; Start
// then names the address that was taken. The search starts at a port
// derived from the process ID, so parallel callers rarely collide.
func FreePortRange(host string, n int) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("cluster: a port range of %d ports", n)
	}
	for base := 20000 + os.Getpid()%20000; base+n < 65000; base += n {
		if rangeFree(host, base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("cluster: no %d consecutive free ports on %s", n, host)
}

// rangeFree reports whether ports base to base+n-1 on host can be bound.
func rangeFree(host string, base, n int) bool {
	for p := base; p < base+n; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}
