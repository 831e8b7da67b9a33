package masterserver

import (
	"errors"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/meta"
)

// Review tests (adversarial review of per-request tenant checks).

// TestReviewTenantNameVariants: a tenant token is bound to its tenant's
// exact name: near-miss spellings of another tenant (or of its own) are
// different namespaces and refused for every per-tenant request, and a
// refused REGISTER adds no node. NODES is served to a tenant token (a
// client needs the nodes' addresses).
func TestReviewTenantNameVariants(t *testing.T) {
	m := newMaster(t, master.Options{})
	ts := start(t, m, tenantOptions(), nil)
	inv := items("alice", meta.TierRAM, 100, 1, 2)
	if _, err := m.Register(meta.NodeInfo{ID: "n1", Addr: "127.0.0.1:1", RAMBytes: 1 << 30}, inv, meta.NodeUsage{}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	bob := dial(t, ts.addr, masterclient.Options{Token: []byte(bobToken)})
	var res masterclient.LookupResult
	var pl masterclient.Placement
	for _, name := range []string{"Alice", "alice ", " alice", "Bob", "bob ", "publi", "public2"} {
		checks := []struct {
			op string
			do func() error
		}{
			{"LOOKUP", func() error { return bob.Lookup(ctx, name, []uint64{1, 2}, true, &res) }},
			{"EXISTS", func() error { _, err := bob.Exists(ctx, name, []uint64{1}, nil); return err }},
			{"QUERY", func() error { _, err := bob.Query(ctx, block.Key{Tenant: name, ID: 1}); return err }},
			{"PLACE", func() error { return bob.Place(ctx, name, []uint64{1}, 1, "", meta.StrategyDefault, &pl) }},
		}
		for _, c := range checks {
			if err := c.do(); err == nil {
				t.Errorf("bob: %s of tenant %q accepted", c.op, name)
			} else if !errors.Is(err, masterclient.ErrUnauthorized) && !errors.Is(err, meta.ErrBadRequest) {
				t.Errorf("bob: %s of tenant %q: %v; want unauthorized (or a bad request for an invalid name)", c.op, name, err)
			}
		}
	}
	if _, err := bob.Register(ctx, meta.NodeInfo{ID: "evil", Addr: "127.0.0.1:2", RAMBytes: 1 << 30}, inv, meta.NodeUsage{}); !errors.Is(err, masterclient.ErrUnauthorized) {
		t.Fatalf("bob: REGISTER: %v; want unauthorized", err)
	}
	nodes, err := bob.Nodes(ctx)
	if err != nil {
		t.Fatalf("bob: NODES: %v", err)
	}
	if len(nodes) != 1 || nodes[0].Info.ID != "n1" {
		t.Fatalf("NODES after bob's refused REGISTER: %+v; want only n1", nodes)
	}
}
