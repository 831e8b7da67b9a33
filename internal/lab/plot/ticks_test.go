package plot

import (
	"math"
	"slices"
	"testing"
)

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
		n      int
		want   []float64
	}{
		{"fraction", 0, 0.37, 5, []float64{0, 0.1, 0.2, 0.3}},
		{"unit", 0, 1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{"coarse", 0, 100, 4, []float64{0, 50, 100}},
		{"negative", -1, 1, 4, []float64{-1, -0.5, 0, 0.5, 1}},
		{"offset", 12, 47, 5, []float64{20, 30, 40}},
		{"small", 0.001, 0.0042, 4, []float64{0.001, 0.002, 0.003, 0.004}},
		{"millions", 0, 3e6, 6, []float64{0, 5e5, 1e6, 1.5e6, 2e6, 2.5e6, 3e6}},
		{"twos", 0, 10, 5, []float64{0, 2, 4, 6, 8, 10}},
		{"single value", 3, 3, 5, []float64{3}},
		{"inverted", 1, 0, 5, nil},
		{"nan", math.NaN(), 1, 5, nil},
		{"inf", 0, math.Inf(1), 5, nil},
		{"no ticks wanted", 0, 1, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NiceTicks(tt.lo, tt.hi, tt.n)
			if !slices.Equal(got, tt.want) {
				t.Errorf("NiceTicks(%v, %v, %d) = %v, want %v", tt.lo, tt.hi, tt.n, got, tt.want)
			}
			if len(got) > 1 && len(got)-1 > tt.n {
				t.Errorf("NiceTicks(%v, %v, %d) gave %d intervals, more than %d", tt.lo, tt.hi, tt.n, len(got)-1, tt.n)
			}
		})
	}
}

func TestLogTicks(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
		n      int
		want   []float64
	}{
		{"decades", 1, 1e6, 10, []float64{1, 10, 100, 1e3, 1e4, 1e5, 1e6}},
		{"cache sizes", 1e5, 1e8, 10, []float64{1e5, 1e6, 1e7, 1e8}},
		{"fractions", 0.001, 1, 10, []float64{0.001, 0.01, 0.1, 1}},
		{"inner decades", 3, 3000, 10, []float64{10, 100, 1000}},
		{"thinned", 1, 1e12, 4, []float64{1, 1e4, 1e8, 1e12}},
		{"one decade", 0.5, 3, 10, []float64{0.5, 1, 2}},
		{"no decade", 2, 8, 10, []float64{2, 5}},
		{"zero", 0, 10, 5, nil},
		{"inverted", 10, 1, 5, nil},
		{"negative", -1, 10, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LogTicks(tt.lo, tt.hi, tt.n)
			if !slices.Equal(got, tt.want) {
				t.Errorf("LogTicks(%v, %v, %d) = %v, want %v", tt.lo, tt.hi, tt.n, got, tt.want)
			}
		})
	}
}

func TestLinearLabels(t *testing.T) {
	tests := []struct {
		name  string
		ticks []float64
		step  float64
		want  []string
	}{
		{"fractions", []float64{0, 0.1, 0.2, 0.3}, 0.1, []string{"0", "0.1", "0.2", "0.3"}},
		{"integers", []float64{0, 50, 100}, 50, []string{"0", "50", "100"}},
		{"kilo", []float64{0, 500, 1000, 1500}, 500, []string{"0", "0.5k", "1.0k", "1.5k"}},
		{"mega", []float64{0, 1e6, 2e6}, 1e6, []string{"0", "1M", "2M"}},
		{"giga", []float64{0, 1e10, 2e10}, 1e10, []string{"0", "10G", "20G"}},
		{"negative", []float64{-1, -0.5, 0, 0.5}, 0.5, []string{"\u22121.0", "\u22120.5", "0", "0.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := linearLabels(tt.ticks, tt.step); !slices.Equal(got, tt.want) {
				t.Errorf("linearLabels(%v, %v) = %q, want %q", tt.ticks, tt.step, got, tt.want)
			}
		})
	}
}

