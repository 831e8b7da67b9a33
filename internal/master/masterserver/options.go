package masterserver

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/master/masterproto"
)

// Defaults for zero Options fields.
const (
	// DefaultHandshakeTimeout bounds the wait for a connection's HELLO:
	// 10 s, as nodeserver (and Go's net/http for a TLS handshake).
	DefaultHandshakeTimeout = 10 * time.Second
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
	// Limits bound what the server accepts; they are advertised in the
	// HELLO response. Zero fields mean masterproto.DefaultLimits.
	Limits masterproto.Limits
	// MaintenanceInterval is how often Serve's background loop calls
	// Expire and Evict on the master (default: the master's heartbeat
	// interval / 4, so a silent node is dropped within a quarter heartbeat
	// of its TTL, as the brief for issue 4 asks).
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
	lim, err := o.Limits.Resolve()
	if err != nil {
		return o, fmt.Errorf("masterserver: Options.Limits: %w", err)
	}
	o.Limits = lim
	durations := [...]struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"HandshakeTimeout", &o.HandshakeTimeout, DefaultHandshakeTimeout},
		{"IdleTimeout", &o.IdleTimeout, DefaultIdleTimeout},
		{"WriteTimeout", &o.WriteTimeout, DefaultWriteTimeout},
		{"MaintenanceInterval", &o.MaintenanceInterval, 0},
	}
	for _, d := range durations {
		switch {
		case *d.v < 0:
			return o, fmt.Errorf("masterserver: Options.%s is %v; want >= 0 (0 means the default)", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	switch {
	case o.MaxConns < 0:
		return o, fmt.Errorf("masterserver: Options.MaxConns is %d; want >= 0 (0 means the default, %d)", o.MaxConns, DefaultMaxConns)
	case o.MaxConns == 0:
		o.MaxConns = DefaultMaxConns
	}
	if len(o.Token) > o.Limits.MaxToken {
		return o, fmt.Errorf("masterserver: Options.Token is %d bytes, longer than Limits.MaxToken (%d): no HELLO could carry it",
			len(o.Token), o.Limits.MaxToken)
	}
	for name, tok := range o.TenantTokens {
		if len(tok) > o.Limits.MaxToken {
			return o, fmt.Errorf("masterserver: Options.TenantTokens: the token of tenant %q is %d bytes, longer than Limits.MaxToken (%d): no HELLO could carry it",
				name, len(tok), o.Limits.MaxToken)
		}
	}
	if err := (auth.Options{ClusterToken: o.Token, TenantTokens: o.TenantTokens, Shared: o.Shared}).Validate(); err != nil {
		return o, fmt.Errorf("masterserver: Options: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
