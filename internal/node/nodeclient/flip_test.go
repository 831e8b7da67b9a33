package nodeclient_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// TestFlippedByteLargeGet: a node that sends a large block with one byte
// changed after checksumming it is caught wherever the byte is — in the
// part the read buffer holds, in the part read straight into the caller's
// buffer (a GET into 64 KiB or more reads only the headers into the
// buffer), at the last byte — by GET and MGET, as kvpool.ErrCorrupt and
// no bytes; the intact block reads back whole.
func TestFlippedByteLargeGet(t *testing.T) {
	const n = 300 << 10
	p := payload(n, 5)
	for _, at := range []int{-1, 0, 100, 70 << 10, n - 1} {
		for _, mget := range []bool{false, true} {
			t.Run(fmt.Sprintf("byte=%d/mget=%v", at, mget), func(t *testing.T) {
				addr := fakeNode(t, func(req *wire.Frame) []byte {
					b := okBlock("t", 7, p)
					if at >= 0 {
						b.Payload = bytes.Clone(p)
						b.Payload[at] ^= 0x20
					}
					if mget {
						return must(wire.AppendMGetResponse(nil, req.Header.ReqID, []wire.Block{b}))
					}
					return must(wire.AppendGetResponse(nil, req.Header.ReqID, b))
				}, false)
				conn, err := nodeclient.Dial(ctxT(t), addr, nodeclient.DialOptions{Tenant: "t"})
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				dst := make([]byte, 0, n)
				var got []byte
				if mget {
					var res []nodeclient.Result
					if res, err = conn.MGet(ctxT(t), []uint64{7}, [][]byte{dst}); err == nil {
						got, err = res[0].Payload, res[0].Err
					}
				} else {
					got, _, err = conn.Get(ctxT(t), 7, dst)
				}
				if at < 0 {
					if err != nil || !bytes.Equal(got, p) {
						t.Fatalf("intact block: %d bytes, %v", len(got), err)
					}
					return
				}
				if !errors.Is(err, kvpool.ErrCorrupt) || got != nil {
					t.Fatalf("byte %d flipped: %d bytes, %v; want kvpool.ErrCorrupt and no bytes", at, len(got), err)
				}
			})
		}
	}
}
