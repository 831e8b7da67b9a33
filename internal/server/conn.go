package server

import (
	"net"
	"sync"
	"time"
)

// aLongTimeAgo is a deadline in the past: setting it interrupts a blocked
// read at once.
var aLongTimeAgo = time.Unix(1, 0)

// Conn is a connection being served. It is a net.Conn whose read deadline
// the server can take over: once the server stops the connection, a read
// waiting for the next request fails at once and SetReadTimeout returns
// ErrShuttingDown, so the handler ends after the request in flight.
// Its methods are safe for concurrent use with the server's.
type Conn struct {
	net.Conn

	mu      sync.Mutex // orders deadline changes against interrupt
	closing bool
}

// SetReadTimeout sets the read deadline d from now, unless the server is
// stopping the connection (ErrShuttingDown).
func (c *Conn) SetReadTimeout(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrShuttingDown
	}
	return c.Conn.SetReadDeadline(time.Now().Add(d))
}

// Closing reports whether the server is stopping the connection.
func (c *Conn) Closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// setDeadline sets both deadlines d from now, unless the connection is
// being stopped.
func (c *Conn) setDeadline(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrShuttingDown
	}
	return c.Conn.SetDeadline(time.Now().Add(d))
}

// interrupt makes a read waiting for a request give up, and any later
// deadline change fail.
func (c *Conn) interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = true
	c.Conn.SetReadDeadline(aLongTimeAgo)
}
