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

var errTripped = errors.New("tripwire: read past the end of the input")

// tripwire fails the test if the decoder reads beyond the bytes it was
// given: on a connection that read would block until the deadline.
type tripwire struct{ t *testing.T }

func (w tripwire) Read([]byte) (int, error) {
	w.t.Helper()
	w.t.Error("decoder read past the end of its frame")
	return 0, errTripped
}

// raw builds a frame header with arbitrary fields followed by body; length
// is the body's true length unless lenOverride >= 0.
func raw(op Op, flags byte, reserved uint16, body []byte, lenOverride int64) []byte {
	n := uint32(HeaderLen + len(body))
	if lenOverride >= 0 {
		n = uint32(lenOverride)
	}
	b := le.AppendUint32(nil, n)
	b = append(b, byte(op), flags)
	b = le.AppendUint16(b, reserved)
	b = le.AppendUint64(b, 99)
	return append(b, body...)
}

func rawFrame(op Op, body ...[]byte) []byte { return raw(op, 0, 0, bytes.Join(body, nil), -1) }

func u8(v uint8) []byte   { return []byte{v} }
func u16(v uint16) []byte { return le.AppendUint16(nil, v) }
func u32(v uint32) []byte { return le.AppendUint32(nil, v) }
func u64(v uint64) []byte { return le.AppendUint64(nil, v) }

// entry builds a block entry header (reserved given explicitly).
func entry(id uint64, c Code, reserved uint16, sum, n uint32) []byte {
	return bytes.Join([][]byte{u64(id), u16(uint16(c)), u16(reserved), u32(sum), u32(n)}, nil)
}

// hint builds an ACCESS hint (reserved bytes given explicitly, as a u24).
func hint(parent uint64, depth uint32, flags byte, reserved uint32) []byte {
	return bytes.Join([][]byte{u64(parent), u32(depth), u8(flags), u16(uint16(reserved)), u8(byte(reserved >> 16))}, nil)
}

