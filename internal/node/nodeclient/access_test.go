package nodeclient_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/nodeserver/nodeservertest"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// plainBackend hides nodeservertest.Backend's ACCESS methods: a node that
// predates the op.
type plainBackend struct{ nodeserver.Backend }

// TestMAccess checks that a request's accesses reach the node's backend in
// order with their hints, over several frames when the batch limit splits
// them, and that touches report whether the node held the block.
func TestMAccess(t *testing.T) {
	n := startNode(t, nodeserver.Options{Limits: wire.Limits{MaxBatch: 3}})
	c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t1"})
	ctx := ctxT(t)
	n.b.Store(block.Key{Tenant: "t1", ID: 10}, payload(8, 1))
	ids := []uint64{10, 11, 12, 13, 14}
	hints := []wire.Hint{{Touch: true}, {Hint: block.Hint{Depth: 1, Parent: 10}}, {Hint: block.Hint{Depth: 2, Parent: 11}, Touch: true}, {Hint: block.Hint{Depth: 3, Parent: 12}}, {Hint: block.Hint{Depth: 4, Parent: 13}}}
	payloads := [][]byte{nil, payload(100, 2), nil, payload(0, 0), payload(64<<10, 3)}
	errs, err := c.MAccess(ctx, ids, hints, payloads)
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, nil, kvpool.ErrNotFound, nil, nil}
	for i := range ids {
		if (want[i] == nil) != (errs[i] == nil) || (want[i] != nil && !errors.Is(errs[i], want[i])) {
			t.Errorf("entry %d: error %v, want %v", i, errs[i], want[i])
		}
	}
	if got := n.srv.Stats().RequestCount(wire.OpAccess, wire.CodeOK); got != 2 {
		t.Errorf("the server counted %d ACCESS requests, want 2 (5 entries, batches of 3)", got)
	}
	got := n.b.Accesses()
	if len(got) != len(ids) {
		t.Fatalf("the backend served %d accesses, want %d", len(got), len(ids))
	}
	for i, a := range got {
		if a.Key != (block.Key{Tenant: "t1", ID: ids[i]}) || a.Hint != hints[i] {
			t.Errorf("access %d: %s %+v, want id %d %+v", i, a.Key, a.Hint, ids[i], hints[i])
		}
	}
	for i, id := range ids {
		if hints[i].Touch {
			continue
		}
		p, _, err := c.Get(ctx, id, nil)
		if err != nil || !slices.Equal(p, payloads[i]) {
			t.Errorf("get %d after its put: %v", id, err)
		}
	}
	if _, err := c.MAccess(ctx, []uint64{1}, []wire.Hint{{Touch: true}}, [][]byte{{1}}); err == nil {
		t.Error("a touch with a payload was sent")
	}
	if _, err := c.MAccess(ctx, []uint64{1}, nil, [][]byte{{1}}); err == nil {
		t.Error("entries without hints were sent")
	}
}

// TestMAccessFallback checks that against a node without ACCESS the puts
// are stored with MPUT, the touches fail with frame.ErrUnknownOp, and the
// connection stays usable.
func TestMAccessFallback(t *testing.T) {
	b := nodeservertest.NewBackend("")
	t.Cleanup(func() { b.Close() })
	_, addr := nodeservertest.Start(t, nodeserver.Options{Backend: plainBackend{b}})
	c := dial(t, addr, nodeclient.DialOptions{Tenant: "t1"})
	ctx := ctxT(t)
	for round := range 2 { // the second call skips the ACCESS attempt
		ids := []uint64{uint64(10 * round), uint64(10*round + 1)}
		errs, err := c.MAccess(ctx, ids, []wire.Hint{{Touch: true}, {Hint: block.Hint{Depth: 1, Parent: ids[0]}}}, [][]byte{nil, payload(10, 1)})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !errors.Is(errs[0], frame.ErrUnknownOp) || errs[1] != nil {
			t.Fatalf("round %d: errors %v, want [unknown op, nil]", round, errs)
		}
		if !b.Exists(block.Key{Tenant: "t1", ID: ids[1]}) {
			t.Fatalf("round %d: the put entry was not stored", round)
		}
	}
	if len(b.Accesses()) != 0 {
		t.Fatal("a backend without ACCESS logged accesses")
	}
	if ok, err := c.Exists(ctx, []uint64{1}); err != nil || !ok[0] {
		t.Fatalf("connection after the fallback: %v %v", ok, err)
	}
}
