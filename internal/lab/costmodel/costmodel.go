// Package costmodel is the prefill cost model of the lab in model units: how
// many FLOPs and seconds a prefill of n tokens takes on a given model and
// hardware profile when a prefix of it is already cached, how many bytes of
// KV cache a token and a block occupy, and at which bandwidth loading a
// cached prefix is as fast as recomputing it.
//
// The formulas come from the Mooncake FAST'25 paper (Table 1, Eq. 1 and 2,
// Fig 14): for a model with l layers and hidden size d,
//
//	flops(n)              = l * (4*n*n*d + 22*n*d*d)
//	prefill(n, cached p)  = (flops(n) - flops(p)) / (G * MFU(n))
//	KV bytes per token    = 2 * l * (d / gqa) * s
//
// where G is the aggregate peak FLOP/s of the node, s the bytes per element
// and MFU(n) the model-FLOPs utilisation at a context of n tokens, which
// grows with n. MFU is data: a small table of calibration points per profile,
// interpolated linearly in log(tokens) and clamped at both ends.
//
// Profiles are plain values; a user adds a model/hardware pair by building a
// Profile and calling Validate. The package holds no mutable state.
package costmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// MFUPoint is one calibration point of a profile's MFU curve.
type MFUPoint struct {
	// Tokens is the total context length in tokens (> 0).
	Tokens int `json:"tokens"`
	// MFU is the model-FLOPs utilisation at that length, in (0, 1].
	MFU float64 `json:"mfu"`
}

// Profile describes a model on a piece of hardware: everything the cost
// model needs. The zero value is not valid; use Default, Lookup or build one
// and call Validate.
type Profile struct {
	// Name identifies the profile (Lookup key).
	Name string `json:"name"`
	// Layers is the number of transformer layers (l).
	Layers int `json:"layers"`
	// Hidden is the model dimension (d).
	Hidden int `json:"hidden"`
	// GQA is the grouped-query attention factor: query heads per KV head.
	// Hidden must be divisible by it.
	GQA int `json:"gqa"`
	// BytesPerElem is the size of one KV element in bytes (s; 2 for fp16/bf16).
	BytesPerElem int `json:"bytes_per_elem"`
	// PeakFLOPS is the aggregate peak FLOP/s of the node running one
	// prefill instance (G).
	PeakFLOPS float64 `json:"peak_flops"`
	// MFU is the utilisation curve, sorted by strictly increasing Tokens.
	// MFUAt interpolates it linearly in log(tokens) and clamps at the ends.
	MFU []MFUPoint `json:"mfu"`
	// BlockTokens is the number of tokens per KV block.
	BlockTokens int `json:"block_tokens"`
}

// Calibration of the default profile.
const (
	// a800PeakFLOPS is the dense BF16 peak of one NVIDIA A800 (= A100),
	// 312 TFLOP/s (NVIDIA A100 datasheet; Mooncake FAST'25 Table 1 uses it).
	a800PeakFLOPS = 312e12
	// defaultBlockTokens is the block size of the published Mooncake traces
	// (FAST25-release/traces/README) and of Mooncake's KV blocks.
	defaultBlockTokens = 512
	// shortPromptTokens and shortPromptMFU are the lowest calibration point:
	// an ASSUMPTION, not a measurement. Fig 14a starts at 8k tokens; short
	// prompts use the GPUs less well (kernel launch and communication
	// overheads dominate), so MFU is taken to fall to 0.30 at 512 tokens,
	// about two thirds of the 8k value, which gives a 512-token prefill of
	// ≈82 ms — in the range reported for 70B models on 8 GPUs with tensor
	// parallelism. Below 512 tokens the curve is clamped.
	shortPromptTokens = 512
	shortPromptMFU    = 0.30
)

// llama3_70b builds the paper's profile: LLaMA3-70B (l = 80, d = 8192,
// gqa = 8, bf16) on one node of 8×A800 (docs/design.md, "Cost model"; Mooncake
// FAST'25 Table 1). Its MFU at 8k…128k tokens is whatever makes the formula
// give the Fig 14a times (MFU = flops(n) / (G * t)): 0.458, 0.529, 0.609,
// 0.718, 0.882; below that, one assumed point at 512 tokens.
func llama3_70b() Profile {
	// Uncached prefill times of LLaMA3-70B on 8×A800 read from Mooncake
	// FAST'25 Fig 14a at 8k, 16k, 32k, 64k and 128k tokens (k = 1024).
	fig14a := []struct {
		tokens  int
		seconds float64
	}{
		{8 << 10, 1.0},
		{16 << 10, 2.0},
		{32 << 10, 4.4},
		{64 << 10, 10.6},
		{128 << 10, 27.5},
	}
	p := Profile{
		Name:         "llama3-70b-8xa800",
		Layers:       80,
		Hidden:       8192,
		GQA:          8,
		BytesPerElem: 2,
		PeakFLOPS:    8 * a800PeakFLOPS,
		BlockTokens:  defaultBlockTokens,
	}
	p.MFU = append(p.MFU, MFUPoint{Tokens: shortPromptTokens, MFU: shortPromptMFU})
	for _, c := range fig14a {
		p.MFU = append(p.MFU, MFUPoint{Tokens: c.tokens, MFU: p.FLOPs(c.tokens) / (p.PeakFLOPS * c.seconds)})
	}
	return p
}

