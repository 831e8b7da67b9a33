package replay

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/cluster"
	"github.com/kvpool/kvpool/internal/lab/costmodel"
	"github.com/kvpool/kvpool/internal/lab/sim"
	"github.com/kvpool/kvpool/internal/netns"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/trace"
)

// PrefillMode is how a worker spends a prefill's live time.
type PrefillMode string

// The prefill modes.
const (
	// PrefillSleep sleeps for the prefill's live duration.
	PrefillSleep PrefillMode = "sleep"
	// PrefillCPU keeps a core busy with a floating-point kernel for the
	// prefill's live duration (it checks the clock, so it is calibrated
	// to the duration by construction).
	PrefillCPU PrefillMode = "cpu"
)

// VerifyMode is how received blocks are checked.
type VerifyMode string

// The verify modes.
const (
	// VerifyChecksum relies on the node client's per-block checksum and
	// key check.
	VerifyChecksum VerifyMode = "checksum"
	// VerifyFull also regenerates each received block (package payload)
	// and compares it byte for byte.
	VerifyFull VerifyMode = "full"
)

// NetMode is how the network between the nodes is limited.
type NetMode string

// The network modes (docs/design.md, "Network modes").
const (
	// NetPacer paces each node's network egress and ingress with token
	// buckets inside the node, every process on one loopback: works
	// anywhere.
	NetPacer NetMode = "pacer"
	// NetKernel puts every node, and the worker co-located with it, on a
	// network host of its own whose link the kernel shapes (package
	// netns; Linux, root, iproute2): the node's network pacers are off,
	// its SSD pacers stay.
	NetKernel NetMode = "kernel"
)

// NetModes lists the network modes.
func NetModes() []NetMode { return []NetMode{NetPacer, NetKernel} }

// Defaults of Options; a zero field takes these values.
const (
	// DefaultPayloadBytes is 64 KiB per block, the low end of the live
	// payloads (64–256 KiB; docs/design.md, "Scale model"): the most blocks
	// per second a 2-core machine can move at a given modelled bandwidth.
	DefaultPayloadBytes = 64 << 10
	// DefaultSpeed compresses trace time 50×: a 10 s conversation-trace
	// bucket of prefills (≈1–4 s each in model time) becomes 20–80 ms of
	// sleeps, long enough that scheduler noise (≈1 ms) stays small.
	DefaultSpeed = 50
	// DefaultTenant namespaces the replay's blocks.
	DefaultTenant = "replay"
	// DefaultProgressEvery refreshes the progress line on a terminal four
	// times a second.
	DefaultProgressEvery = 250 * time.Millisecond
	// DefaultProgressLineEvery writes a progress line to a file or pipe
	// every 5 s: a few lines per demo arm (about 25 s each), few enough
	// to read in a log.
	DefaultProgressLineEvery = 5 * time.Second
	// DefaultIOTimeout bounds one call of a request to a node (a client
	// Fetch or Access; the client's RequestTimeout) in live time:
	// 30 s, far beyond any paced transfer of one request at the default
	// scale (a 128k-token prefix is 250 blocks, 16 MiB at 64 KiB), so it
	// only fires on a stuck node.
	DefaultIOTimeout = 30 * time.Second
	// MaxLagP99 is the dispatcher lag p99 past which the summary says
	// the machine could not keep up: ClusterHeartbeat, 20 ms live (one
	// model second at the default speed). A block a request stores enters
	// the master's index only with its node's next heartbeat, so every
	// request already sees the cache up to a heartbeat late; a dispatch
	// late by less than that, even at p99, changes what requests find no
	// more than the heartbeat does (the mean lateness, which moves the
	// mean TTFT, is bounded separately: validate.KeptUp). Measured with
	// kvpool demo's defaults on the project's 2-core VM: 1–12 ms per arm
	// on an idle machine (the README's run; the former bound, 10 ms, put
	// its local rr arm over it), 20–130 ms with other builds running
	// (load average 7–8), where the live mean TTFTs ran 9–39% above the
	// simulator's.
	MaxLagP99 = ClusterHeartbeat
)

