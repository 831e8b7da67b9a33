package wire

import (
	"fmt"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/frame"
)

// Default limits. Each bounds what a peer can make the decoder allocate or
// wait for.
const (
	// DefaultMaxPayload is the largest block payload accepted: 64 MiB. Live
	// runs move 64–256 KiB per block (docs/design.md, "Scale model"); 64 MiB leaves
	// room for 512-token blocks of models up to ~128 KiB of KV per token
	// while keeping a single frame's memory bounded.
	DefaultMaxPayload = 64 << 20
	// DefaultMaxBatch is the most keys in one MGET, MPUT or EXISTS: 4096
	// blocks of 512 tokens cover a 2M-token prefix, twice the longest input
	// in the Mooncake traces.
	DefaultMaxBatch = frame.DefaultMaxBatch
	// DefaultMaxFrame is the largest frame accepted: one maximum payload
	// plus FrameOverhead.
	DefaultMaxFrame = DefaultMaxPayload + FrameOverhead
	// FrameOverhead is what a frame may hold beyond one maximum payload:
	// 128 KiB, which holds the frame header, the count and the 20-byte
	// headers of a full batch (16 + 4 + 4096×20 = 81,940 bytes), or one
	// named PUT's header, name and block header (16 + 2 + 1024 + 20). A
	// batch of long names can need more (4096 × 1 KiB names are 4 MiB):
	// a client splits named batches by the node's MaxFrame.
	FrameOverhead = 128 << 10
	// MaxObjectSize is the largest object a node may be configured to
	// hold (its max object size, node setting max_object_bytes): 512 MiB.
	// LimitsFor(MaxObjectSize) still fits the u32 frame length with room
	// to spare, and one such object is already 1/8 of a 4 GiB RAM tier.
	MaxObjectSize = 512 << 20
	// DefaultMaxToken is the longest auth token accepted
	// (frame.DefaultMaxToken, 4 KiB).
	DefaultMaxToken = frame.DefaultMaxToken
)

// Format bounds: the most a length field of the encoding can express.
const (
	// MaxTokenLen is the longest auth token the hello can carry (u16 length).
	MaxTokenLen = frame.MaxTokenLen
	// MaxFrameLen is the largest frame the u32 length field can express.
	MaxFrameLen = frame.MaxFrameLen
	// MaxMessageLen is the longest message of an ERROR frame or hello-ack
	// (frame.MaxMessageLen). Longer messages are truncated by the encoders;
	// a decoder rejects them.
	MaxMessageLen = frame.MaxMessageLen
)

// Limits bounds what a Reader accepts. The zero value of each field means
// its default (DefaultLimits). Every limit is enforced on decode before any
// byte it covers is read or any memory for it is allocated.
type Limits struct {
	// MaxFrame is the largest frame, header included, in bytes.
	MaxFrame int
	// MaxBatch is the most keys or blocks in one batch frame.
	MaxBatch int
	// MaxPayload is the largest block payload in bytes.
	MaxPayload int
	// MaxTenant is the longest tenant name in a hello; at most
	// block.MaxTenantLen.
	MaxTenant int
	// MaxToken is the longest auth token in a hello; at most MaxTokenLen.
	MaxToken int
}

// LimitsFor returns the limits of a node whose largest object is
// maxObject bytes (at most MaxObjectSize): MaxPayload is maxObject, and
// MaxFrame leaves FrameOverhead beyond it; the other fields are zero
// (their defaults).
func LimitsFor(maxObject int) Limits {
	return Limits{MaxPayload: maxObject, MaxFrame: maxObject + FrameOverhead}
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{
		MaxFrame:   DefaultMaxFrame,
		MaxBatch:   DefaultMaxBatch,
		MaxPayload: DefaultMaxPayload,
		MaxTenant:  block.MaxTenantLen,
		MaxToken:   DefaultMaxToken,
	}
}

// Validate reports the first bad field: a negative value, a value beyond
// what the encoding can express, or a MaxPayload whose block would not fit
// in a MaxFrame frame.
func (l Limits) Validate() error {
	_, err := l.Resolve()
	return err
}

// Resolve returns l with defaults filled in, or the error Validate
// reports.
func (l Limits) Resolve() (Limits, error) {
	d := DefaultLimits()
	if err := frame.ResolveLimits("wire",
		frame.Limit{Name: "MaxFrame", V: &l.MaxFrame, Default: d.MaxFrame, Max: MaxFrameLen},
		frame.Limit{Name: "MaxBatch", V: &l.MaxBatch, Default: d.MaxBatch, Max: MaxFrameLen},
		frame.Limit{Name: "MaxPayload", V: &l.MaxPayload, Default: d.MaxPayload, Max: MaxFrameLen - HeaderLen - BlockHeaderLen},
		frame.Limit{Name: "MaxTenant", V: &l.MaxTenant, Default: d.MaxTenant, Max: block.MaxTenantLen},
		frame.Limit{Name: "MaxToken", V: &l.MaxToken, Default: d.MaxToken, Max: MaxTokenLen},
	); err != nil {
		return l, err
	}
	if need := uint64(l.MaxPayload) + HeaderLen + BlockHeaderLen; need > uint64(l.MaxFrame) {
		return l, fmt.Errorf("wire: Limits.MaxPayload is %d: a GET response carrying it needs %d bytes, more than Limits.MaxFrame (%d)",
			l.MaxPayload, need, l.MaxFrame)
	}
	return l, nil
}
