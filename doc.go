// Package kvpool holds the error vocabulary every part of kvpool speaks: the
// sentinels a client user can meet (ErrNotFound, ErrCorrupt, ErrTooLarge,
// ErrFull, ErrQuota, ErrUnavailable, ErrUnauthorized, ErrClosed), checked
// with errors.Is.
//
// The same failure is the same sentinel wherever it arises: a tier that
// misses returns an error wrapping ErrNotFound, a node that answers a GET
// with the not-found status makes the client return one too, and a node or
// the master refusing a connection because it is shutting down or full of
// connections both surface as ErrUnavailable. Errors carry their context
// (what was done to what) around the sentinel:
//
//	data, err := c.Get(ctx, key)
//	switch {
//	case errors.Is(err, kvpool.ErrNotFound), errors.Is(err, kvpool.ErrCorrupt):
//		// a miss: recompute
//	case errors.Is(err, kvpool.ErrUnavailable):
//		// try again later or elsewhere
//	}
//
// The client itself lives in package client; block keys in package block.
package kvpool
