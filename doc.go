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
//	errs, err := c.Put(ctx, ids, payloads, client.PutOptions{})
//	for i, e := range errs {
//		switch {
//		case errors.Is(e, kvpool.ErrQuota), errors.Is(e, kvpool.ErrFull):
//			// block i was not stored: the pool has no room for it
//		case errors.Is(e, kvpool.ErrUnavailable):
//			// no node could take it now: try again later
//		}
//	}
//
// The client itself lives in package client; block keys in package block.
package kvpool
