package nodeserver_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// TestSlowlorisHello: a peer that trickles a 4 KiB-token hello one byte
// every 5 ms (20 s in all) is cut off by the handshake deadline (100 ms),
// which bytes arriving do not push back: the server closes it long before
// the hello could complete, without accepting it.
func TestSlowlorisHello(t *testing.T) {
	_, addr := start(t, nil, nodeserver.Options{HandshakeTimeout: 100 * time.Millisecond})
	token := make([]byte, 4<<10)
	for i := range token {
		token[i] = 'a'
	}
	hello := must(wire.AppendHello(nil, &wire.Hello{Token: token}))
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range hello {
		nc.SetWriteDeadline(time.Now().Add(testTimeout))
		if _, err := nc.Write(hello[i : i+1]); err != nil {
			return // the server closed the connection: cut off
		}
		// A closed connection shows up as a read that does not time out.
		nc.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		var b [1]byte
		if _, err := nc.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			if err == nil {
				t.Fatalf("after %d of %d hello bytes the server answered", i+1, len(hello))
			}
			return // EOF or reset: cut off
		}
	}
	t.Fatalf("the whole %d-byte hello trickled in without the server closing the connection", len(hello))
}
