package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"runtime"
	"sync"
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

// TestCloseRacesAFlood: many clients connect over and over, past MaxConns
// and MaxRefusing, some silent and some talking, while the server is
// closed under them. Close returns (never hangs, though the handshake
// timeout is an hour), Serve returns nil, no connection stays open, and
// no goroutine is left (goleak in TestMain).
func TestCloseRacesAFlood(t *testing.T) {
	for round := range 10 {
		h := &lingerRefuse{lineEcho: newLineEcho(), refusing: make(chan struct{}, 1<<16)}
		h.started = make(chan struct{}, 1<<16)
		s, err := New(h, Options{MaxConns: 4, MaxRefusing: 2, HandshakeTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Skipf("no loopback TCP: %v", err)
		}
		addr := ln.Addr().String()
		errc := make(chan error, 1)
		go func() { errc <- s.Serve(context.Background(), ln) }()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					nc, err := net.Dial("tcp", addr)
					if err != nil {
						return // the listener is closed
					}
					if g%2 == 0 { // talk until the server ends the connection
						nc.SetDeadline(time.Now().Add(time.Minute))
						br := bufio.NewReader(nc)
						for io.WriteString(nc, "x\n"); ; {
							if _, err := br.ReadString('\n'); err != nil {
								break
							}
							io.WriteString(nc, "x\n")
						}
					}
					nc.Close()
				}
			}()
		}
		for s.Stats().Accepted < 32 {
			runtime.Gosched()
		}
		done := make(chan error, 1)
		go func() {
			s.Close()
			done <- <-errc
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Serve returned %v after Close", round, err)
			}
		case <-time.After(time.Minute): // a hang, not a speed bound
			t.Fatalf("round %d: Close still waiting after a minute under a connection flood", round)
		}
		close(stop)
		wg.Wait()
		if st := s.Stats(); st.Open != 0 {
			t.Fatalf("round %d: %d connections open after Close (%+v)", round, st.Open, st)
		}
	}
}
