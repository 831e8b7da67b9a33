package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// fuzzLimits are small so the fuzzer reaches every limit.
var fuzzLimits = smallLimits

// decodeErrors are the errors a decoder may return for bad input; anything
// else is a bug (an unclassified failure).
var decodeErrors = []error{
	io.EOF, io.ErrUnexpectedEOF, frame.ErrMalformed, frame.ErrFrameTooLarge, frame.ErrBatchTooLong, frame.ErrPayloadTooLarge,
	frame.ErrUnknownOp, frame.ErrTooLong, frame.ErrBadMagic, frame.ErrVersion, frame.ErrTenantTooLong, frame.ErrTokenTooLong, block.ErrBadTenant,
}

func classified(err error) bool {
	return slices.ContainsFunc(decodeErrors, func(e error) bool { return errors.Is(err, e) })
}

// FuzzDecode feeds arbitrary bytes to the frame decoder (as a stream of
// frames, skipping recoverable errors as a server does), the hello decoder
// and the hello-ack decoder. Nothing may panic or read past the input;
// every error is a known one; every limit holds; and every frame or
// handshake that decodes re-encodes to exactly the bytes it came from.
// Seeds: testdata/fuzz/FuzzDecode (TestSeedCorpus writes them).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFrames(t, data)
		checkHello(t, data)
		checkHelloAck(t, data)
	})
}

func checkFrames(t *testing.T, data []byte) {
	r, err := NewReader(bytes.NewReader(data), fuzzLimits)
	if err != nil {
		t.Fatal(err)
	}
	var f Frame
	off := 0
	for {
		err := r.ReadFrame(&f)
		if err == io.EOF {
			if off != len(data) {
				t.Fatalf("io.EOF at byte %d of %d", off, len(data))
			}
			return
		}
		if err != nil && !classified(err) {
			t.Fatalf("unclassified error: %v", err)
		}
		if cap(f.arena) > fuzzLimits.MaxFrame {
			t.Fatalf("payload buffer of %d bytes exceeds the frame limit", cap(f.arena))
		}
		n := int(f.Header.Len)
		if err != nil {
			if r.Skip() != nil {
				return // the stream is lost: the server closes
			}
			off += n
			if r.Offset() != int64(off) {
				t.Fatalf("after skipping a frame: offset %d, want %d", r.Offset(), off)
			}
			continue
		}
		if len(f.IDs) > fuzzLimits.MaxBatch || len(f.Names) > fuzzLimits.MaxBatch || len(f.Blocks) > fuzzLimits.MaxBatch || len(f.Statuses) > fuzzLimits.MaxBatch {
			t.Fatalf("%v frame with a batch over the limit", f.Header.Op)
		}
		for _, n := range f.Names {
			if len(n) == 0 || len(n) > block.MaxNameLen {
				t.Fatalf("%v frame with a name of %d bytes", f.Header.Op, len(n))
			}
		}
		for i, b := range f.Blocks {
			if f.Header.Op.Named() && f.Header.Op.IsRequest() && b.ID != block.NameID(f.Names[i]) {
				t.Fatalf("%v block %d: id %016x does not match its name", f.Header.Op, i, b.ID)
			}
			if len(b.Payload) > fuzzLimits.MaxPayload {
				t.Fatalf("payload of %d bytes over the limit", len(b.Payload))
			}
		}
		enc, err := AppendFrame(nil, &f)
		if err != nil {
			t.Fatalf("decoded %v frame does not encode: %v", f.Header.Op, err)
		}
		if !bytes.Equal(enc, data[off:off+n]) {
			t.Fatalf("%v frame re-encodes differently:\nin  %x\nout %x", f.Header.Op, data[off:off+n], enc)
		}
		off += n
		if r.Offset() != int64(off) {
			t.Fatalf("offset %d, want %d", r.Offset(), off)
		}
	}
}