// Options configure one replay. The zero value of every field means its
// default; Validate names the first bad field.
type Options struct {
	// Master is the address of the running cluster's master (host:port).
	Master string
	// Token is the cluster's auth token, if any.
	Token string
	// Tenant namespaces the replay's blocks (DefaultTenant).
	Tenant string
	// Mode is the cache mode (sim.DefaultMode).
	Mode sim.Mode
	// Routing is the routing policy (sim.DefaultRouting).
	Routing sim.Routing
	// PayloadBytes is the live size of one block (DefaultPayloadBytes).
	// It must equal the nodes' block size.
	PayloadBytes int
	// Speed is the time compression S: arrivals at timestamp/S, prefills
	// of model_time/S, paced paths at model bandwidth × r × S
	// (DefaultSpeed).
	Speed float64
	// NICGbps and SSDGBps are the modelled bandwidths the cost estimates
	// use and the pacers are derived from (sim.DefaultNICGbps,
	// sim.DefaultSSDGBps).
	NICGbps, SSDGBps float64
	// Profile is the model cost profile (zero: costmodel.Default()).
	Profile costmodel.Profile
	// Prefill is the prefill mode (PrefillSleep).
	Prefill PrefillMode
	// NoPrefetch turns prefetching off: a request's transfer starts at the
	// head of its worker's queue instead of at its arrival.
	NoPrefetch bool
	// Verify is the verification of received blocks (VerifyFull).
	Verify VerifyMode
	// SLOSeconds is the TTFT SLO in model seconds (sim.DefaultSLOSeconds).
	SLOSeconds float64
	// Reject turns on the simulator's admission control (sim.Options
	// Reject): a request whose estimated TTFT at arrival exceeds
	// SLOSeconds is turned away (its record has Rejected set) and never
	// runs.
	Reject bool
	// RAMBlocks, SSDBlocks and Policy describe the nodes' caches for the
	// summary (the cluster is configured with them; see NodeArgs and
	// RAMBytes). Zero means sim's defaults.
	RAMBlocks, SSDBlocks int
	Policy               string
	// IOTimeout bounds one Fetch or Access in live time (DefaultIOTimeout).
	IOTimeout time.Duration
	// Net is how the cluster's network is limited (NetPacer). With
	// NetKernel, ClusterOptions puts the nodes on hosts of their own with
	// links at the pacers' network rate, and HostDial must say how to
	// start a connection on each node's host.
	Net NetMode
	// HostDial, when set, returns the dialer of node id's host: worker i
	// then makes its reads and stores with a client of its own whose
	// connections start on node i's host (NetKernel; Attach sets it).
	HostDial func(id string) func(ctx context.Context, network, addr string) (net.Conn, error)
	// Progress, when not nil, receives the progress display: with
	// ProgressTerminal set (Progress is a terminal) one line redrawn in
	// place every ProgressEvery (DefaultProgressEvery), otherwise one
	// line written every ProgressLineEvery (DefaultProgressLineEvery).
	Progress          io.Writer
	ProgressTerminal  bool
	ProgressEvery     time.Duration
	ProgressLineEvery time.Duration
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options) WithDefaults() Options {
	if o.Tenant == "" {
		o.Tenant = DefaultTenant
	}
	if o.Net == "" {
		o.Net = NetPacer
	}
	if o.Mode == "" {
		o.Mode = sim.DefaultMode
	}
	if o.Routing == "" {
		o.Routing = sim.DefaultRouting
	}
	if o.PayloadBytes == 0 {
		o.PayloadBytes = DefaultPayloadBytes
	}
	if o.Speed == 0 {
		o.Speed = DefaultSpeed
	}
	if o.NICGbps == 0 {
		o.NICGbps = sim.DefaultNICGbps
	}
	if o.SSDGBps == 0 {
		o.SSDGBps = sim.DefaultSSDGBps
	}
	if o.Profile.Name == "" {
		o.Profile = costmodel.Default()
	}
	if o.Prefill == "" {
		o.Prefill = PrefillSleep
	}
	if o.Verify == "" {
		o.Verify = VerifyFull
	}
	if o.SLOSeconds == 0 {
		o.SLOSeconds = sim.DefaultSLOSeconds
	}
	if o.RAMBlocks == 0 {
		o.RAMBlocks = sim.DefaultRAMBlocks
	}
	if o.Policy == "" {
		o.Policy = sim.DefaultPolicy
	}
	if o.IOTimeout == 0 {
		o.IOTimeout = DefaultIOTimeout
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	if o.ProgressLineEvery == 0 {
		o.ProgressLineEvery = DefaultProgressLineEvery
	}
	return o
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// maxPaced bounds a node's byte counts and pacer rates: they are int64
// flags of `kvpool node` (NodeArgs, ClusterOptions).
const maxPaced = float64(math.MaxInt64)

// pacedOK reports whether both pacer rates fit a node's int64 flags.
func pacedOK(net, ssd float64) bool { return net < maxPaced && ssd < maxPaced }

// Validate reports the first bad field by name. Zero fields are valid.
func (o Options) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("replay: %w", option.Errorf(field, format, a...))
	}
	o = o.WithDefaults()
	switch {
	case o.Master == "":
		return bad("Master", "the master's address is required")
	case o.Mode != sim.ModeRecompute && o.Mode != sim.ModeLocal && o.Mode != sim.ModeGlobal:
		return bad("Mode", "unknown mode %q (known: %v)", o.Mode, sim.Modes())
	case o.Routing != sim.RoutingRoundRobin && o.Routing != sim.RoutingLeastLoaded && o.Routing != sim.RoutingCacheAware:
		return bad("Routing", "routing %q is not replayed live (known: %v, %v, %v; joint is simulator-only)",
			o.Routing, sim.RoutingRoundRobin, sim.RoutingLeastLoaded, sim.RoutingCacheAware)
	case o.PayloadBytes < 8:
		return bad("PayloadBytes", "must be at least 8 bytes, got %d", o.PayloadBytes)
	case !positive(o.Speed):
		return bad("Speed", "must be finite and > 0, got %g", o.Speed)
	case !positive(o.NICGbps):
		return bad("NICGbps", "must be finite and > 0, got %g", o.NICGbps)
	case !positive(o.SSDGBps):
		return bad("SSDGBps", "must be finite and > 0, got %g", o.SSDGBps)
	case o.Prefill != PrefillSleep && o.Prefill != PrefillCPU:
		return bad("Prefill", "unknown prefill mode %q (known: sleep, cpu)", o.Prefill)
	case o.Verify != VerifyChecksum && o.Verify != VerifyFull:
		return bad("Verify", "unknown verify mode %q (known: checksum, full)", o.Verify)
	case !positive(o.SLOSeconds):
		return bad("SLOSeconds", "must be finite and > 0, got %g", o.SLOSeconds)
	case o.RAMBlocks < 0:
		return bad("RAMBlocks", "must be >= 0, got %d", o.RAMBlocks)
	case o.SSDBlocks < 0:
		return bad("SSDBlocks", "must be >= 0, got %d", o.SSDBlocks)
	case float64(o.RAMBlocks)*float64(o.PayloadBytes) >= maxPaced/2:
		// RAMSlotsFor(RAMBlocks) payloads are a node's RAM in bytes: half
		// the bound leaves room for RAMSlotsFor's 1/0.9.
		return bad("RAMBlocks", "%d blocks of %d bytes are more RAM than a node can have", o.RAMBlocks, o.PayloadBytes)
	case float64(o.SSDBlocks)*float64(o.PayloadBytes) >= maxPaced/2:
		return bad("SSDBlocks", "%d blocks of %d bytes are more SSD than a node can have", o.SSDBlocks, o.PayloadBytes)
	case !pacedOK(o.PacerRates()):
		net, ssd := o.PacerRates()
		return bad("Speed", "%g makes the live pacers %.3g B/s (network) and %.3g B/s (SSD), more than a node can pace; lower the speed or the modelled bandwidths",
			o.Speed, net, ssd)
	case o.Net != NetPacer && o.Net != NetKernel:
		return bad("Net", "unknown network mode %q (known: %v)", o.Net, NetModes())
	case o.Net == NetKernel && o.kernelRate() != nil:
		return bad("Speed", "%v", o.kernelRate())
	case o.IOTimeout < 0:
		return bad("IOTimeout", "must be >= 0, got %v", o.IOTimeout)
	case o.ProgressEvery < 0:
		return bad("ProgressEvery", "must be >= 0, got %v", o.ProgressEvery)
	case o.ProgressLineEvery < 0:
		return bad("ProgressLineEvery", "must be >= 0, got %v", o.ProgressLineEvery)
	}
	if spec, err := policy.ParseSpec(o.Policy); err != nil {
		return bad("Policy", "%w", err)
	} else if spec.NeedsFuture() {
		return bad("Policy", "%s needs to know the future (simulator only)", spec.Eviction)
	}
	if err := (block.Key{Tenant: o.Tenant}).Validate(); err != nil {
		return bad("Tenant", "%w", err)
	}
	if err := o.Profile.Validate(); err != nil {
		return bad("Profile", "%w", err)
	}
	if o.Profile.BlockTokens != trace.BlockTokens {
		return bad("Profile", "profile %q has %d-token blocks; the traces' keys cover %d tokens",
			o.Profile.Name, o.Profile.BlockTokens, trace.BlockTokens)
	}
	return nil
}

