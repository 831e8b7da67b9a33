package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// encodeDirect encodes f with the op's own encoder (not AppendFrame), so the
// test checks that both paths produce the same bytes.
func encodeDirect(t *testing.T, f *Frame) []byte {
	t.Helper()
	id := f.Header.ReqID
	var b []byte
	var err error
	switch f.Header.Op {
	case OpGet:
		b = AppendGet(nil, id, f.IDs[0])
	case OpDelete:
		b = AppendDelete(nil, id, f.IDs[0])
	case OpStats:
		b = AppendStats(nil, id)
	case OpSync:
		b = AppendSync(nil, id)
	case OpSyncResponse:
		b = AppendSyncResponse(nil, id, f.Statuses[0].Code)
	case OpMGet:
		b, err = AppendMGet(nil, id, f.IDs)
	case OpExists:
		b, err = AppendExists(nil, id, f.IDs)
	case OpPut:
		b, err = AppendPut(nil, id, f.Blocks[0])
	case OpMPut:
		b, err = AppendMPut(nil, id, f.Blocks)
	case OpGetResponse:
		b, err = AppendGetResponse(nil, id, f.Blocks[0])
	case OpMGetResponse:
		b, err = AppendMGetResponse(nil, id, f.Blocks)
	case OpPutResponse:
		b = AppendPutResponse(nil, id, f.Statuses[0])
	case OpDeleteResponse:
		b = AppendDeleteResponse(nil, id, f.Statuses[0])
	case OpMPutResponse:
		b, err = AppendMPutResponse(nil, id, f.Statuses)
	case OpExistsResponse:
		b, err = AppendExistsResponse(nil, id, f.Statuses)
	case OpStatsResponse:
		b, err = AppendStatsResponse(nil, id, f.Tiers)
	case OpError:
		b = AppendError(nil, id, &RemoteError{Code: f.Code, Message: f.Message})
	case OpAccess:
		b, err = AppendAccess(nil, id, f.Hints, f.Blocks)
	case OpAccessResponse:
		b, err = AppendAccessResponse(nil, id, f.Statuses)
	case OpGetNamed:
		b, err = AppendGetNamed(nil, id, f.Names[0])
	case OpDeleteNamed:
		b, err = AppendDeleteNamed(nil, id, f.Names[0])
	case OpMGetNamed:
		b, err = AppendMGetNamed(nil, id, f.Names)
	case OpExistsNamed:
		b, err = AppendExistsNamed(nil, id, f.Names)
	case OpPutNamed:
		b, err = AppendPutNamed(nil, id, f.Names[0], f.Blocks[0])
	case OpMPutNamed:
		b, err = AppendMPutNamed(nil, id, f.Names, f.Blocks)
	case OpGetNamedResponse, OpMGetNamedResponse:
		b, err = AppendBlockResponse(nil, f.Header.Op, id, f.Blocks)
	case OpPutNamedResponse, OpDeleteNamedResponse, OpMPutNamedResponse, OpExistsNamedResponse:
		b, err = AppendStatusResponse(nil, f.Header.Op, id, f.Statuses)
	default:
		t.Fatalf("no encoder for %v", f.Header.Op)
	}
	if err != nil {
		t.Fatalf("encode %v: %v", f.Header.Op, err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, lim := range []struct {
		name string
		lim  Limits
	}{{"small", smallLimits}, {"default", Limits{}}} {
		t.Run(lim.name, func(t *testing.T) {
			r := newReader(t, nil, lim.lim)
			var got Frame // reused across frames, as a server would
			for _, s := range sampleFrames(lim.lim) {
				t.Run(s.name, func(t *testing.T) {
					enc := mustEncode(t, &s.f)
					if direct := encodeDirect(t, &s.f); !bytes.Equal(direct, enc) {
						t.Fatalf("op encoder and AppendFrame differ:\n%x\n%x", direct, enc)
					}
					if int(le.Uint32(enc)) != len(enc) {
						t.Fatalf("length field %d, frame is %d bytes", le.Uint32(enc), len(enc))
					}
					r.Reset(bytes.NewReader(enc))
					if err := r.ReadFrame(&got); err != nil {
						t.Fatalf("decode: %v", err)
					}
					if d := diffFrames(&s.f, &got); d != "" {
						t.Fatal(d)
					}
					if got.Header.Len != uint32(len(enc)) || r.Offset() != int64(len(enc)) {
						t.Fatalf("header len %d, offset %d, want %d", got.Header.Len, r.Offset(), len(enc))
					}
					if re := mustEncode(t, &got); !bytes.Equal(re, enc) {
						t.Fatal("decoded frame re-encodes differently")
					}
					if _, err := r.ReadHeader(); err != io.EOF {
						t.Fatalf("after the frame: %v, want io.EOF", err)
					}
				})
			}
		})
	}
}

// TestSamplesCoverEveryOp keeps the round-trip, truncation and fuzz seeds
// complete when an op is added.
func TestSamplesCoverEveryOp(t *testing.T) {
	seen := map[Op]bool{}
	for _, s := range sampleFrames(smallLimits) {
		seen[s.f.Header.Op] = true
	}
	for op := range 256 {
		if Op(op).Valid() != seen[Op(op)] {
			t.Errorf("%v: valid %v, has a sample frame %v", Op(op), Op(op).Valid(), seen[Op(op)])
		}
	}
}

// TestPipelined decodes all sample frames back to back from one stream, as
// a connection carries them, with one reused Frame.
func TestPipelined(t *testing.T) {
	samples := sampleFrames(smallLimits)
	var stream []byte
	var ends []int64
	for _, s := range samples {
		stream = append(stream, mustEncode(t, &s.f)...)
		ends = append(ends, int64(len(stream)))
	}
	r := newReader(t, stream, smallLimits)
	var got Frame
	for i, s := range samples {
		if err := r.ReadFrame(&got); err != nil {
			t.Fatalf("frame %d (%s): %v", i, s.name, err)
		}
		if d := diffFrames(&s.f, &got); d != "" {
			t.Fatalf("frame %d (%s): %s", i, s.name, d)
		}
		if r.Offset() != ends[i] {
			t.Fatalf("frame %d: offset %d, want %d", i, r.Offset(), ends[i])
		}
	}
	if err := r.ReadFrame(&got); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
}

// TestByRefMatchesAppend: a frame assembled by reference (the head, the
// block headers and the payloads as separate pieces) is byte-identical to
// the copying encoder's.
func TestByRefMatchesAppend(t *testing.T) {
	var g byRef // reused across frames
	for _, s := range sampleFrames(smallLimits) {
		if sh := s.f.Header.Op.shape(); sh != shapeBlock && sh != shapeBlocks {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			want := mustEncode(t, &s.f)
			var buf bytes.Buffer
			n, err := g.writeTo(&buf, s.f.Header.Op, s.f.Header.ReqID, s.f.Blocks)
			if err != nil || n != int64(len(want)) {
				t.Fatalf("WriteTo: %d, %v; want %d bytes", n, err, len(want))
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("frame sent by reference differs:\n%x\n%x", buf.Bytes(), want)
			}
			bufs, err := g.buffers(s.f.Header.Op, s.f.Header.ReqID, s.f.Blocks)
			if err != nil {
				t.Fatal(err)
			}
			// Payloads are referenced, not copied.
			for _, b := range s.f.Blocks {
				if len(b.Payload) == 0 {
					continue
				}
				found := false
				for _, piece := range bufs {
					if len(piece) > 0 && &piece[0] == &b.Payload[0] {
						found = true
					}
				}
				if !found {
					t.Fatalf("payload of block %x was copied", b.ID)
				}
			}
		})
	}
}

// TestBlockFrameHead checks the sendfile-style path: head, then per block a
// header and the payload, written separately.
func TestBlockFrameHead(t *testing.T) {
	for _, s := range sampleFrames(smallLimits) {
		if sh := s.f.Header.Op.shape(); sh != shapeBlock && sh != shapeBlocks {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			var total uint64
			for _, b := range s.f.Blocks {
				total += uint64(len(b.Payload))
			}
			out, err := AppendBlockFrameHead(nil, s.f.Header.Op, s.f.Header.ReqID, len(s.f.Blocks), total)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range s.f.Blocks {
				out = AppendBlockHeader(out, BlockHeader{ID: b.ID, Code: b.Code, Checksum: b.Checksum, Len: uint32(len(b.Payload))})
				out = append(out, b.Payload...)
			}
			if want := mustEncode(t, &s.f); !bytes.Equal(out, want) {
				t.Fatalf("head + entries differ from AppendFrame:\n%x\n%x", out, want)
			}
		})
	}
}

