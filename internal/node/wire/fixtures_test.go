package wire

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/tier"
)

// smallLimits keeps frames small enough to truncate at every offset.
var smallLimits = Limits{MaxFrame: 1 << 12, MaxBatch: 4, MaxPayload: 64, MaxTenant: 16, MaxToken: 8}

const testTenant = "acme-1"

// payload returns n deterministic bytes that differ per seed.
func payload(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range min(n, 251) { // a prime period, so blocks of any size differ
		p[i] = seed + byte(i*7)
	}
	for done := min(n, 251); done < n; done *= 2 {
		copy(p[done:], p[:done]) // doubling copy: fast under -race too
	}
	return p
}

func okBlock(id uint64, n int) Block {
	p := payload(n, byte(id))
	return Block{ID: id, Code: CodeOK, Checksum: block.Checksum(block.Key{Tenant: testTenant, ID: id}, p), Payload: p}
}

// okNamed returns the block stored under name, with an n-byte payload.
func okNamed(name string, n int) Block {
	p := payload(n, byte(len(name)))
	return Block{ID: block.NameID(name), Code: CodeOK, Checksum: block.Checksum(block.Named(testTenant, name), p), Payload: p}
}

// names returns n distinct names of size bytes each (at least 4), of
// arbitrary bytes (a NUL, a newline, invalid UTF-8).
func names(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		b := bytes.Repeat([]byte{'k'}, size)
		copy(b, []byte{byte(i), 0, '\n', 0xff})
		out[i] = string(b)
	}
	return out
}

func namedBlocks(ns []string, size int) []Block {
	out := make([]Block, len(ns))
	for i, n := range ns {
		out[i] = okNamed(n, size)
	}
	return out
}

func ids(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = 0x1000_0000_0000_0000 + uint64(i)*0x1_0000_0001
	}
	return out
}

func blocks(n, size int) []Block {
	out := make([]Block, n)
	for i := range out {
		out[i] = okBlock(uint64(i+1), size)
	}
	return out
}

func statuses(n int) []Status {
	out := make([]Status, n)
	for i := range out {
		out[i] = Status{ID: uint64(i + 1), Code: Code(i % 3)} // ok, not found, corrupt
	}
	return out
}

func sampleTiers() []TierStats {
	return []TierStats{
		{Name: "ram", Stats: tier.Stats{Blocks: 3, Bytes: 3 << 20, HeldBytes: 3<<20 + 4096, CapacityBytes: 1 << 30, Hits: 10, Misses: 2, BytesIn: 1, BytesOut: 2, EvictAttempts: 5, Evicted: 4, Corruptions: 1, IOErrors: 0}},
		{Name: "ssd", Stats: tier.Stats{Blocks: -1, Bytes: -2, HeldBytes: -3, CapacityBytes: 1 << 40, Hits: 1<<64 - 1, IOErrors: 7}},
	}
}

type sample struct {
	name string
	f    Frame
}

