package client

import (
	"errors"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/frame"
)

// The classifications of a node's per-block errors that Fetch and Access
// report as statuses. They are the only place in these calls that names
// the data plane's sentinels.

// notHeld reports whether err says the node does not hold the block.
func notHeld(err error) bool { return errors.Is(err, kvpool.ErrNotFound) }

// corrupt reports whether err says a copy failed verification.
func corrupt(err error) bool { return errors.Is(err, kvpool.ErrCorrupt) }

// refusedAsAWhole reports whether a node's error answering a whole call
// is about the request (an object over the node's limit, a bad name), not
// the node: it is returned, and the node is not marked down.
func refusedAsAWhole(err error) bool {
	return errors.Is(err, kvpool.ErrTooLarge) || errors.Is(err, frame.ErrBadRequest)
}

// noTouches reports whether err says the node predates touches (ACCESS).
func noTouches(err error) bool { return errors.Is(err, frame.ErrUnknownOp) }
