package plot

import (
	"math"
)

// axis maps data values onto one pixel dimension and carries its ticks.
type axis struct {
	log      bool
	lo, hi   float64 // domain
	px0, px1 float64 // pixel positions of lo and hi
	ticks    []float64
	labels   []string
	minor    []float64 // unlabelled ticks (log axes)
}

// pos maps v to its pixel position.
func (a *axis) pos(v float64) float64 {
	var t float64
	if a.log {
		t = (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	} else {
		t = (v - a.lo) / (a.hi - a.lo)
	}
	p := a.px0 + t*(a.px1-a.px0)
	// Far-off points (outside fixed limits) are clipped when drawn; clamp
	// them so their coordinates stay finite and short.
	return min(max(p, -maxPixel), maxPixel)
}

// maxPixel bounds mapped coordinates: a thousand canvases away from the
// plot, so the direction of a clipped segment is kept to within a pixel.
const maxPixel = 1e6

// plottable reports whether v can be drawn on the axis at all.
func (a *axis) plottable(v float64) bool {
	return finite(v) && (!a.log || v > 0)
}

// extent is the range of the finite data on one axis.
type extent struct {
	lo, hi float64
	ok     bool
}

func (e *extent) add(v float64) {
	if !e.ok {
		e.lo, e.hi, e.ok = v, v, true
		return
	}
	e.lo = min(e.lo, v)
	e.hi = max(e.hi, v)
}

// scaleAxis chooses the domain and ticks of an axis. data is the extent of
// the plotted values, minV/maxV the caller's fixed limits (nil = automatic),
// n the largest number of tick intervals wanted. Automatic ends are
// extended to the next tick (linear) or decade (log), so the data never
// touches an unlabelled edge.
func scaleAxis(log bool, data extent, minV, maxV *float64, n int) axis {
	a := axis{log: log}
	lo, hi := data.lo, data.hi
	if !data.ok {
		lo, hi = 0, 1
		if log {
			lo, hi = 1, 10
		}
	}
	if minV != nil {
		lo = *minV
	}
	if maxV != nil {
		hi = *maxV
	}
	if log {
		a.lo, a.hi = logDomain(lo, hi, minV != nil, maxV != nil)
		a.ticks = LogTicks(a.lo, a.hi, n)
		a.minor = logMinorTicks(a.lo, a.hi)
		a.labels = make([]string, len(a.ticks))
		for i, t := range a.ticks {
			a.labels[i] = logLabel(t)
		}
		return a
	}
	a.lo, a.hi = linearDomain(lo, hi, minV != nil, maxV != nil, n)
	a.ticks = NiceTicks(a.lo, a.hi, n)
	a.labels = linearLabels(a.ticks, niceStep(a.hi-a.lo, n))
	return a
}

// linearDomain widens [lo, hi] to a non-empty range whose free ends lie on
// multiples of the tick step.
func linearDomain(lo, hi float64, fixedLo, fixedHi bool, n int) (float64, float64) {
	if hi <= lo {
		switch {
		case fixedLo && !fixedHi:
			hi = lo + max(math.Abs(lo), 1)
		case fixedHi && !fixedLo:
			lo = hi - max(math.Abs(hi), 1)
		default: // a single value: centre it
			d := math.Abs(lo) * 0.1
			if d == 0 {
				d = 1
			}
			lo, hi = lo-d, hi+d
		}
	}
	step := niceStep(hi-lo, n)
	if step == 0 {
		return lo, hi
	}
	if !fixedLo {
		lo = roundTo(math.Floor(lo/step+tickEpsilon)*step, stepDecimals(step))
	}
	if !fixedHi {
		hi = roundTo(math.Ceil(hi/step-tickEpsilon)*step, stepDecimals(step))
	}
	return lo, hi
}

// logDomain widens [lo, hi] (both > 0) to a non-empty range whose free
// ends are powers of ten.
func logDomain(lo, hi float64, fixedLo, fixedHi bool) (float64, float64) {
	if hi <= lo {
		switch {
		case fixedLo && !fixedHi:
			hi = lo * 10
		case fixedHi && !fixedLo:
			lo = hi / 10
		default: // a single value: put it inside a decade, not on its edge
			v := lo
			k := int(math.Floor(math.Log10(v) + tickEpsilon))
			lo, hi = pow10(k), pow10(k+1)
			if v <= lo*(1+tickEpsilon) {
				lo = pow10(k - 1)
			}
		}
	}
	if !fixedLo {
		lo = pow10(int(math.Floor(math.Log10(lo) + tickEpsilon)))
	}
	if !fixedHi {
		hi = pow10(int(math.Ceil(math.Log10(hi) - tickEpsilon)))
	}
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

// tickTarget is the largest tick count whose labels do not overlap along
// an axis of the given pixel length, when each label needs about minGap
// pixels; clamped to [2, 10].
func tickTarget(length, minGap float64) int {
	n := int(length / minGap)
	return min(max(n, 2), 10)
}

// labelsFit reports whether the labels of a horizontal axis leave at least
// a small gap between neighbours.
func labelsFit(a *axis, size float64) bool {
	for i := 1; i < len(a.ticks); i++ {
		space := math.Abs(a.pos(a.ticks[i]) - a.pos(a.ticks[i-1]))
		need := (textWidth(a.labels[i], size)+textWidth(a.labels[i-1], size))/2 + 8
		if space < need {
			return false
		}
	}
	return true
}