func TestLogLabel(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{1, "1"}, {10, "10"}, {100, "100"}, {1e3, "1k"}, {1e5, "100k"}, {3e6, "3M"},
		{1e9, "1G"}, {0.1, "0.1"}, {0.001, "0.001"}, {1e-5, "1e\u22125"}, {5e-4, "5e\u22124"},
	}
	for _, tt := range tests {
		if got := logLabel(tt.v); got != tt.want {
			t.Errorf("logLabel(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.3731, "0.373"}, {2.2222, "2.22"}, {12, "12"}, {999, "999"},
		{1234.5, "1.23k"}, {3.1e6, "3.1M"}, {-500, "\u2212500"}, {0.00012, "0.00012"},
		{2e-6, "2e\u22126"}, {-1.234e-5, "\u22121.23e\u22125"}, {math.NaN(), "n/a"}, {math.Inf(1), "n/a"},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.v); got != tt.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestScaleAxisDomain(t *testing.T) {
	tests := []struct {
		name       string
		log        bool
		data       extent
		minV, maxV *float64
		n          int
		lo, hi     float64
	}{
		{"linear widened to ticks", false, extent{0.02, 0.66, true}, nil, nil, 5, 0, 0.8},
		{"fixed min kept", false, extent{0.02, 0.66, true}, new(0.0), nil, 5, 0, 0.8},
		{"fixed both kept", false, extent{0.02, 0.66, true}, new(0.01), new(0.7), 5, 0.01, 0.7},
		{"single value centred", false, extent{5, 5, true}, nil, nil, 5, 4.4, 5.6},
		{"single zero", false, extent{0, 0, true}, nil, nil, 4, -1, 1},
		{"no data", false, extent{}, nil, nil, 5, 0, 1},
		{"fixed min above data", false, extent{1, 2, true}, new(5.0), nil, 5, 5, 10},
		{"log widened to decades", true, extent{1.5e5, 5e7, true}, nil, nil, 10, 1e5, 1e8},
		{"log single decade value", true, extent{100, 100, true}, nil, nil, 10, 10, 1000},
		{"log single value", true, extent{300, 300, true}, nil, nil, 10, 100, 1000},
		{"log fixed max", true, extent{1.5e5, 5e7, true}, nil, new(1e9), 10, 1e5, 1e9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := scaleAxis(tt.log, tt.data, tt.minV, tt.maxV, tt.n)
			if a.lo != tt.lo || a.hi != tt.hi {
				t.Errorf("domain = [%v, %v], want [%v, %v]", a.lo, a.hi, tt.lo, tt.hi)
			}
			if len(a.ticks) < 2 {
				t.Errorf("ticks = %v, want at least two", a.ticks)
			}
			if len(a.labels) != len(a.ticks) {
				t.Errorf("%d labels for %d ticks", len(a.labels), len(a.ticks))
			}
			for _, tk := range a.ticks {
				if tk < a.lo || tk > a.hi {
					t.Errorf("tick %v outside domain [%v, %v]", tk, a.lo, a.hi)
				}
			}
		})
	}
}

// TestAxisRangeHugsTheData pins where automatic axes start and end: a
// log axis at the decade at or below the smallest value (never further
// down) and at or above the largest; a linear axis at the nice tick at or
// below and at or above.
func TestAxisRangeHugsTheData(t *testing.T) {
	for _, tt := range []struct {
		log            bool
		lo, hi         float64
		wantLo, wantHi float64
	}{
		{true, 0.05, 20, 0.01, 100},
		{true, 0.1, 20, 0.1, 100},
		{true, 0.0017, 25, 0.001, 100},
		{true, 24, 400, 10, 1000},
		{true, 500, 97657, 100, 100000},
		{false, 0.13, 0.87, 0, 1},
		{false, 1.51, 3.49, 1.5, 3.5},
		{false, 12, 58, 10, 60},
	} {
		var e extent
		e.add(tt.lo)
		e.add(tt.hi)
		a := scaleAxis(tt.log, e, nil, nil, 6)
		if a.lo != tt.wantLo || a.hi != tt.wantHi {
			t.Errorf("log %v, data [%g, %g]: axis [%g, %g], want [%g, %g]", tt.log, tt.lo, tt.hi, a.lo, a.hi, tt.wantLo, tt.wantHi)
		}
	}
}