func TestMalformedFrames(t *testing.T) {
	const (
		recoverable = true
		fatal       = false
	)
	tier := make([]byte, tierFixedLen-1) // counters of one tier entry
	cases := []struct {
		name    string
		in      []byte
		lim     Limits // zero: smallLimits
		want    error
		recover bool
		msg     string // must appear in the error
	}{
		{"length zero", raw(OpStats, 0, 0, nil, 0), Limits{}, frame.ErrMalformed, fatal, "length 0"},
		{"length below header", raw(OpStats, 0, 0, nil, 15), Limits{}, frame.ErrMalformed, fatal, "length 15"},
		{"frame too large", raw(OpGet, 0, 0, u64(1), 4097), Limits{}, frame.ErrFrameTooLarge, fatal, "length 4097 exceeds limit 4096"},
		{"frame too large at max u32", raw(OpGet, 0, 0, u64(1), 1<<32-1), Limits{}, frame.ErrFrameTooLarge, fatal, "exceeds limit"},
		{"unknown op 0x00", rawFrame(0x00, u64(1)), Limits{}, frame.ErrUnknownOp, recoverable, "op 0x00"},
		{"unknown op 0x0f", rawFrame(0x0f, []byte("xyz")), Limits{}, frame.ErrUnknownOp, recoverable, "op 0x0f"},
		{"unknown op 0x80", rawFrame(0x80), Limits{}, frame.ErrUnknownOp, recoverable, "op 0x80"},
		{"unknown op 0x8f", rawFrame(0x8f, u64(5)), Limits{}, frame.ErrUnknownOp, recoverable, "op 0x8f"},
		{"unknown op 0xfe", rawFrame(0xfe, u64(5)), Limits{}, frame.ErrUnknownOp, recoverable, "op 0xfe"},
		{"flags set", raw(OpGet, 1, 0, u64(1), -1), Limits{}, frame.ErrMalformed, recoverable, "flags"},
		{"reserved set", raw(OpGet, 0, 0x100, u64(1), -1), Limits{}, frame.ErrMalformed, recoverable, "reserved"},
		{"GET body short", rawFrame(OpGet, []byte{1, 2, 3, 4, 5, 6, 7}), Limits{}, frame.ErrMalformed, recoverable, "body of 7 bytes, want exactly 8"},
		{"GET body long", rawFrame(OpGet, u64(1), u8(0)), Limits{}, frame.ErrMalformed, recoverable, "body of 9 bytes"},
		{"DELETE body long", rawFrame(OpDelete, u64(1), u64(2)), Limits{}, frame.ErrMalformed, recoverable, "want exactly 8"},
		{"STATS with body", rawFrame(OpStats, u8(1)), Limits{}, frame.ErrMalformed, recoverable, "want exactly 0"},
		{"SYNC with body", rawFrame(OpSync, u64(1)), Limits{}, frame.ErrMalformed, recoverable, "body of 8 bytes, want exactly 0"},
		{"SYNC response short", rawFrame(OpSyncResponse, u64(0)), Limits{}, frame.ErrMalformed, recoverable, "want exactly 12"},
		{"SYNC response reserved set", rawFrame(OpSyncResponse, u64(0), u16(0), u16(1)), Limits{}, frame.ErrMalformed, recoverable, "reserved"},
		{"PUT response short", rawFrame(OpPutResponse, u64(1), u16(0)), Limits{}, frame.ErrMalformed, recoverable, "want exactly 12"},
		{"MGET without count", rawFrame(OpMGet, u16(0)), Limits{}, frame.ErrMalformed, recoverable, "at least 4"},
		{"MGET over batch limit", rawFrame(OpMGet, u32(5), bytes.Repeat(u64(1), 5)), Limits{}, frame.ErrBatchTooLong, recoverable, "count 5 exceeds limit 4"},
		{"MGET count above body", rawFrame(OpMGet, u32(3), u64(1), u64(2)), Limits{}, frame.ErrMalformed, recoverable, "count 3"},
		{"MGET count below body", rawFrame(OpMGet, u32(1), u64(1), u64(2)), Limits{}, frame.ErrMalformed, recoverable, "count 1"},
		{"MGET huge count, huge limit", rawFrame(OpMGet, u32(1<<32-1)), Limits{MaxBatch: 1<<32 - 1, MaxPayload: 64, MaxFrame: 4096}, frame.ErrMalformed, recoverable, "count 4294967295"},
		{"EXISTS over batch limit", rawFrame(OpExists, u32(1000), bytes.Repeat(u64(1), 1000)), Limits{MaxBatch: 999, MaxPayload: 64, MaxFrame: 1 << 16}, frame.ErrBatchTooLong, recoverable, "count 1000 exceeds limit 999"},
		{"PUT body short", rawFrame(OpPut, u64(1)), Limits{}, frame.ErrMalformed, recoverable, "at least 20"},
		{"PUT payload over limit", rawFrame(OpPut, entry(1, 0, 0, 0, 65), make([]byte, 65)), Limits{}, frame.ErrPayloadTooLarge, recoverable, "65 bytes exceeds limit 64"},
		{"PUT payload beyond frame", rawFrame(OpPut, entry(1, 0, 0, 0, 10), make([]byte, 5)), Limits{}, frame.ErrMalformed, recoverable, "room for 5"},
		{"PUT payload short of frame", rawFrame(OpPut, entry(1, 0, 0, 0, 5), make([]byte, 7)), Limits{}, frame.ErrMalformed, recoverable, "2 trailing bytes"},
		{"PUT empty payload, trailing", rawFrame(OpPut, entry(1, 0, 0, 0, 0), make([]byte, 3)), Limits{}, frame.ErrMalformed, recoverable, "3 trailing bytes"},
		{"PUT with a status", rawFrame(OpPut, entry(1, CodeNotFound, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "in a request"},
		{"block reserved set", rawFrame(OpGetResponse, entry(1, 0, 7, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "reserved"},
		{"not found with payload", rawFrame(OpGetResponse, entry(1, CodeNotFound, 0, 0, 3), make([]byte, 3)), Limits{}, frame.ErrMalformed, recoverable, "must be empty"},
		{"not found with checksum", rawFrame(OpGetResponse, entry(1, CodeNotFound, 0, 5, 0)), Limits{}, frame.ErrMalformed, recoverable, "must be empty"},
		{"MPUT over batch limit", rawFrame(OpMPut, u32(5), bytes.Repeat(entry(1, 0, 0, 0, 0), 5)), Limits{}, frame.ErrBatchTooLong, recoverable, "count 5 exceeds limit 4"},
		{"MPUT count above body", rawFrame(OpMPut, u32(2), entry(1, 0, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "count 2"},
		{"MGET response payload eats next header", rawFrame(OpMGetResponse, u32(2), entry(1, 0, 0, 0, 40), make([]byte, 20), entry(2, 0, 0, 0, 0)),
			Limits{}, frame.ErrMalformed, recoverable, "payload of 40 bytes, the frame has room for 20"},
		{"MGET response empty, trailing", rawFrame(OpMGetResponse, u32(0), []byte{1, 2, 3}), Limits{}, frame.ErrMalformed, recoverable, "3 trailing bytes"},
		{"status reserved set", rawFrame(OpDeleteResponse, u64(1), u16(0), u16(1)), Limits{}, frame.ErrMalformed, recoverable, "reserved"},
		{"MPUT response count mismatch", rawFrame(OpMPutResponse, u32(2), u64(1), u32(0)), Limits{}, frame.ErrMalformed, recoverable, "count 2"},
		{"EXISTS response over batch limit", rawFrame(OpExistsResponse, u32(5), bytes.Repeat(bytes.Join([][]byte{u64(1), u32(0)}, nil), 5)), Limits{}, frame.ErrBatchTooLong, recoverable, "count 5"},
		{"STATS response without count", rawFrame(OpStatsResponse), Limits{}, frame.ErrMalformed, recoverable, "at least 1"},
		{"STATS response count above body", rawFrame(OpStatsResponse, u8(2), u8(0), tier), Limits{}, frame.ErrMalformed, recoverable, "2 tiers"},
		{"STATS response name beyond body", rawFrame(OpStatsResponse, u8(1), u8(200), tier), Limits{}, frame.ErrMalformed, recoverable, "200-byte name"},
		{"STATS response trailing", rawFrame(OpStatsResponse, u8(1), u8(0), tier, u8(9)), Limits{}, frame.ErrMalformed, recoverable, "1 trailing bytes"},
		{"ACCESS touch with payload", rawFrame(OpAccess, u32(1), hint(0, 0, hintTouch, 0), entry(1, 0, 0, 0, 2), u16(7)), Limits{}, frame.ErrMalformed, recoverable, "a touch with a 2-byte payload"},
		{"ACCESS touch with checksum", rawFrame(OpAccess, u32(1), hint(0, 0, hintTouch, 0), entry(1, 0, 0, 9, 0)), Limits{}, frame.ErrMalformed, recoverable, "checksum 00000009"},
		{"ACCESS unknown hint flag", rawFrame(OpAccess, u32(1), hint(0, 0, 0x80, 0), entry(1, 0, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "hint flags 0x80"},
		{"ACCESS hint reserved set", rawFrame(OpAccess, u32(1), hint(0, 0, 0, 1), entry(1, 0, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "hint reserved"},
		{"ACCESS with a status", rawFrame(OpAccess, u32(1), hint(0, 0, 0, 0), entry(1, CodeFull, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "in a request"},
		{"ACCESS count above body", rawFrame(OpAccess, u32(2), hint(0, 0, 0, 0), entry(1, 0, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "count 2"},
		{"ACCESS over batch limit", rawFrame(OpAccess, u32(5), bytes.Repeat(bytes.Join([][]byte{hint(0, 0, 0, 0), entry(1, 0, 0, 0, 0)}, nil), 5)), Limits{}, frame.ErrBatchTooLong, recoverable, "count 5 exceeds limit 4"},
		{"ACCESS payload eats the next hint", rawFrame(OpAccess, u32(2), hint(0, 0, 0, 0), entry(1, 0, 0, 0, 30), make([]byte, 20), hint(1, 1, 0, 0), entry(2, 0, 0, 0, 0)),
			Limits{}, frame.ErrMalformed, recoverable, "payload of 30 bytes, the frame has room for 20"},
		{"GET named body short", rawFrame(OpGetNamed, u16(1)), Limits{}, frame.ErrMalformed, recoverable, "want at least 3"},
		{"GET named empty name", rawFrame(OpGetNamed, u16(0), u8(1)), Limits{}, frame.ErrMalformed, recoverable, "name 0 is empty"},
		{"GET named name too long", rawFrame(OpGetNamed, u16(1025), make([]byte, 1025)), Limits{}, frame.ErrTooLong, recoverable, "name 0 of 1025 bytes is longer than the 1024-byte limit"},
		{"GET named name beyond body", rawFrame(OpGetNamed, u16(9), []byte("abc")), Limits{}, frame.ErrMalformed, recoverable, "name 0 of 9 bytes, the frame has 3 left"},
		{"GET named trailing", rawFrame(OpGetNamed, u16(1), []byte("ab")), Limits{}, frame.ErrMalformed, recoverable, "1 trailing bytes"},
		{"DELETE named max u16 length", rawFrame(OpDeleteNamed, u16(0xffff), u8(1)), Limits{}, frame.ErrTooLong, recoverable, "65535 bytes"},
		{"MGET named without count", rawFrame(OpMGetNamed, u16(1)), Limits{}, frame.ErrMalformed, recoverable, "at least 4"},
		{"MGET named over batch limit", rawFrame(OpMGetNamed, u32(5), bytes.Repeat(bytes.Join([][]byte{u16(1), u8('a')}, nil), 5)), Limits{}, frame.ErrBatchTooLong, recoverable, "count 5 exceeds limit 4"},
		{"MGET named count above body", rawFrame(OpMGetNamed, u32(3), u16(1), u8('a')), Limits{}, frame.ErrMalformed, recoverable, "count 3"},
		{"EXISTS named count below body", rawFrame(OpExistsNamed, u32(1), u16(1), u8('a'), u16(1), u8('b')), Limits{}, frame.ErrMalformed, recoverable, "3 trailing bytes"},
		{"EXISTS named second name empty", rawFrame(OpExistsNamed, u32(2), u16(1), u8('a'), u16(0), u8(0)), Limits{}, frame.ErrMalformed, recoverable, "name 1 is empty"},
		{"PUT named body short", rawFrame(OpPutNamed, u16(1), u8('a'), u64(1)), Limits{}, frame.ErrMalformed, recoverable, "at least 23"},
		{"PUT named name too long", rawFrame(OpPutNamed, u16(2000), make([]byte, 2000), entry(1, 0, 0, 0, 0)), Limits{}, frame.ErrTooLong, recoverable, "2000 bytes is longer than the 1024-byte limit"},
		{"PUT named wrong id", rawFrame(OpPutNamed, u16(1), u8('a'), entry(1, 0, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "but its name (1 bytes) has id"},
		{"PUT named payload over limit", rawFrame(OpPutNamed, u16(1), u8('a'), entry(block.NameID("a"), 0, 0, 0, 65), make([]byte, 65)), Limits{}, frame.ErrPayloadTooLarge, recoverable, "65 bytes exceeds limit 64"},
		{"PUT named payload beyond frame", rawFrame(OpPutNamed, u16(1), u8('a'), entry(block.NameID("a"), 0, 0, 0, 10), make([]byte, 4)), Limits{}, frame.ErrMalformed, recoverable, "room for 4"},
		{"PUT named with a status", rawFrame(OpPutNamed, u16(1), u8('a'), entry(block.NameID("a"), CodeFull, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "in a request"},
		{"MPUT named over batch limit", rawFrame(OpMPutNamed, u32(5), bytes.Repeat(bytes.Join([][]byte{u16(1), u8('a'), entry(block.NameID("a"), 0, 0, 0, 0)}, nil), 5)), Limits{}, frame.ErrBatchTooLong, recoverable, "count 5 exceeds limit 4"},
		{"MPUT named count above body", rawFrame(OpMPutNamed, u32(2), u16(1), u8('a'), entry(block.NameID("a"), 0, 0, 0, 0)), Limits{}, frame.ErrMalformed, recoverable, "count 2"},
		{"MPUT named payload eats the next name", rawFrame(OpMPutNamed, u32(2), u16(1), u8('a'), entry(block.NameID("a"), 0, 0, 0, 30), make([]byte, 20), u16(1), u8('b'), entry(block.NameID("b"), 0, 0, 0, 0)),
			Limits{}, frame.ErrMalformed, recoverable, "payload of 30 bytes, the frame has room for 20"},
		{"GET named response with a status and payload", rawFrame(OpGetNamedResponse, entry(1, CodeNotFound, 0, 0, 2), u16(0)), Limits{}, frame.ErrMalformed, recoverable, "must be empty"},
		{"MPUT named response count mismatch", rawFrame(OpMPutNamedResponse, u32(2), u64(1), u32(0)), Limits{}, frame.ErrMalformed, recoverable, "count 2"},
		{"DELETE named response short", rawFrame(OpDeleteNamedResponse, u64(1)), Limits{}, frame.ErrMalformed, recoverable, "want exactly 12"},
		{"ERROR short", rawFrame(OpError, u16(5)), Limits{}, frame.ErrMalformed, recoverable, "at least 4"},
		{"ERROR with code ok", rawFrame(OpError, u16(0), u16(0)), Limits{}, frame.ErrMalformed, recoverable, "code ok"},
		{"ERROR message too long", rawFrame(OpError, u16(8), u16(MaxMessageLen+1), make([]byte, MaxMessageLen+1)), Limits{}, frame.ErrMalformed, recoverable, "1025 bytes exceeds limit 1024"},
		{"ERROR message length lies", rawFrame(OpError, u16(8), u16(10), []byte("short")), Limits{}, frame.ErrMalformed, recoverable, "message of 10 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lim := c.lim
			if lim == (Limits{}) {
				lim = smallLimits
			}
			trailer := AppendStats(nil, 777)
			in := append(append([]byte(nil), c.in...), trailer...)
			r, err := NewReader(io.MultiReader(bytes.NewReader(in), tripwire{t}), lim)
			if err != nil {
				t.Fatal(err)
			}
			var f Frame
			err = r.ReadFrame(&f)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not say %q", err, c.msg)
			}
			if !strings.Contains(err.Error(), "at byte 0") {
				t.Errorf("error %q does not say where", err)
			}
			if CodeOf(err) == CodeOK || CodeOf(err) == CodeInternal {
				t.Errorf("CodeOf(%v) = %v, want a client-error code", err, CodeOf(err))
			}
			if !c.recover {
				if serr := r.Skip(); serr == nil || r.ReadFrame(&f) == nil {
					t.Fatalf("fatal error %v did not stick (Skip: %v)", err, serr)
				}
				return
			}
			if f.Header.ReqID != 99 {
				t.Errorf("header request id %d, want 99 (for the ERROR reply)", f.Header.ReqID)
			}
			if err := r.Skip(); err != nil {
				t.Fatalf("Skip: %v", err)
			}
			if r.Offset() != int64(len(c.in)) {
				t.Fatalf("after Skip, offset %d, want %d", r.Offset(), len(c.in))
			}
			if err := r.ReadFrame(&f); err != nil || f.Header.Op != OpStats || f.Header.ReqID != 777 {
				t.Fatalf("next frame: %+v, %v", f.Header, err)
			}
		})
	}
}

// TestTruncatedFrames cuts every sample frame at every byte offset: an empty
// stream is io.EOF, any other prefix io.ErrUnexpectedEOF, never another
// error, a panic or a read past the input.
func TestTruncatedFrames(t *testing.T) {
	r := newReader(t, nil, smallLimits)
	var f Frame
	for _, s := range sampleFrames(smallLimits) {
		enc := mustEncode(t, &s.f)
		for k := range len(enc) {
			r.Reset(bytes.NewReader(enc[:k]))
			err := r.ReadFrame(&f)
			switch {
			case k == 0 && err != io.EOF:
				t.Fatalf("%s: empty stream: %v, want io.EOF", s.name, err)
			case k > 0 && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("%s cut at %d of %d: %v, want io.ErrUnexpectedEOF", s.name, k, len(enc), err)
			}
			if err2 := r.ReadFrame(&f); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("%s cut at %d: error did not stick: %v then %v", s.name, k, err, err2)
			}
		}
		// The whole frame, followed by a tripwire, decodes without reading on.
		rr, err := NewReader(io.MultiReader(bytes.NewReader(enc), tripwire{t}), smallLimits)
		if err != nil {
			t.Fatal(err)
		}
		if err := rr.ReadFrame(&f); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}

func TestTruncatedHandshake(t *testing.T) {
	hello, err := AppendHello(nil, &Hello{Tenant: "t1", Token: []byte("tok")})
	if err != nil {
		t.Fatal(err)
	}
	ack := AppendHelloAck(nil, &HelloAck{Code: CodeUnauthorized, Message: "no"})
	for _, c := range []struct {
		name string
		enc  []byte
		read func(*Reader) error
	}{
		{"hello", hello, func(r *Reader) error { return r.ReadHello(&Hello{}) }},
		{"hello-ack", ack, func(r *Reader) error { return r.ReadHelloAck(&HelloAck{}) }},
	} {
		for k := range len(c.enc) {
			err := c.read(newReader(t, c.enc[:k], smallLimits))
			switch {
			case k == 0 && err != io.EOF:
				t.Fatalf("%s: empty stream: %v, want io.EOF", c.name, err)
			case k > 0 && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("%s cut at %d of %d: %v, want io.ErrUnexpectedEOF", c.name, k, len(c.enc), err)
			}
		}
		r, err := NewReader(io.MultiReader(bytes.NewReader(c.enc), tripwire{t}), smallLimits)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.read(r); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

func helloBytes(version uint16, tenant string, token []byte, res1 byte, res2 uint16) []byte {
	b := append([]byte(Magic), u16(version)...)
	b = append(b, byte(len(tenant)), res1)
	b = append(b, u16(uint16(len(token)))...)
	b = append(b, u16(res2)...)
	b = append(b, tenant...)
	return append(b, token...)
}

func TestMalformedHello(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want error
		msg  string
	}{
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), frame.ErrBadMagic, `magic "GET "`},
		{"frame instead of hello", AppendStats(nil, 1), frame.ErrBadMagic, "magic"},
		{"newer version", helloBytes(3, "t", nil, 0, 0), frame.ErrVersion, "version 3"},
		{"version 1 (before named ops)", helloBytes(1, "t", nil, 0, 0), frame.ErrVersion, "version 1"},
		{"version 0", helloBytes(0, "t", nil, 0, 0), frame.ErrVersion, "version 0"},
		// A future version's hello may be shorter: the version is checked
		// before reading on, so this does not wait for bytes never sent.
		{"newer version, short hello", append([]byte(Magic), u16(3)...), frame.ErrVersion, "version 3"},
		{"reserved byte", helloBytes(Version, "t", nil, 1, 0), frame.ErrMalformed, "reserved"},
		{"reserved u16", helloBytes(Version, "t", nil, 0, 1), frame.ErrMalformed, "reserved"},
		{"tenant too long", helloBytes(Version, strings.Repeat("t", 17), nil, 0, 0), frame.ErrTenantTooLong, "tenant of 17 bytes exceeds limit 16"},
		{"tenant bad byte", helloBytes(Version, "a/b", nil, 0, 0), block.ErrBadTenant, `"a/b"`},
		{"token too long", helloBytes(Version, "t", make([]byte, 9), 0, 0), frame.ErrTokenTooLong, "token of 9 bytes exceeds limit 8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(io.MultiReader(bytes.NewReader(c.in), tripwire{t}), smallLimits)
			if err != nil {
				t.Fatal(err)
			}
			var h Hello
			err = r.ReadHello(&h)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v saying %q", err, c.want, c.msg)
			}
			if errors.Is(err, frame.ErrVersion) && CodeOf(err) != CodeVersionMismatch {
				t.Errorf("CodeOf = %v, want version mismatch", CodeOf(err))
			}
			if _, err2 := r.ReadHeader(); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("hello error did not stick: %v", err2)
			}
			// The server's answer to it refuses the connection.
			ack := HelloAckFor(err, smallLimits)
			if ack.Code == CodeOK || ack.Err() == nil {
				t.Fatalf("ack for %v accepts: %+v", err, ack)
			}
		})
	}
}

func TestMalformedHelloAck(t *testing.T) {
	good := AppendHelloAck(nil, &HelloAck{Message: "hi"})
	mut := func(at int, b ...byte) []byte {
		out := append([]byte(nil), good...)
		copy(out[at:], b)
		return out
	}
	cases := []struct {
		name string
		in   []byte
		want error
		msg  string
	}{
		{"bad magic", mut(0, 'K', 'V', 'P', 'X'), frame.ErrBadMagic, "magic"},
		{"version 0", mut(4, 0, 0), frame.ErrMalformed, "version 0"},
		{"reserved", mut(10, 1), frame.ErrMalformed, "reserved"},
		{"message too long", mut(8, 0x01, 0x04), frame.ErrMalformed, "1025 bytes exceeds limit 1024"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(io.MultiReader(bytes.NewReader(c.in), tripwire{t}), smallLimits)
			if err != nil {
				t.Fatal(err)
			}
			err = r.ReadHelloAck(&HelloAck{})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v saying %q", err, c.want, c.msg)
			}
		})
	}
}

func TestHelloAckErr(t *testing.T) {
	cases := []struct {
		name string
		ack  HelloAck
		want error // nil: accepted
	}{
		{"accepted", HelloAckFor(nil, Limits{}), nil},
		{"unauthorized", HelloAckFor(kvpool.ErrUnauthorized, Limits{}), kvpool.ErrUnauthorized},
		{"bad tenant", HelloAckFor(block.ErrBadTenant, Limits{}), frame.ErrBadRequest},
		{"server speaks another version", HelloAck{Version: 1, Code: CodeVersionMismatch}, frame.ErrVersion},
		{"server accepted another version", HelloAck{Version: 1}, frame.ErrVersion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Through the wire, as a client sees it.
			var a HelloAck
			if err := newReader(t, AppendHelloAck(nil, &c.ack), Limits{}).ReadHelloAck(&a); err != nil {
				t.Fatal(err)
			}
			err := a.Err()
			if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("Err() = %v, want %v", err, c.want)
			}
			if c.ack.Code == CodeVersionMismatch && !strings.Contains(err.Error(), "server speaks protocol version 1, client 2") {
				t.Errorf("version error %q does not name both versions", err)
			}
		})
	}
	a := HelloAckFor(nil, Limits{MaxBatch: 100})
	if a.MaxBatch != 100 || a.MaxFrame != DefaultMaxFrame || a.MaxPayload != DefaultMaxPayload {
		t.Errorf("accepting ack carries %+v, want the server's limits", a)
	}
}

// TestReaderMisuse: calling the streaming methods out of order is an error,
// never a panic, and does not disturb the stream.
func TestReaderMisuse(t *testing.T) {
	mput, err := AppendMPut(nil, 1, blocks(2, 10))
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, append(mput, AppendStats(nil, 2)...), smallLimits)
	misuse := func(step string, err error) {
		t.Helper()
		if !errors.Is(err, errMisuse) {
			t.Fatalf("%s: %v, want a misuse error", step, err)
		}
	}
	_, err = r.NextBlock()
	misuse("NextBlock before a frame", err)
	_, err = r.ReadPayload(nil)
	misuse("ReadPayload before a frame", err)
	if _, err := r.ReadHeader(); err != nil {
		t.Fatal(err)
	}
	_, err = r.ReadIDs(nil)
	misuse("ReadIDs on MPUT", err)
	_, err = r.ReadStatuses(nil)
	misuse("ReadStatuses on MPUT", err)
	misuse("ReadError on MPUT", r.ReadError(&RemoteError{}))
	_, err = r.ReadStats(nil)
	misuse("ReadStats on MPUT", err)
	_, err = r.NextBlock()
	misuse("NextBlock before BeginBlocks", err)
	_, err = r.ReadHeader()
	misuse("ReadHeader with a body unread", err)
	misuse("ReadHello mid-stream", r.ReadHello(&Hello{}))
	if n, err := r.BeginBlocks(); n != 2 || err != nil {
		t.Fatalf("BeginBlocks: %d, %v", n, err)
	}
	if _, err := r.NextBlock(); err != nil {
		t.Fatal(err)
	}
	_, err = r.NextBlock()
	misuse("NextBlock with a payload unread", err)
	if err := r.SkipPayload(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.NextBlock(); err != nil {
		t.Fatal(err)
	}
	if p, err := r.ReadPayload(nil); err != nil || len(p) != 10 {
		t.Fatalf("payload: %d bytes, %v", len(p), err)
	}
	_, err = r.NextBlock()
	misuse("NextBlock past the last block", err)
	var f Frame
	if err := r.ReadFrame(&f); err != nil || f.Header.Op != OpStats {
		t.Fatalf("stream disturbed: %v %v", f.Header.Op, err)
	}
}

func TestEncodeErrors(t *testing.T) {
	prefix := []byte("keep")
	long := strings.Repeat("x", 256)
	cases := []struct {
		name string
		enc  func(dst []byte) ([]byte, error)
		want error
	}{
		{"hello tenant too long", func(d []byte) ([]byte, error) {
			return AppendHello(d, &Hello{Tenant: strings.Repeat("t", block.MaxTenantLen+1)})
		}, block.ErrBadTenant},
		{"hello tenant bad byte", func(d []byte) ([]byte, error) { return AppendHello(d, &Hello{Tenant: "a b"}) }, block.ErrBadTenant},
		{"hello token too long", func(d []byte) ([]byte, error) {
			return AppendHello(d, &Hello{Token: make([]byte, MaxTokenLen+1)})
		}, frame.ErrTokenTooLong},
		{"flags", func(d []byte) ([]byte, error) {
			return AppendFrame(d, &Frame{Header: Header{Op: OpStats, Flags: 2}})
		}, frame.ErrMalformed},
		{"GET without ID", func(d []byte) ([]byte, error) { return AppendFrame(d, &Frame{Header: Header{Op: OpGet}}) }, frame.ErrMalformed},
		{"PUT with two blocks", func(d []byte) ([]byte, error) {
			return AppendFrame(d, &Frame{Header: Header{Op: OpPut}, Blocks: blocks(2, 1)})
		}, frame.ErrMalformed},
		{"DELETE response without status", func(d []byte) ([]byte, error) {
			return AppendFrame(d, &Frame{Header: Header{Op: OpDeleteResponse}})
		}, frame.ErrMalformed},
		{"unknown op", func(d []byte) ([]byte, error) { return AppendFrame(d, &Frame{Header: Header{Op: 0x42}}) }, frame.ErrUnknownOp},
		{"ERROR with code ok", func(d []byte) ([]byte, error) { return AppendFrame(d, &Frame{Header: Header{Op: OpError}}) }, frame.ErrMalformed},
		{"ERROR message too long", func(d []byte) ([]byte, error) {
			return AppendFrame(d, &Frame{Header: Header{Op: OpError}, Code: CodeInternal, Message: strings.Repeat("m", MaxMessageLen+1)})
		}, frame.ErrMalformed},
		{"PUT with a status", func(d []byte) ([]byte, error) { return AppendPut(d, 1, Block{ID: 1, Code: CodeFull}) }, frame.ErrMalformed},
		{"not found with payload", func(d []byte) ([]byte, error) {
			return AppendGetResponse(d, 1, Block{ID: 1, Code: CodeNotFound, Payload: []byte{1}})
		}, frame.ErrMalformed},
		{"not found with checksum", func(d []byte) ([]byte, error) {
			return AppendMGetResponse(d, 1, []Block{{ID: 1, Code: CodeNotFound, Checksum: 1}})
		}, frame.ErrMalformed},
		{"too many tiers", func(d []byte) ([]byte, error) { return AppendStatsResponse(d, 1, make([]TierStats, 256)) }, frame.ErrMalformed},
		{"tier name too long", func(d []byte) ([]byte, error) {
			return AppendStatsResponse(d, 1, []TierStats{{Name: long}})
		}, frame.ErrMalformed},
		{"head of a non-block op", func(d []byte) ([]byte, error) { return AppendBlockFrameHead(d, OpGet, 1, 1, 0) }, frame.ErrUnknownOp},
		{"head of GET response with 2 blocks", func(d []byte) ([]byte, error) {
			return AppendBlockFrameHead(d, OpGetResponse, 1, 2, 0)
		}, frame.ErrMalformed},
		{"head with negative count", func(d []byte) ([]byte, error) { return AppendBlockFrameHead(d, OpMPut, 1, -1, 0) }, frame.ErrMalformed},
		{"head beyond u32 length", func(d []byte) ([]byte, error) {
			return AppendBlockFrameHead(d, OpMGetResponse, 1, 2, MaxFrameLen-50)
		}, frame.ErrFrameTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.enc(prefix)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if !bytes.Equal(out, prefix) {
				t.Fatalf("dst changed to %q on error", out)
			}
		})
	}
}

func TestAppendError(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		wantCode Code
		wantMsg  string
	}{
		{"nil", nil, CodeInternal, "wire: ERROR frame for a nil error"},
		{"unknown op", frame.ErrUnknownOp, CodeUnsupportedOp, "unknown or unsupported op"},
		{"remote passes through", &RemoteError{Code: CodeFull, Message: "upstream full"}, CodeFull, "upstream full"},
		{"remote ok is not ok", &RemoteError{Code: CodeOK}, CodeInternal, ""},
		// 1023 ASCII bytes then a 2-byte rune straddling the limit: cut before it.
		{"truncated at a rune", errors.New(strings.Repeat("a", MaxMessageLen-1) + "é" + "tail"), CodeInternal, strings.Repeat("a", MaxMessageLen-1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f Frame
			if err := newReader(t, AppendError(nil, 5, c.err), Limits{}).ReadFrame(&f); err != nil {
				t.Fatal(err)
			}
			if f.Code != c.wantCode || f.Message != c.wantMsg || f.Header.ReqID != 5 {
				t.Fatalf("got %v %q (request %d), want %v %q", f.Code, f.Message, f.Header.ReqID, c.wantCode, c.wantMsg)
			}
		})
	}
}
