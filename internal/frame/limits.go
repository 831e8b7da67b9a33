package frame

import (
	"fmt"
	"math"
)

// Bounds shared by both protocols.
const (
	// MaxTokenLen is the longest auth token a hello can carry (u16
	// length).
	MaxTokenLen = math.MaxUint16
	// DefaultMaxBatch is the most keys of one batch request: 4096 blocks
	// of 512 tokens cover a 2M-token prefix, twice the longest input in
	// the Mooncake traces.
	DefaultMaxBatch = 4096
	// DefaultMaxToken is the longest auth token a server accepts: 4 KiB,
	// room for a signed bearer token (JWTs are typically well under 2 KiB).
	DefaultMaxToken = 4 << 10
)

// Limit is one field of a protocol's limits, for ResolveLimits.
type Limit struct {
	// Name is the field's name ("MaxFrame").
	Name string
	// V points at the field.
	V *int
	// Default replaces a zero value.
	Default int
	// Max is the most the encoding can express.
	Max uint64
}

// ResolveLimits fills the zero fields of a protocol's limits with their
// defaults, or reports the first field that is negative or beyond what the
// encoding allows; prefix names the protocol in the error.
func ResolveLimits(prefix string, fields ...Limit) error {
	for _, f := range fields {
		switch {
		case *f.V < 0:
			return fmt.Errorf("%s: Limits.%s is %d; want >= 0 (0 means the default, %d)", prefix, f.Name, *f.V, f.Default)
		case *f.V == 0:
			*f.V = f.Default
		case uint64(*f.V) > f.Max:
			return fmt.Errorf("%s: Limits.%s is %d; the encoding allows at most %d", prefix, f.Name, *f.V, f.Max)
		}
	}
	return nil
}
