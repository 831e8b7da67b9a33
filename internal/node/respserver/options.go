package respserver

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/resp"
	"github.com/kvpool/kvpool/internal/server"
)

// Defaults for zero Options fields. Each says where its value comes from.
const (
	// DefaultReadTimeout bounds the rest of a command once its first
	// byte has arrived: 30 s, time enough for a 512 MiB value at 150 Mbit/s,
	// and a client that stops mid-command is cut off after it.
	DefaultReadTimeout = 30 * time.Second
	// DefaultHandshakeTimeout bounds how long a connection to a server
	// with tokens may stay unauthenticated: 10 s, the server skeleton's
	// handshake bound (a client AUTHs as its first command).
	DefaultHandshakeTimeout = server.DefaultHandshakeTimeout
	// DefaultWriteTimeout bounds writing one batch of replies: 30 s, as
	// ReadTimeout.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultRequestTimeout bounds the pool calls of one command: 10 s,
	// twice the client library's per-node request timeout.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxConns is the most connections served at once: 1024, the
	// server skeleton's default (Redis's maxclients is 10000; each kvpool
	// connection holds a goroutine and a 64 KiB read buffer).
	DefaultMaxConns = server.DefaultMaxConns
	// DefaultMaxArgBytes bounds the memory all connections hold for
	// commands at once: 1 GiB, so 1,000 clients each sending (or
	// declaring and trickling) a 64 MiB SET cannot make the node hold 64
	// GiB; a command whose buffers would pass it waits (budget.go).
	DefaultMaxArgBytes = 1 << 30
)

// Options configure a Server. The zero value of each field means its
// default; Backend is required.
type Options struct {
	// Backend is the pool served.
	Backend Backend
	// Token is the cluster token (auth_token); TenantTokens the tenant
	// tokens; Shared the shared namespaces (package auth). With none the
	// server is open: every connection is the default tenant's and AUTH
	// answers as Redis does without a password.
	Token        []byte
	TenantTokens map[string][]byte
	Shared       []auth.Namespace
	// Limits bound one command (package resp); MaxBulk is the largest
	// value a SET may carry, the node's max_object_bytes.
	Limits resp.Limits
	// MaxConns is the most connections served at once (DefaultMaxConns).
	MaxConns int
	// IdleTimeout, when > 0, closes a connection idle that long between
	// commands. Zero keeps idle connections open, as Redis's default
	// timeout 0 does: engines keep pooled connections idle for long.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds, on a server with tokens, the time from
	// connecting to a successful AUTH (or HELLO AUTH): a connection not
	// authenticated by then is closed (DefaultHandshakeTimeout). RESP has
	// no handshake of its own, so an open server has none: its
	// connections may wait as long as IdleTimeout allows before their
	// first command, as Redis's do (client pools open connections ahead
	// of use).
	HandshakeTimeout time.Duration
	// ReadTimeout bounds one command's arrival, from its first byte to
	// its last, however long the connection has been busy
	// (DefaultReadTimeout); WriteTimeout bounds writing replies
	// (DefaultWriteTimeout); RequestTimeout bounds one command's pool calls
	// (DefaultRequestTimeout).
	ReadTimeout, WriteTimeout, RequestTimeout time.Duration
	// MaxArgBytes bounds the memory all connections hold for commands
	// being received and run, argument slots included, reserved before
	// it is allocated (DefaultMaxArgBytes); budget.go gives the rule and
	// the slack (one command beyond it, so that none deadlocks).
	MaxArgBytes int64
	// Version is the kvpool version INFO and HELLO report.
	Version string
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Now is the clock expiries are computed from (time.Now when nil).
	Now func() time.Time
}

// resolve fills in defaults, or reports the first bad field.
func (o Options) resolve() (Options, error) {
	if o.Backend == nil {
		return o, fmt.Errorf("respserver: Options.Backend is nil")
	}
	if err := o.Limits.Validate(); err != nil {
		return o, fmt.Errorf("respserver: %w", err)
	}
	if o.MaxConns < 0 {
		return o, fmt.Errorf("respserver: Options.MaxConns is %d; want >= 0 (0 means the default, %d)", o.MaxConns, DefaultMaxConns)
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.IdleTimeout < 0 {
		return o, fmt.Errorf("respserver: Options.IdleTimeout is %v; want >= 0 (0 keeps idle connections)", o.IdleTimeout)
	}
	if err := server.Durations("respserver",
		server.Duration{Name: "HandshakeTimeout", V: &o.HandshakeTimeout, Default: DefaultHandshakeTimeout},
		server.Duration{Name: "ReadTimeout", V: &o.ReadTimeout, Default: DefaultReadTimeout},
		server.Duration{Name: "WriteTimeout", V: &o.WriteTimeout, Default: DefaultWriteTimeout},
		server.Duration{Name: "RequestTimeout", V: &o.RequestTimeout, Default: DefaultRequestTimeout},
	); err != nil {
		return o, err
	}
	switch {
	case o.MaxArgBytes < 0:
		return o, fmt.Errorf("respserver: Options.MaxArgBytes is %d; want >= 0 (0 means the default, %d)", o.MaxArgBytes, DefaultMaxArgBytes)
	case o.MaxArgBytes == 0:
		o.MaxArgBytes = DefaultMaxArgBytes
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// skeleton returns the options of the server skeleton.
func (o Options) skeleton() server.Options {
	return server.Options{
		Name:     "respserver",
		MaxConns: o.MaxConns,
		// The skeleton's deadline bounds the connection until the
		// handler sets its own; conn.go bounds the wait for AUTH by the
		// same HandshakeTimeout (see Options.HandshakeTimeout).
		HandshakeTimeout: o.HandshakeTimeout,
		Auth:             auth.Options{ClusterToken: o.Token, TenantTokens: o.TenantTokens, Shared: o.Shared},
		Logger:           o.Logger,
	}
}
