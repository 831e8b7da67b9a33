package cluster

import (
	"cmp"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/netns"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/tier/ssd"
)

// Defaults of Options (kvpool up's defaults too).
const (
	// DefaultNodes is the number of nodes: 3, the smallest cluster where a
	// block with two replicas can still be read from a third node.
	DefaultNodes = 3
	// DefaultRAMBytes is each node's RAM tier budget: 256 MiB, a thousand
	// 256 KiB live-run blocks per node, small enough for a laptop.
	DefaultRAMBytes = 256 << 20
	// DefaultSSDBytes is each node's SSD tier capacity when SSD is on:
	// 1 GiB, four times the RAM tier (Mooncake's pool is mostly SSD).
	DefaultSSDBytes = 1 << 30
	// DefaultBlockSize is the typical object size the nodes' eviction
	// policies are sized for (not a limit on object size: MaxObjectBytes
	// is): 256 KiB, the largest live payload of the scale model (64–256
	// KiB; docs/design.md, "Scale model").
	DefaultBlockSize = 256 << 10
	// DefaultMaxObjectBytes is the nodes' own default max object size,
	// 64 MiB (config.DefaultMaxObjectBytes).
	DefaultMaxObjectBytes = int64(config.DefaultMaxObjectBytes)
	// DefaultStartTimeout bounds Start's wait for every node to be live:
	// 30 s, a cold start of N processes on a loaded 2-core machine.
	DefaultStartTimeout = 30 * time.Second
	// DefaultStopTimeout is how long Stop waits after SIGTERM before
	// SIGKILL: 10 s, time for a node to flush its SSD tier.
	DefaultStopTimeout = 10 * time.Second
	// maxNodes bounds Options.Nodes: a local cluster is a handful of
	// processes; more would exhaust a laptop's memory at the default RAM.
	maxNodes = 64
)

// Options configure a local cluster. The zero value of each field means
// its default.
type Options struct {
	// Binary is the kvpool executable (default: os.Executable()).
	Binary string
	// Nodes is the number of nodes (DefaultNodes, at most 64).
	Nodes int
	// RAMBytes, SSDBytes and BlockSize configure every node
	// (DefaultRAMBytes, DefaultSSDBytes, DefaultBlockSize). BlockSize is
	// the typical object size the policies are sized for, not a limit.
	RAMBytes, SSDBytes, BlockSize int64
	// MaxObjectBytes is every node's largest object (--max-object-bytes;
	// 0: the node's default, config.DefaultMaxObjectBytes; at most
	// config.MaxObjectBytesLimit). A node takes objects up to its RAM
	// size when that is smaller.
	MaxObjectBytes int64
	// SSD turns every node's SSD tier on, under DataDir/node-<i>/ssd.
	SSD bool
	// RESP turns every node's Redis front on (Endpoint.RESPAddr); with
	// BasePort, node i's is at BasePort+2+2·Nodes+i.
	RESP bool
	// DataDir holds the nodes' data; "" means a temporary directory
	// removed by Stop.
	DataDir string
	// Heartbeat is the nodes' heartbeat interval and NodeTTL the master's
	// node TTL (0: the processes' own defaults). LeaseTTL is the master's
	// read lease (0: its default).
	Heartbeat, NodeTTL, LeaseTTL time.Duration
	// ExtraNodeArgs and ExtraMasterArgs are appended to every node's and
	// the master's command line.
	ExtraNodeArgs, ExtraMasterArgs []string
	// NodeArgs[i] is appended to node i's command line after
	// ExtraNodeArgs (a later flag wins), to start one node differently:
	// a slow node for a fault test, say. Keys must be node indexes.
	NodeArgs map[int][]string
	// NodeEnv[i] is added to node i's environment ("KEY=value" entries,
	// after this process's own; a later entry wins). Keys must be node
	// indexes. SetNodeEnv changes it for the node's next start.
	NodeEnv map[int][]string
	// Stdout and Stderr receive the processes' output, each line prefixed
	// with the process name (nil discards it); an Output collects it for
	// reading while the processes run.
	Stdout, Stderr io.Writer
	// Host is the address every process binds (default 127.0.0.1).
	Host string
	// BasePort, when not 0, numbers the ports: the master at BasePort
	// (data) and BasePort+1 (admin), node i at BasePort+2+2i and
	// BasePort+3+2i. With M masters, master j takes BasePort+2j and
	// BasePort+2j+1 and the nodes start at BasePort+2M; etcd's client
	// and peer ports come last. 0 picks free ports.
	BasePort int
	// StartTimeout bounds the wait for the cluster to come up, and for a
	// restarted process to rejoin (DefaultStartTimeout).
	StartTimeout time.Duration
	// StopTimeout is how long to wait after SIGTERM before SIGKILL
	// (DefaultStopTimeout).
	StopTimeout time.Duration
	// ClusterID is the cluster ID given to the master and every node
	// (--cluster-id); "" means a random one, new for each Start.
	ClusterID string
	// Masters is the number of masters (1; at most 7). More than one
	// starts an etcd (EtcdBinary) first: the masters campaign on it for
	// the leadership of the cluster, and the nodes follow the leader
	// (their --master lists every master, --etcd names the etcd).
	Masters int
	// ElectionTTL is the masters' etcd lease with several masters (0: the
	// master's default, 5 s; whole seconds, at least 2 s).
	ElectionTTL time.Duration
	// EtcdBinary is the etcd executable with several masters (default
	// "etcd", looked up on PATH; Debian's etcd-server package has it).
	EtcdBinary string
	// Netns puts every process on a network host of its own (package
	// netns; needs Linux, root and iproute2): the master and each node
	// get a namespace with an address on a private bridge, and listen on
	// its port BasePort (data; DefaultHostPort when 0), BasePort+1
	// (admin) and BasePort+2 (Redis front). Bytes between two nodes then
	// cross two kernel-shaped links (Link). Host must be "". One master
	// only, for now.
	Netns bool
	// Token is the cluster's auth token, given to every process in
	// $KVPOOL_AUTH_TOKEN; clients present it (client.Options.Token), the
	// admin endpoints want it as a bearer token. With Netns the processes
	// listen beyond loopback, which needs one: "" then means a random one
	// (Cluster.Token, and the file Cluster.TokenFile).
	Token string
	// Link is every node's link with Netns (rate each way, delay, cut
	// off); the master's is never shaped. SetNodeLink changes one.
	Link netns.Link
}

