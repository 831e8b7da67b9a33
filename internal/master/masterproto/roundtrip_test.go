package masterproto

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/meta"
)

// exported returns m with the scratch fields of result types cleared, for
// comparison.
func exported(m any) any {
	switch v := m.(type) {
	case *LookupResult:
		return &LookupResult{Hit: v.Hit, Replicas: v.Replicas, Ends: v.Ends}
	case *Placement:
		return &Placement{PerBlock: v.PerBlock, Degraded: v.Degraded, Nodes: v.Nodes}
	}
	return m
}

// TestRoundTrip encodes every sample, reads it back through a Reader,
// decodes it, compares, and re-encodes to the same bytes.
func TestRoundTrip(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			b, err := encode([]byte("prefix"), s)
			if err != nil {
				t.Fatal(err)
			}
			if string(b[:6]) != "prefix" {
				t.Fatal("encoder clobbered dst")
			}
			frame := b[6:]
			r, err := NewReader(bytes.NewReader(frame), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			h, body, err := r.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if h.Op != s.op || h.ReqID != s.reqID || int(h.Len) != len(frame) {
				t.Fatalf("header %+v, want op %v id %d len %d", h, s.op, s.reqID, len(frame))
			}
			got, err := decode(h, body, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(exported(got), exported(s.msg)) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", exported(got), exported(s.msg))
			}
			again, err := encode(nil, sample{op: s.op, reqID: s.reqID, msg: got})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, frame) {
				t.Fatalf("re-encoded\n%x\nwant\n%x", again, frame)
			}
			if _, _, err := r.ReadFrame(); err != io.EOF {
				t.Fatalf("after the frame: %v, want io.EOF", err)
			}
		})
	}
}

// TestLookupDecodeAllocs: the hot path allocates nothing in steady state,
// on the server (LOOKUP request, response encoding) and the client
// (response decoding).
func TestLookupDecodeAllocs(t *testing.T) {
	var req []byte
	req, err := AppendLookup(req, 1, &Lookup{Tenant: "t", IDs: make([]uint64, 32), Lease: true})
	if err != nil {
		t.Fatal(err)
	}
	var res *LookupResult
	for _, s := range samples() {
		if s.name == "lookup_result" {
			res = s.msg.(*LookupResult)
		}
	}
	resp, err := AppendLookupResult(nil, 1, res)
	if err != nil {
		t.Fatal(err)
	}
	var l Lookup
	var dst LookupResult
	out := make([]byte, 0, 4096)
	lim := DefaultLimits()
	run := func() {
		if err := DecodeLookup(ParseHeader(req), req[HeaderLen:], lim, &l); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendLookupResult(out[:0], 2, res); err != nil {
			t.Fatal(err)
		}
		if err := DecodeLookupResult(ParseHeader(resp), resp[HeaderLen:], lim, &dst); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per lookup round, want 0", n)
	}
	if dst.Hit != 2 || dst.Block(1)[0].Addr != "127.0.0.1:7481" {
		t.Fatalf("decoded %+v", dst)
	}
}