func checkHello(t *testing.T, data []byte) {
	r, err := NewReader(bytes.NewReader(data), fuzzLimits)
	if err != nil {
		t.Fatal(err)
	}
	var h Hello
	if err := r.ReadHello(&h); err != nil {
		if !classified(err) {
			t.Fatalf("unclassified hello error: %v", err)
		}
		return
	}
	if len(h.Tenant) > fuzzLimits.MaxTenant || len(h.Token) > fuzzLimits.MaxToken {
		t.Fatalf("hello over the limits: %d-byte tenant, %d-byte token", len(h.Tenant), len(h.Token))
	}
	enc, err := AppendHello(nil, &h)
	if err != nil {
		t.Fatalf("decoded hello does not encode: %v", err)
	}
	if !bytes.Equal(enc, data[:r.Offset()]) {
		t.Fatalf("hello re-encodes differently:\nin  %x\nout %x", data[:r.Offset()], enc)
	}
}

func checkHelloAck(t *testing.T, data []byte) {
	r, err := NewReader(bytes.NewReader(data), fuzzLimits)
	if err != nil {
		t.Fatal(err)
	}
	var a HelloAck
	if err := r.ReadHelloAck(&a); err != nil {
		if !classified(err) {
			t.Fatalf("unclassified hello-ack error: %v", err)
		}
		return
	}
	if enc := AppendHelloAck(nil, &a); !bytes.Equal(enc, data[:r.Offset()]) {
		t.Fatalf("hello-ack re-encodes differently:\nin  %x\nout %x", data[:r.Offset()], enc)
	}
	_ = a.Err() // must not panic whatever the ack says
}

