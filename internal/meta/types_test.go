package meta

import (
	"errors"
	"strings"
	"testing"
)

func TestTierString(t *testing.T) {
	for _, c := range []struct {
		t     Tier
		want  string
		valid bool
	}{{TierRAM, "ram", true}, {TierSSD, "ssd", true}, {0, "tier(0)", false}, {9, "tier(9)", false}} {
		if got := c.t.String(); got != c.want {
			t.Errorf("Tier(%d).String() = %q, want %q", uint8(c.t), got, c.want)
		}
		if got := c.t.Valid(); got != c.valid {
			t.Errorf("Tier(%d).Valid() = %v, want %v", uint8(c.t), got, c.valid)
		}
	}
	if TierRAM >= TierSSD {
		t.Error("TierRAM must sort before TierSSD")
	}
}

func TestTaskKindString(t *testing.T) {
	for k, want := range map[TaskKind]string{TaskDemote: "demote", TaskDrop: "drop", TaskPromote: "promote", 0: "task(0)"} {
		if got := k.String(); got != want {
			t.Errorf("TaskKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range []Strategy{StrategyDefault, LocalFirst, LeastUsed, Hash} {
		got, err := ParseStrategy(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	if got, err := ParseStrategy(" Least-Used "); err != nil || got != LeastUsed {
		t.Errorf("ParseStrategy is not case and space tolerant: %v, %v", got, err)
	}
	if got, err := ParseStrategy(""); err != nil || got != StrategyDefault {
		t.Errorf(`ParseStrategy("") = %v, %v; want default`, got, err)
	}
	if _, err := ParseStrategy("random"); err == nil {
		t.Error(`ParseStrategy("random") accepted`)
	}
	if got := Strategy(200).String(); got != "strategy(200)" {
		t.Errorf("Strategy(200).String() = %q", got)
	}
}

func TestNodeInfoValidate(t *testing.T) {
	good := NodeInfo{ID: "n1", Addr: "127.0.0.1:7000", RAMBytes: 1 << 20, SSDBytes: 0, BlockSize: 4096}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid NodeInfo refused: %v", err)
	}
	for _, c := range []struct {
		name  string
		edit  func(*NodeInfo)
		field string
	}{
		{"empty id", func(n *NodeInfo) { n.ID = "" }, "NodeInfo.ID"},
		{"long id", func(n *NodeInfo) { n.ID = NodeID(strings.Repeat("x", MaxNodeIDLen+1)) }, "NodeInfo.ID"},
		{"empty addr", func(n *NodeInfo) { n.Addr = "" }, "NodeInfo.Addr"},
		{"addr without port", func(n *NodeInfo) { n.Addr = "localhost" }, "NodeInfo.Addr"},
		{"negative ram", func(n *NodeInfo) { n.RAMBytes = -1 }, "NodeInfo.RAMBytes"},
		{"negative ssd", func(n *NodeInfo) { n.SSDBytes = -1 }, "NodeInfo.SSDBytes"},
		{"huge block", func(n *NodeInfo) { n.BlockSize = MaxItemSize + 1 }, "NodeInfo.BlockSize"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ni := good
			c.edit(&ni)
			err := ni.Validate()
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("Validate() = %v, want ErrBadRequest naming %s", err, c.field)
			}
		})
	}
}

func TestResultBlocks(t *testing.T) {
	r := LookupResult{Hit: 2, Replicas: []Replica{{Node: "a"}, {Node: "b"}, {Node: "c"}}, Ends: []int{2, 3}}
	if b := r.Block(0); len(b) != 2 || b[1].Node != "b" {
		t.Errorf("Block(0) = %+v", b)
	}
	if b := r.Block(1); len(b) != 1 || b[0].Node != "c" {
		t.Errorf("Block(1) = %+v", b)
	}
	r.Reset()
	if r.Hit != 0 || len(r.Replicas) != 0 || len(r.Ends) != 0 || cap(r.Replicas) != 3 {
		t.Errorf("Reset left %+v", r)
	}
	p := Placement{PerBlock: 2, Nodes: []NodeID{"a", "b", "c", "a"}}
	if b := p.Block(1); len(b) != 2 || b[0] != "c" || b[1] != "a" {
		t.Errorf("Placement.Block(1) = %v", b)
	}
}
