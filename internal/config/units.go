package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Size is a number of bytes. In configuration it is written as a whole or
// decimal number with an optional unit: binary units KiB, MiB, GiB, TiB,
// PiB (and K, M, G, T, P, which mean the same), decimal units KB, MB, GB,
// TB, PB, or B; units are case-insensitive and may follow a space. A bare
// number is bytes. Examples: 4096, 512MiB, 4GiB, 1.5GB, "64 KiB". A
// fractional result is rounded to the nearest byte.
type Size int64

// sizeUnit returns the multiplier of a lower-cased size unit.
func sizeUnit(u string) (int64, bool) {
	switch u {
	case "", "b":
		return 1, true
	case "k", "ki", "kib":
		return 1 << 10, true
	case "m", "mi", "mib":
		return 1 << 20, true
	case "g", "gi", "gib":
		return 1 << 30, true
	case "t", "ti", "tib":
		return 1 << 40, true
	case "p", "pi", "pib":
		return 1 << 50, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "tb":
		return 1e12, true
	case "pb":
		return 1e15, true
	}
	return 0, false
}

// errSizeSyntax and errBandwidthSyntax describe the accepted forms.
var (
	errSizeSyntax      = errors.New("want a size like 4096, 512MiB, 4GiB or 1.5GB")
	errBandwidthSyntax = errors.New("want a bandwidth like 10Gbps, 1.25GB/s, 500MiB/s, a number of bytes per second, or 0/off")
)

// ParseSize parses a size (see Size).
func ParseSize(s string) (Size, error) {
	num, unit, ok := splitNumber(s)
	if !ok {
		return 0, errSizeSyntax
	}
	mult, ok := sizeUnit(strings.ToLower(unit))
	if !ok {
		return 0, fmt.Errorf("unknown unit %q: %w", unit, errSizeSyntax)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, errSizeSyntax
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	// Round to the nearest byte: floor(r + 1/2).
	r.Add(r, big.NewRat(1, 2))
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if !q.IsInt64() {
		return 0, fmt.Errorf("%s is more than %d bytes", s, int64(math.MaxInt64))
	}
	return Size(q.Int64()), nil
}

// String formats the size for people, in binary units with one decimal
// ("1.0 GiB", "256.0 KiB", "512 B").
func (s Size) String() string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if s < 1024 && s > -1024 {
		return strconv.FormatInt(int64(s), 10) + " B"
	}
	v := float64(s)
	u := ""
	for _, name := range units {
		v /= 1024
		u = name
		if math.Abs(v) < 1024 {
			break
		}
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + u
}

// exact is String when that is the exact size, else the size in bytes
// followed by String ("536870913 B (512.0 MiB)"): an error about a limit
// must not show a value over it as the limit itself.
func (s Size) exact() string {
	str := s.String()
	if s > -1024 && s < 1024 {
		return str
	}
	unit := Size(1)
	for a := s; a >= 1024 || a <= -1024; a /= 1024 {
		unit *= 1024
	}
	if (s*10)%unit == 0 && s < math.MaxInt64/10 && s > math.MinInt64/10 {
		return str
	}
	return strconv.FormatInt(int64(s), 10) + " B (" + str + ")"
}

// Bandwidth is a rate in bytes per second; 0 means unlimited (off). In
// configuration it is written as a number with a unit: bits per second
// with bps, Kbps, Mbps, Gbps, Tbps (or bit/s, Gbit/s …: decimal, 8 bits a
// byte), bytes per second with B/s, KB/s, MB/s, GB/s, TB/s (decimal) or
// KiB/s, MiB/s, GiB/s, TiB/s (binary; Bps, GBps … are accepted too). The
// prefix letters are case-insensitive but b (bits) and B (bytes) are not.
// A bare number is bytes per second; 0 or "off" is unlimited. Examples:
// 10Gbps, 1.25GB/s, 500MiB/s.
type Bandwidth float64

// bandwidthPrefix returns the multiplier of a lower-cased unit prefix.
func bandwidthPrefix(p string) (float64, bool) {
	switch p {
	case "":
		return 1, true
	case "k":
		return 1e3, true
	case "m":
		return 1e6, true
	case "g":
		return 1e9, true
	case "t":
		return 1e12, true
	case "ki":
		return 1 << 10, true
	case "mi":
		return 1 << 20, true
	case "gi":
		return 1 << 30, true
	case "ti":
		return 1 << 40, true
	}
	return 0, false
}

// ParseBandwidth parses a bandwidth (see Bandwidth).
func ParseBandwidth(s string) (Bandwidth, error) {
	if strings.EqualFold(strings.TrimSpace(s), "off") {
		return 0, nil
	}
	num, unit, ok := splitNumber(s)
	if !ok {
		return 0, errBandwidthSyntax
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, errBandwidthSyntax
	}
	if unit == "" {
		return Bandwidth(v), nil
	}
	var prefix string
	perUnit := 1.0 // bytes per unit
	switch {
	case strings.HasSuffix(unit, "bps"):
		prefix, perUnit = strings.TrimSuffix(unit, "bps"), 1.0/8
	case strings.HasSuffix(unit, "bit/s"):
		prefix, perUnit = strings.TrimSuffix(unit, "bit/s"), 1.0/8
	case strings.HasSuffix(unit, "b/s"):
		prefix, perUnit = strings.TrimSuffix(unit, "b/s"), 1.0/8
	case strings.HasSuffix(unit, "Bps"):
		prefix = strings.TrimSuffix(unit, "Bps")
	case strings.HasSuffix(unit, "B/s"):
		prefix = strings.TrimSuffix(unit, "B/s")
	default:
		return 0, fmt.Errorf("unknown unit %q: %w", unit, errBandwidthSyntax)
	}
	mult, ok := bandwidthPrefix(strings.ToLower(prefix))
	if !ok {
		return 0, fmt.Errorf("unknown unit %q: %w", unit, errBandwidthSyntax)
	}
	return Bandwidth(v * mult * perUnit), nil
}

// String formats the bandwidth for people in decimal bytes per second
// ("1.25 GB/s", "524.29 MB/s"), or "off" for 0.
func (b Bandwidth) String() string {
	if b == 0 {
		return "off"
	}
	v := float64(b)
	u := "B/s"
	for _, name := range []string{"kB/s", "MB/s", "GB/s", "TB/s", "PB/s"} {
		if math.Abs(v) < 1000 {
			break
		}
		v /= 1000
		u = name
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) + " " + u
}

// maxNumberLen bounds the numeric part of a size or bandwidth; no sane
// value needs more digits, and the bound keeps a hostile input from
// costing big-number arithmetic.
const maxNumberLen = 40

// splitNumber splits s into an unsigned decimal number (digits, an
// optional fraction, an optional exponent of at most two digits) and the
// unit after it, with surrounding and separating spaces removed.
func splitNumber(s string) (num, unit string, ok bool) {
	s = strings.TrimSpace(s)
	i := 0
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return "", "", false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		// An exponent needs 1–2 digits; otherwise the e starts a unit
		// (as in "1EiB"), which the unit table then judges.
		if k > j && k-j <= 2 {
			i = k
		}
	}
	if i > maxNumberLen {
		return "", "", false
	}
	return s[:i], strings.TrimSpace(s[i:]), true
}