// sampleFrames returns frames of every op under lim: empty and full batches,
// empty, failed and maximum-size payloads.
func sampleFrames(lim Limits) []sample {
	lim, err := lim.Resolve()
	if err != nil {
		panic(err)
	}
	fb, mp := lim.MaxBatch, lim.MaxPayload
	// Full batches of maximum payloads may not fit a frame; fill what fits.
	perBlock := min(mp, (lim.MaxFrame-HeaderLen-countLen)/fb-BlockHeaderLen)
	mixed := []Block{okBlock(1, 3), {ID: 2, Code: CodeNotFound}, okBlock(3, 0), {ID: 4, Code: CodeCorrupt}}
	if len(mixed) > fb {
		mixed = mixed[:fb]
	}
	// ACCESS entries carry a hint too.
	perAccess := min(mp, (lim.MaxFrame-HeaderLen-countLen)/fb-BlockHeaderLen-HintLen)
	accessFull, accessHints := blocks(fb, perAccess), make([]Hint, fb)
	for i := range accessHints {
		accessHints[i] = Hint{Hint: block.Hint{Depth: i, Parent: uint64(i)}}
	}
	touchPut := []Block{{ID: 5, Code: CodeOK}, okBlock(6, 3), okBlock(7, 0), {ID: 8, Code: CodeOK}}
	touchPutHints := []Hint{{Touch: true}, {Hint: block.Hint{Depth: 1, Parent: 5}}, {Hint: block.Hint{Depth: 2, Parent: 6}}, {Hint: block.Hint{Depth: 1<<32 - 1, Parent: 7}, Touch: true}}
	if len(touchPut) > fb {
		touchPut, touchPutHints = touchPut[:fb], touchPutHints[:fb]
	}
	tiers := sampleTiers()
	// Named batches: names as long as fit the frame, up to the limit.
	nameLen := min(block.MaxNameLen, (lim.MaxFrame-HeaderLen-countLen)/fb-NameHeaderLen)
	fullNames := names(fb, nameLen)
	perNamed := min(mp, (lim.MaxFrame-HeaderLen-countLen)/fb-BlockHeaderLen-NameHeaderLen-8)
	maxName := string(bytes.Repeat([]byte{0xfe}, min(block.MaxNameLen, lim.MaxFrame-HeaderLen-NameHeaderLen-BlockHeaderLen-1)))
	h := func(op Op, id uint64) Header { return Header{Op: op, ReqID: id} }
	return []sample{
		{"get", Frame{Header: h(OpGet, 1), IDs: []uint64{0xdeadbeefcafef00d}}},
		{"delete", Frame{Header: h(OpDelete, 2), IDs: []uint64{7}}},
		{"stats", Frame{Header: h(OpStats, 3)}},
		{"mget_empty", Frame{Header: h(OpMGet, 4)}},
		{"mget_one", Frame{Header: h(OpMGet, 5), IDs: ids(1)}},
		{"mget_full", Frame{Header: h(OpMGet, 6), IDs: ids(fb)}},
		{"exists_empty", Frame{Header: h(OpExists, 7)}},
		{"exists_full", Frame{Header: h(OpExists, 8), IDs: ids(fb)}},
		{"put", Frame{Header: h(OpPut, 9), Blocks: []Block{okBlock(42, 5)}}},
		{"put_empty_payload", Frame{Header: h(OpPut, 10), Blocks: []Block{okBlock(43, 0)}}},
		{"put_max_payload", Frame{Header: h(OpPut, 11), Blocks: []Block{okBlock(44, mp)}}},
		{"mput_empty", Frame{Header: h(OpMPut, 12)}},
		{"mput_full", Frame{Header: h(OpMPut, 13), Blocks: blocks(fb, perBlock)}},
		{"get_response", Frame{Header: h(OpGetResponse, 14), Blocks: []Block{okBlock(42, 5)}}},
		{"get_response_not_found", Frame{Header: h(OpGetResponse, 15), Blocks: []Block{{ID: 42, Code: CodeNotFound}}}},
		{"get_response_max_payload", Frame{Header: h(OpGetResponse, 16), Blocks: []Block{okBlock(45, mp)}}},
		{"mget_response_empty", Frame{Header: h(OpMGetResponse, 17)}},
		{"mget_response_mixed", Frame{Header: h(OpMGetResponse, 18), Blocks: mixed}},
		{"mget_response_full", Frame{Header: h(OpMGetResponse, 19), Blocks: blocks(fb, perBlock)}},
		{"put_response", Frame{Header: h(OpPutResponse, 20), Statuses: []Status{{ID: 42, Code: CodeFull}}}},
		{"delete_response", Frame{Header: h(OpDeleteResponse, 21), Statuses: []Status{{ID: 7, Code: CodeNotFound}}}},
		{"mput_response_empty", Frame{Header: h(OpMPutResponse, 22)}},
		{"mput_response_full", Frame{Header: h(OpMPutResponse, 23), Statuses: statuses(fb)}},
		{"exists_response_empty", Frame{Header: h(OpExistsResponse, 24)}},
		{"exists_response_full", Frame{Header: h(OpExistsResponse, 25), Statuses: statuses(fb)}},
		{"stats_response_empty", Frame{Header: h(OpStatsResponse, 26)}},
		{"stats_response", Frame{Header: h(OpStatsResponse, 27), Tiers: tiers}},
		{"error", Frame{Header: h(OpError, 28), Code: CodeUnsupportedOp, Message: "op 0x08 is not defined"}},
		{"access_empty", Frame{Header: h(OpAccess, 30)}},
		{"access_touch_and_put", Frame{Header: h(OpAccess, 31), Hints: touchPutHints, Blocks: touchPut}},
		{"access_full", Frame{Header: h(OpAccess, 32), Hints: accessHints, Blocks: accessFull}},
		{"access_response_empty", Frame{Header: h(OpAccessResponse, 33)}},
		{"access_response_full", Frame{Header: h(OpAccessResponse, 34), Statuses: statuses(fb)}},
		{"get_named", Frame{Header: h(OpGetNamed, 40), Names: []string{"meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16kv_bytes"}}},
		{"get_named_one_byte", Frame{Header: h(OpGetNamed, 41), Names: []string{"\x00"}}},
		{"get_named_max_name", Frame{Header: h(OpGetNamed, 42), Names: []string{maxName}}},
		{"delete_named", Frame{Header: h(OpDeleteNamed, 43), Names: []string{"a b"}}},
		{"mget_named_empty", Frame{Header: h(OpMGetNamed, 44)}},
		{"mget_named_full", Frame{Header: h(OpMGetNamed, 45), Names: fullNames}},
		{"exists_named_empty", Frame{Header: h(OpExistsNamed, 46)}},
		{"exists_named_full", Frame{Header: h(OpExistsNamed, 47), Names: fullNames}},
		{"put_named", Frame{Header: h(OpPutNamed, 48), Names: []string{"obj"}, Blocks: []Block{okNamed("obj", 28)}}},
		{"put_named_empty_payload", Frame{Header: h(OpPutNamed, 49), Names: []string{"e"}, Blocks: []Block{okNamed("e", 0)}}},
		{"put_named_max_payload", Frame{Header: h(OpPutNamed, 50), Names: []string{"m"}, Blocks: []Block{okNamed("m", mp)}}},
		{"mput_named_empty", Frame{Header: h(OpMPutNamed, 51)}},
		{"mput_named_full", Frame{Header: h(OpMPutNamed, 52), Names: names(fb, 8), Blocks: namedBlocks(names(fb, 8), perNamed)}},
		{"get_named_response", Frame{Header: h(OpGetNamedResponse, 53), Blocks: []Block{okNamed("obj", 28)}}},
		{"get_named_response_not_found", Frame{Header: h(OpGetNamedResponse, 54), Blocks: []Block{{ID: block.NameID("obj"), Code: CodeNotFound}}}},
		{"mget_named_response_mixed", Frame{Header: h(OpMGetNamedResponse, 55), Blocks: []Block{okNamed("a", 3), {ID: block.NameID("b"), Code: CodeTooLarge}}}},
		{"put_named_response", Frame{Header: h(OpPutNamedResponse, 56), Statuses: []Status{{ID: block.NameID("obj"), Code: CodeTooLarge}}}},
		{"mput_named_response_full", Frame{Header: h(OpMPutNamedResponse, 57), Statuses: statuses(fb)}},
		{"exists_named_response_full", Frame{Header: h(OpExistsNamedResponse, 58), Statuses: statuses(fb)}},
		{"delete_named_response", Frame{Header: h(OpDeleteNamedResponse, 59), Statuses: []Status{{ID: block.NameID("a b"), Code: CodeOK}}}},
		{"sync", Frame{Header: h(OpSync, 60)}},
		{"sync_response", Frame{Header: h(OpSyncResponse, 61), Statuses: []Status{{Code: CodeOK}}}},
		{"sync_response_unavailable", Frame{Header: h(OpSyncResponse, 62), Statuses: []Status{{Code: CodeUnavailable}}}},
		{"error_unknown_code", Frame{Header: h(OpError, 1<<64-1), Code: 999}},
		{"error_max_message", Frame{Header: h(OpError, 29), Code: CodeInternal, Message: strings.Repeat("é", MaxMessageLen/2)}},
	}
}

