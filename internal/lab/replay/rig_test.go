package replay

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/node"
)

// rigHeartbeat is the in-process nodes' heartbeat: 10 ms, so a stored
// block enters the index within 0.5 model seconds at speed 50.
const rigHeartbeat = 10 * time.Millisecond

// startRig runs a master and P nodes in this process, paced and sized for
// o, and returns the master's address. Everything stops at cleanup.
func startRig(t *testing.T, P int, o Options) string {
	t.Helper()
	o = o.WithDefaults()
	m, err := master.New(master.Options{HighWatermark: 1, LowWatermark: 0.99})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := masterserver.New(m, masterserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(ctx, ln) }()
	var stops []func()
	t.Cleanup(func() {
		for _, s := range stops {
			s()
		}
		cancel()
		wg.Wait()
		srv.Close()
	})
	addr := ln.Addr().String()
	netRate, ssdRate := o.PacerRates()
	for i := range P {
		cfg := config.Defaults()
		cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
		cfg.NodeName = "node-" + string(rune('0'+i))
		cfg.BlockSize = config.Size(o.PayloadBytes)
		cfg.RAM.Bytes = config.Size(RAMSlotsFor(o.RAMBlocks) * int64(o.PayloadBytes))
		cfg.RAM.Policy = o.Policy
		cfg.RAM.HighWatermark, cfg.RAM.LowWatermark = RAMWatermark(o.RAMBlocks), RAMWatermark(o.RAMBlocks)
		cfg.HeartbeatInterval = rigHeartbeat
		cfg.Pacers.NetEgress, cfg.Pacers.NetIngress = config.Bandwidth(netRate), config.Bandwidth(netRate)
		cfg.Pacers.SSDRead, cfg.Pacers.SSDWrite = config.Bandwidth(ssdRate), config.Bandwidth(ssdRate)
		mc, err := masterclient.Dial(ctx, addr, masterclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := node.New(cfg, node.Options{Master: mc})
		if err != nil {
			t.Fatal(err)
		}
		nctx, ncancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(nctx) }()
		select {
		case <-n.Ready():
		case err := <-done:
			ncancel()
			t.Fatalf("node %d: %v", i, err)
		}
		stops = append(stops, func() { ncancel(); <-done; mc.Close() })
	}
	// Wait until the master lists every node live.
	mc, err := masterclient.Dial(ctx, addr, masterclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ns, err := mc.Nodes(ctx)
		live := 0
		for _, n := range ns {
			if n.Alive {
				live++
			}
		}
		if err == nil && live == P {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d nodes live after 20 s (err %v)", live, P, err)
		}
		tick := time.NewTimer(rigHeartbeat)
		<-tick.C
	}
}
