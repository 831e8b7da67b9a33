package wire

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/tier"
)

func TestCodesBothWays(t *testing.T) {
	cases := []struct {
		code Code
		err  error
		name string
	}{
		{CodeOK, nil, "ok"},
		{CodeNotFound, kvpool.ErrNotFound, "not found"},
		{CodeCorrupt, kvpool.ErrCorrupt, "corrupt"},
		{CodeTooLarge, kvpool.ErrTooLarge, "too large"},
		{CodeFull, kvpool.ErrFull, "full"},
		{CodeBadRequest, frame.ErrBadRequest, "bad request"},
		{CodeUnsupportedOp, frame.ErrUnknownOp, "unsupported op"},
		{CodeUnauthorized, kvpool.ErrUnauthorized, "unauthorized"},
		{CodeInternal, frame.ErrInternal, "internal error"},
		{CodeVersionMismatch, frame.ErrVersion, "version mismatch"},
		{CodeUnavailable, kvpool.ErrUnavailable, "unavailable"},
		{CodeQuota, kvpool.ErrQuota, "quota exceeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ErrorFor(c.code); got != c.err {
				t.Errorf("ErrorFor(%d) = %v, want %v", c.code, got, c.err)
			}
			if got := CodeOf(c.err); got != c.code {
				t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.code)
			}
			if c.err != nil {
				wrapped := fmt.Errorf("ram: get blk 7f3a: %w", c.err)
				if got := CodeOf(wrapped); got != c.code {
					t.Errorf("CodeOf(wrapped) = %v, want %v", got, c.code)
				}
				// What a client sees after the code crossed the wire.
				re := &RemoteError{Code: CodeOf(wrapped), Message: wrapped.Error()}
				if !errors.Is(re, c.err) || CodeOf(re) != c.code {
					t.Errorf("remote error %v does not match %v", re, c.err)
				}
			}
			if c.code.String() != c.name {
				t.Errorf("String() = %q, want %q", c.code.String(), c.name)
			}
		})
	}
}

