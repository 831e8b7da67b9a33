package client

import "github.com/kvpool/kvpool/block"

// Waiters returns the number of Gets waiting on the in-flight fetch of
// block id (0 when none is in flight), for tests that must know every
// concurrent Get has joined a flight.
func Waiters(c *Client, id uint64) int {
	c.fl.mu.Lock()
	defer c.fl.mu.Unlock()
	if f := c.fl.m[block.Key{Tenant: c.opts.Tenant, ID: id}]; f != nil {
		return f.waiters
	}
	return -1
}
