package masterproto

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/meta"
)

// decodeErrors are the errors a decoder may return for bad input; anything
// else is a bug.
var decodeErrors = []error{
	io.EOF, io.ErrUnexpectedEOF, frame.ErrMalformed, frame.ErrFrameTooLarge, frame.ErrBatchTooLong, frame.ErrTooLong,
	frame.ErrUnknownOp, frame.ErrBadMagic, block.ErrBadTenant,
}

func classified(err error) bool {
	return slices.ContainsFunc(decodeErrors, func(e error) bool { return errors.Is(err, e) })
}

// FuzzDecode feeds arbitrary bytes to the Reader as a stream of frames and
// decodes each frame with the decoder of its op, as a server or client
// does. Nothing may panic; every error is a known one; the Reader never
// buffers more than the frame limit; and every frame that decodes
// re-encodes to exactly the bytes it came from (strict decoding: one
// encoding per message). Seeds: testdata/fuzz/FuzzDecode (TestSeedCorpus
// writes them).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), smallLimits)
		if err != nil {
			t.Fatal(err)
		}
		off := 0
		for {
			h, body, err := r.ReadFrame()
			if err == io.EOF {
				if off != len(data) {
					t.Fatalf("io.EOF at byte %d of %d", off, len(data))
				}
				return
			}
			if err != nil {
				if !classified(err) {
					t.Fatalf("unclassified stream error: %v", err)
				}
				return // the stream is lost: the peer closes
			}
			if cap(r.buf) > smallLimits.MaxFrame {
				t.Fatalf("buffer of %d bytes exceeds the frame limit", cap(r.buf))
			}
			frame := data[off : off+int(h.Len)]
			off += int(h.Len)
			msg, err := decode(h, body, smallLimits)
			if err != nil {
				if !classified(err) {
					t.Fatalf("unclassified decode error: %v", err)
				}
				continue
			}
			again, err := encode(nil, sample{op: h.Op, reqID: h.ReqID, msg: msg})
			if err != nil {
				t.Fatalf("decoded %v frame does not re-encode: %v", h.Op, err)
			}
			if !bytes.Equal(again, frame) {
				t.Fatalf("%v frame re-encodes differently:\n got %x\nwant %x", h.Op, again, frame)
			}
		}
	})
}

// FuzzNamedKeys encodes named keys of arbitrary names and ids in every
// message that carries keys (HEARTBEAT entries, the tasks of its reply, a
// LOCATE, KEYINFO or EXPIRE batch, QUERY, a SCAN page) and decodes them
// back: a name of 1 to
// block.MaxNameLen bytes round-trips exactly (any bytes, beside a chain
// key of the same id); any other is refused by the encoder with an error
// of the bad-request family, never sent.
func FuzzNamedKeys(f *testing.F) {
	f.Add("a", uint64(7), "b")
	f.Add("meta-llama/Llama-3.1-8B@1@0@5f3a@bfloat16kv_bytes", uint64(0), "\x00")
	f.Add("", uint64(1), "x")
	f.Add(string(make([]byte, block.MaxNameLen+1)), uint64(2), "y")
	f.Fuzz(func(t *testing.T, name string, id uint64, other string) {
		k := block.Key{Tenant: "t", ID: id, Name: name}
		o := block.Key{Tenant: "u", ID: id, Name: other}
		valid := func(n string) bool { return len(n) <= block.MaxNameLen } // "" is a chain key
		hb := &Heartbeat{Node: "n", Session: 1, Delta: meta.Delta{
			Added:   []meta.Item{{Key: k, Tier: meta.TierRAM, Size: 1}, {Key: block.Key{Tenant: "t", ID: id}, Tier: meta.TierRAM}},
			Removed: []meta.ItemKey{{Key: o, Tier: meta.TierSSD}},
			Moved:   []meta.Move{{Key: k, From: meta.TierRAM, To: meta.TierSSD}},
		}, SSDHits: []block.Key{o, k}}
		b, err := AppendHeartbeat(nil, 1, hb)
		if !valid(name) || !valid(other) {
			if err == nil || CodeOf(err) != CodeBadRequest {
				t.Fatalf("heartbeat with a %d- and a %d-byte name: err %v", len(name), len(other), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var got Heartbeat
		if err := DecodeHeartbeat(ParseHeader(b), b[HeaderLen:], Limits{}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Delta.Added[0].Key != k || got.Delta.Added[1].Key.Name != "" || got.Delta.Removed[0].Key != o ||
			got.Delta.Moved[0].Key != k || got.SSDHits[0] != o || got.SSDHits[1] != k {
			t.Fatalf("heartbeat keys changed: %+v", got)
		}
		rb, err := AppendHeartbeatReply(nil, 1, &meta.HeartbeatReply{Tasks: []meta.Task{{ID: 1, Kind: meta.TaskDemote, Key: k}, {ID: 2, Kind: meta.TaskPromote, Key: o}}})
		if err != nil {
			t.Fatal(err)
		}
		var reply meta.HeartbeatReply
		if err := DecodeHeartbeatReply(ParseHeader(rb), rb[HeaderLen:], Limits{}, &reply); err != nil || reply.Tasks[0].Key != k || reply.Tasks[1].Key != o {
			t.Fatalf("tasks: %+v, %v", reply.Tasks, err)
		}
		qb, err := AppendQuery(nil, 1, k)
		if err != nil {
			t.Fatal(err)
		}
		if q, err := DecodeQuery(ParseHeader(qb), qb[HeaderLen:]); err != nil || q != k {
			t.Fatalf("query: %v, %v", q, err)
		}
		if name == "" {
			return // a LOCATE batch is all chain keys or all named
		}
		lb, err := AppendLocate(nil, 1, &Locate{Tenant: "t", IDs: []uint64{id, id}, Names: []string{name, name}})
		if err != nil {
			t.Fatal(err)
		}
		var l Locate
		if err := DecodeLocate(ParseHeader(lb), lb[HeaderLen:], Limits{}, &l); err != nil || len(l.Names) != 2 || l.Names[1] != name || l.IDs[0] != id {
			t.Fatalf("locate: %+v, %v", l, err)
		}
		kb, err := AppendKeyInfo(nil, 1, &KeyInfo{Tenant: "t", IDs: []uint64{id}, Names: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		var ki KeyInfo
		if err := DecodeKeyInfo(ParseHeader(kb), kb[HeaderLen:], Limits{}, &ki); err != nil || ki.Keys(nil)[0] != k {
			t.Fatalf("keyinfo: %+v, %v", ki, err)
		}
		eb, err := AppendExpire(nil, 1, &Expire{Tenant: "t", IDs: []uint64{id}, Names: []string{name}, At: []int64{int64(id >> 1)}})
		if err != nil {
			t.Fatal(err)
		}
		var e Expire
		if err := DecodeExpire(ParseHeader(eb), eb[HeaderLen:], Limits{}, &e); err != nil || e.Keys(nil)[0] != k || e.At[0] != int64(id>>1) {
			t.Fatalf("expire: %+v, %v", e, err)
		}
		sb, err := AppendScanResult(nil, 1, &ScanResult{Cursor: id, Names: []string{name, "x"}})
		if err != nil {
			t.Fatal(err)
		}
		var sr ScanResult
		if err := DecodeScanResult(ParseHeader(sb), sb[HeaderLen:], Limits{}, &sr); err != nil || sr.Cursor != id || len(sr.Names) != 2 || sr.Names[0] != name {
			t.Fatalf("scan result: %+v, %v", sr, err)
		}
	})
}
