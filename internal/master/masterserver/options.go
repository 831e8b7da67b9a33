package masterserver

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/election"
	"github.com/kvpool/kvpool/internal/master/masterproto"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/server"
)

// Defaults for zero Options fields.
const (
	// DefaultHandshakeTimeout bounds the wait for a connection's HELLO
	// (server.DefaultHandshakeTimeout, 10 s, as nodeserver).
	DefaultHandshakeTimeout = server.DefaultHandshakeTimeout
	// DefaultIdleTimeout bounds the wait for the next request: 5 min. Nodes
	// heartbeat every second, and a client library's pooled connections
	// must outlive the gaps of a trace replay (~3 s buckets); abandoned
	// connections are still reclaimed.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultWriteTimeout bounds each write of responses: 30 s, as
	// nodeserver (a 64 MiB NODES or REGISTER-sized frame at 100 Mbit/s
	// takes 5.4 s).
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxConns is the most connections served at once: 4096 (each
	// holds a goroutine and a 64 KiB read buffer: 256 MiB at most). A
	// cluster of hundreds of nodes and prefill workers with a few pooled
	// connections each stays well under it.
	DefaultMaxConns = 4096
	// DefaultAdminShutdownTimeout bounds how long ServeAdmin waits for
	// in-flight admin requests when stopping: 5 s (a /metrics scrape scans
	// the index once; milliseconds at a million replicas).
	DefaultAdminShutdownTimeout = 5 * time.Second
)

// flushThreshold is the response bytes a connection buffers before writing
// even while more pipelined requests are waiting: 64 KiB, the loopback
// MTU, so one write system call fills one segment.
const flushThreshold = 64 << 10

// Options configure a Server. The zero value of each field means its
// default.
type Options struct {
	// Token, when not empty, is the cluster auth token: a connection whose
	// HELLO carries it may act for any tenant and as a node (REGISTER,
	// HEARTBEAT). It is compared in constant time and never logged.
	Token []byte
	// TenantTokens maps a tenant to its own token (requires Token): a
	// connection whose HELLO carries tenant T's token may LOOKUP, EXISTS,
	// QUERY and PLACE for T only (and read the shared namespaces). Never
	// logged.
	TenantTokens map[string][]byte
	// Shared are the shared namespaces: every authenticated connection
	// may read them; only the cluster token and each namespace's writers
	// may PLACE in them.
	Shared []auth.Namespace
	// ClusterID, when not empty, names the cluster this master serves
	// (meta.CheckClusterID): a HELLO carrying another ID is refused, a
	// node whose HELLO carried none may not REGISTER or HEARTBEAT, and an
	// accepted HELLO that carried one is answered with it. The admin
	// endpoints report it (header Kvpool-Cluster-Id, /health). A HELLO
	// carrying an ID is refused by a master without one.
	ClusterID string
	// Limits bound what the server accepts; they are advertised in the
	// HELLO response. Zero fields mean masterproto.DefaultLimits.
	Limits masterproto.Limits
	// MaintenanceInterval is how often Serve's background loop calls
	// Expire and Evict on the master (default: the master's heartbeat
	// interval / 4, so a silent node is dropped within a quarter heartbeat
	// of its TTL).
	MaintenanceInterval time.Duration
	// HandshakeTimeout bounds the wait for a HELLO (DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// IdleTimeout bounds the wait for the next request (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// WriteTimeout bounds each write of responses (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxConns is the most connections served at once; more are refused
	// with CodeUnavailable (DefaultMaxConns).
	MaxConns int
	// Logger receives connection and error events; nil discards them.
	Logger *slog.Logger
	// Election, when set, makes the master one of its cluster's
	// candidates (leader.go): it serves only while it leads, and stands
	// by otherwise. Nil: it serves alone, for good. ClusterID must name
	// the election's cluster.
	Election *election.Election
	// Advertise is the control-plane address other hosts reach this
	// master at, campaigned with and told to clients as the leader's
	// (required with Election).
	Advertise string
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve returns o with defaults filled in, or the error Validate reports.
// The maintenance interval is left at 0 when unset (New derives it from
// the master).
func (o Options) resolve() (Options, error) {
	var err error
	if o.Election != nil {
		switch {
		case o.Election.Cluster() != o.ClusterID:
			return o, fmt.Errorf("masterserver: the election is for cluster %q, the master for %q (--cluster-id)", o.Election.Cluster(), o.ClusterID)
		case o.Advertise == "":
			return o, errors.New("masterserver: a master in an election needs the address it is reached at (--advertise)")
		case len(o.Advertise) > masterproto.MaxAddrLen:
			return o, fmt.Errorf("masterserver: advertised address of %d bytes, limit %d (--advertise)", len(o.Advertise), masterproto.MaxAddrLen)
		}
	}
	if err := meta.CheckClusterID(o.ClusterID); err != nil {
		return o, fmt.Errorf("masterserver: %w", option.Errorf("ClusterID", "%w", err))
	}
	if o.Limits, err = o.Limits.Resolve(); err != nil {
		return o, fmt.Errorf("masterserver: limits: %w", err)
	}
	if err := server.Durations("masterserver",
		server.Duration{Name: "WriteTimeout", V: &o.WriteTimeout, Default: DefaultWriteTimeout},
		server.Duration{Name: "IdleTimeout", V: &o.IdleTimeout, Default: DefaultIdleTimeout},
		server.Duration{Name: "MaintenanceInterval", V: &o.MaintenanceInterval},
	); err != nil {
		return o, err
	}
	sk, err := o.skeleton().Resolve() // connections, handshake, tokens, auth
	if err != nil {
		return o, err
	}
	o.MaxConns, o.HandshakeTimeout, o.Logger = sk.MaxConns, sk.HandshakeTimeout, sk.Logger
	return o, nil
}

// skeleton returns the options of the server skeleton.
func (o Options) skeleton() server.Options {
	return server.Options{
		Name:             "masterserver",
		MaxConns:         cmp.Or(o.MaxConns, DefaultMaxConns),
		HandshakeTimeout: o.HandshakeTimeout,
		Auth:             auth.Options{ClusterToken: o.Token, TenantTokens: o.TenantTokens, Shared: o.Shared},
		MaxToken:         o.Limits.MaxToken,
		Logger:           o.Logger,
	}
}