// llama3_8b is LLaMA3-8B (l = 32, d = 4096, 32 query heads over 8 KV heads,
// bf16) on one A800. Its MFU curve is the 70B curve reused unchanged: an
// ASSUMPTION for what-if runs, not a calibration (no figure in the paper
// gives 8B prefill times).
func llama3_8b() Profile {
	big := llama3_70b()
	return Profile{
		Name:         "llama3-8b-1xa800",
		Layers:       32,
		Hidden:       4096,
		GQA:          4,
		BytesPerElem: 2,
		PeakFLOPS:    a800PeakFLOPS,
		MFU:          big.MFU,
		BlockTokens:  defaultBlockTokens,
	}
}

// Default returns the paper's profile, LLaMA3-70B on 8×A800
// ("llama3-70b-8xa800").
func Default() Profile { return llama3_70b() }

// Profiles returns every built-in profile, Default first. Each call returns
// fresh values the caller may modify.
func Profiles() []Profile { return []Profile{llama3_70b(), llama3_8b()} }

// Lookup returns the built-in profile called name.
func Lookup(name string) (Profile, error) {
	var names []string
	for _, p := range Profiles() {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("costmodel: unknown profile %q (known: %s)", name, strings.Join(names, ", "))
}

// Validate reports the first invalid field of p, by name.
func (p Profile) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("costmodel: profile %q: %s %s", p.Name, field, fmt.Sprintf(format, a...))
	}
	switch {
	case p.Name == "":
		return errors.New("costmodel: profile: Name is empty")
	case p.Layers <= 0:
		return bad("Layers", "must be > 0, got %d", p.Layers)
	case p.Hidden <= 0:
		return bad("Hidden", "must be > 0, got %d", p.Hidden)
	case p.GQA <= 0:
		return bad("GQA", "must be > 0, got %d", p.GQA)
	case p.Hidden%p.GQA != 0:
		return bad("GQA", "%d does not divide Hidden %d", p.GQA, p.Hidden)
	case p.BytesPerElem <= 0:
		return bad("BytesPerElem", "must be > 0, got %d", p.BytesPerElem)
	case !(p.PeakFLOPS > 0) || math.IsInf(p.PeakFLOPS, 0):
		return bad("PeakFLOPS", "must be finite and > 0, got %g", p.PeakFLOPS)
	case p.BlockTokens <= 0:
		return bad("BlockTokens", "must be > 0, got %d", p.BlockTokens)
	case len(p.MFU) == 0:
		return bad("MFU", "has no points")
	}
	for i, pt := range p.MFU {
		if pt.Tokens <= 0 {
			return bad(fmt.Sprintf("MFU[%d].Tokens", i), "must be > 0, got %d", pt.Tokens)
		}
		if !(pt.MFU > 0 && pt.MFU <= 1) {
			return bad(fmt.Sprintf("MFU[%d].MFU", i), "must be in (0, 1], got %g", pt.MFU)
		}
		if i > 0 && pt.Tokens <= p.MFU[i-1].Tokens {
			return bad(fmt.Sprintf("MFU[%d].Tokens", i), "%d is not above the previous point's %d", pt.Tokens, p.MFU[i-1].Tokens)
		}
	}
	return nil
}

// FLOPs returns the FLOPs of an uncached prefill of n tokens,
// l*(4*n²*d + 22*n*d²). n <= 0 gives 0.
func (p Profile) FLOPs(n int) float64 {
	if n <= 0 {
		return 0
	}
	x, d := float64(n), float64(p.Hidden)
	return float64(p.Layers) * (4*x*x*d + 22*x*d*d)
}

