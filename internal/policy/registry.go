package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Spec names an eviction policy and an optional admission policy, written
// "eviction" or "eviction+admission" (for example "s3fifo+second-hit").
// The zero Spec is "lru" admitting everything: an empty Eviction means
// "lru", an empty Admission "all".
//
// An eviction policy that takes parameters may carry them in parentheses,
// name(key=value,key=value), kept in Eviction as written in canonical form
// (lower case, parameters in the policy's fixed order). kvchain takes
// perr (ChainOptions.PredictionError, 0..1), seed (ChainOptions.Seed,
// an unsigned integer) and probation (on, the default, or off:
// ChainOptions.DisableProbation, the variant for per-node caches behind
// cache-aware routing, docs/policy.md): "kvchain(perr=0.2,seed=1)",
// "kvchain(probation=off)". Parameters may also be
// separated by ';' ("kvchain(perr=0.2;seed=1)"), which survives a
// comma-separated list of specs; SplitSpecs splits such a list without
// cutting inside parentheses.
type Spec struct {
	Eviction  string
	Admission string
}

type evictionEntry struct {
	name   string
	oracle bool // needs Access.NextUse
	build  func(capacity int) Eviction
	// params lists the parameter keys, in canonical order (nil: none);
	// buildWith builds with parameters that parseParams checked.
	params    []string
	buildWith func(capacity int, params map[string]string) (Eviction, error)
}

type admissionEntry struct {
	name  string
	build func(capacity int) Admission
}

// evictionTable returns the eviction registry, fresh on every call.
func evictionTable() []evictionEntry {
	return []evictionEntry{
		{name: "lru", build: func(c int) Eviction { return NewLRU(c) }},
		{name: "fifo", build: func(c int) Eviction { return NewFIFO(c) }},
		{name: "lfu", build: func(c int) Eviction { return NewLFU(c) }},
		{name: "s3fifo", build: func(c int) Eviction { return NewS3FIFO(c) }},
		{name: "arc", build: func(c int) Eviction { return NewARC(c) }},
		{name: "mooncake", build: func(c int) Eviction { return NewMooncake(c) }},
		{name: "kvchain", build: func(c int) Eviction { return NewChain(c) }, params: []string{"perr", "seed", "probation"}, buildWith: buildChain},
		{name: "belady", oracle: true, build: func(c int) Eviction { return NewBelady(c, BeladyOptions{}) }},
	}
}

// admissionTable returns the admission registry, fresh on every call.
func admissionTable() []admissionEntry {
	return []admissionEntry{
		{"all", func(int) Admission { return AdmitAll{} }},
		{"second-hit", func(c int) Admission { return NewSecondHit(c) }},
		{"cms", func(c int) Admission { return NewCMS(c) }},
	}
}

// EvictionNames returns the registered eviction policy names.
func EvictionNames() []string {
	t := evictionTable()
	out := make([]string, len(t))
	for i, e := range t {
		out[i] = e.name
	}
	return out
}

// AdmissionNames returns the registered admission policy names.
func AdmissionNames() []string {
	t := admissionTable()
	out := make([]string, len(t))
	for i, e := range t {
		out[i] = e.name
	}
	return out
}

// Presets returns the specs worth comparing: every eviction policy alone,
// every online one with second-hit admission, LRU and Mooncake with
// count-min-sketch admission, and kvchain without probation (the variant
// for per-node caches).
func Presets() []Spec {
	var out []Spec
	t := evictionTable()
	for _, e := range t {
		out = append(out, Spec{Eviction: e.name})
	}
	for _, e := range t {
		if !e.oracle {
			out = append(out, Spec{Eviction: e.name, Admission: "second-hit"})
		}
	}
	return append(out, Spec{Eviction: "lru", Admission: "cms"}, Spec{Eviction: "mooncake", Admission: "cms"},
		Spec{Eviction: "kvchain(probation=off)"})
}

