package frame

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/kvpool/kvpool"
)

// MaxMessageLen is the longest message of an ERROR frame or a handshake
// reply. Encoders truncate longer ones (TruncateMessage); decoders reject
// them. 1 KiB is room for a wrapped error chain, not for a data dump.
const MaxMessageLen = 1 << 10

// Code is the constraint on a protocol's status-code type: a u16 that names
// itself and knows the error it stands for (through the protocol's Table).
type Code interface {
	~uint16
	fmt.Stringer
	// Err returns the error the code stands for: nil for success, a
	// sentinel for a known code, an error wrapping ErrInternal otherwise.
	Err() error
}

// Entry is one row of a Table: a protocol's code, its name and the
// sentinel it means.
type Entry[C Code] struct {
	Code C
	Name string
	// Err is the sentinel: what a client's error unwraps to, and what a
	// server's error must wrap to be sent with Code. Nil only for OK.
	Err error
}

// Table maps one protocol's status codes to the shared error vocabulary,
// both ways. It is immutable after NewTable and safe for concurrent use.
type Table[C Code] struct {
	prefix   string
	rows     []Entry[C]
	also     []Entry[C]
	internal C
	byCode   map[C]int
}

// Shared are a protocol's numbers for the meanings every kvpool protocol
// has, for NewTable. The numbers differ between protocols (they predate
// this package and are part of the wire formats); the names and errors do
// not.
type Shared[C Code] struct {
	OK, BadRequest, UnknownOp, Unauthorized, Internal, Version, Unavailable, TooLarge C
}

// rows returns the shared rows, most specific sentinel first and bad
// request last (the decode errors mean it, and may wrap another).
func (n Shared[C]) rows() []Entry[C] {
	return []Entry[C]{
		{Code: n.OK, Name: "ok"},
		{Code: n.TooLarge, Name: "too large", Err: kvpool.ErrTooLarge},
		{Code: n.Unavailable, Name: "unavailable", Err: kvpool.ErrUnavailable},
		{Code: n.UnknownOp, Name: "unsupported op", Err: ErrUnknownOp},
		{Code: n.Unauthorized, Name: "unauthorized", Err: kvpool.ErrUnauthorized},
		{Code: n.Version, Name: "version mismatch", Err: ErrVersion},
		{Code: n.Internal, Name: "internal error", Err: ErrInternal},
		{Code: n.BadRequest, Name: "bad request", Err: ErrBadRequest},
	}
}

// NewTable returns the table of a protocol whose errors are prefixed with
// prefix ("wire"): its own rows first (checked first by CodeOf, so a row
// whose sentinel wraps a shared one wins), then the shared meanings under
// its numbers, then kvpool.ErrClosed sent as unavailable, then also
// (further errors a server sends with a row's code, in order). An error
// matching nothing is sent as the internal code.
func NewTable[C Code](prefix string, shared Shared[C], own []Entry[C], also ...Entry[C]) *Table[C] {
	rows := append(own[:len(own):len(own)], shared.rows()...)
	also = append([]Entry[C]{{Code: shared.Unavailable, Err: kvpool.ErrClosed}}, also...)
	t := &Table[C]{prefix: prefix, rows: rows, also: also, internal: shared.Internal, byCode: make(map[C]int, len(rows))}
	for i, r := range rows {
		t.byCode[r.Code] = i
	}
	return t
}

// Name names code c ("not found"), or "code(N)" for an unknown one.
func (t *Table[C]) Name(c C) string {
	if i, ok := t.byCode[c]; ok {
		return t.rows[i].Name
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Err returns the error a client reports for c: nil for success, the row's
// sentinel for a known code, an error wrapping ErrInternal otherwise.
func (t *Table[C]) Err(c C) error {
	if i, ok := t.byCode[c]; ok {
		return t.rows[i].Err
	}
	return fmt.Errorf("%s: unknown status %s: %w", t.prefix, t.Name(c), ErrInternal)
}

// CodeOf returns the code a server sends for err: the success code for nil,
// the code of a *RemoteError of the protocol (so a proxy passes codes
// through), the code of the first row (then also entry) whose sentinel err
// wraps, and the internal code otherwise.
func (t *Table[C]) CodeOf(err error) C {
	if re, ok := errors.AsType[*RemoteError[C]](err); ok {
		return re.Code
	}
	for _, rows := range [2][]Entry[C]{t.rows, t.also} {
		for _, r := range rows {
			if (err == nil) == (r.Err == nil) && (err == nil || errors.Is(err, r.Err)) {
				return r.Code
			}
		}
	}
	return t.internal
}

// RemoteError is a failure the peer reported: an ERROR frame or a refused
// handshake. It unwraps to Code.Err(), so errors.Is(err,
// kvpool.ErrUnavailable) and friends work on it.
type RemoteError[C Code] struct {
	// Code is the status the peer sent.
	Code C
	// Message is the peer's explanation (at most MaxMessageLen bytes).
	Message string
}

// Error formats the error as "<peer>: <code>: <message>", where the peer is
// named by the code type's Peer method ("master") if it has one, and is
// "remote" otherwise.
func (e *RemoteError[C]) Error() string {
	p := "remote"
	if n, ok := any(e.Code).(interface{ Peer() string }); ok {
		p = n.Peer()
	}
	if e.Message == "" {
		return p + ": " + e.Code.String()
	}
	return p + ": " + e.Code.String() + ": " + e.Message
}

// Unwrap returns e.Code.Err() (nil for success).
func (e *RemoteError[C]) Unwrap() error { return e.Code.Err() }

// TruncateMessage cuts msg to at most MaxMessageLen bytes without
// splitting a UTF-8 sequence.
func TruncateMessage(msg string) string {
	if len(msg) <= MaxMessageLen {
		return msg
	}
	n := MaxMessageLen
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n]
}