// MFUAt returns the utilisation at a context of n tokens: the profile's
// points interpolated linearly in log(tokens), clamped to the first point
// below it and to the last point above it. A profile without points gives 1.
func (p Profile) MFUAt(n int) float64 {
	pts := p.MFU
	switch {
	case len(pts) == 0:
		return 1
	case n <= pts[0].Tokens:
		return pts[0].MFU
	case n >= pts[len(pts)-1].Tokens:
		return pts[len(pts)-1].MFU
	}
	i, _ := slices.BinarySearchFunc(pts, n, func(pt MFUPoint, n int) int { return pt.Tokens - n })
	if pts[i].Tokens == n {
		return pts[i].MFU
	}
	lo, hi := pts[i-1], pts[i]
	f := math.Log(float64(n)/float64(lo.Tokens)) / math.Log(float64(hi.Tokens)/float64(lo.Tokens))
	return lo.MFU + f*(hi.MFU-lo.MFU)
}

// PrefillSeconds returns the time to prefill a prompt of n tokens of which
// the first cached tokens are already cached: (flops(n) - flops(cached)) /
// (G * MFU(n)). MFU is taken at the total context length n, because the
// uncached tokens attend to the whole context; this reproduces the paper's
// "128k tokens with 95% cached ≈ 2.4 s" (2.35 s). MFU at the uncached
// length n-cached does not (4.65 s); MFU at the cached length happens to
// give nearly the same here (2.38 s), since both lengths are near 128k.
//
// Bad inputs are clamped, never rejected: n < 0 counts as 0, cached < 0 as
// 0 and cached > n as n. The result is finite and >= 0 for a valid profile;
// a profile without positive PeakFLOPS gives +Inf for any work (never NaN).
func (p Profile) PrefillSeconds(n, cached int) float64 {
	n = max(n, 0)
	cached = min(max(cached, 0), n)
	if n == cached {
		return 0
	}
	rate := p.PeakFLOPS * p.MFUAt(n)
	if !(rate > 0) {
		return math.Inf(1)
	}
	return (p.FLOPs(n) - p.FLOPs(cached)) / rate
}

// KVBytesPerToken returns the KV cache size of one token,
// 2 (K and V) * l * (d / gqa) * s: 327,680 B for the default profile.
func (p Profile) KVBytesPerToken() int64 {
	if p.GQA <= 0 {
		return 0
	}
	return 2 * int64(p.Layers) * int64(p.Hidden/p.GQA) * int64(p.BytesPerElem)
}

// KVBytes returns the KV cache size of n tokens (0 for n <= 0).
func (p Profile) KVBytes(n int) int64 {
	return int64(max(n, 0)) * p.KVBytesPerToken()
}

// BlockBytes returns the KV cache size of one full block: 160 MiB for the
// default profile's 512-token blocks.
func (p Profile) BlockBytes() int64 { return p.KVBytes(p.BlockTokens) }

// TransferSeconds returns the time to move bytes at bytesPerSec. Zero or
// negative bytes take 0 s; a bandwidth that is not > 0 gives +Inf (the
// transfer never finishes).
func TransferSeconds(bytes int64, bytesPerSec float64) float64 {
	if bytes <= 0 {
		return 0
	}
	if !(bytesPerSec > 0) {
		return math.Inf(1)
	}
	return float64(bytes) / bytesPerSec
}

// TransferSeconds is the package function TransferSeconds, for call sites
// that hold a profile.
func (p Profile) TransferSeconds(bytes int64, bytesPerSec float64) float64 {
	return TransferSeconds(bytes, bytesPerSec)
}

// BreakEvenBandwidth returns the bandwidth in bytes/s at which loading the
// KV cache of a prefix-token prefix takes as long as computing it at PEAK
// FLOP/s, as in the paper's Eq. 2: KVBytes(prefix) / (flops(prefix) / G).
// For the default profile an 8192-token prefix gives ≈5.9 GB/s (the paper's
// "≈6 GB/s"). It is an upper bound: real prefill runs below peak, so the
// break-even against the modelled prefill time (BreakEvenBandwidthMFU) is
// lower. prefix <= 0 gives 0.
func (p Profile) BreakEvenBandwidth(prefix int) float64 {
	if prefix <= 0 {
		return 0
	}
	return float64(p.KVBytes(prefix)) / (p.FLOPs(prefix) / p.PeakFLOPS)
}

// BreakEvenBandwidthMFU is BreakEvenBandwidth against the modelled prefill
// time, PrefillSeconds(prefix, 0), which includes MFU: the bandwidth the
// simulator's fetch-or-recompute decision effectively uses for a request
// that is all prefix. It is lower than the peak-FLOPs figure by the factor
// MFU(prefix) (≈2.7 GB/s for 8192 tokens on the default profile).
// prefix <= 0 gives 0.
func (p Profile) BreakEvenBandwidthMFU(prefix int) float64 {
	if prefix <= 0 {
		return 0
	}
	return float64(p.KVBytes(prefix)) / p.PrefillSeconds(prefix, 0)
}
