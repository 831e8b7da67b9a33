package resp

import (
	"math"

	"github.com/kvpool/kvpool/internal/frame"
)

// Default limits: Redis's, so a Redis client sees the server it expects.
const (
	// DefaultMaxBulk is the longest bulk-string argument: 512 MiB, the
	// default of Redis's proto-max-bulk-len.
	DefaultMaxBulk = 512 << 20
	// DefaultMaxArgs is the most arguments of one command: 1,048,576,
	// Redis's multibulk bound up to 6.2 (7.0 allows 2^31-1).
	DefaultMaxArgs = 1 << 20
	// DefaultMaxInline is the longest inline command line, its CRLF
	// included, and of a header line (`*N`, `$len`): 64 KiB, Redis's
	// PROTO_INLINE_MAX_SIZE.
	DefaultMaxInline = 64 << 10
	// CommandOverhead is what MaxCommand's default allows beyond one
	// largest argument: 1 MiB, room for the command name, a key and a few
	// options beside a MaxBulk value (SET key value EX 10 NX).
	CommandOverhead = 1 << 20
)

// Limits bound what one client may make the server hold. Zero fields take
// their defaults; see the package comment for which are Redis's.
type Limits struct {
	// MaxBulk is the longest bulk-string argument, in bytes. Default
	// DefaultMaxBulk.
	MaxBulk int
	// MaxArgs is the most arguments of one command. Default
	// DefaultMaxArgs.
	MaxArgs int
	// MaxInline is the longest inline command line, its CRLF included;
	// it bounds the header lines of a multibulk command too. Default
	// DefaultMaxInline.
	MaxInline int
	// MaxCommand is the most bytes of all arguments of one command
	// together. Default MaxBulk + CommandOverhead.
	MaxCommand int
}

// Validate reports the first negative field, by name.
func (l Limits) Validate() error {
	_, err := l.resolve()
	return err
}

// resolve returns l with its zero fields set to their defaults, or the
// first negative field's error.
func (l Limits) resolve() (Limits, error) {
	if err := frame.ResolveLimits("resp",
		frame.Limit{Name: "MaxBulk", V: &l.MaxBulk, Default: DefaultMaxBulk, Max: math.MaxInt},
		frame.Limit{Name: "MaxArgs", V: &l.MaxArgs, Default: DefaultMaxArgs, Max: math.MaxInt},
		frame.Limit{Name: "MaxInline", V: &l.MaxInline, Default: DefaultMaxInline, Max: math.MaxInt},
	); err != nil {
		return l, err
	}
	cmd := math.MaxInt
	if l.MaxBulk <= math.MaxInt-CommandOverhead {
		cmd = l.MaxBulk + CommandOverhead
	}
	err := frame.ResolveLimits("resp", frame.Limit{Name: "MaxCommand", V: &l.MaxCommand, Default: cmd, Max: math.MaxInt})
	return l, err
}

// resolveOrDefault is resolve for NewReader, which cannot fail: a negative
// field takes its default too.
func (l Limits) resolveOrDefault() Limits {
	for _, v := range []*int{&l.MaxBulk, &l.MaxArgs, &l.MaxInline, &l.MaxCommand} {
		if *v < 0 {
			*v = 0
		}
	}
	l, _ = l.resolve()
	return l
}
