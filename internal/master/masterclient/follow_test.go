package masterclient_test

import (
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
)

// A scripted master stands in for the real one where a test needs what a
// real master cannot be made to do on cue: answer a heartbeat late with
// orders, or claim an epoch older than one the client has seen. Its
// frames are masterproto's own encodings.

// scripted answers every HELLO with hello(h) and each HEARTBEAT with
// beat after delay (zero: at once). It records the HELLOs it got.
type scripted struct {
	ln    net.Listener
	hello func(h masterproto.Hello) masterproto.HelloReply
	beat  meta.HeartbeatReply
	delay time.Duration
	hold  func() // called before each heartbeat is answered (nil: none)

	mu     sync.Mutex
	hellos []masterproto.Hello
	conns  []net.Conn
	wg     sync.WaitGroup
}

// closeConns closes the connections s accepted.
func closeConns(s *scripted) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

func startScripted(t *testing.T, s *scripted) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, nc)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer nc.Close()
				s.serve(nc)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return ln.Addr().String()
}

func (s *scripted) serve(nc net.Conn) {
	r, err := masterproto.NewReader(nc, masterproto.Limits{})
	if err != nil {
		return
	}
	h, body, err := r.ReadFrame()
	if err != nil {
		return
	}
	var hello masterproto.Hello
	if masterproto.DecodeHello(h, body, masterproto.Limits{}, &hello) != nil {
		return
	}
	hello.Token = nil
	s.mu.Lock()
	s.hellos = append(s.hellos, hello)
	s.mu.Unlock()
	reply := s.hello(hello)
	b, err := masterproto.AppendHelloReply(nil, h.ReqID, &reply)
	if err != nil {
		return
	}
	if _, err := nc.Write(b); err != nil || reply.Code != masterproto.CodeOK {
		return
	}
	for {
		h, _, err := r.ReadFrame()
		if err != nil {
			return
		}
		if h.Op != masterproto.OpHeartbeat {
			nc.Write(masterproto.AppendError(nil, h.ReqID, masterproto.CodeUnsupportedOp, "scripted: heartbeats only"))
			continue
		}
		if s.hold != nil {
			s.hold()
		}
		time.Sleep(s.delay) // the lateness under test
		b, err := masterproto.AppendHeartbeatReply(nil, h.ReqID, &s.beat)
		if err != nil {
			return
		}
		if _, err := nc.Write(b); err != nil {
			return
		}
	}
}

// leads returns a hello script of a master leading epoch with margin.
func leads(epoch uint64, margin time.Duration, addr *string) func(masterproto.Hello) masterproto.HelloReply {
	return func(h masterproto.Hello) masterproto.HelloReply {
		r := masterproto.HelloReplyFor(nil, masterproto.Limits{})
		if h.Follows {
			r.Term, r.Epoch, r.Margin, r.Leader = true, epoch, margin, *addr
		}
		return r
	}
}

var orders = meta.HeartbeatReply{HeartbeatInterval: time.Second, Tasks: []meta.Task{
	{ID: 1, Kind: meta.TaskDemote, Key: block.Key{Tenant: "t", ID: 7}},
	{ID: 2, Kind: meta.TaskPromote, Key: block.Key{Tenant: "t", ID: 8}},
}}

// TestOrdersLaterThanTheMarginAreDropped: a heartbeat answered within the
// leader's margin keeps its orders; one answered later (the leader may
// have been frozen past its term meanwhile) has them dropped and counted.
func TestOrdersLaterThanTheMarginAreDropped(t *testing.T) {
	for _, tc := range []struct {
		name          string
		margin, delay time.Duration
		follow        bool
		kept          bool
	}{
		// Within a margin of a minute: no machine is that slow.
		{"prompt", time.Minute, 0, true, true},
		// The answer comes at least 300 ms after the request.
		{"late", 100 * time.Millisecond, 300 * time.Millisecond, true, false},
		// Not following: no margin, as with a master without an election.
		{"late, not following", 100 * time.Millisecond, 300 * time.Millisecond, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			s := &scripted{beat: orders, delay: tc.delay}
			s.hello = leads(9, tc.margin, &addr)
			addr = startScripted(t, s)
			cl := dial(t, addr, masterclient.Options{Follow: tc.follow, Conns: 1})
			reply, err := cl.Heartbeat(ctxT(t, 30*time.Second), "n", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.kept && (len(reply.Tasks) != 2 || cl.Fenced() != 0):
				t.Errorf("%d orders kept, %d fenced; want both kept", len(reply.Tasks), cl.Fenced())
			case !tc.kept && (len(reply.Tasks) != 0 || cl.Fenced() != 2):
				t.Errorf("%d orders kept, %d fenced; want both dropped and counted", len(reply.Tasks), cl.Fenced())
			}
			if tc.follow && cl.Epoch() != 9 {
				t.Errorf("epoch %d; want 9", cl.Epoch())
			}
		})
	}
}

