package nodeclient_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// TestReviewNamedSizeEdges: against a node whose max object size is 1000
// bytes, under names of 1 and 1024 bytes: payloads of 0, 1 and exactly
// the max round-trip byte-exact (one at a time and in a batch whose
// response frame cannot carry them all); max+1 is refused with the size,
// the limit and the setting, and stores nothing.
func TestReviewNamedSizeEdges(t *testing.T) {
	const max = 1000
	for _, lim := range []struct {
		name string
		l    wire.Limits
	}{
		{"LimitsFor", wire.LimitsFor(max)},
		{"defaults but the payload", wire.Limits{MaxPayload: max}},
		// Room for one named PUT of the max under a 1 KiB name (2066
		// bytes), two max-size blocks per GET response.
		{"frame for two", wire.Limits{MaxPayload: max, MaxFrame: 2100}},
	} {
		t.Run(lim.name, func(t *testing.T) {
			n := startNode(t, nodeserver.Options{Limits: lim.l})
			c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t"})
			ctx := ctxT(t)
			for _, name := range []string{"x", strings.Repeat("N", block.MaxNameLen)} {
				for _, size := range []int{0, 1, max} {
					p := payload(size, byte(size))
					nm := name + string(rune('a'+size%26))
					if len(nm) > block.MaxNameLen {
						nm = nm[1:]
					}
					if err := c.PutNamed(ctx, nm, p); err != nil {
						t.Errorf("PutNamed %d-byte name, %d bytes: %v", len(nm), size, err)
						continue
					}
					got, _, err := c.GetNamed(ctx, nm, nil)
					if err != nil || !bytes.Equal(got, p) {
						t.Errorf("GetNamed %d-byte name, %d bytes: %d bytes, %v", len(nm), size, len(got), err)
					}
				}
				big := name[1:] + "!"
				err := c.PutNamed(ctx, big, payload(max+1, 1))
				if !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), "1001") {
					t.Errorf("PutNamed of max+1 bytes: %v, want too large naming the size", err)
				}
				if ok, err := c.ExistsNamed(ctx, []string{big}); err != nil || ok[0] {
					t.Errorf("after a refused put: exists %v, %v", ok, err)
				}
			}
			// A batch of max-size objects that no one response frame holds.
			names := []string{"m1", "m2", "m3", strings.Repeat("L", block.MaxNameLen)}
			var ps [][]byte
			for i, nm := range names {
				ps = append(ps, payload(max, byte(i+1)))
				if err := c.PutNamed(ctx, nm, ps[i]); err != nil {
					t.Fatal(err)
				}
			}
			res, err := c.MGetNamed(ctx, names, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range names {
				if res[i].Err != nil || !bytes.Equal(res[i].Payload, ps[i]) {
					t.Errorf("MGetNamed %s: %d bytes, %v", names[i][:2], len(res[i].Payload), res[i].Err)
				}
			}
			errs, err := c.MPutNamed(ctx, names, ps)
			if err != nil {
				t.Fatalf("MPutNamed: %v", err)
			}
			for i, e := range errs {
				if e != nil {
					t.Errorf("MPutNamed %s: %v", names[i][:2], e)
				}
			}
		})
	}
}

// TestReviewManyLongNames: batches of more names than a frame or a batch
// holds (5000 names of 1 KiB: 5 MiB of names; MaxBatch 4096) are split by
// the client: every name is answered, in order.
func TestReviewManyLongNames(t *testing.T) {
	n := startNode(t, nodeserver.Options{})
	c := dial(t, n.addr, nodeclient.DialOptions{Tenant: "t"})
	ctx := ctxT(t)
	const count = 5000
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%05d", i) + strings.Repeat("n", block.MaxNameLen-5)
	}
	stored := map[int]bool{0: true, 4095: true, 4096: true, count - 1: true}
	for i := range stored {
		if err := c.PutNamed(ctx, names[i], []byte(names[i][:5])); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := c.ExistsNamed(ctx, names)
	if err != nil || len(ok) != count {
		t.Fatalf("ExistsNamed: %d answers, %v", len(ok), err)
	}
	res, err := c.MGetNamed(ctx, names, nil)
	if err != nil || len(res) != count {
		t.Fatalf("MGetNamed: %d answers, %v", len(res), err)
	}
	for i := range names {
		if ok[i] != stored[i] {
			t.Errorf("ExistsNamed %d: %v", i, ok[i])
		}
		switch {
		case stored[i] && (res[i].Err != nil || string(res[i].Payload) != names[i][:5]):
			t.Errorf("MGetNamed %d: %q, %v", i, res[i].Payload, res[i].Err)
		case !stored[i] && !errors.Is(res[i].Err, kvpool.ErrNotFound):
			t.Errorf("MGetNamed %d (absent): %q, %v", i, res[i].Payload, res[i].Err)
		}
	}
}
