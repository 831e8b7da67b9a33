package plot

import (
	"math"
	"strconv"
	"strings"
)

// tickEpsilon absorbs floating-point error when comparing tick positions
// with a range's ends (a tick at 0.30000000000000004 belongs to [0, 0.3]).
// It is relative to the tick step, so it works at every scale.
const tickEpsilon = 1e-9

// NiceTicks returns tick values for a linear axis over [lo, hi]: the
// multiples of a "nice" step (1, 2 or 5 × 10^k) that lie in the range, with
// the step chosen as the smallest one that cuts hi-lo into at most n
// intervals. For example NiceTicks(0, 0.37, 5) is [0 0.1 0.2 0.3].
//
// The values are rounded to the step's decimal precision, so they compare
// equal to the literals they print as. NiceTicks returns nil when lo or hi
// is not finite, lo > hi or n < 1, and [lo] when lo == hi.
func NiceTicks(lo, hi float64, n int) []float64 {
	if !finite(lo) || !finite(hi) || lo > hi || n < 1 {
		return nil
	}
	if lo == hi {
		return []float64{lo}
	}
	step := niceStep(hi-lo, n)
	if step == 0 {
		return nil
	}
	first := math.Ceil(lo/step - tickEpsilon)
	last := math.Floor(hi/step + tickEpsilon)
	if last-first > float64(maxTicks) {
		return nil
	}
	dec := stepDecimals(step)
	ticks := make([]float64, 0, int(last-first)+1)
	for i := first; i <= last; i++ {
		ticks = append(ticks, roundTo(i*step, dec))
	}
	return ticks
}

// maxTicks bounds the tick count of any axis. No axis of a 720 px chart can
// label more; it also bounds work on absurd inputs.
const maxTicks = 1000

// niceStep returns the smallest 1/2/5 × 10^k step that cuts span into at
// most n intervals, or 0 when span is not positive and finite.
func niceStep(span float64, n int) float64 {
	if !(span > 0) || math.IsInf(span, 0) || n < 1 {
		return 0
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	norm := raw / mag
	var m float64
	switch {
	case norm <= 1+tickEpsilon:
		m = 1
	case norm <= 2+tickEpsilon:
		m = 2
	case norm <= 5+tickEpsilon:
		m = 5
	default:
		m = 10
	}
	return m * mag
}

// stepDecimals is the number of decimals needed to print multiples of step
// (a 1/2/5 × 10^k value) exactly.
func stepDecimals(step float64) int {
	d := -int(math.Floor(math.Log10(step) + tickEpsilon))
	return max(d, 0)
}

// roundTo rounds v to dec decimals through its decimal representation, so
// that the result is the float64 nearest to the printed value.
func roundTo(v float64, dec int) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'f', dec, 64), 64)
	if err != nil {
		return v
	}
	if r == 0 {
		return 0 // no negative zero
	}
	return r
}

// LogTicks returns tick values for a base-10 logarithmic axis over [lo, hi]
// (0 < lo < hi): the powers of ten in the range, thinned to every second,
// third, … decade when there are more than n of them. When the range holds
// fewer than two powers of ten it adds the 2× and 5× multiples, and when
// even that gives fewer than two ticks it falls back to NiceTicks. It
// returns nil for invalid input.
func LogTicks(lo, hi float64, n int) []float64 {
	if !finite(lo) || !finite(hi) || lo <= 0 || lo >= hi || n < 1 {
		return nil
	}
	kLo := int(math.Ceil(math.Log10(lo) - tickEpsilon))
	kHi := int(math.Floor(math.Log10(hi) + tickEpsilon))
	if count := kHi - kLo + 1; count >= 2 {
		stride := (count + n - 1) / n
		var ticks []float64
		for k := kLo; k <= kHi; k++ {
			// Align the thinned decades to multiples of the stride, so
			// that 10^0 stays a tick whenever it is in range.
			if mod(k, stride) == 0 {
				ticks = append(ticks, pow10(k))
			}
		}
		if len(ticks) >= 2 {
			return ticks
		}
	}
	var ticks []float64
	for k := kLo - 1; k <= kHi; k++ {
		for _, m := range []float64{1, 2, 5} {
			v := roundTo(m*pow10(k), max(-k, 0))
			if v >= lo*(1-tickEpsilon) && v <= hi*(1+tickEpsilon) {
				ticks = append(ticks, v)
			}
		}
	}
	if len(ticks) >= 2 && len(ticks) <= n {
		return ticks
	}
	return NiceTicks(lo, hi, n)
}