// TestFollowRedirects: a client given two masters follows a standby's
// redirect to the leader and takes its epoch.
func TestFollowRedirects(t *testing.T) {
	var leaderAddr, standbyAddr string
	leader := &scripted{beat: meta.HeartbeatReply{HeartbeatInterval: time.Second}}
	leader.hello = leads(12, 100*time.Millisecond, &leaderAddr)
	leaderAddr = startScripted(t, leader)
	standby := &scripted{}
	standby.hello = func(h masterproto.Hello) masterproto.HelloReply {
		r := masterproto.HelloReplyFor(meta.ErrNotLeader, masterproto.Limits{})
		r.Term, r.Epoch, r.Leader = true, 12, leaderAddr
		return r
	}
	standbyAddr = startScripted(t, standby)

	cl := dial(t, standbyAddr+","+leaderAddr, masterclient.Options{Conns: 1})
	if cl.Addr() != leaderAddr || cl.Epoch() != 12 {
		t.Fatalf("client on %s at epoch %d; want the leader %s at 12", cl.Addr(), cl.Epoch(), leaderAddr)
	}
	standby.mu.Lock()
	defer standby.mu.Unlock()
	if h := standby.hellos; len(h) != 1 || !h[0].Follows || h[0].Epoch != 0 {
		t.Errorf("the standby got HELLOs %+v; want one following, epoch 0", h)
	}

}

// TestFollowRefusesAnOlderEpoch: a client that has seen epoch 12 refuses a
// master whose HELLO answer says it leads epoch 11.
func TestFollowRefusesAnOlderEpoch(t *testing.T) {
	var newAddr, oldAddr string
	newer := &scripted{}
	newer.hello = leads(12, 100*time.Millisecond, &newAddr)
	newAddr = startScripted(t, newer)
	older := &scripted{}
	older.hello = leads(11, 100*time.Millisecond, &oldAddr)
	oldAddr = startScripted(t, older)

	// The client reaches the newer master first (the list's order), and
	// then, when that one is gone, only the older one answers.
	cl := dial(t, newAddr+","+oldAddr, masterclient.Options{Conns: 1})
	if cl.Epoch() != 12 {
		t.Fatalf("epoch %d; want 12", cl.Epoch())
	}
	newer.ln.Close()
	closeConns(newer)
	var err error
	for range 20 { // the dropped connection is noticed by the next call or the one after
		if _, err = cl.Heartbeat(ctxT(t, 10*time.Second), "n", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil); err != nil && strings.Contains(err.Error(), "older than epoch 12") {
			break
		}
	}
	if !errors.Is(err, meta.ErrNotLeader) || !strings.Contains(err.Error(), "older than epoch 12") {
		t.Fatalf("heartbeat with only epoch 11 reachable: %v; want the older epoch refused", err)
	}
	older.mu.Lock()
	defer older.mu.Unlock()
	if h := older.hellos; len(h) == 0 || h[len(h)-1].Epoch != 12 {
		t.Errorf("the older master got HELLOs %+v; want one carrying epoch 12", h)
	}
}

// TestSilentMasterTriedLast: a leader that stops answering (a frozen
// process: its socket accepts, nothing comes back) is tried last when the
// client dials again, even when it heads the list: the next call goes to
// the other master without a HELLO to the silent one.
func TestSilentMasterTriedLast(t *testing.T) {
	var frozen atomic.Bool
	unblock := make(chan struct{})
	var aAddr, bAddr string
	a := &scripted{beat: meta.HeartbeatReply{HeartbeatInterval: time.Second}}
	lead := leads(1, time.Minute, &aAddr)
	a.hello = func(h masterproto.Hello) masterproto.HelloReply {
		if frozen.Load() {
			<-unblock
		}
		return lead(h)
	}
	a.hold = func() {
		if frozen.Load() {
			<-unblock
		}
	}
	aAddr = startScripted(t, a)
	b := &scripted{beat: meta.HeartbeatReply{HeartbeatInterval: time.Second}}
	b.hello = leads(2, time.Minute, &bAddr)
	bAddr = startScripted(t, b)
	t.Cleanup(func() { close(unblock) })

	cl := dial(t, aAddr+","+bAddr, masterclient.Options{Conns: 1})
	if cl.Addr() != aAddr {
		t.Fatalf("client on %s; want the first master %s", cl.Addr(), aAddr)
	}
	frozen.Store(true)
	// The call gives up on the silent master at its deadline.
	if _, err := cl.Heartbeat(ctxT(t, 300*time.Millisecond), "n", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil); err == nil {
		t.Fatal("a heartbeat to the frozen master succeeded")
	}
	if _, err := cl.Heartbeat(ctxT(t, time.Minute), "n", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil); err != nil {
		t.Fatalf("heartbeat after the silent master: %v", err)
	}
	if cl.Addr() != bAddr || cl.Epoch() != 2 {
		t.Errorf("client on %s at epoch %d; want %s at 2", cl.Addr(), cl.Epoch(), bAddr)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.hellos); n != 1 {
		t.Errorf("the silent master got %d HELLOs; want only the first (it is tried last)", n)
	}
}

