package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"time"
)

const (
	// maxNets bounds the Net numbers N, one /24 each under 10.213.0.0/16.
	maxNets = 256
	// maxHosts bounds a Net's hosts: addresses .10 to .254.
	maxHosts = 245
	// firstHost is the last byte of host 0's address.
	firstHost = 10
	// prefix starts every namespace and root-namespace link a Net makes.
	prefix = "kvp"
	// cmdTimeout bounds one ip or tc command: 10 s, far more than any
	// takes on an idle machine, and a hung one must not hang the caller.
	cmdTimeout = 10 * time.Second
)

// hostName is what a host may be called: a short name, as a process's
// (master, node-0).
var hostName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// Options configure a Net.
type Options struct {
	// Hosts names the hosts, one namespace each, in address order: host k
	// is 10.213.N.(10+k). Names are lower-case letters, digits and '-',
	// at most 32 characters, and distinct.
	Hosts []string
	// Link is every host's link at the start (SetLink changes one).
	Link Link
}

// Link is one host's link to the bridge, each direction shaped alike.
type Link struct {
	// Rate is the link's rate in bytes per second in each direction, as
	// the kernel counts them (Ethernet frames: about 4% more than the TCP
	// payload at a 1500-byte MTU); 0 leaves the link unshaped.
	Rate float64
	// Delay is added to every packet the host sends (netem; this
	// machine's kernel may not have it: ErrNoNetem); 0 adds none.
	Delay time.Duration
	// Down cuts the host off the bridge: its packets and those sent to it
	// are dropped, as in a partition.
	Down bool
}

// Validate reports the first bad field, in the terms of kvpool's flags.
func (l Link) Validate() error {
	switch {
	case !(l.Rate >= 0) || l.Rate > maxRate:
		return fmt.Errorf("netns: link rate %g B/s: want 0 (unshaped) to %g B/s", l.Rate, maxRate)
	case l.Rate > 0 && l.Rate < minRate:
		return fmt.Errorf("netns: link rate %g B/s: want at least %d B/s (or 0, unshaped)", l.Rate, minRate)
	case l.Delay < 0 || l.Delay > maxDelay:
		return fmt.Errorf("netns: link delay %v: want 0 to %v", l.Delay, maxDelay)
	}
	return nil
}

// Net is a set of hosts on one bridge. Its methods are safe for
// concurrent use.
type Net struct {
	// N numbers the Net; Prefix is its subnet and Gateway the root
	// namespace's address on it.
	N       int
	Prefix  netip.Prefix
	Gateway netip.Addr

	hosts []*Host
	owner string // the owner file

	mu     sync.Mutex // serialises link changes and Close
	closed bool
}

// Host is one namespace of a Net.
type Host struct {
	// Name is the host's name (Options.Hosts); NS names its namespace
	// (ip netns list) and Addr is its address.
	Name string
	NS   string
	Addr netip.Addr

	net   *Net
	index int
	link  Link // guarded by net.mu
}

// New makes the hosts of o: a switch namespace with a bridge, one
// namespace per host with a veth pair to the bridge, and the root
// namespace's gateway, each host's link set to o.Link. It first removes
// the Nets of owners that are gone, as CleanStale does, and takes a free
// number under a lock that other processes' New and CleanStale respect.
// On failure everything it made is removed.
func New(ctx context.Context, o Options) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if len(o.Hosts) == 0 || len(o.Hosts) > maxHosts {
		return nil, fmt.Errorf("netns: %d hosts: want 1 to %d", len(o.Hosts), maxHosts)
	}
	seen := map[string]bool{}
	for _, h := range o.Hosts {
		if !hostName.MatchString(h) || h == "switch" {
			return nil, fmt.Errorf("netns: host name %q: want lower-case letters, digits and '-', at most 32 characters, not \"switch\"", h)
		}
		if seen[h] {
			return nil, fmt.Errorf("netns: host name %q given twice", h)
		}
		seen[h] = true
	}
	if err := o.Link.Validate(); err != nil {
		return nil, err
	}
	var n *Net
	err := locked(func() error {
		// Best effort: a Net that cannot be removed now keeps its number,
		// which claim skips; CleanStale says what it removed to a caller
		// that asks.
		cleanStale()
		var err error
		n, err = claim()
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := n.build(ctx, o); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// newNet returns Net number num, before anything is made.
func newNet(num int, owner string) *Net {
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte(num), 0}), 24)
	return &Net{N: num, Prefix: p, Gateway: netip.AddrFrom4([4]byte{10, 213, byte(num), 1}), owner: owner}
}

