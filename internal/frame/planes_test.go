package frame_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/frame"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// The two planes number their codes differently on the wire; the same
// failure must still be the same error in Go, whichever plane reported it,
// through the real encoders and decoders, as an ERROR frame and as a
// refused handshake.
func TestSameErrorFromBothPlanes(t *testing.T) {
	cases := []struct {
		name     string
		sentinel error
		server   error // what the server failed with
		wireCode wire.Code
		mastCode masterproto.Code
	}{
		{"unavailable", kvpool.ErrUnavailable, fmt.Errorf("shutting down: %w", kvpool.ErrUnavailable), 10, 8},
		{"closed is sent as unavailable", kvpool.ErrUnavailable, fmt.Errorf("store: %w", kvpool.ErrClosed), 10, 8},
		{"unauthorized", kvpool.ErrUnauthorized, fmt.Errorf("token refused: %w", kvpool.ErrUnauthorized), 7, 5},
		{"too large", kvpool.ErrTooLarge, fmt.Errorf("frame of 9 GiB: %w", frame.ErrFrameTooLarge), 3, 9},
		{"bad request", frame.ErrBadRequest, fmt.Errorf("count 3, 2 left: %w", frame.ErrMalformed), 5, 1},
		{"unknown op", frame.ErrUnknownOp, frame.ErrUnknownOp, 6, 4},
		{"version", frame.ErrVersion, frame.ErrVersion, 9, 7},
		{"internal", frame.ErrInternal, errors.New("disk on fire"), 8, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range []struct {
				plane string
				got   func(t *testing.T, err error) (code uint16, errFrame, errHello error)
			}{{"node", nodeErrors}, {"master", masterErrors}} {
				code, ef, eh := p.got(t, c.server)
				want := uint16(c.wireCode)
				if p.plane == "master" {
					want = uint16(c.mastCode)
				}
				if code != want {
					t.Errorf("%s: code %d on the wire, want %d", p.plane, code, want)
				}
				for what, err := range map[string]error{"ERROR frame": ef, "refused hello": eh} {
					if !errors.Is(err, c.sentinel) {
						t.Errorf("%s %s: %v is not %v", p.plane, what, err, c.sentinel)
					}
				}
			}
		})
	}
}

// nodeErrors sends err as the node protocol does (an ERROR frame and a
// refusing hello-ack) and returns the code on the wire and what a client
// decodes.
func nodeErrors(t *testing.T, err error) (uint16, error, error) {
	t.Helper()
	b := wire.AppendError(nil, 7, err)
	ack := wire.HelloAckFor(err, wire.Limits{})
	b = wire.AppendHelloAck(b, &ack)
	code := uint16(b[frame.HeaderLen]) | uint16(b[frame.HeaderLen+1])<<8
	r, rerr := wire.NewReader(bytes.NewReader(b), wire.Limits{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if _, rerr := r.ReadHeader(); rerr != nil {
		t.Fatal(rerr)
	}
	var re wire.RemoteError
	if rerr := r.ReadError(&re); rerr != nil {
		t.Fatal(rerr)
	}
	var a wire.HelloAck
	if rerr := r.ReadHelloAck(&a); rerr != nil {
		t.Fatal(rerr)
	}
	return code, &re, a.Err()
}

// masterErrors is nodeErrors for the master protocol.
func masterErrors(t *testing.T, err error) (uint16, error, error) {
	t.Helper()
	b := masterproto.AppendError(nil, 7, masterproto.CodeOf(err), err.Error())
	reply := masterproto.HelloReplyFor(err, masterproto.Limits{})
	b, aerr := masterproto.AppendHelloReply(b, 8, &reply)
	if aerr != nil {
		t.Fatal(aerr)
	}
	code := uint16(b[frame.HeaderLen]) | uint16(b[frame.HeaderLen+1])<<8
	r, rerr := masterproto.NewReader(bytes.NewReader(b), masterproto.Limits{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	h, body, rerr := r.ReadFrame()
	if rerr != nil {
		t.Fatal(rerr)
	}
	re, rerr := masterproto.DecodeError(h, body)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if h, body, rerr = r.ReadFrame(); rerr != nil {
		t.Fatal(rerr)
	}
	var hr masterproto.HelloReply
	if rerr := masterproto.DecodeHelloReply(h, body, masterproto.Limits{}, &hr); rerr != nil {
		t.Fatal(rerr)
	}
	return code, re, hr.Err()
}
