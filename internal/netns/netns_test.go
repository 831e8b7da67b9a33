package netns_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/netns"
	"github.com/kvpool/kvpool/internal/netns/netnstest"
)

func newNet(t *testing.T, hosts ...string) *netns.Net {
	t.Helper()
	netnstest.Require(t)
	n, err := netns.New(context.Background(), netns.Options{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// echoOnce accepts one connection on ln, reports its remote address and
// echoes what it reads.
func echoOnce(t *testing.T, ln net.Listener) <-chan string {
	t.Helper()
	remote := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			remote <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		remote <- c.RemoteAddr().String()
		io.Copy(c, c)
	}()
	return remote
}

// roundTrip writes msg on c and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

func TestHostsReachEachOtherFromTheirOwnAddresses(t *testing.T) {
	n := newNet(t, "a", "b")
	a, b := n.Host("a"), n.Host("b")
	if a.Addr == b.Addr || !n.Prefix.Contains(a.Addr) || !n.Prefix.Contains(b.Addr) {
		t.Fatalf("addresses %v and %v, subnet %v", a.Addr, b.Addr, n.Prefix)
	}
	ln, err := b.Listen("tcp", netip.AddrPortFrom(b.Addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	// From host a: the connection starts on a's address.
	remote := echoOnce(t, ln)
	c, err := a.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "from a")
	c.Close()
	if got := <-remote; !strings.HasPrefix(got, a.Addr.String()+":") {
		t.Errorf("b saw the connection from %s; want host a's address %v", got, a.Addr)
	}

	// From this process's own namespace: through the gateway.
	remote = echoOnce(t, ln)
	c, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "from the root namespace")
	c.Close()
	if got := <-remote; !strings.HasPrefix(got, n.Gateway.String()+":") {
		t.Errorf("b saw the connection from %s; want the gateway %v", got, n.Gateway)
	}

	// A host's own loopback is its own: nothing of b's listens on a's.
	lb, err := b.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if c, err := a.DialContext(context.Background(), "tcp", lb.Addr().String()); err == nil {
		c.Close()
		t.Errorf("host a reached host b's loopback listener %s", lb.Addr())
	}
}

func TestDownHostIsCutOffUntilUp(t *testing.T) {
	n := newNet(t, "a", "b")
	a, b := n.Host("a"), n.Host("b")
	ln, err := b.Listen("tcp", netip.AddrPortFrom(b.Addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := context.Background()
	if err := b.SetLink(ctx, netns.Link{Down: true}); err != nil {
		t.Fatal(err)
	}
	if !b.Link().Down {
		t.Fatal("Link().Down = false after SetLink(Down)")
	}
	// The packets are dropped, not refused: the dial runs out of time.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	c, err := a.DialContext(short, "tcp", ln.Addr().String())
	cancel()
	if err == nil {
		c.Close()
		t.Fatal("dialled a host whose link is down")
	}
	// Go reports a dial that ran out of its context's time as either the
	// context's error or the socket's i/o timeout; a refusal is neither.
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("dial to a cut-off host: %v; want the deadline to pass (packets dropped, not refused)", err)
	}
	if err := b.SetLink(ctx, netns.Link{}); err != nil {
		t.Fatal(err)
	}
	// The dials into the void may have left a failed neighbour entry
	// (ARP), which answers "no route to host" for a moment after the link
	// is back: try until the link answers, for up to a minute.
	remote := echoOnce(t, ln)
	deadline := time.Now().Add(time.Minute)
	for {
		c, err = a.DialContext(ctx, "tcp", ln.Addr().String())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial after the link came back up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	roundTrip(t, c, "back")
	c.Close()
	<-remote
}

// tcShow returns what tc shows of kind (qdisc, class, filter) for dev in
// namespace ns.
func tcShow(t *testing.T, ns, kind, dev string) string {
	t.Helper()
	out, err := exec.Command("tc", "-n", ns, kind, "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc %s show: %v: %s", kind, err, out)
	}
	return string(out)
}

func TestLinkRateIsSetOnBothEndsSharedByPeers(t *testing.T) {
	n := newNet(t, "a", "b", "c")
	a := n.Host("a")
	ctx := context.Background()
	if err := a.SetLink(ctx, netns.Link{Rate: 25e6}); err != nil {
		t.Fatal(err)
	}
	sw := "kvp" + strconv.Itoa(n.N) + "-switch"
	for _, end := range []struct{ ns, dev, match string }{{a.NS, "eth0", "at 16"}, {sw, "h0", "at 12"}} {
		// tc prints 25e6 B/s as 200Mbit: the whole link, and a third of it
		// guaranteed to each peer (b, c) and to anything else.
		classes := tcShow(t, end.ns, "class", end.dev)
		if !strings.Contains(classes, "root rate 200Mbit ceil 200Mbit") || strings.Count(classes, "rate 66666Kbit ceil 200Mbit") != 3 {
			t.Errorf("%s %s classes:\n%s\nwant a 200Mbit root and three 66666Kbit children", end.ns, end.dev, classes)
		}
		// One filter per peer, on the destination (egress) or the source
		// (ingress) address: offset 16 or 12 of the IP header.
		filters := tcShow(t, end.ns, "filter", end.dev)
		for _, p := range []*netns.Host{n.Host("b"), n.Host("c")} {
			hex := fmt.Sprintf("%08x/ffffffff %s", p.Addr.As4(), end.match)
			if !strings.Contains(filters, hex) {
				t.Errorf("%s %s filters lack %q:\n%s", end.ns, end.dev, hex, filters)
			}
		}
	}
	// Back to unshaped: no htb left, on either end.
	if err := a.SetLink(ctx, netns.Link{}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{tcShow(t, a.NS, "qdisc", "eth0"), tcShow(t, sw, "qdisc", "h0")} {
		if strings.Contains(q, "htb") {
			t.Errorf("qdiscs = %q after an unshaped link; want no htb", q)
		}
	}
	// A delay needs netem, which some kernels lack: then the error says so.
	err := a.SetLink(ctx, netns.Link{Rate: 25e6, Delay: 2 * time.Millisecond})
	switch {
	case errors.Is(err, netns.ErrNoNetem):
		if netns.HasNetem() {
			t.Errorf("SetLink says %v, HasNetem says yes", err)
		}
		t.Logf("this kernel has no netem: %v", err)
	case err != nil:
		t.Fatal(err)
	default:
		if q := tcShow(t, a.NS, "qdisc", "eth0"); !strings.Contains(q, "netem") || !strings.Contains(q, "delay 2ms") {
			t.Errorf("qdiscs = %q; want netem delay 2ms", q)
		}
	}
}

func TestLinkValidate(t *testing.T) {
	for _, l := range []netns.Link{{Rate: -1}, {Rate: 1000}, {Rate: 1e12}, {Delay: -time.Second}, {Delay: time.Hour}} {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v: no error", l)
		}
	}
	for _, l := range []netns.Link{{}, {Rate: 1 << 20}, {Rate: 1e9, Delay: time.Millisecond}, {Down: true}} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
}

func TestNewRefusesBadHosts(t *testing.T) {
	netnstest.Require(t)
	for _, hosts := range [][]string{nil, {"A"}, {"a b"}, {"switch"}, {"x", "x"}, {strings.Repeat("a", 33)}} {
		if n, err := netns.New(context.Background(), netns.Options{Hosts: hosts}); err == nil {
			n.Close()
			t.Errorf("hosts %q: no error", hosts)
		}
	}
}

// mine returns the leftovers of Net n.
func mine(n *netns.Net) []string {
	tag := "kvp" + strconv.Itoa(n.N)
	var out []string
	for _, l := range netns.Leftovers() {
		name := l[strings.LastIndexByte(l, ' ')+1:]
		if strings.HasPrefix(name, tag+"-") || name == tag+"gw" || filepath.Base(name) == strconv.Itoa(n.N)+".json" {
			out = append(out, l)
		}
	}
	return out
}

func TestCloseLeavesNothing(t *testing.T) {
	netnstest.Require(t)
	n, err := netns.New(context.Background(), netns.Options{Hosts: []string{"a", "b"}, Link: netns.Link{Rate: 10e6}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mine(n); len(got) != 4+1 { // switch, a, b, gateway; owner file
		t.Errorf("while open: %q; want the switch, two hosts, the gateway and the owner file", got)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mine(n); len(got) > 0 {
		t.Errorf("after Close: %q left", got)
	}
}

func TestCleanStaleRemovesANetWhoseOwnerIsGone(t *testing.T) {
	netnstest.Require(t)
	n, err := netns.New(context.Background(), netns.Options{Hosts: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// Hand the Net to a process that has ended, as after a kill -9.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"pid": dead.Process.Pid, "start": 1})
	owner := filepath.Join("/run/kvpool-netns", strconv.Itoa(n.N)+".json")
	if err := os.WriteFile(owner, b, 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := netns.CleanStale()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(removed, func(s string) bool { return strings.HasPrefix(s, "kvp"+strconv.Itoa(n.N)+" ") }) {
		t.Errorf("CleanStale removed %q; want net %d", removed, n.N)
	}
	if got := mine(n); len(got) > 0 {
		t.Errorf("after CleanStale: %q left", got)
	}
	// A live owner's Net is left alone.
	live := newNet(t, "a")
	if _, err := netns.CleanStale(); err != nil {
		t.Fatal(err)
	}
	if got := mine(live); len(got) == 0 {
		t.Error("CleanStale removed a Net whose owner is alive")
	}
}

func TestMain(m *testing.M) { os.Exit(netnstest.Main(m)) }

func TestOwnedListsTheNetsOfThisProcess(t *testing.T) {
	netnstest.Require(t)
	n, err := netns.New(context.Background(), netns.Options{Hosts: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	name := "kvp" + strconv.Itoa(n.N)
	if !slices.Contains(netns.Owned(), name) {
		t.Errorf("Owned() = %q while %s is open", netns.Owned(), name)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(netns.Owned(), name) {
		t.Errorf("Owned() = %q after %s closed", netns.Owned(), name)
	}
}

// TestConcurrentNewAfterACrash: several New at once, all finding the same
// dead owner's Net, all succeed on distinct numbers, and the dead Net is
// gone (they clean it under one lock, and "already gone" is no error).
func TestConcurrentNewAfterACrash(t *testing.T) {
	netnstest.Require(t)
	dead, err := netns.New(context.Background(), netns.Options{Hosts: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"pid": gone.Process.Pid, "start": 1})
	if err := os.WriteFile(filepath.Join("/run/kvpool-netns", strconv.Itoa(dead.N)+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	const k = 4
	nets := make([]*netns.Net, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { nets[i], errs[i] = netns.New(context.Background(), netns.Options{Hosts: []string{"a"}}) })
	}
	wg.Wait()
	seen := map[int]bool{}
	for i := range k {
		if errs[i] != nil {
			t.Errorf("New %d: %v", i, errs[i])
			continue
		}
		defer nets[i].Close()
		if seen[nets[i].N] {
			t.Errorf("two Nets numbered %d", nets[i].N)
		}
		seen[nets[i].N] = true
	}
	if got := mine(dead); len(got) > 0 && !seen[dead.N] {
		t.Errorf("the dead owner's Net is still there: %q", got)
	}
}
