package policy

import (
	"fmt"
	"strings"
)

// Spec names an eviction policy and an optional admission policy, written
// "eviction" or "eviction+admission" (for example "s3fifo+second-hit").
// The zero Spec is "lru" admitting everything: an empty Eviction means
// "lru", an empty Admission "all".
type Spec struct {
	Eviction  string
	Admission string
}

type evictionEntry struct {
	name   string
	oracle bool // needs Access.NextUse
	build  func(capacity int) Eviction
}

type admissionEntry struct {
	name  string
	build func(capacity int) Admission
}

// evictionTable returns the eviction registry, fresh on every call.
func evictionTable() []evictionEntry {
	return []evictionEntry{
		{"lru", false, func(c int) Eviction { return NewLRU(c) }},
		{"fifo", false, func(c int) Eviction { return NewFIFO(c) }},
		{"lfu", false, func(c int) Eviction { return NewLFU(c) }},
		{"s3fifo", false, func(c int) Eviction { return NewS3FIFO(c) }},
		{"arc", false, func(c int) Eviction { return NewARC(c) }},
		{"mooncake", false, func(c int) Eviction { return NewMooncake(c) }},
		{"kvchain", false, func(c int) Eviction { return NewChain(c) }},
		{"belady", true, func(c int) Eviction { return NewBelady(c, BeladyOptions{}) }},
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
// every online one with second-hit admission, and LRU and Mooncake with
// count-min-sketch admission.
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
	return append(out, Spec{Eviction: "lru", Admission: "cms"}, Spec{Eviction: "mooncake", Admission: "cms"})
}

// ParseSpec parses "eviction" or "eviction+admission". Names are case
// insensitive; an unknown name is an error that lists the valid ones.
func ParseSpec(s string) (Spec, error) {
	in := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Spec{}, fmt.Errorf("policy: empty policy spec (want eviction[+admission], eviction one of %s)", strings.Join(EvictionNames(), ", "))
	}
	ev, adm, hasAdm := strings.Cut(s, "+")
	ev, adm = strings.TrimSpace(ev), strings.TrimSpace(adm)
	if ev == "" || (hasAdm && adm == "") {
		return Spec{}, fmt.Errorf("policy: spec %q: empty policy name around '+' (want eviction[+admission])", in)
	}
	if strings.Contains(adm, "+") {
		return Spec{}, fmt.Errorf("policy: spec %q: at most one admission policy (want eviction[+admission])", in)
	}
	if _, ok := findEviction(ev); !ok {
		return Spec{}, fmt.Errorf("policy: spec %q: unknown eviction policy %q (valid: %s)", in, ev, strings.Join(EvictionNames(), ", "))
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
// for a cache of capacity blocks.
func NewEviction(name string, capacity int) (Eviction, error) {
	e, ok := findEviction(name)
	if !ok {
		return nil, fmt.Errorf("unknown eviction policy %q (valid: %s)", name, strings.Join(EvictionNames(), ", "))
	}
	return e.build(max(capacity, 0)), nil
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

func findEviction(name string) (evictionEntry, bool) {
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