// TestEncodeRejects: encoders refuse what the format cannot carry,
// leaving dst unchanged.
func TestEncodeRejects(t *testing.T) {
	long := strings.Repeat("x", MaxNodeIDLen+1)
	cases := []struct {
		name string
		s    sample
		want error
	}{
		{"long node id", sample{msg: &Register{Info: meta.NodeInfo{ID: meta.NodeID(long), Addr: "h:1"}}}, frame.ErrTooLong},
		{"long addr", sample{msg: &Register{Info: meta.NodeInfo{ID: "n", Addr: strings.Repeat("a", 256)}}}, frame.ErrTooLong},
		{"bad tier", sample{msg: &Register{Info: meta.NodeInfo{ID: "n", Addr: "h:1"}, Inventory: meta.Inventory{{Tier: 9}}}}, meta.ErrBadRequest},
		{"bad tenant", sample{msg: &Lookup{Tenant: "a/b"}}, block.ErrBadTenant},
		{"bad tenant in delta", sample{msg: &Heartbeat{Node: "n", SSDHits: []block.Key{{Tenant: "é"}}}}, block.ErrBadTenant},
		{"bad task kind", sample{msg: &meta.HeartbeatReply{Tasks: []meta.Task{{Kind: 9}}}}, meta.ErrBadRequest},
		{"ends disagree", sample{msg: &LookupResult{Hit: 1, Ends: []int{2}, Replicas: []Replica{{Tier: meta.TierRAM}}}}, meta.ErrBadRequest},
		{"uneven placement", sample{msg: &Placement{PerBlock: 2, Nodes: []Target{{}}}}, meta.ErrBadRequest},
		{"long token", sample{msg: &Hello{Token: make([]byte, MaxTokenLen+1)}}, frame.ErrTooLong},
		{"replicas field", sample{msg: &Place{Replicas: 1 << 16}}, meta.ErrBadRequest},
		{"keyinfo mixed batch", sample{msg: &KeyInfo{IDs: []uint64{1, 2}, Names: []string{"a", ""}}}, meta.ErrBadRequest},
		{"holders unsorted", sample{msg: []meta.KeyInfo{{Present: true, Holders: []meta.NodeID{"b", "a"}}}}, meta.ErrBadRequest},
		{"holders twice", sample{msg: []meta.KeyInfo{{Present: true, Holders: []meta.NodeID{"a", "a"}}}}, meta.ErrBadRequest},
		{"visible absent", sample{msg: []meta.KeyInfo{{Visible: true}}}, meta.ErrBadRequest},
		{"absent with holders", sample{msg: []meta.KeyInfo{{Holders: []meta.NodeID{"a"}}}}, meta.ErrBadRequest},
		{"long holder", sample{msg: []meta.KeyInfo{{Present: true, Holders: []meta.NodeID{meta.NodeID(long)}}}}, frame.ErrTooLong},
		{"expire times", sample{msg: &Expire{IDs: []uint64{1}, Names: []string{"a"}}}, meta.ErrBadRequest},
		{"expire negative", sample{msg: &Expire{IDs: []uint64{1}, Names: []string{"a"}, At: []int64{-1}}}, meta.ErrBadRequest},
		{"scan count", sample{msg: &Scan{Count: -1}}, meta.ErrBadRequest},
		{"scan tenant", sample{msg: &Scan{Tenant: "a b"}}, block.ErrBadTenant},
		{"scan empty name", sample{msg: &ScanResult{Names: []string{""}}}, frame.ErrTooLong},
		{"count tenant", sample{msg: countRequest("a/b")}, block.ErrBadTenant},
		{"count expiring", sample{msg: &CountResult{Keys: 1, Expiring: 2}}, meta.ErrBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := encode([]byte("keep"), c.s)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if string(b) != "keep" {
				t.Fatalf("dst is %q after a failed encode", b)
			}
		})
	}
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		err  error
		code Code
	}{
		{nil, CodeOK},
		{meta.ErrUnknownNode, CodeUnknownNode},
		{meta.ErrNoNodes, CodeNoNodes},
		{meta.ErrBadRequest, CodeBadRequest},
		{frame.ErrMalformed, CodeBadRequest},
		{frame.ErrUnknownOp, CodeUnsupportedOp},
		{kvpool.ErrUnauthorized, CodeUnauthorized},
		{frame.ErrVersion, CodeVersionMismatch},
		{kvpool.ErrUnavailable, CodeUnavailable},
		{kvpool.ErrTooLarge, CodeTooLarge},
		{errors.New("boom"), CodeInternal},
	}
	// Errors a server sends with a code that means a more general one.
	for _, err := range []error{frame.ErrFrameTooLarge, kvpool.ErrClosed, frame.ErrBatchTooLong} {
		want := map[error]Code{frame.ErrFrameTooLarge: CodeTooLarge, kvpool.ErrClosed: CodeUnavailable, frame.ErrBatchTooLong: CodeBadRequest}[err]
		if got := CodeOf(err); got != want {
			t.Errorf("CodeOf(%v) = %v, want %v", err, got, want)
		}
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.code {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.code)
		}
		if c.err == nil || c.code == CodeInternal {
			continue
		}
		re := &RemoteError{Code: c.code, Message: "m"}
		if CodeOf(re) != c.code || (c.code != CodeBadRequest && !errors.Is(re, c.err)) {
			t.Errorf("RemoteError %v does not map back to %v", re, c.err)
		}
	}
	if err := ErrorFor(Code(999)); !errors.Is(err, frame.ErrInternal) {
		t.Errorf("unknown code: %v", err)
	}
}

func TestOpStrings(t *testing.T) {
	cases := map[Op]string{OpLookup: "LOOKUP", OpLookupResponse: "LOOKUP response", OpError: "ERROR", Op(0x42): "op(0x42)", Op(0x80): "op(0x80)",
		OpKeyInfo: "KEYINFO", OpExpireResponse: "EXPIRE response", OpScan: "SCAN", OpCountResponse: "COUNT response", Op(0x0E): "op(0x0e)"}
	for op, want := range cases {
		if op.String() != want {
			t.Errorf("%#x: %q, want %q", uint8(op), op.String(), want)
		}
	}
	if OpLookup.Response() != OpLookupResponse || OpLookupResponse.Response() != OpError || !OpQuery.IsRequest() || OpQueryResponse.IsRequest() ||
		OpCount.Response() != OpCountResponse || OpKeyInfo.Response() != 0x8A {
		t.Error("request/response mapping broken")
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, bad := range []Limits{{MaxFrame: -1}, {MaxBatch: -1}, {MaxToken: MaxTokenLen + 1}, {MaxFrame: 100}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestCodeNumbers pins the code numbers: they are part of the protocol.
func TestCodeNumbers(t *testing.T) {
	want := map[Code]uint16{CodeOK: 0, CodeBadRequest: 1, CodeUnknownNode: 2, CodeNoNodes: 3, CodeUnsupportedOp: 4,
		CodeUnauthorized: 5, CodeInternal: 6, CodeVersionMismatch: 7, CodeUnavailable: 8, CodeTooLarge: 9, CodeNotLeader: 10}
	for c, n := range want {
		if uint16(c) != n {
			t.Errorf("%v is %d on the wire, want %d", c, uint16(c), n)
		}
	}
}