// TestStreamingMGet reads an MGET response block by block, landing each
// payload in the caller's destination buffer, skipping one, and verifying
// checksums against the tenant.
func TestStreamingMGet(t *testing.T) {
	want := []Block{okBlock(1, 100), {ID: 2, Code: CodeNotFound}, okBlock(3, 70_000), okBlock(4, 0), okBlock(5, 33)}
	enc, err := AppendMGetResponse(nil, 9, want)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, enc, Limits{})
	h, err := r.ReadHeader()
	if err != nil || h.Op != OpMGetResponse || h.ReqID != 9 {
		t.Fatalf("header %+v, %v", h, err)
	}
	n, err := r.BeginBlocks()
	if err != nil || n != len(want) {
		t.Fatalf("BeginBlocks: %d, %v", n, err)
	}
	dests := make([][]byte, n)
	for i := range dests {
		dests[i] = make([]byte, 0, 70_000)
	}
	for i := range n {
		bh, err := r.NextBlock()
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		w := want[i]
		if bh.ID != w.ID || bh.Code != w.Code || int(bh.Len) != len(w.Payload) {
			t.Fatalf("block %d header %+v, want %+v", i, bh, w)
		}
		if i == 4 {
			if err := r.SkipPayload(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p, err := r.ReadPayload(dests[i])
		if err != nil {
			t.Fatalf("block %d payload: %v", i, err)
		}
		if len(p) > 0 && &p[0] != &dests[i][:1][0] {
			t.Fatalf("block %d: payload not read into the caller's buffer", i)
		}
		if !bytes.Equal(p, w.Payload) {
			t.Fatalf("block %d payload differs", i)
		}
		if bh.Code == CodeOK && !block.Verify(block.Key{Tenant: testTenant, ID: bh.ID}, p, bh.Checksum) {
			t.Fatalf("block %d fails verification", i)
		}
		if bh.Code == CodeOK && block.Verify(block.Key{Tenant: "other", ID: bh.ID}, p, bh.Checksum) {
			t.Fatalf("block %d verifies under another tenant", i)
		}
	}
	if _, err := r.ReadHeader(); err != io.EOF {
		t.Fatalf("after the frame: %v, want io.EOF", err)
	}
}

// TestPayloadGrowsWithData: with a too-small destination the payload still
// decodes, into a new array.
func TestPayloadGrowsWithData(t *testing.T) {
	want := okBlock(1, 3<<20) // spans several growChunks
	enc, err := AppendGetResponse(nil, 1, want)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, enc, Limits{})
	if _, err := r.ReadHeader(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.BeginBlocks(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.NextBlock(); err != nil {
		t.Fatal(err)
	}
	p, err := r.ReadPayload(make([]byte, 10))
	if err != nil || !bytes.Equal(p, want.Payload) {
		t.Fatalf("payload: %d bytes, %v", len(p), err)
	}
	if cap(p) > len(want.Payload) {
		t.Fatalf("payload buffer cap %d for %d bytes: grew beyond the payload", cap(p), len(want.Payload))
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	hellos := []Hello{
		{Tenant: testTenant, Token: []byte("s3cret")},
		{},                                     // default tenant, no token
		{Version: Version, Tenant: "a.b_c-D9"}, // explicit version
		{Tenant: string(bytes.Repeat([]byte{'t'}, block.MaxTenantLen)), Token: bytes.Repeat([]byte{0xff}, DefaultMaxToken)},
	}
	for i, h := range hellos {
		enc, err := AppendHello(nil, &h)
		if err != nil {
			t.Fatalf("hello %d: %v", i, err)
		}
		var got Hello
		r := newReader(t, enc, Limits{})
		if err := r.ReadHello(&got); err != nil {
			t.Fatalf("hello %d: %v", i, err)
		}
		if got.Version != Version || got.Tenant != h.Tenant || !bytes.Equal(got.Token, h.Token) {
			t.Fatalf("hello %d: got %+v, want %+v", i, got, h)
		}
		if r.Offset() != int64(len(enc)) {
			t.Fatalf("hello %d: offset %d, want %d", i, r.Offset(), len(enc))
		}
	}
	acks := []HelloAck{
		HelloAckFor(nil, Limits{}),
		HelloAckFor(kvpool.ErrUnauthorized, Limits{}),
		{Version: 7, Code: CodeVersionMismatch, Message: "speak 7"},
		{Version: Version, Code: CodeInternal, Message: strings.Repeat("m", MaxMessageLen)},
	}
	for i, a := range acks {
		enc := AppendHelloAck(nil, &a)
		var got HelloAck
		if err := newReader(t, enc, Limits{}).ReadHelloAck(&got); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
		if got != a {
			t.Fatalf("ack %d: got %+v, want %+v", i, got, a)
		}
	}
}

// TestHandshakeThenFrames: a hello followed by frames on one stream.
func TestHandshakeThenFrames(t *testing.T) {
	stream, err := AppendHello(nil, &Hello{Tenant: testTenant})
	if err != nil {
		t.Fatal(err)
	}
	stream = AppendGet(stream, 1, 42)
	stream = AppendStats(stream, 2)
	r := newReader(t, stream, Limits{})
	var h Hello
	if err := r.ReadHello(&h); err != nil {
		t.Fatal(err)
	}
	var f Frame
	for _, want := range []Op{OpGet, OpStats} {
		if err := r.ReadFrame(&f); err != nil || f.Header.Op != want {
			t.Fatalf("frame: %v %v, want %v", f.Header.Op, err, want)
		}
	}
	if err := r.ReadFrame(&f); !errors.Is(err, io.EOF) {
		t.Fatalf("at end: %v", err)
	}
}

// TestAllocationFollowsData: a frame that announces a maximum payload and
// then stops makes the Reader allocate in proportion to what arrived, not
// to what was announced.
func TestAllocationFollowsData(t *testing.T) {
	head, err := AppendBlockFrameHead(nil, OpGetResponse, 1, 1, DefaultMaxPayload)
	if err != nil {
		t.Fatal(err)
	}
	in := AppendBlockHeader(head, BlockHeader{ID: 1, Len: DefaultMaxPayload})
	in = append(in, make([]byte, 100)...) // 100 of 64 MiB, then the peer stalls
	cases := []struct {
		name string
		read func(r *Reader) (capacity int, err error)
	}{
		{"ReadFrame", func(r *Reader) (int, error) {
			var f Frame
			err := r.ReadFrame(&f)
			return cap(f.arena), err
		}},
		{"ReadPayload", func(r *Reader) (int, error) {
			if _, err := r.ReadHeader(); err != nil {
				return 0, err
			}
			if _, err := r.BeginBlocks(); err != nil {
				return 0, err
			}
			if _, err := r.NextBlock(); err != nil {
				return 0, err
			}
			p, err := r.ReadPayload(nil)
			return cap(p), err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.read(newReader(t, in, Limits{}))
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
			}
			if got > frame.GrowChunk {
				t.Fatalf("allocated %d bytes for 100 received", got)
			}
		})
	}
}