// logMinorTicks returns the unlabelled 2×…9× multiples of each decade in
// [lo, hi] for a log axis.
func logMinorTicks(lo, hi float64) []float64 {
	kLo := int(math.Floor(math.Log10(lo)))
	kHi := int(math.Ceil(math.Log10(hi)))
	if kHi-kLo > 12 { // too dense to be useful beyond a dozen decades
		return nil
	}
	var ticks []float64
	for k := kLo; k <= kHi; k++ {
		for m := 2; m <= 9; m++ {
			v := float64(m) * pow10(k)
			if v > lo && v < hi {
				ticks = append(ticks, v)
			}
		}
	}
	return ticks
}

// mod is the non-negative remainder of a / b.
func mod(a, b int) int {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// pow10 is 10^k as the float64 nearest to its decimal value.
func pow10(k int) float64 {
	v, err := strconv.ParseFloat("1e"+strconv.Itoa(k), 64)
	if err != nil {
		return math.Pow(10, float64(k))
	}
	return v
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// siPrefix picks the SI prefix and divisor used to label values up to
// maxAbs: k, M, G, T from 1000 upwards, none below.
func siPrefix(maxAbs float64) (string, float64) {
	switch {
	case maxAbs >= 1e12:
		return "T", 1e12
	case maxAbs >= 1e9:
		return "G", 1e9
	case maxAbs >= 1e6:
		return "M", 1e6
	case maxAbs >= 1e3:
		return "k", 1e3
	}
	return "", 1
}

// minus is the typographic minus sign used in labels (U+2212), which lines
// up with digits where a hyphen does not.
const minus = "\u2212"

// linearLabels formats the ticks of a linear axis whose ticks are multiples
// of step: all with the same number of decimals, with an SI prefix when the
// largest tick is 1000 or more (so 1500000 prints as 1.5M).
func linearLabels(ticks []float64, step float64) []string {
	maxAbs := 0.0
	for _, t := range ticks {
		maxAbs = max(maxAbs, math.Abs(t))
	}
	prefix, div := siPrefix(maxAbs)
	dec := 0
	if step > 0 {
		dec = stepDecimals(step / div)
	}
	labels := make([]string, len(ticks))
	for i, t := range ticks {
		if t == 0 {
			labels[i] = "0"
			continue
		}
		labels[i] = signed(strconv.FormatFloat(t/div, 'f', dec, 64)) + prefix
	}
	return labels
}

// logLabel formats one tick of a log axis: plain decimals from 0.001 to
// 999, SI prefixes above, and 1e−k below.
func logLabel(v float64) string {
	switch {
	case v >= 1e3:
		prefix, div := siPrefix(v)
		return trimNumber(v/div, 3) + prefix
	case v >= 1e-3:
		return trimNumber(v, 3)
	}
	return signed(strings.Replace(strconv.FormatFloat(v, 'e', -1, 64), "e-0", "e-", 1))
}

// trimNumber prints v with at most sig significant digits and no trailing
// zeros or exponent.
func trimNumber(v float64, sig int) string {
	if v == 0 {
		return "0"
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', sig, 64), 64)
	if err != nil {
		r = v
	}
	return signed(strconv.FormatFloat(r, 'f', -1, 64))
}

// signed replaces a leading hyphen-minus (and one after an exponent
// marker) with the typographic minus sign.
func signed(s string) string {
	return strings.ReplaceAll(s, "-", minus)
}

// FormatValue prints a data value compactly for labels: three significant
// digits, an SI prefix (k, M, G, T) from 1000 upwards, a typographic minus
// sign, "0" for zero and "n/a" for NaN or ±Inf. BarChart uses it for its
// value labels unless BarChart.Format is set.
func FormatValue(v float64) string {
	if !finite(v) {
		return "n/a"
	}
	a := math.Abs(v)
	if a >= 1e3 {
		prefix, div := siPrefix(a)
		return trimNumber(v/div, 3) + prefix
	}
	if a != 0 && a < 1e-4 {
		return signed(strings.Replace(strconv.FormatFloat(v, 'g', 3, 64), "e-0", "e-", 1))
	}
	return trimNumber(v, 3)
}