// mustEncode encodes f or fails the test.
func mustEncode(t testing.TB, f *Frame) []byte {
	t.Helper()
	b, err := AppendFrame(nil, f)
	if err != nil {
		t.Fatalf("encode %v: %v", f.Header.Op, err)
	}
	return b
}

// diffFrames describes how got differs from want (Header.Len ignored when
// want's is zero), or returns "".
func diffFrames(want, got *Frame) string {
	wh, gh := want.Header, got.Header
	if wh.Len == 0 {
		gh.Len = 0
	}
	if wh != gh {
		return fmt.Sprintf("header %+v, want %+v", gh, wh)
	}
	if !slices.Equal(want.IDs, got.IDs) {
		return fmt.Sprintf("IDs %v, want %v", got.IDs, want.IDs)
	}
	if !slices.Equal(want.Names, got.Names) {
		return fmt.Sprintf("names %q, want %q", got.Names, want.Names)
	}
	if len(want.Blocks) != len(got.Blocks) {
		return fmt.Sprintf("%d blocks, want %d", len(got.Blocks), len(want.Blocks))
	}
	for i := range want.Blocks {
		w, g := want.Blocks[i], got.Blocks[i]
		if w.ID != g.ID || w.Code != g.Code || w.Checksum != g.Checksum || !bytes.Equal(w.Payload, g.Payload) {
			return fmt.Sprintf("block %d: id %x code %v sum %08x len %d, want id %x code %v sum %08x len %d",
				i, g.ID, g.Code, g.Checksum, len(g.Payload), w.ID, w.Code, w.Checksum, len(w.Payload))
		}
	}
	if !slices.Equal(want.Hints, got.Hints) {
		return fmt.Sprintf("hints %+v, want %+v", got.Hints, want.Hints)
	}
	if !slices.Equal(want.Statuses, got.Statuses) {
		return fmt.Sprintf("statuses %v, want %v", got.Statuses, want.Statuses)
	}
	if !slices.Equal(want.Tiers, got.Tiers) {
		return fmt.Sprintf("tiers %+v, want %+v", got.Tiers, want.Tiers)
	}
	if want.Code != got.Code || want.Message != got.Message {
		return fmt.Sprintf("error %v %q, want %v %q", got.Code, got.Message, want.Code, want.Message)
	}
	return ""
}

// newReader returns a Reader of b under lim or fails the test.
func newReader(t testing.TB, b []byte, lim Limits) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b), lim)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
