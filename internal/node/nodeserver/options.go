package nodeserver

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/node/wire"
)

// Defaults for zero Options fields.
const (
	// DefaultHandshakeTimeout bounds the wait for a hello: 10 s, as Go's
	// net/http bounds a TLS handshake; a hello is at most ~4 KiB.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultIdleTimeout bounds the wait for the next request: 5 min, long
	// enough for a client pool's connections to outlive the gaps of a trace
	// replay (the conversation trace arrives in ~3 s buckets), short enough
	// that abandoned connections are reclaimed.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultReadTimeout bounds reading the rest of a frame once its header
	// has arrived: 30 s. A maximum frame (64 MiB) takes 5.4 s at
	// 100 Mbit/s, the slowest link a node is expected on; 30 s leaves room
	// for a loaded host.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds each write of a response: 30 s, for the
	// same reason as DefaultReadTimeout.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxConns is the most connections served at once: 1024. Each
	// holds a goroutine and a 64 KiB read buffer, so the buffers stay under
	// 64 MiB.
	DefaultMaxConns = 1024
)

// Options configure a Server. The zero value of each field means its
// default.
type Options struct {
	// Backend is the store to serve. Required.
	Backend Backend
	// Limits bound what the server accepts and sends; they are advertised
	// to clients in the hello-ack. Zero fields mean wire.DefaultLimits.
	Limits wire.Limits
	// Egress paces the payload bytes the server sends (Wait before each
	// block's payload); nil means unlimited.
	Egress Pacer
	// Ingress paces the payload bytes the server receives (Wait before
	// reading each PUT payload); nil means unlimited.
	Ingress Pacer
	// HandshakeTimeout bounds the wait for a connection's hello
	// (DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// IdleTimeout bounds the wait for the next request's header
	// (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ReadTimeout bounds reading the rest of a frame after its header, and
	// each PUT payload after the ingress pacer lets it in
	// (DefaultReadTimeout).
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxConns is the most connections served at once; more are refused
	// with CodeUnavailable (DefaultMaxConns).
	MaxConns int
	// Token, when not empty, is the cluster auth token: a hello carrying
	// it may name any tenant. It is compared in constant time and never
	// logged.
	Token []byte
	// TenantTokens maps a tenant to its own token (requires Token): a
	// hello carrying tenant T's token is bound to T, and may name only T
	// or a shared namespace. Never logged.
	TenantTokens map[string][]byte
	// Shared are the shared namespaces: every authenticated connection
	// may read them; only the cluster token and each namespace's writers
	// may write them (PUT, MPUT, DELETE).
	Shared []auth.Namespace
	// TenantPolicy, when not nil, decides whether a hello's tenant (already
	// a valid tenant name) may connect; an error refuses the connection
	// with CodeUnauthorized and the error's text.
	TenantPolicy func(tenant string) error
	// Logger receives connection and error events; nil discards them.
	Logger *slog.Logger
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve returns o with defaults filled in, or the error Validate reports.
func (o Options) resolve() (Options, error) {
	if o.Backend == nil {
		return o, fmt.Errorf("nodeserver: Options.Backend is nil; a server needs a backend to serve")
	}
	lim, err := resolveLimits(o.Limits)
	if err != nil {
		return o, fmt.Errorf("nodeserver: Options.Limits: %w", err)
	}
	o.Limits = lim
	durations := [...]struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"HandshakeTimeout", &o.HandshakeTimeout, DefaultHandshakeTimeout},
		{"IdleTimeout", &o.IdleTimeout, DefaultIdleTimeout},
		{"ReadTimeout", &o.ReadTimeout, DefaultReadTimeout},
		{"WriteTimeout", &o.WriteTimeout, DefaultWriteTimeout},
	}
	for _, d := range durations {
		switch {
		case *d.v < 0:
			return o, fmt.Errorf("nodeserver: Options.%s is %v; want >= 0 (0 means the default, %v)", d.name, *d.v, d.def)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	switch {
	case o.MaxConns < 0:
		return o, fmt.Errorf("nodeserver: Options.MaxConns is %d; want >= 0 (0 means the default, %d)", o.MaxConns, DefaultMaxConns)
	case o.MaxConns == 0:
		o.MaxConns = DefaultMaxConns
	}
	if len(o.Token) > o.Limits.MaxToken {
		return o, fmt.Errorf("nodeserver: Options.Token is %d bytes, longer than Limits.MaxToken (%d): no hello could carry it",
			len(o.Token), o.Limits.MaxToken)
	}
	for name, tok := range o.TenantTokens {
		if len(tok) > o.Limits.MaxToken {
			return o, fmt.Errorf("nodeserver: Options.TenantTokens: the token of tenant %q is %d bytes, longer than Limits.MaxToken (%d): no hello could carry it",
				name, len(tok), o.Limits.MaxToken)
		}
	}
	if err := (auth.Options{ClusterToken: o.Token, TenantTokens: o.TenantTokens, Shared: o.Shared}).Validate(); err != nil {
		return o, fmt.Errorf("nodeserver: Options: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// resolveLimits validates l and fills its zero fields with the defaults.
func resolveLimits(l wire.Limits) (wire.Limits, error) {
	if err := l.Validate(); err != nil {
		return l, err
	}
	d := wire.DefaultLimits()
	for _, f := range [...]struct{ v, def *int }{
		{&l.MaxFrame, &d.MaxFrame}, {&l.MaxBatch, &d.MaxBatch}, {&l.MaxPayload, &d.MaxPayload},
		{&l.MaxTenant, &d.MaxTenant}, {&l.MaxToken, &d.MaxToken},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return l, nil
}