// scale is r × S: live bytes per second per modelled byte per second.
func (o Options) scale() float64 {
	return float64(o.PayloadBytes) / float64(o.Profile.BlockBytes()) * o.Speed
}

// PacerRates returns the live rates (bytes/s) of the nodes' network (each
// direction) and SSD paths under the scale model: model bandwidth ×
// (payload / model block bytes) × speed (docs/design.md, "Scale model").
func (o Options) PacerRates() (net, ssd float64) {
	o = o.WithDefaults()
	s := o.scale()
	return o.NICGbps * 1e9 / 8 * s, o.SSDGBps * 1e9 * s
}

// RAMSlotsFor returns the RAM slots a node gets for a resident set of
// ramBlocks: ramBlocks / 0.9, rounded up. The node keeps exactly ramBlocks
// resident (RAMWatermark), so the master's pool usage stays at or under
// 0.9, below its eviction watermark (0.95, master.Options.HighWatermark):
// the master never orders evictions by its own global policy, and every
// eviction is the node policy's, as in the simulator, where each
// instance's cache is alone. The 5% margin covers blocks a concurrent
// Put holds for a moment above the watermark.
func RAMSlotsFor(ramBlocks int) int64 {
	const poolUsage = 0.9 // under the master's 0.95
	return int64(math.Ceil(float64(ramBlocks) / poolUsage))
}

