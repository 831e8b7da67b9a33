package client

import (
	"fmt"

	"github.com/kvpool/kvpool/block"
)

// batch is the keys of one request of the client's tenant: chain ids, or
// names (names non-nil; ids then hold block.NameID of each name). A batch
// is never mixed, as the node and master protocols carry it.
type batch struct {
	ids   []uint64
	names []string
}

// idBatch and nameBatch build the two kinds.
func idBatch(ids []uint64) batch { return batch{ids: ids} }

func nameBatch(names []string) batch {
	ids := make([]uint64, len(names))
	for i, n := range names {
		ids[i] = block.NameID(n)
	}
	return batch{ids: ids, names: names}
}

func (b batch) len() int    { return len(b.ids) }
func (b batch) named() bool { return b.names != nil }
func (b batch) head(n int) batch {
	if b.names == nil {
		return batch{ids: b.ids[:n]}
	}
	return batch{ids: b.ids[:n], names: b.names[:n]}
}

// key returns key i of tenant.
func (b batch) key(tenant string, i int) block.Key {
	if b.names == nil {
		return block.Key{Tenant: tenant, ID: b.ids[i]}
	}
	return block.Key{Tenant: tenant, ID: b.ids[i], Name: b.names[i]}
}

// keys returns every key of tenant.
func (b batch) keys(tenant string) []block.Key {
	out := make([]block.Key, b.len())
	for i := range out {
		out[i] = b.key(tenant, i)
	}
	return out
}

// pick returns the batch of keys idx (indexes into b).
func (b batch) pick(idx []int) batch {
	out := batch{ids: make([]uint64, len(idx))}
	if b.names != nil {
		out.names = make([]string, len(idx))
	}
	for k, i := range idx {
		out.ids[k] = b.ids[i]
		if b.names != nil {
			out.names[k] = b.names[i]
		}
	}
	return out
}

// what names key i in an error: "block 00000000000000a1" or
// "object \"name\"".
func (b batch) what(i int) string {
	if b.names == nil {
		return fmt.Sprintf("block %016x", b.ids[i])
	}
	return "object " + block.Key{Name: b.names[i]}.String()
}

// noun is what the batch's keys are called in errors.
func (b batch) noun() string {
	if b.names == nil {
		return "blocks"
	}
	return "objects"
}

// checkNames validates the names of a named call: 1 to block.MaxNameLen
// bytes each (any bytes).
func checkNames(call string, names []string) error {
	for i, n := range names {
		switch {
		case n == "":
			return fmt.Errorf("client: %s: name %d is empty (names are 1 to %d bytes)", call, i, block.MaxNameLen)
		case len(n) > block.MaxNameLen:
			return fmt.Errorf("client: %s: name %d is %d bytes, over the limit of %d bytes: %w", call, i, len(n), block.MaxNameLen, block.ErrBadName)
		}
	}
	return nil
}
