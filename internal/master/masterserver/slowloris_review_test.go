package masterserver

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterproto"
)

// TestSlowlorisHello: a peer that trickles a 4 KiB-token HELLO one byte
// every 5 ms (20 s in all) is cut off by the handshake deadline (100 ms),
// which bytes arriving do not push back.
func TestSlowlorisHello(t *testing.T) {
	token := make([]byte, 4<<10)
	for i := range token {
		token[i] = 'a'
	}
	ts := start(t, newMaster(t, master.Options{}), Options{Token: token, HandshakeTimeout: 100 * time.Millisecond}, nil)
	hello := mustEncode(masterproto.AppendHello(nil, 1, &masterproto.Hello{Token: token}))
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range hello {
		nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(hello[i : i+1]); err != nil {
			return // the server closed the connection: cut off
		}
		nc.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		var b [1]byte
		if _, err := nc.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			if err == nil {
				t.Fatalf("after %d of %d HELLO bytes the server answered", i+1, len(hello))
			}
			return
		}
	}
	t.Fatalf("the whole %d-byte HELLO trickled in without the server closing the connection", len(hello))
}
