package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
)

// dialMaster connects to the master's index at o.Master over the master
// protocol.
func dialMaster(ctx context.Context, o Options) (Index, func() error, error) {
	// Follow: even given one address, the client goes where a standby
	// sends it and carries the epochs it has seen (a master without an
	// election answers with none).
	mc, err := masterclient.Dial(ctx, o.Master, masterclient.Options{
		Token: []byte(o.Token), Timeout: o.DialTimeout, Leader: o.Leader, Follow: true, Dial: o.Dial,
	})
	if err != nil {
		return nil, nil, err
	}
	return &remoteIndex{mc: mc}, mc.Close, nil
}

// remoteIndex adapts a masterclient.Client to Index. Safe for concurrent
// use: its scratch results are pooled.
type remoteIndex struct {
	mc      *masterclient.Client
	lookups sync.Pool // *masterclient.LookupResult
	places  sync.Pool // *masterclient.Placement
}

func (x *remoteIndex) Lookup(ctx context.Context, tenant string, ids []uint64, lease bool) (int, [][]Location, error) {
	r, _ := x.lookups.Get().(*masterclient.LookupResult)
	if r == nil {
		r = new(masterclient.LookupResult)
	}
	defer x.lookups.Put(r)
	if err := x.mc.Lookup(ctx, tenant, ids, lease, r); err != nil {
		return 0, nil, err
	}
	if r.Hit < 0 || r.Hit > len(ids) || len(r.Ends) < r.Hit {
		return 0, nil, fmt.Errorf("lookup answer: prefix %d of %d keys with %d replica ends: %w", r.Hit, len(ids), len(r.Ends), ErrBadIndex)
	}
	out := make([][]Location, r.Hit)
	flat := make([]Location, len(r.Replicas))
	for i, rep := range r.Replicas {
		flat[i] = Location{Node: string(rep.Node), Addr: rep.Addr, Tier: Tier(rep.Tier), Size: rep.Size, Sum: rep.Sum}
	}
	start := 0
	for i := range out {
		if r.Ends[i] < start || r.Ends[i] > len(flat) {
			return 0, nil, fmt.Errorf("lookup answer: block %d ends at replica %d of %d: %w", i, r.Ends[i], len(flat), ErrBadIndex)
		}
		out[i] = flat[start:r.Ends[i]:r.Ends[i]]
		start = r.Ends[i]
	}
	return r.Hit, out, nil
}

func (x *remoteIndex) Locate(ctx context.Context, keys []block.Key, lease bool) ([][]Location, error) {
	r, _ := x.lookups.Get().(*masterclient.LookupResult)
	if r == nil {
		r = new(masterclient.LookupResult)
	}
	defer x.lookups.Put(r)
	if err := x.mc.Locate(ctx, keys, lease, r); err != nil {
		return nil, err
	}
	if r.Hit != len(keys) || len(r.Ends) != r.Hit {
		return nil, fmt.Errorf("locate answer: %d blocks for %d keys: %w", r.Hit, len(keys), ErrBadIndex)
	}
	out := make([][]Location, len(keys))
	flat := make([]Location, len(r.Replicas))
	for i, rep := range r.Replicas {
		flat[i] = Location{Node: string(rep.Node), Addr: rep.Addr, Tier: Tier(rep.Tier), Size: rep.Size, Sum: rep.Sum}
	}
	start := 0
	for i := range out {
		if r.Ends[i] < start || r.Ends[i] > len(flat) {
			return nil, fmt.Errorf("locate answer: key %d ends at replica %d of %d: %w", i, r.Ends[i], len(flat), ErrBadIndex)
		}
		out[i] = flat[start:r.Ends[i]:r.Ends[i]]
		start = r.Ends[i]
	}
	return out, nil
}

func (x *remoteIndex) Exists(ctx context.Context, keys []block.Key) ([]bool, error) {
	return x.mc.ExistsKeys(ctx, keys, nil)
}

func (x *remoteIndex) Place(ctx context.Context, keys []block.Key, sizes []int64, replicas int, hint string) ([][]string, error) {
	if len(sizes) != len(keys) {
		return nil, fmt.Errorf("place: %d sizes for %d keys", len(sizes), len(keys))
	}
	p, _ := x.places.Get().(*masterclient.Placement)
	if p == nil {
		p = new(masterclient.Placement)
	}
	defer x.places.Put(p)
	objs := make([]meta.Object, len(keys))
	for i, k := range keys {
		objs[i] = meta.Object{Key: k, Size: sizes[i]}
	}
	if err := x.mc.PlaceObjects(ctx, objs, replicas, meta.NodeID(hint), meta.StrategyDefault, p); err != nil {
		return nil, err
	}
	out := make([][]string, len(keys))
	for i := range out {
		if p.PerBlock == 0 {
			continue
		}
		for _, t := range p.Block(i) {
			out[i] = append(out[i], string(t.Node))
		}
	}
	return out, nil
}

func (x *remoteIndex) Nodes(ctx context.Context) ([]Node, error) {
	list, err := x.mc.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Node, len(list))
	for i, n := range list {
		out[i] = Node{ID: string(n.Info.ID), Addr: n.Info.Addr, Live: n.Alive, BlockSize: n.Info.BlockSize}
	}
	return out, nil
}