// ParseSpec parses "eviction" or "eviction+admission". Names are case
// insensitive; an unknown name is an error that lists the valid ones.
func ParseSpec(s string) (Spec, error) {
	in := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Spec{}, fmt.Errorf("policy: empty policy spec (want eviction[+admission], eviction one of %s)", strings.Join(EvictionNames(), ", "))
	}
	ev, adm, hasAdm := cutOutside(s, '+') // not a '+' inside parameters (perr=1e+0)
	ev, adm = strings.TrimSpace(ev), strings.TrimSpace(adm)
	if ev == "" || (hasAdm && adm == "") {
		return Spec{}, fmt.Errorf("policy: spec %q: empty policy name around '+' (want eviction[+admission])", in)
	}
	if _, _, more := cutOutside(adm, '+'); more {
		return Spec{}, fmt.Errorf("policy: spec %q: at most one admission policy (want eviction[+admission])", in)
	}
	base, params, err := splitParams(ev)
	if err != nil {
		return Spec{}, fmt.Errorf("policy: spec %q: %w", in, err)
	}
	e, ok := findEviction(base)
	if !ok {
		return Spec{}, fmt.Errorf("policy: spec %q: unknown eviction policy %q (valid: %s)", in, base, strings.Join(EvictionNames(), ", "))
	}
	if ev, _, err = e.canonical(params); err != nil {
		return Spec{}, fmt.Errorf("policy: spec %q: %w", in, err)
	}
	if hasAdm {
		if _, ok := findAdmission(adm); !ok {
			return Spec{}, fmt.Errorf("policy: spec %q: unknown admission policy %q (valid: %s)", in, adm, strings.Join(AdmissionNames(), ", "))
		}
	}
	if adm == "all" {
		adm = ""
	}
	return Spec{Eviction: ev, Admission: adm}, nil
}

// String returns the spec in the form ParseSpec reads, omitting the
// default admission ("lru", not "lru+all").
func (s Spec) String() string {
	ev := s.Eviction
	if ev == "" {
		ev = "lru"
	}
	if s.Admission == "" || s.Admission == "all" {
		return ev
	}
	return ev + "+" + s.Admission
}

// NeedsFuture reports whether the spec's policies need Access.NextUse (an
// Oracle such as Belady). An unknown name needs nothing; NewCache rejects
// it.
func (s Spec) NeedsFuture() bool {
	e, ok := findEviction(s.Eviction)
	return ok && e.oracle
}

// NewCache returns an empty cache of capacity blocks driven by the spec's
// policies. Capacity 0 is a cache that holds nothing; a negative capacity
// or an unknown name is an error.
func (s Spec) NewCache(capacity int) (*Cache, error) {
	if capacity < 0 {
		return nil, fmt.Errorf("policy: new %s cache: capacity %d is negative", s, capacity)
	}
	ev, err := NewEviction(s.Eviction, capacity)
	if err != nil {
		return nil, fmt.Errorf("policy: new %s cache: %w", s, err)
	}
	var adm Admission
	if s.Admission != "" && s.Admission != "all" {
		if adm, err = NewAdmission(s.Admission, capacity); err != nil {
			return nil, fmt.Errorf("policy: new %s cache: %w", s, err)
		}
	}
	return NewCache(capacity, ev, adm), nil
}

// NewEviction returns a new eviction policy by registry name ("" is "lru")
// for a cache of capacity blocks. The name may carry parameters, as in
// "kvchain(perr=0.2,seed=1)" (see Spec).
func NewEviction(name string, capacity int) (Eviction, error) {
	base, params, err := splitParams(strings.ToLower(strings.TrimSpace(name)))
	if err != nil {
		return nil, err
	}
	e, ok := findEviction(base)
	if !ok {
		return nil, fmt.Errorf("unknown eviction policy %q (valid: %s)", base, strings.Join(EvictionNames(), ", "))
	}
	_, kv, err := e.canonical(params)
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return e.build(max(capacity, 0)), nil
	}
	return e.buildWith(max(capacity, 0), kv)
}

// SplitSpecs splits a comma-separated list of specs, leaving commas inside
// parentheses alone: "lru,kvchain(perr=0.2,seed=1)" is two specs. Items
// are trimmed; empty items are kept (ParseSpec rejects them).
func SplitSpecs(list string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(list[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(list[start:]))
}

// cutOutside is strings.Cut for a separator outside parentheses.
func cutOutside(s string, sep byte) (before, after string, found bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case sep:
			if depth == 0 {
				return s[:i], s[i+1:], true
			}
		}
	}
	return s, "", false
}

