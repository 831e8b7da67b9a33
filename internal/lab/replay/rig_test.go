package replay

import (
	"context"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/config"
)

// rigHeartbeat is the in-process nodes' heartbeat: 10 ms, so a stored
// block enters the index within 0.5 model seconds at speed 50.
const rigHeartbeat = 10 * time.Millisecond

// startRig runs a master and P nodes in this process (the cluster
// harness), paced and sized for o, and returns the master's address.
// Everything stops at cleanup.
func startRig(t *testing.T, P int, o Options) string {
	t.Helper()
	o = o.WithDefaults()
	netRate, ssdRate := o.PacerRates()
	c, err := cluster.StartInProcess(context.Background(), cluster.InProcessOptions{
		Nodes:         P,
		HighWatermark: 1, LowWatermark: 0.99,
		Node: func(i int, cfg *config.Node) {
			cfg.BlockSize = config.Size(o.PayloadBytes)
			cfg.RAM.Bytes = config.Size(RAMSlotsFor(o.RAMBlocks) * int64(o.PayloadBytes))
			cfg.RAM.Policy = o.Policy
			cfg.RAM.HighWatermark, cfg.RAM.LowWatermark = RAMWatermark(o.RAMBlocks), RAMWatermark(o.RAMBlocks)
			cfg.HeartbeatInterval = rigHeartbeat
			cfg.Pacers.NetEgress, cfg.Pacers.NetIngress = config.Bandwidth(netRate), config.Bandwidth(netRate)
			cfg.Pacers.SSDRead, cfg.Pacers.SSDWrite = config.Bandwidth(ssdRate), config.Bandwidth(ssdRate)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("stop the rig: %v", err)
		}
	})
	return c.Master
}
