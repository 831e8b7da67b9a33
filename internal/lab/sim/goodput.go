package sim

import (
	"context"
	"fmt"
	"math"

	"github.com/kvpool/kvpool/trace"
)

// Goodput search parameters.
const (
	// goodputLow and goodputHigh bracket the rate multiplier: from 64×
	// slower to 64× faster than the trace, wide enough for every shared
	// trace on clusters from 1 to hundreds of instances.
	goodputLow  = 1.0 / 64
	goodputHigh = 64.0
	// goodputTolerance is the relative width at which bisection stops
	// (2%: finer than the run-to-run spread of the paper's figures, and 11
	// simulations in all).
	goodputTolerance = 0.02
	// DefaultGoodputTarget is the SLO attainment goodput must keep
	// (docs/design.md, "What is measured, and where": >= 90%).
	DefaultGoodputTarget = 0.9
)

// Goodput finds the highest rate multiplier at which at least target of
// the requests (0 means DefaultGoodputTarget) meet opts' TTFT SLO, by
// bisection in log space over [1/64, 64] until the bracket is within 2%;
// opts.RateMultiplier is ignored. It returns that multiplier and the
// goodput in requests per second (the trace's rate — requests over its
// span — times the multiplier). It assumes attainment falls as the rate
// rises. When even 1/64 misses the target it returns 0, 0 and no error;
// when 64 meets it, it returns 64.
func Goodput(ctx context.Context, reqs []trace.Request, opts Options, target float64) (multiplier, reqPerSec float64, err error) {
	target, rate, err := goodputSetup(reqs, opts, target)
	if err != nil {
		return 0, 0, err
	}
	m, err := bisectRate(func(m float64) (bool, error) {
		o := opts
		o.RateMultiplier = m
		res, err := Run(ctx, reqs, o)
		if err != nil {
			return false, fmt.Errorf("sim: goodput at rate multiplier %g: %w", m, err)
		}
		return res.Summary.SLOAttainment >= target, nil
	})
	return m, m * rate, err
}

// goodputSetup validates the arguments of a goodput search and returns the
// target (defaulted) and the trace's rate in requests per second.
func goodputSetup(reqs []trace.Request, opts Options, target float64) (float64, float64, error) {
	if target == 0 {
		target = DefaultGoodputTarget
	}
	if !(target > 0 && target <= 1) {
		return 0, 0, fmt.Errorf("sim: goodput target %g is outside (0, 1]", target)
	}
	if err := opts.Validate(); err != nil {
		return 0, 0, err
	}
	if len(reqs) == 0 {
		return 0, 0, fmt.Errorf("sim: goodput: no requests")
	}
	first, last := reqs[0].Timestamp, reqs[0].Timestamp
	for _, r := range reqs {
		first, last = min(first, r.Timestamp), max(last, r.Timestamp)
	}
	if last == first {
		return 0, 0, fmt.Errorf("sim: goodput: all %d requests have timestamp %d ms; the trace has no rate", len(reqs), first)
	}
	return target, float64(len(reqs)) / (float64(last-first) / 1000), nil
}

// bisectRate returns the highest rate multiplier in [1/64, 64] that meets,
// to 2%, assuming meets is monotone (0 when even 1/64 fails).
func bisectRate(meets func(m float64) (bool, error)) (float64, error) {
	lo, hi := goodputLow, goodputHigh
	ok, err := meets(hi)
	if err != nil {
		return 0, err
	}
	if ok {
		return hi, nil
	}
	if ok, err = meets(lo); err != nil || !ok {
		return 0, err
	}
	for hi/lo > 1+goodputTolerance {
		mid := math.Sqrt(lo * hi)
		ok, err := meets(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}