// splitParams splits "name(k=v,k=v)" into the name and its raw parameter
// list ("" when there are no parentheses).
func splitParams(s string) (name, params string, err error) {
	open := strings.IndexByte(s, '(')
	if open < 0 {
		if strings.IndexByte(s, ')') >= 0 {
			return "", "", fmt.Errorf("eviction policy %q: ')' without '('", s)
		}
		return s, "", nil
	}
	if !strings.HasSuffix(s, ")") || strings.Count(s, "(") != 1 || strings.Count(s, ")") != 1 {
		return "", "", fmt.Errorf("eviction policy %q: want name(key=value,...) with one pair of parentheses at the end", s)
	}
	return strings.TrimSpace(s[:open]), s[open+1 : len(s)-1], nil
}

// canonical checks a raw parameter list against the entry and returns the
// canonical name (parameters in the entry's order) and the parsed values
// (nil when there are none).
func (e evictionEntry) canonical(raw string) (string, map[string]string, error) {
	if strings.TrimSpace(raw) == "" {
		return e.name, nil, nil
	}
	if e.params == nil {
		return "", nil, fmt.Errorf("eviction policy %s takes no parameters, got %q", e.name, raw)
	}
	kv := map[string]string{}
	for _, f := range strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ';' }) {
		k, v, ok := strings.Cut(f, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return "", nil, fmt.Errorf("%s parameter %q: want key=value", e.name, strings.TrimSpace(f))
		}
		known := false
		for _, p := range e.params {
			known = known || p == k
		}
		if !known {
			return "", nil, fmt.Errorf("%s: unknown parameter %q (valid: %s)", e.name, k, strings.Join(e.params, ", "))
		}
		if _, dup := kv[k]; dup {
			return "", nil, fmt.Errorf("%s: parameter %s given twice", e.name, k)
		}
		kv[k] = v
	}
	if _, err := e.buildWith(0, kv); err != nil { // validates the values
		return "", nil, err
	}
	var b strings.Builder
	b.WriteString(e.name)
	sep := "("
	for _, p := range e.params {
		if v, ok := kv[p]; ok {
			b.WriteString(sep + p + "=" + v)
			sep = ","
		}
	}
	b.WriteString(")")
	return b.String(), kv, nil
}

// buildChain builds a kvchain from its spec parameters: perr is
// ChainOptions.PredictionError, seed ChainOptions.Seed, probation=off
// ChainOptions.DisableProbation.
func buildChain(capacity int, kv map[string]string) (Eviction, error) {
	var o ChainOptions
	if v, ok := kv["perr"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("kvchain parameter perr = %q: want a probability in 0..1", v)
		}
		o.PredictionError = f
	}
	if v, ok := kv["seed"]; ok {
		u, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("kvchain parameter seed = %q: want an unsigned integer", v)
		}
		o.Seed = u
	}
	if v, ok := kv["probation"]; ok {
		switch v {
		case "on":
		case "off":
			o.DisableProbation = true
		default:
			return nil, fmt.Errorf("kvchain parameter probation = %q: want on or off", v)
		}
	}
	return NewChainWith(capacity, o)
}

// NewAdmission returns a new admission policy by registry name ("" is
// "all") for a cache of capacity blocks.
func NewAdmission(name string, capacity int) (Admission, error) {
	a, ok := findAdmission(name)
	if !ok {
		return nil, fmt.Errorf("unknown admission policy %q (valid: %s)", name, strings.Join(AdmissionNames(), ", "))
	}
	return a.build(max(capacity, 0)), nil
}

// findEviction looks up an entry by name; parameters, if any, are ignored.
func findEviction(name string) (evictionEntry, bool) {
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = strings.TrimSpace(name[:i])
	}
	if name == "" {
		name = "lru"
	}
	for _, e := range evictionTable() {
		if e.name == name {
			return e, true
		}
	}
	return evictionEntry{}, false
}

func findAdmission(name string) (admissionEntry, bool) {
	if name == "" {
		name = "all"
	}
	for _, a := range admissionTable() {
		if a.name == name {
			return a, true
		}
	}
	return admissionEntry{}, false
}
