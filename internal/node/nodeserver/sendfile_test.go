package nodeserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/vfs"
)

// The SSD tier's files (ssd.Tier.Section returns a vfs.File) can be sent.
var _ nodeserver.File = vfs.File(nil)

// TestFileBlocks sends blocks that live in a real file: with sendfile where
// the platform has it, through a buffer when the file has no descriptor,
// in GETs and in MGETs mixed with memory blocks.
func TestFileBlocks(t *testing.T) {
	const size = 1 << 20
	for _, noFd := range []bool{false, true} {
		t.Run(fmt.Sprintf("noFd=%v", noFd), func(t *testing.T) {
			fb := &faultBackend{Backend: newBackend(t), noFd: noFd}
			want := map[uint64][]byte{}
			for id := uint64(1); id <= 4; id++ {
				want[id] = payload(size+int(id), byte(id))
				fb.Store(block.Key{Tenant: "f", ID: id}, want[id])
			}
			for _, id := range []uint64{2, 3} {
				if err := fb.Spill(block.Key{Tenant: "f", ID: id}); err != nil {
					t.Fatal(err)
				}
			}
			srv, addr := start(t, fb, nodeserver.Options{})
			c, err := nodeclient.Dial(context.Background(), addr, nodeclient.DialOptions{Tenant: "f"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			got, _, err := c.Get(ctx, 2, nil)
			if err != nil || !bytes.Equal(got, want[2]) {
				t.Fatalf("GET of a file block: %v", err)
			}
			res, err := c.MGet(ctx, []uint64{1, 2, 9, 3, 4}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range []uint64{1, 2, 9, 3, 4} {
				if id == 9 {
					continue
				}
				if res[i].Err != nil || !bytes.Equal(res[i].Payload, want[id]) {
					t.Fatalf("MGET block %d: %v", id, res[i].Err)
				}
			}
			// The server counts bytes once written; the client may have them
			// a moment before.
			fileBytes := uint64(3*size + 2 + 2 + 3) // blocks 2 (twice) and 3
			wantSt := nodeserver.Stats{WritevBytes: uint64(2*size + 1 + 4), SendfileBytes: fileBytes, BlocksOut: 5}
			if runtime.GOOS != "linux" || noFd {
				wantSt.SendfileBytes, wantSt.CopiedBytes = 0, fileBytes
			}
			var st nodeserver.Stats
			waitFor(t, "the payload byte counters", func() bool {
				st = srv.Stats()
				return st.WritevBytes >= wantSt.WritevBytes && st.SendfileBytes+st.CopiedBytes >= fileBytes
			})
			if st.WritevBytes != wantSt.WritevBytes || st.SendfileBytes != wantSt.SendfileBytes ||
				st.CopiedBytes != wantSt.CopiedBytes || st.BlocksOut != wantSt.BlocksOut {
				t.Fatalf("writev %d, sendfile %d, copied %d, blocks %d; want %d, %d, %d, %d",
					st.WritevBytes, st.SendfileBytes, st.CopiedBytes, st.BlocksOut,
					wantSt.WritevBytes, wantSt.SendfileBytes, wantSt.CopiedBytes, wantSt.BlocksOut)
			}
		})
	}
}

// TestFileShorterThanBlock: when a file block cannot be read in full, the
// frame cannot be completed; the server closes the connection, and the
// client gets an error, never bytes.
func TestFileShorterThanBlock(t *testing.T) {
	for _, noFd := range []bool{false, true} {
		t.Run(fmt.Sprintf("noFd=%v", noFd), func(t *testing.T) {
			fb := &faultBackend{Backend: newBackend(t), noFd: noFd, shortLen: 100}
			fb.Store(block.Key{ID: 1}, payload(5000, 1))
			if err := fb.Spill(block.Key{ID: 1}); err != nil {
				t.Fatal(err)
			}
			_, addr := start(t, fb, nodeserver.Options{})
			c, err := nodeclient.Dial(context.Background(), addr, nodeclient.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			got, _, err := c.Get(ctx, 1, nil)
			if err == nil || got != nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Get = %d bytes, %v; want a connection error", len(got), err)
			}
			if !c.Broken() {
				t.Fatal("connection still in use after a truncated frame")
			}
		})
	}
}

// TestPartialHeaderUsesReadTimeout: once a frame's first bytes have arrived
// the rest must follow within ReadTimeout, even when they were read ahead
// with an earlier frame; only waiting for a frame's first byte is idle.
func TestPartialHeaderUsesReadTimeout(t *testing.T) {
	srv, addr := start(t, nil, nodeserver.Options{IdleTimeout: time.Hour, ReadTimeout: 50 * time.Millisecond})
	for _, c := range []struct {
		name  string
		ahead bool
	}{{"alone", false}, {"read ahead with a frame", true}} {
		t.Run(c.name, func(t *testing.T) {
			rc := open(t, addr, "")
			var b []byte
			if c.ahead {
				b = wire.AppendStats(b, 1)
			}
			rc.send(append(b, wire.AppendGet(nil, 2, 3)[:5]...))
			if c.ahead {
				if f := rc.frame(); f.Header.Op != wire.OpStatsResponse {
					t.Fatalf("got %v", f.Header.Op)
				}
			}
			if !rc.closed() {
				t.Fatal("connection open after a stalled header")
			}
		})
	}
	if got := srv.Stats().Timeouts; got != 2 {
		t.Fatalf("timeouts %d, want 2", got)
	}
}
