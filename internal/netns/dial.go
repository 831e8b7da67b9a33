package netns

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
)

// A socket belongs to the network namespace of the thread that created
// it, for its whole life. So a process can start connections on any host
// of a Net: the socket is made on an OS thread that has entered the
// host's namespace (setns), and is then used from anywhere. The thread is
// never handed back to the Go runtime: its goroutine ends while locked to
// it, and the runtime ends the thread, so no other goroutine ever runs in
// the wrong namespace.

// Path returns the file of the host's namespace, for setns.
func (h *Host) Path() string { return filepath.Join(nsDir, h.NS) }

// Do runs f on an OS thread inside the host's namespace and returns its
// error; sockets f creates belong to the host. f must not start
// goroutines that create sockets: they run elsewhere.
func (h *Host) Do(f func() error) error {
	return InNamespace(h.Path(), f)
}

// InNamespace runs f on an OS thread inside the network namespace whose
// file is path (Host.Path) and returns its error.
func InNamespace(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the thread ends with the goroutine.
		runtime.LockOSThread()
		if err := Enter(path); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// DialContext connects from the host, as net.Dialer.DialContext does:
// the connection starts on the host's link.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() error {
		// No Happy Eyeballs: its racing dials run on other goroutines,
		// whose sockets would be made in another namespace. Serial
		// dials stay on this locked thread.
		d := net.Dialer{FallbackDelay: -1}
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on the host, as net.Listen does.
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := h.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}
