package wire

import (
	"fmt"

	"github.com/kvpool/kvpool/internal/frame"
)

// AppendFrame appends the whole frame f (f.Header.Len is ignored and
// computed). It is the inverse of Reader.ReadFrame: a frame ReadFrame
// decoded re-encodes to the same bytes.
func AppendFrame(dst []byte, f *Frame) ([]byte, error) {
	h := f.Header
	if h.Flags != 0 {
		return dst, fmt.Errorf("wire: encode %v: flags %#02x set; version %d defines none: %w", h.Op, h.Flags, Version, frame.ErrMalformed)
	}
	one := func(n int, what string) error {
		if n != 1 {
			return fmt.Errorf("wire: encode %v: %d %s (must be 1): %w", h.Op, n, what, frame.ErrMalformed)
		}
		return nil
	}
	switch h.Op.shape() {
	case shapeEmpty:
		return appendEmpty(dst, h.Op, h.ReqID), nil
	case shapeID:
		if err := one(len(f.IDs), "IDs"); err != nil {
			return dst, err
		}
		return appendID(dst, h.Op, h.ReqID, f.IDs[0]), nil
	case shapeIDs:
		return appendIDs(dst, h.Op, h.ReqID, f.IDs)
	case shapeName:
		if err := one(len(f.Names), "names"); err != nil {
			return dst, err
		}
		return appendName(dst, h.Op, h.ReqID, f.Names[0])
	case shapeNames:
		return appendNames(dst, h.Op, h.ReqID, f.Names)
	case shapeNamedBlock:
		if err := one(len(f.Blocks), "blocks"); err != nil {
			return dst, err
		}
		return appendNamedBlocks(dst, h.Op, h.ReqID, f.Names, f.Blocks)
	case shapeNamedBlocks:
		return appendNamedBlocks(dst, h.Op, h.ReqID, f.Names, f.Blocks)
	case shapeBlock:
		if err := one(len(f.Blocks), "blocks"); err != nil {
			return dst, err
		}
		return appendBlocks(dst, h.Op, h.ReqID, f.Blocks)
	case shapeBlocks:
		return appendBlocks(dst, h.Op, h.ReqID, f.Blocks)
	case shapeStatus:
		if err := one(len(f.Statuses), "statuses"); err != nil {
			return dst, err
		}
		return appendOneStatus(dst, h.Op, h.ReqID, f.Statuses[0]), nil
	case shapeStatuses:
		return appendStatuses(dst, h.Op, h.ReqID, f.Statuses)
	case shapeStats:
		return AppendStatsResponse(dst, h.ReqID, f.Tiers)
	case shapeAccess:
		return AppendAccess(dst, h.ReqID, f.Hints, f.Blocks)
	case shapeError:
		if f.Code == CodeOK {
			return dst, fmt.Errorf("wire: encode ERROR: code ok (an ERROR frame reports a failure): %w", frame.ErrMalformed)
		}
		if len(f.Message) > MaxMessageLen {
			return dst, fmt.Errorf("wire: encode ERROR: message of %d bytes, limit %d: %w", len(f.Message), MaxMessageLen, frame.ErrMalformed)
		}
		return appendError(dst, h.ReqID, f.Code, f.Message), nil
	}
	return dst, fmt.Errorf("wire: encode %v: %w", h.Op, frame.ErrUnknownOp)
}
