//go:build !linux

package nodeserver

import "net"

// sendfiler would send file regions with sendfile; on this platform the
// server copies them through a buffer instead.
type sendfiler struct{}

func (s *sendfiler) init(nc net.Conn) {}

// send reports that sendfile is not used: nothing sent, not handled.
func (s *sendfiler) send(src uintptr, off int64, n int) (sent int64, handled bool, err error) {
	return 0, false, nil
}