func (n *Net) switchNS() string    { return nsName(n.N, "switch") }
func (n *Net) gatewayLink() string { return prefix + strconv.Itoa(n.N) + "gw" }

// nsName is the name of Net num's namespace for host.
func nsName(num int, host string) string { return prefix + strconv.Itoa(num) + "-" + host }

// build makes the switch, the gateway and the hosts.
func (n *Net) build(ctx context.Context, o Options) error {
	sw := n.switchNS()
	steps := [][]string{
		{"ip", "netns", "add", sw},
		{"ip", "-n", sw, "link", "set", "lo", "up"},
		{"ip", "-n", sw, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", sw, "link", "set", "br0", "up"},
		{"ip", "link", "add", n.gatewayLink(), "type", "veth", "peer", "name", "gw", "netns", sw},
		{"ip", "addr", "add", netip.PrefixFrom(n.Gateway, 24).String(), "dev", n.gatewayLink()},
		{"ip", "link", "set", n.gatewayLink(), "up"},
		{"ip", "-n", sw, "link", "set", "gw", "master", "br0"},
		{"ip", "-n", sw, "link", "set", "gw", "up"},
	}
	for k, name := range o.Hosts {
		h := &Host{Name: name, NS: nsName(n.N, name), Addr: netip.AddrFrom4([4]byte{10, 213, byte(n.N), byte(firstHost + k)}), net: n, index: k}
		n.hosts = append(n.hosts, h)
		port := h.port()
		steps = append(steps,
			[]string{"ip", "netns", "add", h.NS},
			[]string{"ip", "-n", h.NS, "link", "set", "lo", "up"},
			[]string{"ip", "link", "add", "eth0", "netns", h.NS, "type", "veth", "peer", "name", port, "netns", sw},
			[]string{"ip", "-n", h.NS, "addr", "add", netip.PrefixFrom(h.Addr, 24).String(), "dev", "eth0"},
			[]string{"ip", "-n", h.NS, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", sw, "link", "set", port, "master", "br0"},
			[]string{"ip", "-n", sw, "link", "set", port, "up"},
		)
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return err
		}
	}
	for _, h := range n.hosts {
		if err := h.apply(ctx, o.Link); err != nil {
			return err
		}
	}
	return nil
}

// Hosts returns the hosts in the order of Options.Hosts.
func (n *Net) Hosts() []*Host { return n.hosts }

// Host returns the host named name, or nil.
func (n *Net) Host(name string) *Host {
	for _, h := range n.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// port is the host's port on the bridge, in the switch namespace.
func (h *Host) port() string { return "h" + strconv.Itoa(h.index) }

// Link returns the host's link as last set.
func (h *Host) Link() Link {
	h.net.mu.Lock()
	defer h.net.mu.Unlock()
	return h.link
}

// SetLink changes the host's link: its rate and delay, or whether it is
// cut off.
func (h *Host) SetLink(ctx context.Context, l Link) error {
	if err := l.Validate(); err != nil {
		return err
	}
	return h.apply(ctx, l)
}

// apply sets the host's link to l.
func (h *Host) apply(ctx context.Context, l Link) error {
	n := h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: the net is closed")
	}
	// Egress: the host's eth0; ingress: its port on the bridge. Delay is
	// one-way, on what the host sends.
	var peers []netip.Addr
	for _, o := range n.hosts {
		if o != h {
			peers = append(peers, o.Addr)
		}
	}
	if err := shape(ctx, h.NS, "eth0", l.Rate, l.Delay, "dst", peers); err != nil {
		return fmt.Errorf("netns: host %s egress: %w", h.Name, err)
	}
	if err := shape(ctx, n.switchNS(), h.port(), l.Rate, 0, "src", peers); err != nil {
		return fmt.Errorf("netns: host %s ingress: %w", h.Name, err)
	}
	state := "up"
	if l.Down {
		state = "down"
	}
	if err := run(ctx, "ip", "-n", n.switchNS(), "link", "set", h.port(), state); err != nil {
		return fmt.Errorf("netns: host %s: %w", h.Name, err)
	}
	h.link = l
	return nil
}

// Close removes the Net's namespaces, its gateway and its owner file. It
// returns the first error but removes what it can.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	return remove(n.N, n.owner)
}
