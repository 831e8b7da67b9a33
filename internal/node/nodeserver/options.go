package nodeserver

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/server"
)

// Defaults for zero Options fields.
const (
	// DefaultHandshakeTimeout bounds the wait for a hello
	// (server.DefaultHandshakeTimeout, 10 s).
	DefaultHandshakeTimeout = server.DefaultHandshakeTimeout
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
	// DefaultSyncTimeout bounds the wait of one SYNC: 10 s, the node
	// agent's bound on one call to its master (internal/node/agent.go,
	// rpcTimeout), so a SYNC outlasts a slow heartbeat but not a master
	// that is down; well under a client's default call timeout
	// (nodeclient.DefaultTimeout, 30 s), so the client reads the answer
	// rather than giving up first.
	DefaultSyncTimeout = 10 * time.Second
	// DefaultMaxConns is the most connections served at once
	// (server.DefaultMaxConns, 1024: 64 MiB of read buffers at most).
	DefaultMaxConns = server.DefaultMaxConns
)

// DefaultMaxPutBytes is the default Options.MaxPutBytes for a max payload
// of maxPayload bytes: two maximum payloads, and at least 256 MiB (a
// quarter of the default RAM tier: 8192 PUTs of 32 KiB in flight, or four
// of 64 MiB).
func DefaultMaxPutBytes(maxPayload int) int64 { return max(2*int64(maxPayload), 256<<20) }

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
	// SyncTimeout bounds the wait of a SYNC for the backend's index
	// (Syncer); past it the SYNC is answered CodeUnavailable
	// (DefaultSyncTimeout). The connection serves nothing else meanwhile.
	SyncTimeout time.Duration
	// MaxConns is the most connections served at once; more are refused
	// with CodeUnavailable (DefaultMaxConns).
	MaxConns int
	// MaxPutBytes bounds the PUT payload bytes held in memory at once
	// across connections (default DefaultMaxPutBytes(Limits.MaxPayload));
	// a PUT beyond it waits before its payload is read (see putBudget).
	// At least Limits.MaxPayload.
	MaxPutBytes int64
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
	lim, err := o.Limits.Resolve()
	if err != nil {
		return o, fmt.Errorf("nodeserver: Options.Limits: %w", err)
	}
	o.Limits = lim
	switch {
	case o.MaxPutBytes == 0:
		o.MaxPutBytes = DefaultMaxPutBytes(lim.MaxPayload)
	case o.MaxPutBytes < int64(lim.MaxPayload):
		return o, fmt.Errorf("nodeserver: Options.MaxPutBytes: %d below Limits.MaxPayload %d (a maximum PUT could never be read)", o.MaxPutBytes, lim.MaxPayload)
	}
	sk, err := o.skeleton().Resolve() // connections, handshake, tokens, auth
	if err != nil {
		return o, err
	}
	o.MaxConns, o.HandshakeTimeout, o.Logger = sk.MaxConns, sk.HandshakeTimeout, sk.Logger
	return o, server.Durations("nodeserver",
		server.Duration{Name: "IdleTimeout", V: &o.IdleTimeout, Default: DefaultIdleTimeout},
		server.Duration{Name: "ReadTimeout", V: &o.ReadTimeout, Default: DefaultReadTimeout},
		server.Duration{Name: "WriteTimeout", V: &o.WriteTimeout, Default: DefaultWriteTimeout},
		server.Duration{Name: "SyncTimeout", V: &o.SyncTimeout, Default: DefaultSyncTimeout},
	)
}