// RAMWatermark returns the node's RAM high and low watermark for a
// resident set of ramBlocks in RAMSlotsFor(ramBlocks) slots: both
// ramBlocks / slots, so the node evicts one block at a time as soon as a
// Put takes it past ramBlocks, after the Put, like the simulator's cache
// (policy.Cache: insert, then evict down to the capacity), rather than in
// batches from 95% down to 90% of its slots (the node's defaults), which
// would leave it between 90% and 95% of the capacity. The node also
// sizes its policies for the high watermark's ramBlocks blocks, as the
// simulator does.
func RAMWatermark(ramBlocks int) float64 {
	return float64(ramBlocks) / float64(RAMSlotsFor(ramBlocks))
}

// NetDescription says how the live network is limited, for a report:
// the mode and the rate each node's link (or pacers) runs at.
func (o Options) NetDescription() string {
	o = o.WithDefaults()
	net, _ := o.PacerRates()
	if o.Net == NetKernel {
		return fmt.Sprintf("kernel links (a network host per node), %.1f MB/s each way", net/1e6)
	}
	return fmt.Sprintf("pacers in the nodes (one loopback), %.1f MB/s each way", net/1e6)
}

// kernelRate says why the network rate of the scale model cannot be a
// kernel-shaped link, or nil.
func (o Options) kernelRate() error {
	net, _ := o.PacerRates()
	if err := (netns.Link{Rate: net}).Validate(); err != nil {
		return fmt.Errorf("with --net kernel the links run at the pacers' network rate, %.3g B/s (model bandwidth × payload / model block bytes × speed): %w", net, err)
	}
	return nil
}

