// Package netshare models transfers that share links by processor sharing,
// in simulated time: every link (a NIC's egress, a NIC's ingress, an SSD)
// has a capacity in bytes per second, every active flow crosses one to four
// links, and a flow's rate is the smallest fair share among its links:
//
//	rate(f) = min over links l of f: capacity(l) / active flows on l
//
// Rates are recomputed whenever a flow starts or ends. This is a simple
// approximation of max–min fairness: a flow held back by one link does not
// hand its unused share on another link to the other flows there, so a link
// can stay partly idle. It is exact for one flow, for flows that all share
// one bottleneck, and for symmetric patterns (n flows into one ingress from
// n idle sources each get capacity/n).
//
// Time is a float64 in seconds chosen by the caller; the Network only moves
// forward. A Network is not safe for concurrent use.
package netshare

import (
	"fmt"
	"math"
)

// MaxLinks is the most links one flow may cross (a remote SSD read crosses
// the source SSD, the source egress and the destination ingress).
const MaxLinks = 4

// Network is a set of links and the flows active on them.
type Network struct {
	caps   []float64
	counts []int
	flows  []flow
	now    float64
	// next is the earliest finish time among flows (+Inf when none).
	next float64
}

type flow struct {
	tag    int
	nlinks int
	links  [MaxLinks]int32
	rem    float64 // bytes left at time now
	rate   float64 // bytes/s since now
	finish float64 // now + rem/rate
}

// New returns a network of len(capacities) links, link i carrying
// capacities[i] bytes per second. Every capacity must be finite and > 0.
func New(capacities []float64) (*Network, error) {
	for i, c := range capacities {
		if !(c > 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("netshare: capacity of link %d must be finite and > 0, got %g", i, c)
		}
	}
	return &Network{
		caps:   append([]float64(nil), capacities...),
		counts: make([]int, len(capacities)),
		next:   math.Inf(1),
	}, nil
}

// Now returns the time the network has been advanced to.
func (n *Network) Now() float64 { return n.now }

// Links returns the number of links.
func (n *Network) Links() int { return len(n.caps) }

// Flows returns the number of active flows.
func (n *Network) Flows() int { return len(n.flows) }

// Active returns the number of active flows crossing link l (0 for an
// unknown link).
func (n *Network) Active(l int) int {
	if l < 0 || l >= len(n.counts) {
		return 0
	}
	return n.counts[l]
}

func (n *Network) checkLinks(links []int) error {
	if len(links) == 0 || len(links) > MaxLinks {
		return fmt.Errorf("netshare: a flow crosses 1 to %d links, got %d", MaxLinks, len(links))
	}
	for i, l := range links {
		if l < 0 || l >= len(n.caps) {
			return fmt.Errorf("netshare: link %d of flow is %d, outside [0, %d)", i, l, len(n.caps))
		}
		for _, m := range links[:i] {
			if m == l {
				return fmt.Errorf("netshare: flow crosses link %d twice", l)
			}
		}
	}
	return nil
}

// Start advances the network to now (completing any flows that finish by
// then, which are appended to done and returned) and starts a flow of bytes
// over links, identified by tag in later completions. bytes must be finite
// and > 0 and now must not be before Now().
func (n *Network) Start(now, bytes float64, links []int, tag int, done []int) ([]int, error) {
	if !(bytes > 0) || math.IsInf(bytes, 0) {
		return done, fmt.Errorf("netshare: start flow %d: size must be finite and > 0, got %g", tag, bytes)
	}
	if err := n.checkLinks(links); err != nil {
		return done, fmt.Errorf("netshare: start flow %d: %w", tag, err)
	}
	done, err := n.Advance(now, done)
	if err != nil {
		return done, err
	}
	f := flow{tag: tag, nlinks: len(links), rem: bytes}
	for i, l := range links {
		f.links[i] = int32(l)
		n.counts[l]++
	}
	n.flows = append(n.flows, f)
	n.reshare()
	return done, nil
}

// NextDone returns the earliest time an active flow finishes, and false when
// no flow is active.
func (n *Network) NextDone() (float64, bool) {
	return n.next, len(n.flows) > 0
}

// Advance moves the network forward to time t, completing every flow that
// finishes at or before t in finish order (ties in start order), and appends
// their tags to done. Rates are reshared after each completion. t before
// Now() is an error.
func (n *Network) Advance(t float64, done []int) ([]int, error) {
	if t < n.now || math.IsNaN(t) {
		return done, fmt.Errorf("netshare: advance to %g s: before the current time %g s", t, n.now)
	}
	for len(n.flows) > 0 && n.next <= t {
		done = n.step(n.next, done)
	}
	if t > n.now {
		n.progress(t)
	}
	return done, nil
}

// step advances to t = the earliest finish time and removes the flows that
// finish then.
func (n *Network) step(t float64, done []int) []int {
	kept := n.flows[:0]
	for _, f := range n.flows {
		if f.finish <= t {
			done = append(done, f.tag)
			for _, l := range f.links[:f.nlinks] {
				n.counts[l]--
			}
			continue
		}
		kept = append(kept, f)
	}
	n.flows = kept
	n.progress(t)
	n.reshare()
	return done
}

// progress moves every flow's remaining bytes forward to t at its current
// rate, without resharing.
func (n *Network) progress(t float64) {
	dt := t - n.now
	for i := range n.flows {
		f := &n.flows[i]
		f.rem = max(f.rem-f.rate*dt, 0)
	}
	n.now = t
}

// reshare recomputes every flow's rate and finish time from the link counts.
func (n *Network) reshare() {
	n.next = math.Inf(1)
	for i := range n.flows {
		f := &n.flows[i]
		f.rate = math.Inf(1)
		for _, l := range f.links[:f.nlinks] {
			f.rate = min(f.rate, n.caps[l]/float64(n.counts[l]))
		}
		f.finish = n.now + f.rem/f.rate
		n.next = min(n.next, f.finish)
	}
}

// Estimate returns how long a flow of bytes over links would take if it
// started now and the shares stayed as they are with it added (one more
// flow on each of its links). Invalid links give an error; bytes <= 0 take
// 0 s.
func (n *Network) Estimate(bytes float64, links []int) (float64, error) {
	if err := n.checkLinks(links); err != nil {
		return 0, fmt.Errorf("netshare: estimate: %w", err)
	}
	if !(bytes > 0) {
		return 0, nil
	}
	rate := math.Inf(1)
	for _, l := range links {
		rate = min(rate, n.caps[l]/float64(n.counts[l]+1))
	}
	return bytes / rate, nil
}

// Capacity returns the capacity of link l in bytes per second (0 for an
// unknown link).
func (n *Network) Capacity(l int) float64 {
	if l < 0 || l >= len(n.caps) {
		return 0
	}
	return n.caps[l]
}

// Remaining returns the bytes left of the active flow with tag, and false
// if no such flow is active.
func (n *Network) Remaining(tag int) (float64, bool) {
	for _, f := range n.flows {
		if f.tag == tag {
			return f.rem, true
		}
	}
	return 0, false
}
