package nodeserver_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// Review tests (adversarial review of tenant tokens and the ACCESS op):
// each documents a property that holds against a hostile tenant, on the
// test backend and on a real node (RAM and SSD tiers).

// rawAs dials addr and completes the handshake as tenant with token.
func rawAs(t *testing.T, addr, tenant, token string) *raw {
	t.Helper()
	c := dialRaw(t, addr)
	if a := c.handshake(tenant, []byte(token)); a.Code != wire.CodeOK {
		t.Fatalf("hello as %q refused: %v %s", tenant, a.Code, a.Message)
	}
	return c
}

// accessFrame encodes an ACCESS request, failing the test on an encoding
// error.
func accessFrame(t *testing.T, reqID uint64, hints []wire.Hint, blocks []wire.Block) []byte {
	t.Helper()
	b, err := wire.AppendAccess(nil, reqID, hints, blocks)
	return mustAppend(t, b, err)
}

// putBlock is a put entry of tenant's block id with its correct checksum.
func putBlock(tenant string, id uint64, p []byte) wire.Block {
	return wire.Block{ID: id, Checksum: block.Checksum(block.Key{Tenant: tenant, ID: id}, p), Payload: p}
}

// TestReviewAccessOnReadOnlySharedNamespace: a tenant that may only read
// a shared namespace cannot write it through ACCESS either — neither a
// hinted put nor a touch (a touch moves the namespace's eviction order) —
// and the client does not fall back to MPUT on the refusal. A writer of
// the namespace may use ACCESS.
func TestReviewAccessOnReadOnlySharedNamespace(t *testing.T) {
	for _, srv := range tokenServers {
		t.Run(srv.name, func(t *testing.T) {
			ctx := context.Background()
			addr := srv.start(t)
			pub := mustDial(t, addr, "public", tenantToken)
			if err := pub.Put(ctx, 1, []byte("system prompt")); err != nil {
				t.Fatal(err)
			}
			bob := mustDial(t, addr, "public", bobToken)
			cases := []struct {
				name     string
				ids      []uint64
				hints    []wire.Hint
				payloads [][]byte
			}{
				{"hinted put", []uint64{2}, []wire.Hint{{Hint: block.Hint{Depth: 1, Parent: 1}}}, [][]byte{[]byte("bob was here")}},
				{"touch", []uint64{1}, []wire.Hint{{Touch: true}}, [][]byte{nil}},
				{"touch then put", []uint64{1, 3}, []wire.Hint{{Touch: true}, {Hint: block.Hint{Depth: 1, Parent: 1}}}, [][]byte{nil, []byte("x")}},
			}
			for _, c := range cases {
				errs, err := bob.MAccess(ctx, c.ids, c.hints, c.payloads)
				if !errors.Is(err, kvpool.ErrUnauthorized) {
					t.Errorf("bob: %s in public = %v, %v; want kvpool.ErrUnauthorized", c.name, errs, err)
				}
			}
			present, err := bob.Exists(ctx, []uint64{2, 3})
			if err != nil || present[0] || present[1] {
				t.Fatalf("bob's refused ACCESS stored blocks (or fell back to MPUT): Exists = %v, %v", present, err)
			}
			if got, _, err := bob.Get(ctx, 1, nil); err != nil || string(got) != "system prompt" {
				t.Fatalf("bob: Get(public 1) = %q, %v after the refusals", got, err)
			}
			carol := mustDial(t, addr, "public", carolToken)
			errs, err := carol.MAccess(ctx, []uint64{1, 4}, []wire.Hint{{Touch: true}, {Hint: block.Hint{Depth: 1, Parent: 1}}}, [][]byte{nil, []byte("carol")})
			if err != nil || errs[1] != nil {
				t.Fatalf("carol (a writer): ACCESS in public = %v, %v", errs, err)
			}
			if got, _, err := bob.Get(ctx, 4, nil); err != nil || string(got) != "carol" {
				t.Fatalf("bob: Get(public 4) = %q, %v; want carol's block", got, err)
			}
		})
	}
}