// TestPipelinedBehindARefusalGoAgain: requests pipelined behind one a
// master refused as no longer leading were not served either (it closes
// the connection): they go again to the new leader, like the refused one.
func TestPipelinedBehindARefusalGoAgain(t *testing.T) {
	var newAddr string
	newer := &scripted{beat: meta.HeartbeatReply{HeartbeatInterval: time.Second}}
	newer.hello = leads(8, time.Minute, &newAddr)
	newAddr = startScripted(t, newer)

	// The old leader reads two heartbeats, then refuses the first and
	// closes: the second is never answered.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	oldAddr := ln.Addr().String()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if n == 0 {
				serveRefusing(nc, oldAddr)
			} else {
				redirect(nc, newAddr) // its term is over: a standby now
			}
			nc.Close()
		}
	})

	cl := dial(t, oldAddr+","+newAddr, masterclient.Options{Conns: 1})
	if cl.Addr() != oldAddr {
		t.Fatalf("client on %s; want the old leader first", cl.Addr())
	}
	errs := make([]error, 2)
	var calls sync.WaitGroup
	for i := range errs {
		calls.Go(func() {
			_, errs[i] = cl.Heartbeat(ctxT(t, time.Minute), "n", 1, meta.Delta{}, meta.NodeUsage{}, nil, nil)
		})
	}
	calls.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("heartbeat %d: %v; want it served by the new leader", i, err)
		}
	}
	if cl.Addr() != newAddr || cl.Epoch() != 8 {
		t.Errorf("client on %s at epoch %d; want %s at 8", cl.Addr(), cl.Epoch(), newAddr)
	}
}

// redirect answers the HELLO on nc as a standby naming leader.
func redirect(nc net.Conn, leader string) {
	nc.SetDeadline(time.Now().Add(time.Minute))
	r, err := masterproto.NewReader(nc, masterproto.Limits{})
	if err != nil {
		return
	}
	h, _, err := r.ReadFrame()
	if err != nil {
		return
	}
	reply := masterproto.HelloReplyFor(meta.ErrNotLeader, masterproto.Limits{})
	reply.Term, reply.Epoch, reply.Leader = true, 8, leader
	b, _ := masterproto.AppendHelloReply(nil, h.ReqID, &reply)
	nc.Write(b)
}

// serveRefusing is an old leader on nc: it accepts the HELLO (epoch 7),
// reads two requests, answers the first "not leader" and returns (the
// caller closes nc), leaving the second unanswered. A connection on which
// two requests do not arrive is answered nothing.
func serveRefusing(nc net.Conn, addr string) {
	nc.SetDeadline(time.Now().Add(time.Minute))
	r, err := masterproto.NewReader(nc, masterproto.Limits{})
	if err != nil {
		return
	}
	h, body, err := r.ReadFrame()
	if err != nil {
		return
	}
	var hello masterproto.Hello
	if masterproto.DecodeHello(h, body, masterproto.Limits{}, &hello) != nil {
		return
	}
	reply := leads(7, time.Minute, &addr)(hello)
	b, _ := masterproto.AppendHelloReply(nil, h.ReqID, &reply)
	if _, err := nc.Write(b); err != nil {
		return
	}
	first, _, err := r.ReadFrame()
	if err != nil {
		return
	}
	if _, _, err := r.ReadFrame(); err != nil {
		return
	}
	nc.Write(masterproto.AppendError(nil, first.ReqID, masterproto.CodeNotLeader, "old: no longer leads"))
}
