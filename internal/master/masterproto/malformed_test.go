package masterproto

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

type malformed struct {
	name  string
	frame []byte
	want  error
}

// smallLimits make limits reachable with small inputs.
var smallLimits = Limits{MaxFrame: 4096, MaxBatch: 8, MaxItems: 16, MaxToken: 16}

// malformedFrames are whole frames (valid length, so the stream stays in
// sync) that a decoder must reject with the given error.
func malformedFrames(t *testing.T) []malformed {
	t.Helper()
	enc := func(name string) []byte {
		b, err := encode(nil, sampleNamed(t, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// set returns a copy of b with b[off:] overwritten by v.
	set := func(b []byte, off int, v ...byte) []byte {
		c := bytes.Clone(b)
		copy(c[off:], v)
		return c
	}
	body := HeaderLen
	lookup := enc("lookup")         // lease, tenant "t1", count 3, ids
	register := enc("register")     // id "node-1", addr, 5×u64, tenant table {a, b}, 3 items
	regTable := body + 7 + 15 + 40  // tenant table count
	regItem := regTable + 2 + 4 + 4 // first item
	lres := enc("lookup_result")    // hit 2, node table {n1, n2}, blocks
	lresBlock := body + 4 + 2 + (1 + 2 + 1 + 14) + (1 + 2 + 1 + 14)
	big, err := AppendLookup(nil, 1, &Lookup{Tenant: "t", IDs: make([]uint64, smallLimits.MaxBatch+1)})
	if err != nil {
		t.Fatal(err)
	}
	trailing := append(bytes.Clone(lookup), 0)
	le.PutUint32(trailing, uint32(len(trailing)))
	// grow returns a copy of b with v appended and the length fixed.
	grow := func(b []byte, v ...byte) []byte {
		c := append(bytes.Clone(b), v...)
		le.PutUint32(c, uint32(len(c)))
		return c
	}
	helloID := body + helloLen + len("secret") // the cluster ID trailer of "hello_cluster"
	exNamed := enc("exists_named")             // tenant "t1", count 2, (id, name "a"), (id, name "b")
	exName := body + 3 + 4 + 8                 // first name length
	hbNamed := enc("heartbeat_named")          // node, session, usage, tenants {a, b, c}, 4 added
	hbItem := body + 7 + 8 + 16 + 8 + 4        // first added item
	place := enc("place")
	kinfo := enc("keyinfo_result") // id table {n1, n2, n0}, 3 entries
	kiEntry := body + 2 + 3*3 + 4  // first entry
	kiThird := kiEntry + 2*(keyInfoMinLen) + 2*2
	expire := enc("expire") // force, tenant "t1", 2 named keys, 2 times
	scanRes := enc("scan_result")
	u16 := func(v uint16) []byte { return le.AppendUint16(nil, v) }
	return []malformed{
		{"header_flags", set(lookup, 5, 1), frame.ErrMalformed},
		{"header_reserved", set(lookup, 6, 1), frame.ErrMalformed},
		{"unknown_op", set(lookup, 4, 0x42), frame.ErrUnknownOp},
		{"lease_flag_2", set(lookup, body, 2), frame.ErrMalformed},
		{"bad_tenant", set(lookup, body+2, '/'), frame.ErrMalformed},
		{"count_over_length", set(lookup, body+4, 4), frame.ErrMalformed},
		{"batch_over_limit", big, frame.ErrBatchTooLong},
		{"trailing_byte", trailing, frame.ErrMalformed},
		{"item_tier_9", set(register, regItem+2, 9), frame.ErrMalformed},
		{"item_reserved", set(register, regItem+3, 1), frame.ErrMalformed},
		{"tenant_index_out_of_range", set(register, regItem, 5), frame.ErrMalformed},
		{"tenant_index_out_of_order", set(register, regItem, 1), frame.ErrMalformed},
		{"tenant_listed_twice", set(register, regTable+5, 'a'), frame.ErrMalformed},
		{"negative_size", set(register, regItem+16+7, 0x80), frame.ErrMalformed},
		{"hello_magic", set(enc("hello"), body, 'X'), frame.ErrBadMagic},
		{"hello_version_0", set(enc("hello"), body+4, 0, 0), frame.ErrMalformed},
		{"hello_token_over_limit", set(enc("hello"), body+6, 17), frame.ErrTooLong},
		{"hello_cluster_empty", grow(enc("hello"), 0), frame.ErrMalformed},
		{"hello_cluster_bad_byte", set(enc("hello_cluster"), helloID+1, '/'), frame.ErrMalformed},
		{"hello_cluster_truncated", set(enc("hello_cluster"), helloID, 60), frame.ErrMalformed},
		{"hello_reply_cluster_empty", grow(enc("hello_reply"), 0), frame.ErrMalformed},
		{"hello_reply_cluster_trailing", grow(enc("hello_reply_cluster"), 'x'), frame.ErrMalformed},
		{"backlog_flag_on_lookup", set(lookup, 5, FlagBacklog), frame.ErrMalformed},
		{"heartbeat_flag_4", set(enc("heartbeat"), 5, 4), frame.ErrMalformed},
		{"register_named_flag", set(enc("register"), 5, FlagNamed), frame.ErrMalformed},
		{"hello_term_truncated", grow(enc("hello"), termTag, 1, 2), frame.ErrMalformed},
		{"hello_term_twice", grow(enc("hello_follow"), termTag, 0, 0, 0, 0, 0, 0, 0, 0), frame.ErrMalformed},
		{"hello_term_before_cluster", grow(enc("hello"), append([]byte{termTag, 0, 0, 0, 0, 0, 0, 0, 0}, 2, 'h', 'a')...), frame.ErrMalformed},
		{"hello_reply_term_margin", set(enc("hello_reply_term"), len(enc("hello_reply_term"))-len("10.0.0.2:7470")-1-4, 0xff, 0xff, 0xff, 0xff), frame.ErrMalformed},
		{"hello_reply_term_leader_truncated", set(enc("hello_reply_term"), len(enc("hello_reply_term"))-len("10.0.0.2:7470")-1, 200), frame.ErrMalformed},
		{"hello_reply_term_trailing", grow(enc("hello_reply_term"), 'x'), frame.ErrMalformed},
		{"error_code_ok", set(enc("error"), body, 0, 0), frame.ErrMalformed},
		{"replica_count_0", set(lres, lresBlock, 0, 0), frame.ErrMalformed},
		{"replica_node_out_of_order", set(lres, lresBlock+2, 1), frame.ErrMalformed},
		{"replica_tier_0", set(lres, lresBlock+4, 0), frame.ErrMalformed},
		{"task_kind_9", set(enc("heartbeat_reply"), body+8+2+2+2+4+8, 9), frame.ErrMalformed},
		{"exists_answer_2", set(enc("exists_result"), body+4, 2), frame.ErrMalformed},
		{"query_flags", set(enc("query_result"), body+4+1+2+1+14+1, 4), frame.ErrMalformed},
		{"named_flag_on_lookup", set(lookup, 5, FlagNamed), frame.ErrMalformed},
		{"named_flag_on_register", set(register, 5, FlagNamed), frame.ErrMalformed},
		{"query_flag_2", set(enc("query"), 5, 2), frame.ErrMalformed},
		{"query_named_without_flag", set(enc("query_named"), 5, 0), frame.ErrMalformed},
		{"key_name_empty", set(exNamed, exName, u16(0)...), frame.ErrMalformed},
		{"key_name_over_limit", set(exNamed, exName, u16(block.MaxNameLen+1)...), frame.ErrTooLong},
		{"key_name_truncated", set(exNamed, exName, u16(200)...), frame.ErrMalformed},
		{"keys_unnamed_with_flag", set(enc("exists"), 5, FlagNamed), frame.ErrMalformed},
		{"item_name_empty", set(hbNamed, hbItem+itemLen, u16(0)...), frame.ErrMalformed},
		{"item_name_over_limit", set(hbNamed, hbItem+itemLen, u16(block.MaxNameLen+1)...), frame.ErrTooLong},
		{"item_name_truncated", set(hbNamed, hbItem+itemLen, u16(block.MaxNameLen)...), frame.ErrMalformed},
		{"item_named_bit_bad_tenant", set(hbNamed, hbItem, 3, 0x80), frame.ErrMalformed},
		{"place_size_negative", set(place, len(place)-1, 0x80), frame.ErrMalformed},
		{"place_size_over_limit", set(place, len(place)-3, 0x02), frame.ErrMalformed},
		{"locate_result_lookup_op", set(enc("locate_result"), 4, byte(OpLookupResponse)), frame.ErrMalformed},
		{"keyinfo_flags_4", set(kinfo, kiEntry, 7), frame.ErrMalformed},
		{"keyinfo_visible_absent", set(kinfo, kiEntry, keyVisible), frame.ErrMalformed},
		{"keyinfo_absent_expiry", set(kinfo, kiEntry+keyInfoMinLen+2*2+1, 1), frame.ErrMalformed},
		{"keyinfo_negative_expiry", set(kinfo, kiEntry+8, 0x80), frame.ErrMalformed},
		{"keyinfo_holders_unsorted", set(kinfo, kiThird+keyInfoMinLen, u16(1)...), frame.ErrMalformed},
		{"keyinfo_holder_out_of_range", set(kinfo, kiThird+keyInfoMinLen+2, u16(9)...), frame.ErrMalformed},
		{"keyinfo_id_listed_twice", set(kinfo, body+2+3+2, '1'), frame.ErrMalformed},
		{"keyinfo_named_flag_2", set(enc("keyinfo"), 5, 2), frame.ErrMalformed},
		{"expire_force_2", set(expire, body, 2), frame.ErrMalformed},
		{"expire_negative_time", set(expire, len(expire)-1, 0x80), frame.ErrMalformed},
		{"expire_times_missing", func() []byte { c := bytes.Clone(expire[:len(expire)-8]); le.PutUint32(c, uint32(len(c))); return c }(), frame.ErrMalformed},
		{"expire_result_answer_2", set(enc("expire_result"), body+4, 2), frame.ErrMalformed},
		{"scan_bad_tenant", set(enc("scan"), body+1, '/'), frame.ErrMalformed},
		{"scan_named_flag", set(enc("scan"), 5, FlagNamed), frame.ErrMalformed},
		{"scan_name_empty", set(scanRes, body+8+4, u16(0)...), frame.ErrMalformed},
		{"scan_name_over_limit", set(scanRes, body+8+4, u16(block.MaxNameLen+1)...), frame.ErrTooLong},
		{"scan_names_over_limit", set(scanRes, body+8, 17), frame.ErrBatchTooLong},
		{"count_trailing", grow(enc("count"), 0), frame.ErrMalformed},
		{"count_result_expiring_over_keys", set(enc("count_result"), body+8+6, 1), frame.ErrMalformed},
	}
}

// TestMalformed: every malformed frame is rejected with its error, the
// Reader stays in sync (the next frame decodes), and nothing panics.
func TestMalformed(t *testing.T) {
	next, err := AppendNodes(nil, 77), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range malformedFrames(t) {
		t.Run(m.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(append(bytes.Clone(m.frame), next...)), smallLimits)
			if err != nil {
				t.Fatal(err)
			}
			h, body, err := r.ReadFrame()
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			_, err = decode(h, body, smallLimits)
			if !errors.Is(err, m.want) {
				t.Fatalf("decode: %v, want %v", err, m.want)
			}
			if CodeOf(err) != CodeBadRequest && CodeOf(err) != CodeUnsupportedOp {
				t.Errorf("code %v for a malformed request", CodeOf(err))
			}
			h, _, err = r.ReadFrame()
			if err != nil || h.Op != OpNodes || h.ReqID != 77 {
				t.Fatalf("next frame: %+v %v", h, err)
			}
		})
	}
}

// TestStreamErrors: a frame length out of range or a truncated frame is
// fatal and sticky.
func TestStreamErrors(t *testing.T) {
	lookup, err := AppendLookup(nil, 1, &Lookup{Tenant: "t", IDs: []uint64{1}})
	if err != nil {
		t.Fatal(err)
	}
	short := bytes.Clone(lookup)
	le.PutUint32(short, 15)
	huge := bytes.Clone(lookup)
	le.PutUint32(huge, uint32(smallLimits.MaxFrame+1))
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"length_below_header", short, frame.ErrMalformed},
		{"length_over_limit", huge, frame.ErrFrameTooLarge},
		{"truncated_header", lookup[:7], io.ErrUnexpectedEOF},
		{"truncated_body", lookup[:len(lookup)-1], io.ErrUnexpectedEOF},
		{"empty", nil, io.EOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(c.data), smallLimits)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // sticky
				if _, _, err := r.ReadFrame(); !errors.Is(err, c.want) {
					t.Fatalf("err %v, want %v", err, c.want)
				}
			}
		})
	}
}

// TestAnnouncedLengthNotAllocated: a header announcing a large frame
// whose bytes never come does not make the Reader allocate it.
func TestAnnouncedLengthNotAllocated(t *testing.T) {
	hdr := make([]byte, HeaderLen)
	le.PutUint32(hdr, DefaultMaxFrame)
	hdr[4] = byte(OpRegister)
	r, err := NewReader(bytes.NewReader(hdr), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v", err)
	}
	if cap(r.buf) > frame.GrowChunk {
		t.Fatalf("buffer of %d bytes for a frame that sent none", cap(r.buf))
	}
}

// TestDecodeWrongOp: a decoder given another op's frame says so.
func TestDecodeWrongOp(t *testing.T) {
	b, err := AppendQuery(nil, 1, block.Key{Tenant: "t", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	var l Lookup
	if err := DecodeLookup(ParseHeader(b), b[HeaderLen:], Limits{}, &l); !errors.Is(err, frame.ErrUnknownOp) {
		t.Fatalf("err %v", err)
	}
}
