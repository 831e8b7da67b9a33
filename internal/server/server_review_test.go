package server

import (
	"io"
	"net"
	"testing"
	"time"
)

// lingerRefuse refuses as the node server does: it answers, then reads
// until the peer leaves (so the peer reads the answer, not a reset).
type lingerRefuse struct {
	*lineEcho
	refusing chan struct{}
}

func (h *lingerRefuse) Refuse(nc net.Conn, reason error) {
	io.WriteString(nc, "BUSY\n")
	h.refusing <- struct{}{}
	io.Copy(io.Discard, nc)
}

// TestCloseInterruptsRefusals: a refused peer that keeps its connection
// open and silent must not hold Close for the handshake timeout (an hour
// here): stopping ends the refusals as it ends the served connections.
func TestCloseInterruptsRefusals(t *testing.T) {
	h := &lingerRefuse{lineEcho: newLineEcho(), refusing: make(chan struct{}, 4)}
	s, addr, wait := start(t, h, Options{MaxConns: 1, HandshakeTimeout: time.Hour})
	c1, r1 := dial(t, addr)
	echo(t, c1, r1, "served")
	_, r2 := dial(t, addr)
	if line, err := r2.ReadString('\n'); err != nil || line != "BUSY\n" {
		t.Fatalf("second connection read %q, %v; want the refusal", line, err)
	}
	<-h.refusing
	done := make(chan struct{})
	go func() {
		s.Close()
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang, not a speed bound: the refusal waits an hour
		t.Fatal("Close still waits for a silent refused connection after a minute (handshake timeout 1h)")
	}
}