// TestReviewTouchIsNoCrossTenantOracle: a touch is answered from the
// connection's own namespace only: bob touching IDs alice holds gets the
// same answer as for IDs nobody holds (not found), and his touches change
// nothing of alice's blocks.
func TestReviewTouchIsNoCrossTenantOracle(t *testing.T) {
	held := []uint64{10, 11, 12}
	absent := []uint64{20, 21, 22}
	for _, srv := range tokenServers {
		t.Run(srv.name, func(t *testing.T) {
			ctx := context.Background()
			addr := srv.start(t)
			alice := mustDial(t, addr, "alice", aliceToken)
			for _, id := range held {
				if err := alice.Put(ctx, id, tenantPayload("alice", id)); err != nil {
					t.Fatal(err)
				}
			}
			bob := rawAs(t, addr, "bob", bobToken)
			answer := func(reqID uint64, ids []uint64) []wire.Status {
				hints := make([]wire.Hint, len(ids))
				blocks := make([]wire.Block, len(ids))
				for i, id := range ids {
					hints[i], blocks[i] = wire.Hint{Touch: true, Hint: block.Hint{Depth: i, Parent: id - 1}}, wire.Block{ID: id}
				}
				bob.send(accessFrame(t, reqID, hints, blocks))
				f := bob.frame()
				if f.Header.Op != wire.OpAccessResponse {
					t.Fatalf("bob: touch: %v %v %q", f.Header.Op, f.Code, f.Message)
				}
				return append([]wire.Status(nil), f.Statuses...)
			}
			for i, st := range [][]wire.Status{answer(1, held), answer(2, absent)} {
				for _, s := range st {
					if s.Code != wire.CodeNotFound {
						t.Errorf("bob: touch of %d (held by alice: %v) = %v; want not found", s.ID, i == 0, s.Code)
					}
				}
			}
			for _, id := range held {
				if got, _, err := alice.Get(ctx, id, nil); err != nil || !bytes.Equal(got, tenantPayload("alice", id)) {
					t.Errorf("alice: Get(%d) after bob's touches = %q, %v", id, got, err)
				}
			}
		})
	}
}

// TestReviewAccessPutChecksum: a hinted put whose checksum does not match
// is refused (CodeCorrupt) and never stored, whichever way the checksum is
// wrong — a flipped bit, or the right checksum of the same ID in another
// tenant (a client replaying alice's block into bob's namespace) — while
// the good entries of the same frame are stored.
func TestReviewAccessPutChecksum(t *testing.T) {
	p := []byte("a block of kv cache")
	bad := []struct {
		name string
		sum  uint32
	}{
		{"flipped bit", block.Checksum(block.Key{Tenant: "bob", ID: 5}, p) ^ 1},
		{"alice's checksum", block.Checksum(block.Key{Tenant: "alice", ID: 5}, p)},
		{"zero", 0},
	}
	for _, srv := range tokenServers {
		t.Run(srv.name, func(t *testing.T) {
			ctx := context.Background()
			addr := srv.start(t)
			bobRaw := rawAs(t, addr, "bob", bobToken)
			bob := mustDial(t, addr, "bob", bobToken)
			for i, b := range bad {
				reqID := uint64(100 + i)
				good := putBlock("bob", 6, p)
				bobRaw.send(accessFrame(t, reqID,
					[]wire.Hint{{Hint: block.Hint{Depth: 0}}, {Hint: block.Hint{Depth: 1, Parent: 6}}},
					[]wire.Block{good, {ID: 5, Checksum: b.sum, Payload: p}}))
				f := bobRaw.frame()
				if f.Header.Op != wire.OpAccessResponse || len(f.Statuses) != 2 {
					t.Fatalf("%s: got %v %v %q", b.name, f.Header.Op, f.Code, f.Message)
				}
				if f.Statuses[0].Code != wire.CodeOK || f.Statuses[1].Code != wire.CodeCorrupt {
					t.Errorf("%s: statuses %v; want ok, corrupt", b.name, f.Statuses)
				}
				if got, _, err := bob.Get(ctx, 5, nil); !errors.Is(err, kvpool.ErrNotFound) {
					t.Errorf("%s: Get(5) = %q, %v; want not found", b.name, got, err)
				}
				if got, _, err := bob.Get(ctx, 6, nil); err != nil || !bytes.Equal(got, p) {
					t.Errorf("%s: Get(6) = %q, %v; want the good entry", b.name, got, err)
				}
			}
		})
	}
}

