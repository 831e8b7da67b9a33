package pacer

import (
	"fmt"
	"time"
)

// Path names one paced I/O path of a node.
type Path int

// The paced paths of a node (docs/design.md, "Scale model").
const (
	NetEgress  Path = iota // bytes the node sends over the network
	NetIngress             // bytes the node receives over the network
	SSDRead                // bytes read from the SSD tier
	SSDWrite               // bytes written to the SSD tier
	// NumPaths is the number of paths; Path values are 0 … NumPaths-1.
	NumPaths
)

// Paths returns every path in order.
func Paths() []Path { return []Path{NetEgress, NetIngress, SSDRead, SSDWrite} }

// String returns the path's metric label: net_egress, net_ingress,
// ssd_read or ssd_write.
func (p Path) String() string {
	switch p {
	case NetEgress:
		return "net_egress"
	case NetIngress:
		return "net_ingress"
	case SSDRead:
		return "ssd_read"
	case SSDWrite:
		return "ssd_write"
	}
	return fmt.Sprintf("path(%d)", int(p))
}

// SetOptions configure a Set: a rate in bytes per second per path (0 =
// unlimited, the zero value), one shared burst rule and clock.
type SetOptions struct {
	NetEgress, NetIngress, SSDRead, SSDWrite float64
	// Burst is every pacer's burst in bytes (0: Options.Burst's default).
	Burst float64
	// Clock is the time source (default: the system clock).
	Clock Clock
}

// Validate reports the first bad field, by name.
func (o SetOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"NetEgress", o.NetEgress}, {"NetIngress", o.NetIngress}, {"SSDRead", o.SSDRead}, {"SSDWrite", o.SSDWrite}} {
		if !finiteNonNeg(f.v) {
			return fmt.Errorf("pacer: SetOptions.%s: %v bytes/s is not a finite non-negative number", f.name, f.v)
		}
	}
	if !finiteNonNeg(o.Burst) {
		return fmt.Errorf("pacer: SetOptions.Burst: %v bytes is not a finite non-negative number", o.Burst)
	}
	return nil
}

// Set holds the pacers of a node, one per Path. It is safe for concurrent
// use (each Pacer is).
type Set struct {
	pacers [NumPaths]*Pacer
}

// NewSet returns the four pacers configured by o.
func NewSet(o SetOptions) (*Set, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Set{}
	rates := [NumPaths]float64{o.NetEgress, o.NetIngress, o.SSDRead, o.SSDWrite}
	for _, path := range Paths() {
		p, err := New(Options{Rate: rates[path], Burst: o.Burst, Clock: o.Clock})
		if err != nil {
			return nil, fmt.Errorf("pacer: new %s pacer: %w", path, err)
		}
		s.pacers[path] = p
	}
	return s, nil
}

// Pacer returns the pacer of path, or nil for a path outside 0 … NumPaths-1.
func (s *Set) Pacer(path Path) *Pacer {
	if path < 0 || path >= NumPaths {
		return nil
	}
	return s.pacers[path]
}

// Waited returns the cumulative time spent waiting, per path, indexed by
// Path.
func (s *Set) Waited() [NumPaths]time.Duration {
	var out [NumPaths]time.Duration
	for i, p := range s.pacers {
		out[i] = p.Waited()
	}
	return out
}
