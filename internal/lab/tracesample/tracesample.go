// Package tracesample cuts deterministic subsamples out of a request trace.
// Every sample is itself a valid trace (timestamps non-decreasing, lines
// unchanged except for their timestamps), so it can be read strictly,
// replayed and described like the original.
//
// The operations, applied in this order when combined:
//
//  1. time window: keep requests with From <= timestamp < To (original
//     times), then shift timestamps so the window starts at 0;
//  2. prefix families: keep a seeded fraction of families whole, where a
//     family is all requests sharing their first hash id, so prefix reuse
//     within a family is preserved;
//  3. first N: keep the first N requests that survive 1 and 2;
//  4. time scaling: multiply timestamps by a factor (0.5 replays twice as
//     fast), rounding to whole milliseconds, which keeps them monotone.
package tracesample

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
)

// Options selects a subsample. The zero value keeps everything unchanged.
type Options struct {
	// FromMs is the start of the time window in trace milliseconds
	// (inclusive); 0 means the start of the trace.
	FromMs int64
	// ToMs is the end of the time window (exclusive); 0 means no end.
	ToMs int64
	// Families is the fraction of prefix families to keep, in (0, 1];
	// 0 means keep all (no family filter).
	Families float64
	// Seed selects which families are kept; the same seed and fraction
	// always keep the same families.
	Seed uint64
	// First keeps only the first First requests; 0 means no limit.
	First int
	// Scale multiplies timestamps (after the window shift); 0 means 1.
	// 0.5 makes the trace twice as fast, 2 half as fast.
	Scale float64
}

// Validate reports the first invalid field of o.
func (o Options) Validate() error {
	switch {
	case o.FromMs < 0:
		return fmt.Errorf("tracesample: %w", option.Errorf("FromMs", "%d ms: want >= 0", o.FromMs))
	case o.ToMs < 0:
		return fmt.Errorf("tracesample: %w", option.Errorf("ToMs", "%d ms: want >= 0 (0 means no end)", o.ToMs))
	case o.ToMs != 0 && o.ToMs <= o.FromMs:
		return fmt.Errorf("tracesample: %w", option.Errorf("ToMs", "the window end (%d ms) must be after its start (%d ms)", o.ToMs, o.FromMs))
	case math.IsNaN(o.Families) || o.Families < 0 || o.Families > 1:
		return fmt.Errorf("tracesample: %w", option.Errorf("Families", "%v: want a fraction in (0, 1] (0 means all)", o.Families))
	case o.First < 0:
		return fmt.Errorf("tracesample: %w", option.Errorf("First", "%d: want >= 0 (0 means no limit)", o.First))
	case math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) || o.Scale < 0:
		return fmt.Errorf("tracesample: %w", option.Errorf("Scale", "%v: want a factor > 0 (0 means 1)", o.Scale))
	}
	return nil
}

// Filter applies Options to requests presented one at a time in trace
// order. A Filter is not safe for concurrent use.
type Filter struct {
	opts Options
	kept int
	done bool
}

// New returns a Filter for opts.
func New(opts Options) (*Filter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Filter{opts: opts}, nil
}

// Apply returns the request to write for r, and false if r is dropped.
// The returned request shares r's HashIDs. r must be valid and come in
// trace order (non-decreasing timestamps).
func (f *Filter) Apply(r trace.Request) (trace.Request, bool, error) {
	o := f.opts
	if f.done {
		return trace.Request{}, false, nil
	}
	if r.Timestamp < o.FromMs {
		return trace.Request{}, false, nil
	}
	if o.ToMs != 0 && r.Timestamp >= o.ToMs {
		f.done = true // timestamps never decrease: nothing later is kept
		return trace.Request{}, false, nil
	}
	if o.Families != 0 && len(r.HashIDs) > 0 && !KeepFamily(o.Seed, r.HashIDs[0], o.Families) {
		return trace.Request{}, false, nil
	}
	if o.First != 0 && f.kept >= o.First {
		f.done = true
		return trace.Request{}, false, nil
	}
	ts := r.Timestamp - o.FromMs
	if o.Scale != 0 && o.Scale != 1 {
		x := math.Round(float64(ts) * o.Scale)
		if x >= math.MaxInt64 {
			return trace.Request{}, false, fmt.Errorf("tracesample: timestamp %d scaled by %v overflows", r.Timestamp, o.Scale)
		}
		ts = int64(x)
	}
	f.kept++
	if o.First != 0 && f.kept >= o.First {
		f.done = true
	}
	r.Timestamp = ts
	return r, true, nil
}

// Done reports whether no later request can be kept (the window has ended
// or First requests were kept), so the caller may stop reading.
func (f *Filter) Done() bool { return f.done }

// Kept returns the number of requests kept so far.
func (f *Filter) Kept() int { return f.kept }

// KeepFamily reports whether the family whose first hash id is first is
// kept at the given fraction and seed: hash(seed, first) < fraction, with
// the hash mapped uniformly onto [0, 1). Raising the fraction only adds
// families.
func KeepFamily(seed, first uint64, fraction float64) bool {
	h := block.Mix64(seed ^ block.Mix64(first+block.Golden64))
	return float64(h>>11)*(1.0/(1<<53)) < fraction
}

// Sample returns the subsample of reqs (which must be in trace order).
// The result shares the HashIDs slices of reqs.
func Sample(reqs []trace.Request, opts Options) ([]trace.Request, error) {
	f, err := New(opts)
	if err != nil {
		return nil, err
	}
	var out []trace.Request
	for _, r := range reqs {
		if f.Done() {
			break
		}
		s, ok, err := f.Apply(r)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// ctxCheckEvery is how many requests Copy handles between context checks:
// about a millisecond of work, so cancellation is prompt but cheap.
const ctxCheckEvery = 1024

// Copy streams the subsample of src to dst and flushes dst. It stops
// reading src as soon as no later request can be kept. It returns the
// number of requests written.
func Copy(ctx context.Context, dst *trace.Writer, src *trace.Reader, opts Options) (int, error) {
	f, err := New(opts)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := 0; !f.Done(); i++ {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return n, fmt.Errorf("tracesample: sample %s: %w", src.Name(), err)
			}
		}
		r, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, fmt.Errorf("tracesample: %w", err)
		}
		s, ok, err := f.Apply(r)
		if err != nil {
			return n, fmt.Errorf("%w (%s:%d)", err, src.Name(), src.Line())
		}
		if ok {
			if err := dst.Write(s); err != nil {
				return n, fmt.Errorf("tracesample: sample %s: %w", src.Name(), err)
			}
			n++
		}
	}
	if err := dst.Flush(); err != nil {
		return n, fmt.Errorf("tracesample: sample %s: %w", src.Name(), err)
	}
	return n, nil
}