// DefaultHostPort is the first port of every process with Options.Netns:
// each process has a host, an address, of its own, so all use the same
// ports.
const DefaultHostPort = 7700

// maxMasters bounds Options.Masters: an election needs a majority of
// nothing but etcd, so more than a handful of standbys only cost
// processes.
const maxMasters = 7

// Validate reports the first bad field.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

func (o Options) resolve() (Options, error) {
	ints := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"RAMBytes", &o.RAMBytes, DefaultRAMBytes},
		{"SSDBytes", &o.SSDBytes, DefaultSSDBytes},
		{"BlockSize", &o.BlockSize, DefaultBlockSize},
		{"MaxObjectBytes", &o.MaxObjectBytes, DefaultMaxObjectBytes},
	}
	for _, f := range ints {
		switch {
		case *f.v < 0:
			return o, fmt.Errorf("cluster: %w", option.Errorf(f.name, "%d: want >= 0 (0 means the default, %d)", *f.v, f.def))
		case *f.v == 0:
			*f.v = f.def
		}
	}
	switch {
	case o.Nodes < 0:
		return o, fmt.Errorf("cluster: %w", option.Errorf("Nodes", "%d: want >= 0 (0 means the default, %d)", o.Nodes, DefaultNodes))
	case o.Nodes > maxNodes:
		return o, fmt.Errorf("cluster: %w", option.Errorf("Nodes", "%d: want at most %d", o.Nodes, maxNodes))
	case o.Nodes == 0:
		o.Nodes = DefaultNodes
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Heartbeat", &o.Heartbeat, 0},
		{"NodeTTL", &o.NodeTTL, 0},
		{"LeaseTTL", &o.LeaseTTL, 0},
		{"StartTimeout", &o.StartTimeout, DefaultStartTimeout},
		{"StopTimeout", &o.StopTimeout, DefaultStopTimeout},
	} {
		switch {
		case *d.v < 0:
			return o, fmt.Errorf("cluster: %w", option.Errorf(d.name, "%v: want >= 0", *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	// What the processes would refuse at start (exit status 2), refused
	// here first, under the option that set it.
	if o.RAMBytes < o.BlockSize {
		return o, fmt.Errorf("cluster: %w", option.Errorf("BlockSize", "%v: larger than a node's RAM (%v); it is the typical object size the eviction policy is sized for", config.Size(o.BlockSize), config.Size(o.RAMBytes)))
	}
	if o.MaxObjectBytes > int64(config.MaxObjectBytesLimit) {
		return o, fmt.Errorf("cluster: %w", option.Errorf("MaxObjectBytes", "%d bytes (%v): want at most %v", o.MaxObjectBytes, config.Size(o.MaxObjectBytes), config.MaxObjectBytesLimit))
	}
	if need := ssd.SlotSize(int(o.BlockSize)); o.SSD && o.SSDBytes < need {
		return o, fmt.Errorf("cluster: %w", option.Errorf("SSDBytes", "%v: holds no object of the block size on SSD (%v in pages with its key and page metadata)", config.Size(o.SSDBytes), config.Size(need)))
	}
	md := master.DefaultOptions()
	if hb, ttl := cmp.Or(o.Heartbeat, md.HeartbeatInterval), cmp.Or(o.NodeTTL, md.NodeTTL); hb >= ttl {
		if o.Heartbeat == 0 { // the TTL set is what is wrong
			return o, fmt.Errorf("cluster: %w", option.Errorf("NodeTTL", "%v: must be longer than the heartbeat (%v)", ttl, hb))
		}
		return o, fmt.Errorf("cluster: %w", option.Errorf("Heartbeat", "%v: must be shorter than the node TTL (%v)", hb, ttl))
	}
	switch {
	case o.Masters < 0 || o.Masters > maxMasters:
		return o, fmt.Errorf("cluster: %w", option.Errorf("Masters", "%d: want 1 to %d (0 means 1)", o.Masters, maxMasters))
	case o.Masters == 0:
		o.Masters = 1
	}
	if o.ElectionTTL != 0 && (o.ElectionTTL < 2*time.Second || o.ElectionTTL%time.Second != 0) {
		return o, fmt.Errorf("cluster: %w", option.Errorf("ElectionTTL", "%v: want whole seconds, at least 2s", o.ElectionTTL))
	}
	if o.Masters > 1 {
		bin := cmp.Or(o.EtcdBinary, "etcd")
		path, err := exec.LookPath(bin)
		if err != nil {
			return o, fmt.Errorf("cluster: %w", option.Errorf("Masters", "%d masters elect their leader on etcd, and %q is not an executable on PATH (Debian: apt-get install etcd-server): %v", o.Masters, bin, err))
		}
		o.EtcdBinary = path
	}
	if o.Netns {
		switch {
		case o.Masters > 1:
			return o, fmt.Errorf("cluster: %w", option.Errorf("Masters", "%d: several masters on network hosts of their own (Netns) are not supported yet; use one", o.Masters))
		case o.Host != "":
			return o, fmt.Errorf("cluster: %w", option.Errorf("Host", "%q: with Netns every process listens on its own host's address", o.Host))
		case o.BasePort < 0 || o.BasePort > 65533:
			return o, fmt.Errorf("cluster: %w", option.Errorf("BasePort", "%d: want 0 (the default, %d) or a port below 65534", o.BasePort, DefaultHostPort))
		}
		if err := o.Link.Validate(); err != nil {
			return o, fmt.Errorf("cluster: %w", option.Errorf("Link", "%w", err))
		}
		if o.Link.Down {
			return o, fmt.Errorf("cluster: %w", option.Errorf("Link", "down: nodes cut off from the start never join; cut one off once the cluster is up (SetNodeLink)"))
		}
	} else if o.Link != (netns.Link{}) {
		return o, fmt.Errorf("cluster: %w", option.Errorf("Link", "%+v: links are shaped only on network hosts of their own (Netns)", o.Link))
	}
	nports := o.ports()
	if o.Netns {
		nports = 0 // per host, checked above
	}
	if o.BasePort < 0 || o.BasePort+nports > 65536 {
		return o, fmt.Errorf("cluster: %w", option.Errorf("BasePort", "%d: want 0, or a port leaving room for %d ports below 65536", o.BasePort, nports))
	}
	for i := range o.NodeArgs {
		if i < 0 || i >= o.Nodes {
			return o, fmt.Errorf("cluster: %w", option.Errorf("NodeArgs", "has node %d; want 0 to %d", i, o.Nodes-1))
		}
	}
	for i, env := range o.NodeEnv {
		if i < 0 || i >= o.Nodes {
			return o, fmt.Errorf("cluster: %w", option.Errorf("NodeEnv", "has node %d; want 0 to %d", i, o.Nodes-1))
		}
		if err := checkEnv(env); err != nil {
			return o, fmt.Errorf("cluster: %w", option.Errorf("NodeEnv", "node %d: %w", i, err))
		}
	}
	if err := meta.CheckClusterID(o.ClusterID); err != nil {
		return o, fmt.Errorf("cluster: %w", option.Errorf("ClusterID", "%w", err))
	}
	if o.Host == "" && !o.Netns {
		o.Host = "127.0.0.1"
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	return o, nil
}

// ports is how many ports the cluster's processes listen on: two per
// master and node, one per Redis front, two for etcd.
func (o Options) ports() int {
	n := 2*o.Masters + 2*o.Nodes
	if o.RESP {
		n += o.Nodes
	}
	if o.Masters > 1 {
		n += 2
	}
	return n
}

// checkEnv checks that every entry of env is KEY=value with a non-empty
// key.
func checkEnv(env []string) error {
	for j, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("entry %d is %q; want KEY=value", j, kv)
		}
	}
	return nil
}