// NodeArgs returns the `kvpool node` flags of the scale model: the
// pacers (the network's only with NetPacer: with NetKernel the links are
// the kernel's), the RAM eviction policy of the simulator's caches, and
// the RAM watermarks of RAMWatermark.
func (o Options) NodeArgs() []string {
	o = o.WithDefaults()
	net, ssd := o.PacerRates()
	rate := func(v float64) string { return strconv.FormatInt(int64(math.Max(1, math.Round(v))), 10) + "B/s" }
	wm := strconv.FormatFloat(RAMWatermark(o.RAMBlocks), 'g', -1, 64)
	var args []string
	if o.Net != NetKernel {
		args = append(args, "--pacers-net-egress", rate(net), "--pacers-net-ingress", rate(net))
	}
	return append(args,
		"--pacers-ssd-read", rate(ssd),
		"--pacers-ssd-write", rate(ssd),
		"--ram-policy", o.Policy,
		"--ram-high-watermark", wm,
		"--ram-low-watermark", wm,
	)
}

// ClusterHeartbeat is the heartbeat of a cluster started for a replay:
// 20 ms, so a stored block enters the master's index within one model
// second at the default speed (50×), while N nodes' beats stay far below
// the master's capacity.
const ClusterHeartbeat = 20 * time.Millisecond

// ClusterOptions returns the options of a local cluster of n nodes sized
// and paced for o under the scale model: block size = payload, RAM =
// RAMSlotsFor(RAMBlocks) payloads, SSD of SSDBlocks payloads when > 0, the
// pacers and RAM policy of NodeArgs, a ClusterHeartbeat heartbeat, and a
// max object size of the payload when that is over the nodes' default.
func ClusterOptions(n int, o Options) cluster.Options {
	o = o.WithDefaults()
	co := cluster.Options{
		Nodes:         n,
		BlockSize:     int64(o.PayloadBytes),
		RAMBytes:      RAMSlotsFor(o.RAMBlocks) * int64(o.PayloadBytes),
		Heartbeat:     ClusterHeartbeat,
		ExtraNodeArgs: o.NodeArgs(),
	}
	if int64(o.PayloadBytes) > cluster.DefaultMaxObjectBytes {
		co.MaxObjectBytes = int64(o.PayloadBytes) // else every put is refused as too large
	}
	if o.SSDBlocks > 0 {
		co.SSD = true
		co.SSDBytes = int64(o.SSDBlocks) * int64(o.PayloadBytes)
	}
	if o.Net == NetKernel {
		net, _ := o.PacerRates()
		co.Netns, co.Link = true, netns.Link{Rate: net}
	}
	return co
}

// Attach returns o set to replay against the running cluster c: its
// master and token, and with network hosts (NetKernel) each node's
// dialer, so that worker i's connections start on node i's host.
func Attach(c *cluster.Cluster, o Options) Options {
	o.Master, o.Token = c.Master.Addr, c.Token
	if n := c.Net(); n != nil {
		o.HostDial = func(id string) func(ctx context.Context, network, addr string) (net.Conn, error) {
			if h := n.Host(id); h != nil {
				return h.DialContext
			}
			return nil
		}
	}
	return o
}
