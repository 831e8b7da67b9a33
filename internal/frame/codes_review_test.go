package frame_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// TestEveryCodeOnBothPlanes sends every code below 1024 (and two high
// ones) in an ERROR frame and a refusing handshake reply of each plane,
// through the real encoders and decoders: no code decodes as success; a code the plane does not know
// is an internal error (and named "code(N)"); a known code is its one
// sentinel, which a server sends back as the same code, and a decoded
// error passes through a proxy with its code unchanged.
func TestEveryCodeOnBothPlanes(t *testing.T) {
	codes := make([]int, 0, 1<<10+2)
	for c := range 1 << 10 {
		codes = append(codes, c)
	}
	for _, c := range append(codes, 1<<15, 1<<16-1) {
		// Node plane.
		wc := wire.Code(c)
		b := wire.AppendError(nil, 1, &wire.RemoteError{Code: wc, Message: "m"})
		ack := wire.HelloAck{Version: wire.Version, Code: wc, Message: "m"}
		b = wire.AppendHelloAck(b, &ack)
		r, err := wire.NewReader(bytes.NewReader(b), wire.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadHeader(); err != nil {
			t.Fatal(err)
		}
		var re wire.RemoteError
		if err := r.ReadError(&re); err != nil {
			t.Fatalf("node code %d: ERROR frame: %v", c, err)
		}
		var a wire.HelloAck
		if err := r.ReadHelloAck(&a); err != nil {
			t.Fatalf("node code %d: hello-ack: %v", c, err)
		}
		sent := wc
		if wc == wire.CodeOK {
			sent = wire.CodeInternal // an ERROR frame never says ok
		}
		checkCode(t, "node", uint16(sent), uint16(re.Code), &re, wire.ErrorFor(sent), uint16(wire.CodeOf(&re)), uint16(wire.CodeOf(wire.ErrorFor(sent))), wire.Code(sent).String())
		if herr := a.Err(); (herr == nil) != (wc == wire.CodeOK) {
			t.Fatalf("node code %d: hello-ack Err() = %v", c, herr)
		}

		// Master plane.
		mc := masterproto.Code(c)
		mb := masterproto.AppendError(nil, 1, mc, "m")
		reply := masterproto.HelloReply{Version: masterproto.Version, Code: mc, Message: "m"}
		mb, err = masterproto.AppendHelloReply(mb, 2, &reply)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := masterproto.NewReader(bytes.NewReader(mb), masterproto.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		h, body, err := mr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		mre, err := masterproto.DecodeError(h, body)
		if err != nil {
			t.Fatalf("master code %d: ERROR frame: %v", c, err)
		}
		if h, body, err = mr.ReadFrame(); err != nil {
			t.Fatal(err)
		}
		var hr masterproto.HelloReply
		if err := masterproto.DecodeHelloReply(h, body, masterproto.Limits{}, &hr); err != nil {
			t.Fatalf("master code %d: hello reply: %v", c, err)
		}
		msent := mc
		if mc == masterproto.CodeOK {
			msent = masterproto.CodeInternal
		}
		checkCode(t, "master", uint16(msent), uint16(mre.Code), mre, masterproto.ErrorFor(msent), uint16(masterproto.CodeOf(mre)), uint16(masterproto.CodeOf(masterproto.ErrorFor(msent))), msent.String())
		if herr := hr.Err(); (herr == nil) != (mc == masterproto.CodeOK) {
			t.Fatalf("master code %d: hello reply Err() = %v", c, herr)
		}
	}
}

// checkCode checks one decoded code of a plane (see
// TestEveryCodeOnBothPlanes): sent is the code on the wire, got the
// decoded one, decoded the decoded error, sentinel ErrorFor(sent),
// passed CodeOf(decoded) and back CodeOf(sentinel).
func checkCode(t *testing.T, plane string, sent, got uint16, decoded, sentinel error, passed, back uint16, name string) {
	t.Helper()
	switch {
	case got != sent:
		t.Fatalf("%s code %d: decoded as %d", plane, sent, got)
	case sentinel == nil:
		t.Fatalf("%s code %d: ErrorFor is nil (success) for a failure code", plane, sent)
	case !errors.Is(decoded, sentinel) && !errors.Is(decoded, frame.ErrInternal):
		t.Fatalf("%s code %d: decoded %v is not %v", plane, sent, decoded, sentinel)
	case passed != sent:
		t.Fatalf("%s code %d: a proxy re-sends the decoded error as %d", plane, sent, passed)
	}
	if strings.HasPrefix(name, "code(") { // not a code of this plane
		if !errors.Is(sentinel, frame.ErrInternal) || !errors.Is(decoded, frame.ErrInternal) {
			t.Fatalf("%s unknown code %d: %v, want an internal error", plane, sent, sentinel)
		}
		return
	}
	if back != sent {
		t.Fatalf("%s code %d (%s): its sentinel %v is sent back as %d", plane, sent, name, sentinel, back)
	}
}