// TestReviewAccessHostileFrames: ACCESS frames with extreme hints are
// served (the hint is advice, the block is stored and read back exactly);
// a count beyond the frame, a touch carrying a payload, and unknown hint
// flags are refused as bad requests without storing the offending entry,
// and the server keeps serving.
func TestReviewAccessHostileFrames(t *testing.T) {
	p := []byte("payload")
	sum := block.Checksum(block.Key{Tenant: "bob", ID: 7}, p)
	hint := func(parent uint64, depth uint32, flags byte) []byte {
		return append(append(le64(parent), le32(depth)...), flags, 0, 0, 0)
	}
	malformed := []struct {
		name string
		body []byte
	}{
		{"count overrun", bytes.Join([][]byte{le32(1000), hint(0, 0, 0), blockEntry(7, sum, uint32(len(p))), p}, nil)},
		{"count max u32", bytes.Join([][]byte{le32(math.MaxUint32), hint(0, 0, 0), blockEntry(7, sum, uint32(len(p))), p}, nil)},
		{"touch with payload", bytes.Join([][]byte{le32(1), hint(0, 0, 1), blockEntry(7, sum, uint32(len(p))), p}, nil)},
		{"touch with checksum", bytes.Join([][]byte{le32(1), hint(0, 0, 1), blockEntry(7, sum, 0)}, nil)},
		{"unknown hint flag", bytes.Join([][]byte{le32(1), hint(0, 0, 2), blockEntry(7, sum, uint32(len(p))), p}, nil)},
		{"hint reserved byte", bytes.Join([][]byte{le32(1), append(hint(0, 0, 0)[:15], 1), blockEntry(7, sum, uint32(len(p))), p}, nil)},
		{"payload beyond frame", bytes.Join([][]byte{le32(1), hint(0, 0, 0), blockEntry(7, sum, 1000), p}, nil)},
	}
	for _, srv := range tokenServers {
		t.Run(srv.name, func(t *testing.T) {
			ctx := context.Background()
			addr := srv.start(t)
			bob := mustDial(t, addr, "bob", bobToken)
			for _, m := range malformed {
				rc := rawAs(t, addr, "bob", bobToken)
				rc.send(frameBytes(wire.OpAccess, 0, m.body, -1))
				rc.send(wire.AppendStats(nil, 777))
				f := wire.Frame{}
				if err := rc.r.ReadFrame(&f); err == nil && (f.Header.Op != wire.OpError || f.Code != wire.CodeBadRequest) {
					t.Errorf("%s: got %v %v; want ERROR bad request (or a close)", m.name, f.Header.Op, f.Code)
				}
				if ex, err := bob.Exists(ctx, []uint64{7}); err != nil || ex[0] {
					t.Fatalf("%s: block 7 stored by a malformed ACCESS: %v, %v", m.name, ex, err)
				}
			}
			// Extreme hints: served, and the block is the one sent.
			for i, h := range []wire.Hint{
				{Hint: block.Hint{Depth: math.MaxUint32, Parent: math.MaxUint64}},
				{Hint: block.Hint{Depth: 1, Parent: 8}}, // its own ID
				{Hint: block.Hint{Depth: 0, Parent: math.MaxUint64}},
			} {
				id := uint64(8)
				q := append([]byte("extreme "), byte(i))
				errs, err := bob.MAccess(ctx, []uint64{id, id}, []wire.Hint{h, {Hint: h.Hint, Touch: true}}, [][]byte{q, nil})
				if err != nil || errs[0] != nil || errs[1] != nil {
					t.Fatalf("hint %+v: put and touch = %v, %v", h, errs, err)
				}
				if got, _, err := bob.Get(ctx, id, nil); err != nil || !bytes.Equal(got, q) {
					t.Fatalf("hint %+v: Get = %q, %v; want %q", h, got, err, q)
				}
			}
		})
	}
}
