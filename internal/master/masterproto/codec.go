package masterproto

import (
	"fmt"
	"math"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// begin appends a frame header with a placeholder length and returns the
// offset of the frame's start.
func begin(dst []byte, op Op, reqID uint64) ([]byte, int) { return frame.Begin(dst, op, reqID) }

// finish patches the frame's length. On error it returns dst cut back to
// start.
func finish(dst []byte, start int, op Op) ([]byte, error) {
	return frame.Finish(dst, start, "masterproto", op)
}

// encodeError cuts dst back to start and wraps err with the op.
func encodeError(dst []byte, start int, op Op, err error) ([]byte, error) {
	return dst[:start], fmt.Errorf("masterproto: encode %v: %w", op, err)
}

func appendStr8(dst []byte, s string) []byte {
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// unixNano encodes t as unix nanoseconds, the zero time as 0.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano decodes unixNano's encoding.
func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// checkNodeID reports a node ID the protocol cannot carry.
func checkNodeID(what, id string) error {
	if len(id) > MaxNodeIDLen {
		return fmt.Errorf("%s: node ID of %d bytes, limit %d: %w", what, len(id), MaxNodeIDLen, frame.ErrTooLong)
	}
	return nil
}

func checkAddr(node, addr string) error {
	if len(addr) > MaxAddrLen {
		return fmt.Errorf("node %q: address of %d bytes, limit %d: %w", node, len(addr), MaxAddrLen, frame.ErrTooLong)
	}
	return nil
}

func checkTenant(what, tenant string) error {
	if err := (block.Key{Tenant: tenant}).Validate(); err != nil {
		return fmt.Errorf("%s: tenant %q: %w", what, tenant, err)
	}
	return nil
}

// checkName reports a named key whose name the protocol cannot carry
// (over block.MaxNameLen bytes; an empty name is a chain key).
func checkName(what string, k block.Key) error {
	if len(k.Name) > block.MaxNameLen {
		return fmt.Errorf("%s: key %v: name of %d bytes, limit %d: %w", what, k, len(k.Name), block.MaxNameLen, frame.ErrTooLong)
	}
	return nil
}

// appendName appends the name of a named key (u16 length, bytes), nothing
// for a chain key.
func appendName(dst []byte, k block.Key) []byte {
	if k.Name == "" {
		return dst
	}
	dst = le.AppendUint16(dst, uint16(len(k.Name)))
	return append(dst, k.Name...)
}

// name reads the name of a named key (named false: a chain key, "").
// Names are 1 to block.MaxNameLen bytes.
func (d *dec) name(named bool) string {
	if !named || d.err != nil {
		return ""
	}
	n := int(d.u16("name length"))
	switch {
	case d.err != nil:
		return ""
	case n == 0:
		d.fail(frame.ErrMalformed, "empty name (a chain key carries none)")
		return ""
	case n > block.MaxNameLen:
		d.fail(frame.ErrTooLong, "name of %d bytes, limit %d", n, block.MaxNameLen)
		return ""
	case !d.need(n, "name"):
		return ""
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s
}

func checkCount(what string, n, limit int) error {
	if n > limit {
		return fmt.Errorf("%s: %d entries, limit %d: %w", what, n, limit, frame.ErrBatchTooLong)
	}
	return nil
}

// dec reads a frame body. The first error sticks: later reads return zero
// values, and err says what went wrong first and where.
type dec struct {
	b   []byte
	off int
	op  Op
	lim Limits
	err error
}

func (d *dec) fail(sentinel error, format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("masterproto: %v body at byte %d: %s: %w", d.op, d.off, fmt.Sprintf(format, a...), sentinel)
	}
}

func (d *dec) need(n int, what string) bool {
	if d.err != nil {
		return false
	}
	if n > len(d.b)-d.off {
		d.fail(frame.ErrMalformed, "%s needs %d bytes, %d left", what, n, len(d.b)-d.off)
		return false
	}
	return true
}

func (d *dec) u8(what string) uint8 {
	if !d.need(1, what) {
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *dec) u16(what string) uint16 {
	if !d.need(2, what) {
		return 0
	}
	v := le.Uint16(d.b[d.off:])
	d.off += 2
	return v
}

func (d *dec) u32(what string) uint32 {
	if !d.need(4, what) {
		return 0
	}
	v := le.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *dec) u64(what string) uint64 {
	if !d.need(8, what) {
		return 0
	}
	v := le.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// i64 reads a non-negative int64.
func (d *dec) nonNeg(what string) int64 {
	v := d.u64(what)
	if v > math.MaxInt64 {
		d.fail(frame.ErrMalformed, "%s is %d, above the int64 range", what, v)
		return 0
	}
	return int64(v)
}

// signed reads an int64 (two's complement).
func (d *dec) signed(what string) int64 { return int64(d.u64(what)) }

func (d *dec) bool(what string) bool {
	switch v := d.u8(what); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(frame.ErrMalformed, "%s is %d, want 0 or 1", what, v)
		return false
	}
}

func (d *dec) zero8(what string) {
	if v := d.u8(what); v != 0 {
		d.fail(frame.ErrMalformed, "reserved %s is %d, want 0", what, v)
	}
}

func (d *dec) zero16(what string) {
	if v := d.u16(what); v != 0 {
		d.fail(frame.ErrMalformed, "reserved %s is %d, want 0", what, v)
	}
}

// bytes8 returns a u8-length-prefixed byte string (aliasing the body) of at
// most max bytes.
func (d *dec) bytes8(what string, max int) []byte {
	n := int(d.u8(what))
	if d.err != nil {
		return nil
	}
	if n > max {
		d.fail(frame.ErrTooLong, "%s of %d bytes, limit %d", what, n, max)
		return nil
	}
	if !d.need(n, what) {
		return nil
	}
	v := d.b[d.off : d.off+n]
	d.off += n
	return v
}

// str8 returns a u8-length-prefixed string of at most max bytes.
func (d *dec) str8(what string, max int) string { return string(d.bytes8(what, max)) }

// tenant reads a tenant name and validates it.
func (d *dec) tenant(what string) string {
	b := d.bytes8(what, block.MaxTenantLen)
	if d.err != nil {
		return ""
	}
	s := string(b)
	if err := (block.Key{Tenant: s}).Validate(); err != nil {
		d.fail(frame.ErrMalformed, "%s %q: %v", what, s, err)
		return ""
	}
	return s
}

// count reads a u32 count of entries of at least minSize bytes each and
// checks it against limit and the bytes left, before anything is
// allocated for them.
func (d *dec) count(what string, limit, minSize int) int {
	n := d.u32(what)
	if d.err != nil {
		return 0
	}
	if uint64(n) > uint64(limit) {
		d.fail(frame.ErrBatchTooLong, "%s count %d, limit %d", what, n, limit)
		return 0
	}
	if uint64(n)*uint64(minSize) > uint64(len(d.b)-d.off) {
		d.fail(frame.ErrMalformed, "%s count %d needs at least %d bytes, %d left", what, n, uint64(n)*uint64(minSize), len(d.b)-d.off)
		return 0
	}
	return int(n)
}

// count16 is count with a u16 count field.
func (d *dec) count16(what string, minSize int) int {
	n := int(d.u16(what))
	if d.err != nil {
		return 0
	}
	if n*minSize > len(d.b)-d.off {
		d.fail(frame.ErrMalformed, "%s count %d needs at least %d bytes, %d left", what, n, n*minSize, len(d.b)-d.off)
		return 0
	}
	return n
}

// end checks that the body was consumed exactly and returns the first
// error.
func (d *dec) end() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail(frame.ErrMalformed, "%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}

// refs checks references into a table: every index is below the table's
// length, new entries are referenced in table order (index == next), and
// at the end every entry was referenced. Together with distinct entries
// this makes the table's encoding unique.
type refs struct {
	n, next int
}

func (r *refs) use(d *dec, what string, idx int) int {
	if d.err != nil {
		return 0
	}
	switch {
	case idx >= r.n:
		d.fail(frame.ErrMalformed, "%s index %d, table has %d entries", what, idx, r.n)
		return 0
	case idx > r.next:
		d.fail(frame.ErrMalformed, "%s index %d referenced before %d (tables list entries in order of first use)", what, idx, r.next)
		return 0
	case idx == r.next:
		r.next++
	}
	return idx
}

func (r *refs) done(d *dec, what string) {
	if d.err == nil && r.next != r.n {
		d.fail(frame.ErrMalformed, "%s table has %d entries, only %d referenced", what, r.n, r.next)
	}
}

// tenantTable is a decoded tenant table.
func (d *dec) tenantTable() ([]string, refs) {
	n := d.count16("tenant table", 1)
	if d.err != nil {
		return nil, refs{}
	}
	out := make([]string, 0, n)
	var seen map[string]struct{}
	if n > 8 {
		seen = make(map[string]struct{}, n)
	}
	for i := range n {
		s := d.tenant("tenant")
		if d.err != nil {
			return nil, refs{}
		}
		dup := false
		if seen != nil {
			_, dup = seen[s]
			seen[s] = struct{}{}
		} else {
			for _, t := range out {
				dup = dup || t == s
			}
		}
		if dup {
			d.fail(frame.ErrMalformed, "tenant table entry %d %q listed twice", i, s)
			return nil, refs{}
		}
		out = append(out, s)
	}
	return out, refs{n: n}
}

// tenantEnc assigns tenant table indexes in order of first use.
type tenantEnc struct {
	names []string
	idx   map[string]uint16
	err   error
}

func (t *tenantEnc) add(what string, k block.Key) {
	if t.err != nil {
		return
	}
	if err := checkName(what, k); err != nil {
		t.err = err
		return
	}
	tenant := k.Tenant
	if t.idx == nil {
		t.idx = make(map[string]uint16)
	}
	if _, ok := t.idx[tenant]; ok {
		return
	}
	if err := checkTenant(what, tenant); err != nil {
		t.err = err
		return
	}
	if len(t.names) == MaxTenants {
		t.err = fmt.Errorf("%s: more than %d tenants in one frame: %w", what, MaxTenants, frame.ErrBatchTooLong)
		return
	}
	t.idx[tenant] = uint16(len(t.names))
	t.names = append(t.names, tenant)
}

// ref returns the tenant reference of k: its tenant's index, with
// namedRef set when k is named.
func (t *tenantEnc) ref(k block.Key) uint16 {
	r := t.idx[k.Tenant]
	if k.Name != "" {
		r |= namedRef
	}
	return r
}

func (t *tenantEnc) appendTable(dst []byte) []byte {
	dst = le.AppendUint16(dst, uint16(len(t.names)))
	for _, s := range t.names {
		dst = appendStr8(dst, s)
	}
	return dst
}

// nameLen is the bytes the name of k takes in an entry: none for a chain
// key, a 2-byte length and the name for a named one.
func nameLen(k block.Key) int {
	if k.Name == "" {
		return 0
	}
	return 2 + len(k.Name)
}

// ItemLen is the bytes an inventory or delta.Added entry of k takes in a
// REGISTER or HEARTBEAT frame (the tenant table aside): what a node
// splitting a large inventory across frames counts.
func ItemLen(k block.Key) int { return itemLen + nameLen(k) }

// HitLen is the bytes an SSD-hit entry of k takes in a HEARTBEAT frame
// (the tenant table aside).
func HitLen(k block.Key) int { return hitLen + nameLen(k) }
