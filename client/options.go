package client

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// Defaults of Options.
const (
	// DefaultDialTimeout bounds connecting to a node (or the master) and
	// its handshake: 2 s, many loopback or datacenter round trips, yet short
	// enough that a request blocked on a dead node's SYN falls back to
	// recompute well within the seconds a long prefill takes (docs/design.md,
	// "Cost model": prefill of 8k tokens ≈ 1 s, 32k ≈ 4.4 s).
	DefaultDialTimeout = 2 * time.Second
	// DefaultRequestTimeout bounds each call to one node within the
	// caller's context: 5 s, the master's lease TTL (master.Options
	// LeaseTTL default), past which a leased replica may be evicted anyway.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultReplicas is the number of copies Put stores: 1, Mooncake's
	// default replica_num; hot blocks replicate themselves in global mode.
	DefaultReplicas = 1
	// DefaultDownRetry is how long a node that failed a call is skipped
	// when the index keeps reporting it live: 3 s, the master's default
	// node TTL (master.Options NodeTTL), by which time a really dead node
	// has left the index.
	DefaultDownRetry = 3 * time.Second
	// MaxReplicas bounds Options.Replicas and PutOptions.Replicas (the
	// master's limit, meta.MaxReplicas).
	MaxReplicas = 8
)

// Options configure a Client. The zero value of each field means its
// default; Master or Index is required.
type Options struct {
	// Master is the master's address (host:port), or the addresses of a
	// cluster's masters, comma-separated. The client follows the leader
	// (a standby sends it there; a change of leader is followed on the
	// next call), even from one address. Ignored when Index is set.
	Master string
	// Leader, when set, names the leading master's control address: the
	// client asks it when none of Master's addresses answers as leader
	// (Master may then be empty). Package client/etcdleader makes one
	// from etcd's endpoints, so that only a client that uses etcd links
	// etcd's client.
	Leader func(ctx context.Context) (string, error)
	// Tenant is the namespace of every block the client reads or writes
	// (block.Key rules; "" is the default tenant).
	Tenant string
	// Token is the auth token sent to the nodes and the master; never
	// logged.
	Token string
	// Index, when set, is used instead of a connection to Master (tests,
	// or an embedding that has its own route to the master).
	Index Index
	// DialTimeout bounds connecting to a node and its handshake
	// (DefaultDialTimeout).
	DialTimeout time.Duration
	// Dial, when set, opens every TCP connection the client makes, to the
	// master and to the nodes, instead of a net.Dialer (a caller's own
	// route, such as sockets made in another network namespace).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RequestTimeout bounds each call to one node within the caller's
	// context (DefaultRequestTimeout).
	RequestTimeout time.Duration
	// PoolSize is the most connections open to one node
	// (nodeclient.DefaultPoolSize).
	PoolSize int
	// Replicas is the number of copies Put stores when PutOptions.Replicas
	// is 0 (DefaultReplicas, at most MaxReplicas).
	Replicas int
	// LocalNode is the ID of the node on the client's own machine, if any:
	// Get prefers its replicas among those of the same tier, and Put uses
	// it as the placement hint when PutOptions.Hint is "".
	LocalNode string
	// DownRetry is how long a node that failed a call is skipped while the
	// index still reports it live (DefaultDownRetry).
	DownRetry time.Duration
	// Logger receives node-down and recovery events; nil discards them.
	Logger *slog.Logger
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

func (o Options) resolve() (Options, error) {
	if o.Index == nil && o.Master == "" && o.Leader == nil {
		return o, fmt.Errorf("client: Options.Master is empty and Options.Index and Options.Leader are nil: one is required")
	}
	if err := (block.Key{Tenant: o.Tenant}).Validate(); err != nil {
		return o, fmt.Errorf("client: Options.Tenant %q: %w", o.Tenant, err)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DialTimeout", &o.DialTimeout, DefaultDialTimeout},
		{"RequestTimeout", &o.RequestTimeout, DefaultRequestTimeout},
		{"DownRetry", &o.DownRetry, DefaultDownRetry},
	} {
		switch {
		case *d.v < 0:
			return o, fmt.Errorf("client: Options.%s is %v; want >= 0 (0 means the default, %v)", d.name, *d.v, d.def)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	switch {
	case o.PoolSize < 0:
		return o, fmt.Errorf("client: Options.PoolSize is %d; want >= 0 (0 means the default, %d)", o.PoolSize, nodeclient.DefaultPoolSize)
	case o.PoolSize == 0:
		o.PoolSize = nodeclient.DefaultPoolSize
	}
	switch {
	case o.Replicas < 0 || o.Replicas > MaxReplicas:
		return o, fmt.Errorf("client: Options.Replicas is %d; want 0 to %d (0 means the default, %d)", o.Replicas, MaxReplicas, DefaultReplicas)
	case o.Replicas == 0:
		o.Replicas = DefaultReplicas
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// DeadlineFor returns the deadline for fetching blocks whose recomputation
// would take recomputeSeconds (from the cost model): now plus that time.
// Past it, fetching is slower than recomputing, so Get should give up on
// what has not arrived. A negative or NaN cost gives now (fetch nothing
// that is not instant).
func DeadlineFor(recomputeSeconds float64) time.Time {
	now := time.Now()
	if !(recomputeSeconds > 0) {
		return now
	}
	const maxSeconds = float64(math.MaxInt64/int64(time.Second)) - 1
	if recomputeSeconds > maxSeconds {
		recomputeSeconds = maxSeconds
	}
	return now.Add(time.Duration(recomputeSeconds * float64(time.Second)))
}
