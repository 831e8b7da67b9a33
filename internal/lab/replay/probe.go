package replay

import (
	"context"
	"fmt"
	"sort"

	"github.com/kvpool/kvpool/client"
)

// NodeInfo is what one live node of a cluster reports about its caches
// (client.NodeStats), in blocks of the replay's payload size, each taking
// whole slots of the node's block size.
type NodeInfo struct {
	// ID is the node's ID.
	ID string `json:"id"`
	// RAMBlocks and SSDBlocks are the tiers' capacities (0: no such
	// tier): the RAM tier's slots, of which a node keeps up to its high
	// watermark's share resident.
	RAMBlocks int `json:"ram_blocks"`
	SSDBlocks int `json:"ssd_blocks"`
	// Stored is the blocks the node holds now, every tier and tenant.
	Stored int `json:"stored_blocks"`
}

// ClusterInfo is what the live nodes of a running cluster report, sorted
// by ID.
type ClusterInfo struct {
	Nodes []NodeInfo `json:"nodes"`
}

// Stored returns the blocks the nodes hold together.
func (c *ClusterInfo) Stored() int {
	n := 0
	for _, x := range c.Nodes {
		n += x.Stored
	}
	return n
}

// Uniform reports whether every node has the same capacities.
func (c *ClusterInfo) Uniform() bool {
	for _, x := range c.Nodes {
		if x.RAMBlocks != c.Nodes[0].RAMBlocks || x.SSDBlocks != c.Nodes[0].SSDBlocks {
			return false
		}
	}
	return true
}

// Probe asks the live nodes of the cluster o.Master names for their
// capacities and stored blocks, through the client, in blocks of
// o.PayloadBytes, each taking whole slots of its node's block size.
func Probe(ctx context.Context, o Options) (*ClusterInfo, error) {
	o = o.WithDefaults()
	cl, err := client.New(ctx, client.Options{Master: o.Master, Tenant: o.Tenant, Token: o.Token, RequestTimeout: o.IOTimeout})
	if err != nil {
		return nil, fmt.Errorf("replay: connect to master %s: %w", o.Master, err)
	}
	defer cl.Close()
	return probe(ctx, cl, o.PayloadBytes)
}

// probe is Probe on a connected client.
func probe(ctx context.Context, cl *client.Client, payload int) (*ClusterInfo, error) {
	stats, err := cl.NodeStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("replay: ask the nodes for their stats: %w", err)
	}
	info := &ClusterInfo{}
	for _, st := range stats {
		if !st.Node.Live {
			continue
		}
		if st.Err != nil {
			return nil, fmt.Errorf("replay: ask node %s for its stats: %w", st.Node.ID, st.Err)
		}
		n := NodeInfo{ID: st.Node.ID}
		per := blockFootprint(int64(payload), st.Node.BlockSize)
		for _, t := range st.Tiers {
			blocks := int(t.CapacityBytes / per)
			switch t.Name {
			case "ram":
				n.RAMBlocks = blocks
			case "ssd":
				n.SSDBlocks = blocks
			}
			n.Stored += t.Blocks
		}
		info.Nodes = append(info.Nodes, n)
	}
	sort.Slice(info.Nodes, func(a, b int) bool { return info.Nodes[a].ID < info.Nodes[b].ID })
	return info, nil
}

// blockFootprint is the capacity one block of payload bytes takes on a
// node whose slots are blockSize bytes: whole slots (payload itself when
// the node's block size is not known).
func blockFootprint(payload, blockSize int64) int64 {
	if blockSize <= 0 {
		return payload
	}
	return (payload + blockSize - 1) / blockSize * blockSize
}
