package node

import (
	"context"
	"fmt"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/store"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// backend serves a store through nodeserver.Backend, and SYNC through
// its agent (nil on a standalone node).
type backend struct {
	s  *store.Store
	ag *agent
}

var (
	_ nodeserver.AccessBackend = backend{}
	_ nodeserver.Syncer        = backend{}
)

// Acquire pins k where it lies: a RAM slot or a verified SSD read (sent
// with writev), or with the store's ZeroCopySSD an SSD slot's file region
// (sent with sendfile).
func (b backend) Acquire(ctx context.Context, k block.Key) (nodeserver.Ref, error) {
	r, err := b.s.Acquire(ctx, k)
	if err != nil {
		return nodeserver.Ref{}, err
	}
	ref := nodeserver.Ref{Sum: r.Sum, Release: r.Release}
	if r.File != nil {
		ref.File, ref.Off, ref.Len = r.File, r.Off, r.Len
	} else {
		ref.Payload = r.Payload
	}
	return ref, nil
}

// Put stores payload; the store verifies sum (kvpool.ErrCorrupt on a
// mismatch) and copies the bytes.
func (b backend) Put(ctx context.Context, k block.Key, payload []byte, sum uint32) error {
	_, err := b.s.Put(ctx, k, payload, sum)
	return err
}

// PutHinted is Put with the access's chain position for the RAM tier's
// eviction policy (nodeserver.AccessBackend).
func (b backend) PutHinted(ctx context.Context, k block.Key, payload []byte, sum uint32, h wire.Hint) error {
	_, err := b.s.PutHinted(ctx, k, payload, sum, h.Hint)
	return err
}

// Touch records an access to k's RAM copy (nodeserver.AccessBackend);
// kvpool.ErrNotFound when RAM does not hold k.
func (b backend) Touch(_ context.Context, k block.Key, h wire.Hint) error {
	if !b.s.Touch(k, h.Hint) {
		return fmt.Errorf("node: touch %s: not in RAM: %w", k, kvpool.ErrNotFound)
	}
	return nil
}

// Exists reports whether either tier holds k, touching no policy state.
func (b backend) Exists(k block.Key) bool { return b.s.Contains(k) }

// Delete removes k from both tiers.
func (b backend) Delete(ctx context.Context, k block.Key) error { return b.s.Delete(ctx, k) }

// Sync returns once the master has indexed every change made to the store
// before the call (agent.Sync); at once on a standalone node, which has no
// index to wait for.
func (b backend) Sync(ctx context.Context) error {
	if b.ag == nil {
		return nil
	}
	return b.ag.Sync(ctx)
}

// Stats returns the RAM tier's counters, and the SSD tier's while SSD
// offload is on.
func (b backend) Stats() []wire.TierStats {
	st := b.s.Stats()
	out := []wire.TierStats{{Name: "ram", Stats: st.RAM}}
	if st.SSDOn {
		out = append(out, wire.TierStats{Name: "ssd", Stats: st.SSD})
	}
	return out
}
