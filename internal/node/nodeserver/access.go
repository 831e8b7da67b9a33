package nodeserver

import (
	"context"
	"fmt"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// AccessBackend is a Backend that serves ACCESS requests: accesses that
// carry their chain position (wire.Hint) for the eviction policy, and
// touches of blocks the client reused without reading. A Backend without
// these methods answers ACCESS with ERROR CodeUnsupportedOp, as a server
// that predates the op does, and the client falls back to MPUT.
type AccessBackend interface {
	Backend
	// PutHinted is Put with the access's chain position (h.Parent is a
	// key ID in k's tenant; h.Touch is false).
	PutHinted(ctx context.Context, k block.Key, payload []byte, sum uint32, h wire.Hint) error
	// Touch records an access to k's in-memory copy with the eviction
	// policy, moving no data and taking no read lease. It returns
	// kvpool.ErrNotFound, changing nothing, when memory does not hold k.
	Touch(ctx context.Context, k block.Key, h wire.Hint) error
}

// access serves ACCESS: each entry, in order, is a hinted put (its payload
// read into a pooled buffer, paced like a PUT's) or a touch.
func (c *conn) access(ctx context.Context, h wire.Header) (wire.Code, error) {
	ab, ok := c.s.opts.Backend.(AccessBackend)
	if !ok {
		if err := c.r.Skip(); err != nil {
			return wire.CodeUnsupportedOp, err
		}
		return wire.CodeUnsupportedOp, c.writeError(h.ReqID,
			fmt.Errorf("nodeserver: %v (request %d): this node's backend takes no access hints: %w", h.Op, h.ReqID, frame.ErrUnknownOp))
	}
	n, err := c.r.BeginBlocks()
	if err != nil {
		return c.bodyError(h, err)
	}
	st := c.statuses[:0]
	defer func() { c.statuses = st }()
	for range n {
		hint, bh, err := c.r.NextAccess()
		if err != nil {
			return c.bodyError(h, err)
		}
		k := block.Key{Tenant: c.tenant, ID: bh.ID}
		if hint.Touch {
			st = append(st, wire.Status{ID: bh.ID, Code: c.backendCode("touch", k, ab.Touch(ctx, k, hint))})
			continue
		}
		payload, buf, ok, code, err := c.readPayload(ctx, h, bh)
		if !ok {
			return code, err
		}
		code = c.stored(buf, c.backendCode("put", k, ab.PutHinted(ctx, k, payload, bh.Checksum, hint)))
		st = append(st, wire.Status{ID: bh.ID, Code: code})
	}
	resp, err := wire.AppendAccessResponse(c.wbuf[:0], h.ReqID, st)
	if err != nil {
		return c.internal(h, err)
	}
	c.wbuf = resp
	return wire.CodeOK, c.write(c.wbuf)
}
