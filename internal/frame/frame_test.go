package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
)

// op is a protocol's op type for the tests.
type op uint8

func (o op) String() string { return fmt.Sprintf("op(0x%02x)", uint8(o)) }

// code is a protocol's code type for the tests.
type code uint16

var table = NewTable("test",
	Shared[code]{OK: 0, Internal: 2, BadRequest: 3, UnknownOp: 4, Unauthorized: 5, Version: 6, Unavailable: 7, TooLarge: 8},
	[]Entry[code]{{Code: 1, Name: "not found", Err: kvpool.ErrNotFound}},
	Entry[code]{Code: 1, Err: io.EOF})

func (c code) String() string { return table.Name(c) }
func (c code) Err() error     { return table.Err(c) }

func TestHeaderRoundTrip(t *testing.T) {
	h := Header[op]{Len: 40, Op: 0x85, Flags: 1, Reserved: 2, ReqID: 1 << 60}
	b := AppendHeader(nil, h)
	if len(b) != HeaderLen {
		t.Fatalf("%d header bytes, want %d", len(b), HeaderLen)
	}
	if got := ParseHeader[op](b); got != h || got.BodyLen() != 24 {
		t.Fatalf("ParseHeader = %+v (body %d), want %+v", got, got.BodyLen(), h)
	}
	dst, start := Begin([]byte("xx"), op(3), 9)
	dst = append(dst, "body"...)
	dst, err := Finish(dst, start, "test", op(3))
	if err != nil || ParseHeader[op](dst[start:]).Len != HeaderLen+4 {
		t.Fatalf("Finish: %v, header %+v", err, ParseHeader[op](dst[start:]))
	}
}

func TestTable(t *testing.T) {
	cases := []struct {
		err  error
		want code
	}{
		{nil, 0},
		{fmt.Errorf("x: %w", kvpool.ErrNotFound), 1},
		{io.EOF, 1}, // an also entry
		{ErrMalformed, 3},
		{ErrTooLong, 3},
		{errors.New("other"), 2},
		{fmt.Errorf("x: %w", kvpool.ErrClosed), 7},
		{ErrFrameTooLarge, 8},
	}
	for _, c := range cases {
		if got := table.CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if err := table.Err(77); !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "test: unknown status code(77)") {
		t.Errorf("Err(77) = %v", err)
	}
	re := &RemoteError[code]{Code: 1, Message: "blk 9"}
	if re.Error() != "remote: not found: blk 9" || !errors.Is(re, kvpool.ErrNotFound) {
		t.Errorf("RemoteError: %v", re)
	}
	if err := HelloErr(code(3), 0, 2, 1, 1, "no", "test: hello"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("refused hello: %v", err)
	}
	if err := HelloErr(code(0), 0, 2, 2, 1, "", "test: hello"); !errors.Is(err, ErrVersion) {
		t.Errorf("accepted in another version: %v", err)
	}
	if err := HelloErr(code(0), 0, 2, 1, 1, "", "test: hello"); err != nil {
		t.Errorf("accepted: %v", err)
	}
}

func TestSentinelsMean(t *testing.T) {
	for _, err := range []error{ErrMalformed, ErrBadMagic, ErrBatchTooLong, ErrTooLong, ErrTenantTooLong, ErrTokenTooLong} {
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%v is not a bad request", err)
		}
	}
	for _, err := range []error{ErrFrameTooLarge, ErrPayloadTooLarge} {
		if !errors.Is(err, kvpool.ErrTooLarge) || errors.Is(err, ErrBadRequest) {
			t.Errorf("%v should mean too large only", err)
		}
	}
}

func TestReader(t *testing.T) {
	good := AppendHeader(nil, Header[op]{Len: HeaderLen + 3, Op: 1, ReqID: 5})
	good = append(good, "abc"...)
	cases := []struct {
		name string
		in   []byte
		want error // of the first ReadHeader
	}{
		{"empty", nil, io.EOF},
		{"short header", good[:7], io.ErrUnexpectedEOF},
		{"below header", AppendHeader(nil, Header[op]{Len: 3}), ErrMalformed},
		{"too large", AppendHeader(nil, Header[op]{Len: 1 << 20}), ErrFrameTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewReader[op](bytes.NewReader(c.in), "test")
			_, err := r.ReadHeader(1 << 10)
			if !errors.Is(err, c.want) {
				t.Fatalf("ReadHeader: %v, want %v", err, c.want)
			}
			if _, again := r.ReadHeader(1 << 10); again != err || r.Err() != err {
				t.Fatalf("error not sticky: %v then %v", err, again)
			}
		})
	}
	r := NewReader[op](bytes.NewReader(append(good, good[:HeaderLen+1]...)), "test")
	h, err := r.ReadHeader(1 << 10)
	if err != nil || h.ReqID != 5 {
		t.Fatal(h, err)
	}
	body, err := r.AppendFull(nil, h.BodyLen(), h.BodyLen())
	if err != nil || string(body) != "abc" || r.Offset() != int64(len(good)) {
		t.Fatalf("body %q, %v, offset %d", body, err, r.Offset())
	}
	if h, err = r.ReadHeader(1 << 10); err != nil {
		t.Fatal(err)
	}
	if err := r.Discard(h.BodyLen()); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Discard past the end: %v", err)
	}
	r.Reset(bytes.NewReader([]byte("KVPX")))
	if err := r.ReadMagic(make([]byte, MagicLen), "KVPL"); !errors.Is(err, ErrBadMagic) || !strings.Contains(err.Error(), `magic "KVPX", want "KVPL"`) {
		t.Fatalf("ReadMagic: %v", err)
	}
}

// TestAppendFullGrows: memory follows the bytes received, not the length
// announced.
func TestAppendFullGrows(t *testing.T) {
	r := NewReader[op](bytes.NewReader(make([]byte, 100)), "test")
	got, err := r.AppendFull(nil, 64<<20, 64<<20)
	if !errors.Is(err, io.ErrUnexpectedEOF) || cap(got) > GrowChunk {
		t.Fatalf("AppendFull of a stalled 64 MiB: cap %d, %v", cap(got), err)
	}
}

func TestTruncateMessage(t *testing.T) {
	long := strings.Repeat("a", MaxMessageLen-1) + "é"
	if got := TruncateMessage(long); got != strings.Repeat("a", MaxMessageLen-1) {
		t.Fatalf("cut inside a rune: %d bytes", len(got))
	}
	if got := TruncateMessage("short"); got != "short" {
		t.Fatal(got)
	}
}

func TestResolveLimits(t *testing.T) {
	a, b := 0, 5
	if err := ResolveLimits("test", Limit{"A", &a, 7, 10}, Limit{"B", &b, 1, 10}); err != nil || a != 7 || b != 5 {
		t.Fatalf("%v: a %d b %d", err, a, b)
	}
	b = 11
	if err := ResolveLimits("test", Limit{"B", &b, 1, 10}); err == nil || !strings.Contains(err.Error(), "test: Limits.B is 11") {
		t.Fatalf("over the max: %v", err)
	}
	b = -1
	if err := ResolveLimits("test", Limit{"B", &b, 1, 10}); err == nil {
		t.Fatal("negative accepted")
	}
}
