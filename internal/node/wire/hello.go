package wire

import (
	"fmt"
	"math"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// Hello opens a connection (client to server). The tenant it names is the
// namespace of every key on the connection: frames carry key IDs only, never
// a tenant, so once the server has accepted the hello (and checked the token
// against the tenant) a client cannot name, probe or time another tenant's
// blocks. This is the tenant-isolation property; do not add a per-request
// tenant field.
type Hello struct {
	// Version is the protocol version the client speaks; 0 means Version.
	Version uint16
	// Tenant is the connection's namespace: at most block.MaxTenantLen bytes
	// of [A-Za-z0-9._-]; may be empty (the default tenant).
	Tenant string
	// Token is an opaque auth token (may be empty); at most MaxTokenLen
	// bytes on the wire, Limits.MaxToken on decode.
	Token []byte
}

// AppendHello appends the hello h. It fails, leaving dst unchanged, when the
// tenant is not a valid tenant name or the token is longer than MaxTokenLen.
func AppendHello(dst []byte, h *Hello) ([]byte, error) {
	if err := (block.Key{Tenant: h.Tenant}).Validate(); err != nil {
		return dst, fmt.Errorf("wire: encode hello: tenant %q: %w", h.Tenant, err)
	}
	if len(h.Token) > MaxTokenLen {
		return dst, fmt.Errorf("wire: encode hello: token of %d bytes, the format allows %d: %w", len(h.Token), MaxTokenLen, frame.ErrTokenTooLong)
	}
	v := h.Version
	if v == 0 {
		v = Version
	}
	dst = frame.AppendMagic(dst, Magic, v)
	dst = append(dst, byte(len(h.Tenant)), 0)
	dst = le.AppendUint16(dst, uint16(len(h.Token)))
	dst = append(dst, 0, 0)
	dst = append(dst, h.Tenant...)
	return append(dst, h.Token...), nil
}

// HelloAck answers a Hello (server to client). On success it tells the client
// the server's limits, so the client can split batches and refuse oversized
// payloads before sending them.
type HelloAck struct {
	// Version is the version the server speaks; 0 means Version. On
	// CodeVersionMismatch it tells the client which version to use.
	Version uint16
	// Code is CodeOK when the connection is accepted; otherwise the server
	// closes the connection after the ack.
	Code Code
	// Message explains a refusal; at most MaxMessageLen bytes.
	Message string
	// MaxFrame, MaxBatch and MaxPayload are the server's Limits.
	MaxFrame   uint32
	MaxBatch   uint32
	MaxPayload uint32
}

// HelloAckFor returns the ack a server sends after reading a hello with
// result err under limits lim: accepted (carrying lim) for nil, refused with
// CodeOf(err) and err's message otherwise. Fields of lim that are zero or
// invalid are sent as their defaults.
func HelloAckFor(err error, lim Limits) HelloAck {
	if r, rerr := lim.Resolve(); rerr == nil {
		lim = r
	} else {
		lim = DefaultLimits()
	}
	if err != nil {
		c := CodeOf(err)
		if c == CodeOK {
			c = CodeInternal
		}
		return HelloAck{Version: Version, Code: c, Message: frame.TruncateMessage(err.Error())}
	}
	return HelloAck{
		Version:    Version,
		MaxFrame:   uint32(lim.MaxFrame),
		MaxBatch:   uint32(min(uint64(lim.MaxBatch), math.MaxUint32)),
		MaxPayload: uint32(lim.MaxPayload),
	}
}

// Err returns nil when the ack accepts the connection in this package's
// Version; a *RemoteError (unwrapping to ErrorFor(a.Code)) when it refuses
// it; and an error wrapping frame.ErrVersion when the server accepted a version
// this side does not speak.
func (a *HelloAck) Err() error {
	return frame.HelloErr(a.Code, CodeOK, CodeVersionMismatch, a.Version, Version, a.Message, "wire: hello-ack")
}

// AppendHelloAck appends the ack a; a message longer than MaxMessageLen is
// truncated at a UTF-8 boundary.
func AppendHelloAck(dst []byte, a *HelloAck) []byte {
	v := a.Version
	if v == 0 {
		v = Version
	}
	msg := frame.TruncateMessage(a.Message)
	dst = frame.AppendMagic(dst, Magic, v)
	dst = le.AppendUint16(dst, uint16(a.Code))
	dst = le.AppendUint16(dst, uint16(len(msg)))
	dst = append(dst, 0, 0)
	dst = le.AppendUint32(dst, a.MaxFrame)
	dst = le.AppendUint32(dst, a.MaxBatch)
	dst = le.AppendUint32(dst, a.MaxPayload)
	return append(dst, msg...)
}