func TestCodeOfOtherErrors(t *testing.T) {
	cases := []struct {
		err  error
		want Code
	}{
		{frame.ErrMalformed, CodeBadRequest},
		{frame.ErrBadMagic, CodeBadRequest},
		{frame.ErrBatchTooLong, CodeBadRequest},
		{frame.ErrTenantTooLong, CodeBadRequest},
		{frame.ErrTokenTooLong, CodeBadRequest},
		{fmt.Errorf("x: %w", block.ErrBadTenant), CodeBadRequest},
		{fmt.Errorf("ram: %w", kvpool.ErrClosed), CodeUnavailable},
		{frame.ErrFrameTooLarge, CodeTooLarge},
		{frame.ErrPayloadTooLarge, CodeTooLarge},
		{io.ErrUnexpectedEOF, CodeInternal},
		{errors.New("disk on fire"), CodeInternal},
		{fmt.Errorf("proxy: %w", &RemoteError{Code: 77}), 77},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	err := ErrorFor(999)
	if !errors.Is(err, frame.ErrInternal) || !strings.Contains(err.Error(), "code(999)") {
		t.Errorf("ErrorFor(999) = %v, want an internal error naming code(999)", err)
	}
	re := &RemoteError{Code: CodeNotFound, Message: "blk 42"}
	if re.Error() != "remote: not found: blk 42" {
		t.Errorf("RemoteError.Error() = %q", re.Error())
	}
}

func TestLimitsValidate(t *testing.T) {
	cases := []struct {
		name string
		lim  Limits
		want string // "" means valid
	}{
		{"zero means defaults", Limits{}, ""},
		{"custom", smallLimits, ""},
		{"negative frame", Limits{MaxFrame: -1}, "Limits.MaxFrame is -1"},
		{"negative batch", Limits{MaxBatch: -1}, "Limits.MaxBatch is -1"},
		{"negative payload", Limits{MaxPayload: -5}, "Limits.MaxPayload is -5"},
		{"negative tenant", Limits{MaxTenant: -1}, "Limits.MaxTenant is -1"},
		{"negative token", Limits{MaxToken: -1}, "Limits.MaxToken is -1"},
		{"tenant beyond block limit", Limits{MaxTenant: block.MaxTenantLen + 1}, "Limits.MaxTenant is 65"},
		{"token beyond u16", Limits{MaxToken: MaxTokenLen + 1}, "Limits.MaxToken is 65536"},
		{"frame beyond u32", Limits{MaxFrame: 1 << 32}, "Limits.MaxFrame is 4294967296"},
		{"payload does not fit frame", Limits{MaxFrame: 1000, MaxPayload: 965}, "Limits.MaxPayload is 965"},
		{"default payload does not fit small frame", Limits{MaxFrame: 1 << 20}, "Limits.MaxPayload is 67108864"},
		{"payload just fits", Limits{MaxFrame: 1000, MaxPayload: 964}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.lim.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if _, err := NewReader(nil, c.lim); err != nil {
					t.Fatalf("NewReader: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want an error saying %q", err, c.want)
			}
			if _, err := NewReader(nil, c.lim); err == nil {
				t.Fatal("NewReader accepted invalid limits")
			}
		})
	}
	r, err := NewReader(nil, Limits{MaxBatch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Limits(), (Limits{DefaultMaxFrame, 7, DefaultMaxPayload, block.MaxTenantLen, DefaultMaxToken}); got != want {
		t.Errorf("Limits() = %+v, want %+v", got, want)
	}
}

// TestStatsLayoutMatchesTierStats fails when tier.Stats gains or loses a
// field: the STATS response encodes 12 counters in declaration order, and a
// change needs a new protocol version (Version 2 added HeldBytes).
func TestStatsLayoutMatchesTierStats(t *testing.T) {
	want := []string{"Blocks", "Bytes", "HeldBytes", "CapacityBytes", "Hits", "Misses", "BytesIn", "BytesOut",
		"EvictAttempts", "Evicted", "Corruptions", "IOErrors"}
	typ := reflect.TypeFor[tier.Stats]()
	var got []string
	for i := range typ.NumField() {
		got = append(got, typ.Field(i).Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tier.Stats fields %v; the STATS encoding has %v", got, want)
	}
	if tierFixedLen != 1+8*len(want) {
		t.Fatalf("tierFixedLen %d, want %d", tierFixedLen, 1+8*len(want))
	}
}

func TestOpNames(t *testing.T) {
	for op, want := range map[Op]string{OpGet: "GET", OpMGetResponse: "MGET response", OpError: "ERROR", OpSync: "SYNC", OpSyncResponse: "SYNC response", 0x0f: "op(0x0f)", 0x8f: "op(0x8f)", OpGetNamed: "GET named", OpMPutNamedResponse: "MPUT named response"} {
		if op.String() != want {
			t.Errorf("%#x.String() = %q, want %q", uint8(op), op.String(), want)
		}
	}
	for op := range 256 {
		o := Op(op)
		if o.IsRequest() && (o.Response().shape() == shapeUnknown || o.Response()&^responseBit != o) {
			t.Errorf("%v: response %v", o, o.Response())
		}
	}
	if OpGetResponse.Response() != OpError || Op(0x42).Response() != OpError {
		t.Error("non-requests must be answered with ERROR")
	}
}

// TestLimitsFor: a node's limits derived from its max object size accept
// a named PUT of the largest object under the longest name, up to
// MaxObjectSize (512 MiB), within the u32 frame length.
func TestLimitsFor(t *testing.T) {
	for _, max := range []int{1, 4096, DefaultMaxPayload, MaxObjectSize} {
		lim, err := LimitsFor(max).Resolve()
		if err != nil {
			t.Fatalf("LimitsFor(%d): %v", max, err)
		}
		if lim.MaxPayload != max {
			t.Errorf("LimitsFor(%d).MaxPayload = %d", max, lim.MaxPayload)
		}
		name := strings.Repeat("n", block.MaxNameLen)
		if need := HeaderLen + countLen + NamedBlocksLen(1, uint64(len(name))) + uint64(max); need > uint64(lim.MaxFrame) {
			t.Errorf("LimitsFor(%d): an MPUT named of one max object needs %d bytes, MaxFrame is %d", max, need, lim.MaxFrame)
		}
		if _, err := AppendNamedBlockFrameHead(nil, OpPutNamed, 1, 1, uint64(len(name)), uint64(max)); err != nil {
			t.Errorf("LimitsFor(%d): head of the largest PUT named: %v", max, err)
		}
	}
	if d := DefaultLimits(); LimitsFor(DefaultMaxPayload).MaxFrame != d.MaxFrame {
		t.Errorf("LimitsFor(DefaultMaxPayload).MaxFrame = %d, DefaultLimits().MaxFrame = %d", LimitsFor(DefaultMaxPayload).MaxFrame, d.MaxFrame)
	}
}
