package client

import (
	"context"
	"fmt"

	"github.com/kvpool/kvpool"
)

// Named objects.
//
// Besides the chain ids of prefix blocks, an object may be stored under a
// name of its own: any 1 to 1024 bytes (block.MaxNameLen), within the
// client's tenant, for a payload of any size up to the nodes' maximum
// object size (64 MiB by default; a node's --max-object-bytes raises it
// to 512 MiB). Names have no prefix semantics: each is stored, looked up
// and fetched on its own. The full name travels to the master and the
// nodes and is compared on every read, so two names whose internal ids
// collide never return each other's bytes, and every payload read is
// verified against block.Named(tenant, name) and its checksum (which
// covers tenant, name and payload).

// PutNamed stores payloads[i] under names[i] on the nodes the index
// chooses (placed by bytes: a node's free RAM against what the object
// takes there), one MPUT per node, in parallel, each bounded by
// RequestTimeout. Results as Put's: one error per object (nil when every
// chosen copy was stored; an object over a node's size limit gets that
// node's error, which names the size, the limit and the node setting that
// raises it), and a non-nil error when nothing could be attempted (bad
// names, placement failed). Storing a name again replaces its object.
func (c *Client) PutNamed(ctx context.Context, names []string, payloads [][]byte, po PutOptions) ([]error, error) {
	if len(payloads) != len(names) {
		return nil, fmt.Errorf("client: put: %d names but %d payloads", len(names), len(payloads))
	}
	if err := checkNames("put", names); err != nil {
		return nil, err
	}
	return c.put(ctx, nameBatch(names), payloads, po)
}

// GetNamed fetches the objects names, object i into dst[i] when i <
// len(dst) and its capacity suffices. Each name is looked up on its own,
// with a read lease; the objects are fetched as Get's blocks are (one MGET
// per node, RAM replicas first, the next replica as the fallback,
// verified, coalesced with concurrent reads of the same names), and ctx's
// deadline bounds the whole call. In the result, Cached counts the names
// the index found (Prefix has no meaning for names); a name it does not
// know is Missing. The error is non-nil only when the lookup failed.
func (c *Client) GetNamed(ctx context.Context, names []string, dst [][]byte) (GetResult, error) {
	c.ctr.gets.Add(1)
	res := newGetResult(len(names))
	if err := c.check(); err != nil {
		return res, err
	}
	if err := checkNames("get", names); err != nil {
		return res, err
	}
	b := nameBatch(names)
	reps, err := c.locate(ctx, b, true)
	if err != nil {
		if expired(ctx) {
			for i := range res.Status {
				res.Status[i] = TimedOut
			}
		}
		c.count(&res)
		return res, err
	}
	for _, r := range reps {
		if len(r) > 0 {
			res.Cached++
		}
	}
	c.getLocated(ctx, b, reps, dst, &res)
	c.count(&res)
	return res, nil
}

// ExistsNamed reports which of names are stored, with no side effects on
// the master (no lease, no recency) and without contacting the nodes.
func (c *Client) ExistsNamed(ctx context.Context, names []string) ([]bool, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := checkNames("exists", names); err != nil {
		return nil, err
	}
	return c.exists(ctx, nameBatch(names))
}

// exists asks the index about the keys of b.
func (c *Client) exists(ctx context.Context, b batch) ([]bool, error) {
	present, err := c.idx.Exists(ctx, b.keys(c.opts.Tenant))
	if err != nil {
		return nil, fmt.Errorf("client: exists of %d %s of tenant %q: %w", b.len(), b.noun(), c.opts.Tenant, err)
	}
	if len(present) != b.len() {
		return nil, fmt.Errorf("client: exists of %d %s: index answered %d flags: %w", b.len(), b.noun(), len(present), ErrBadIndex)
	}
	return present, nil
}

// locate asks the index for the replicas of each key of b and checks its
// answer.
func (c *Client) locate(ctx context.Context, b batch, lease bool) ([][]Location, error) {
	reps, err := c.idx.Locate(ctx, b.keys(c.opts.Tenant), lease)
	if err != nil {
		return nil, fmt.Errorf("client: locate %d %s of tenant %q: %w", b.len(), b.noun(), c.opts.Tenant, err)
	}
	if len(reps) != b.len() {
		return nil, fmt.Errorf("client: locate %d %s: index answered %d replica lists: %w", b.len(), b.noun(), len(reps), ErrBadIndex)
	}
	return reps, nil
}

// DeleteNamed deletes the objects names from every node the index lists
// them on. It returns one error per name: nil when every copy was deleted
// (a copy already gone counts), an error wrapping kvpool.ErrNotFound when
// the index knows no copy, else the failures joined; the error is non-nil
// when nothing could be attempted. The index forgets a deleted copy when
// its node next reports (a heartbeat later), so ExistsNamed may still say
// true until then; a read meanwhile finds the object Missing.
func (c *Client) DeleteNamed(ctx context.Context, names []string) ([]error, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := checkNames("delete", names); err != nil {
		return nil, err
	}
	return c.delete(ctx, nameBatch(names))
}

// Delete deletes the blocks ids from every node the index lists them on,
// as DeleteNamed does names.
func (c *Client) Delete(ctx context.Context, ids []uint64) ([]error, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.delete(ctx, idBatch(ids))
}

func (c *Client) delete(ctx context.Context, b batch) ([]error, error) {
	if b.len() == 0 {
		return nil, nil
	}
	reps, err := c.locate(ctx, b, false)
	if err != nil {
		return nil, err
	}
	errs := make([][]error, b.len())
	type target struct{ node, addr string }
	groups := map[target][]int{}
	var order []target
	for i, locs := range reps {
		if len(locs) == 0 {
			errs[i] = append(errs[i], fmt.Errorf("client: delete %s: %w", b.what(i), kvpool.ErrNotFound))
			continue
		}
		seen := map[string]bool{}
		for _, l := range locs {
			if seen[l.Node] { // a RAM and an SSD copy: one delete
				continue
			}
			seen[l.Node] = true
			t := target{l.Node, l.Addr}
			if groups[t] == nil {
				order = append(order, t)
			}
			groups[t] = append(groups[t], i)
		}
	}
	fanOut(order, groups, errs, func(t target, keys []int) []error {
		return c.deleteOn(ctx, t.node, t.addr, b, keys)
	})
	return joinEach(errs), nil
}

// deleteOn deletes the keys (indexes into b) on node n, one call each
// within RequestTimeout, and returns one error per key (a copy the node no
// longer holds is deleted).
func (c *Client) deleteOn(ctx context.Context, n, addr string, b batch, keys []int) []error {
	out := make([]error, len(keys))
	p, err := c.pool(ctx, n, addr)
	if err != nil {
		for k := range out {
			out[k] = fmt.Errorf("client: delete %s on node %q: %w", b.what(keys[k]), n, err)
		}
		return out
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	for k, i := range keys {
		if b.named() {
			err = p.DeleteNamed(rctx, b.names[i])
		} else {
			err = p.Delete(rctx, b.ids[i])
		}
		if err != nil && !notHeld(err) {
			out[k] = fmt.Errorf("client: delete %s on node %q: %w", b.what(i), n, err)
		}
	}
	return out
}
