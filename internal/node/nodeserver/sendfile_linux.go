//go:build linux

package nodeserver

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// maxSendfileChunk is the most bytes one sendfile call is asked for: 4 MiB,
// as Go's internal/poll does, so one call does not hold the socket long.
const maxSendfileChunk = 4 << 20

// sendfiler sends file regions to one connection with sendfile(2). Its
// state lives in fields and its callback is bound once, so a send does not
// allocate. Not safe for concurrent use (one per connection).
type sendfiler struct {
	rc    syscall.RawConn // nil: the connection has no descriptor
	fn    func(fd uintptr) bool
	src   uintptr
	off   int64
	n     int64
	sent  int64
	errno error
}

// init prepares s for nc; sends fail over to copying when nc has no
// descriptor.
func (s *sendfiler) init(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	s.rc = rc
	s.fn = s.write
}

// write is the raw-connection callback: it sends until done, an error, or
// the socket is full (then it returns false and the poller waits, under the
// connection's write deadline, for room).
func (s *sendfiler) write(fd uintptr) bool {
	for s.sent < s.n {
		m, e := syscall.Sendfile(int(fd), int(s.src), &s.off, int(min(s.n-s.sent, maxSendfileChunk)))
		if m > 0 {
			s.sent += int64(m)
		}
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			return false
		case e != nil:
			s.errno = e
			return true
		case m == 0:
			s.errno = io.ErrUnexpectedEOF // the file ends before the block does
			return true
		}
	}
	return true
}

// send sends the n bytes at off of the file with descriptor src. handled is
// false, with nothing sent, when sendfile cannot serve this pair (the caller
// copies instead); otherwise err says why fewer than n bytes were sent (the
// file is shorter, the peer left, the deadline passed).
func (s *sendfiler) send(src uintptr, off int64, n int) (sent int64, handled bool, err error) {
	if s.rc == nil {
		return 0, false, nil
	}
	s.src, s.off, s.n, s.sent, s.errno = src, off, int64(n), 0, nil
	werr := s.rc.Write(s.fn)
	err = s.errno
	if err == nil {
		err = werr
	}
	switch {
	case err == nil:
		return s.sent, true, nil
	case s.sent == 0 && (errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP)):
		return 0, false, nil
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError("sendfile", errno)
	}
	return s.sent, true, err
}