// seedCorpus returns the FuzzDecode seeds: a valid frame of every op, a
// pipelined stream, handshakes, and malformed inputs of each kind.
func seedCorpus(t *testing.T) map[string][]byte {
	seeds := map[string][]byte{}
	var stream []byte
	for _, s := range sampleFrames(fuzzLimits) {
		enc := mustEncode(t, &s.f)
		seeds["valid_"+s.name] = enc
		stream = append(stream, enc...)
	}
	seeds["valid_stream_of_every_op"] = stream
	hello, err := AppendHello(nil, &Hello{Tenant: testTenant, Token: []byte("tok")})
	if err != nil {
		t.Fatal(err)
	}
	seeds["hello"] = hello
	seeds["hello_then_get"] = AppendGet(append([]byte(nil), hello...), 1, 2)
	ack := HelloAckFor(nil, fuzzLimits)
	seeds["hello_ack"] = AppendHelloAck(nil, &ack)
	refused := HelloAckFor(fmt.Errorf("token expired: %w", kvpool.ErrUnauthorized), fuzzLimits)
	seeds["hello_ack_refused"] = AppendHelloAck(nil, &refused)

	get := AppendGet(nil, 1, 2)
	seeds["bad_length_short"] = raw(OpStats, 0, 0, nil, 3)
	seeds["bad_frame_too_large"] = raw(OpGet, 0, 0, u64(1), int64(fuzzLimits.MaxFrame)+1)
	seeds["bad_unknown_op_then_get"] = append(rawFrame(0x0f, []byte("abc")), get...)
	seeds["bad_sync_with_body_then_get"] = append(rawFrame(OpSync, u8(1)), get...)
	seeds["bad_flags"] = raw(OpGet, 0x80, 0, u64(1), -1)
	seeds["bad_get_body_long"] = rawFrame(OpGet, u64(1), u8(0))
	seeds["bad_batch_too_long"] = rawFrame(OpMGet, u32(uint32(fuzzLimits.MaxBatch+1)), bytes.Repeat(u64(9), fuzzLimits.MaxBatch+1))
	seeds["bad_count_mismatch"] = rawFrame(OpExists, u32(3), u64(1))
	seeds["bad_payload_too_large"] = rawFrame(OpPut, entry(1, 0, 0, 0, uint32(fuzzLimits.MaxPayload+1)), make([]byte, fuzzLimits.MaxPayload+1))
	seeds["bad_payload_beyond_frame"] = rawFrame(OpMGetResponse, u32(1), entry(1, 0, 0, 0, 9), []byte("short"))
	seeds["bad_failed_block_with_payload"] = rawFrame(OpGetResponse, entry(1, CodeCorrupt, 0, 0, 1), u8(1))
	seeds["bad_trailing_bytes"] = rawFrame(OpMPutResponse, u32(0), u8(1))
	seeds["bad_access_touch_with_payload"] = rawFrame(OpAccess, u32(1), u64(0), u32(0), u8(hintTouch), make([]byte, 3), entry(1, 0, 0, 0, 1), u8(1))
	seeds["bad_access_hint_flags"] = rawFrame(OpAccess, u32(1), u64(0), u32(0), u8(0x02), make([]byte, 3), entry(1, 0, 0, 0, 0))
	seeds["bad_access_count_overrun"] = rawFrame(OpAccess, u32(2), u64(0), u32(0), make([]byte, 4), entry(1, 0, 0, 0, 0))
	seeds["bad_named_empty"] = rawFrame(OpGetNamed, u16(0), u8(1))
	seeds["bad_named_too_long"] = rawFrame(OpDeleteNamed, u16(block.MaxNameLen+1), make([]byte, block.MaxNameLen+1))
	seeds["bad_named_count_overrun"] = rawFrame(OpExistsNamed, u32(2), u16(1), u8('a'))
	seeds["bad_named_wrong_id"] = rawFrame(OpPutNamed, u16(1), u8('a'), entry(1, 0, 0, 0, 0))
	seeds["bad_named_payload_eats_name"] = rawFrame(OpMPutNamed, u32(2), u16(1), u8('a'), entry(block.NameID("a"), 0, 0, 0, 9), u16(1), u8('b'), entry(block.NameID("b"), 0, 0, 0, 0))
	seeds["bad_stats_name_overrun"] = rawFrame(OpStatsResponse, u8(1), u8(255), make([]byte, 88))
	seeds["bad_error_code_ok"] = rawFrame(OpError, u16(0), u16(2), []byte("ok"))
	seeds["bad_truncated_mget_response"] = stream[:len(stream)/2]
	seeds["bad_hello_magic"] = []byte("GET / HTTP/1.1\r\n\r\n")
	seeds["bad_hello_version"] = helloBytes(Version+1, "t", nil, 0, 0)
	seeds["bad_hello_tenant"] = helloBytes(Version, "a/b", nil, 0, 0)
	seeds["bad_hello_token_too_long"] = helloBytes(Version, "t", make([]byte, fuzzLimits.MaxToken+1), 0, 0)
	return seeds
}

// TestSeedCorpus keeps testdata/fuzz/FuzzDecode in step with the encoders:
// with -update it rewrites the seed files, otherwise it checks them.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	seeds := seedCorpus(t)
	for name, b := range seeds {
		path := filepath.Join(dir, name)
		want := []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run %s)", err, regenerate)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale (run %s)", path, regenerate)
		}
	}
	// The seeds are what their names say: valid ones decode completely,
	// bad ones fail.
	for name, b := range seeds {
		r := newReader(t, b, fuzzLimits)
		var err error
		switch {
		case strings.HasPrefix(name, "hello_ack"):
			err = r.ReadHelloAck(&HelloAck{})
		case strings.HasPrefix(name, "hello"), strings.HasPrefix(name, "bad_hello"):
			err = r.ReadHello(&Hello{})
		}
		var f Frame
		for err == nil {
			err = r.ReadFrame(&f)
		}
		if valid := !strings.HasPrefix(name, "bad_"); valid != (err == io.EOF) {
			t.Errorf("seed %s: decoding ends with %v", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := seeds[e.Name()]; !ok && !strings.HasPrefix(e.Name(), "found_") {
			t.Errorf("%s: not a generated seed (keep inputs the fuzzer found as found_<name>)", e.Name())
		}
	}
}
