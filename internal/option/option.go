// Package option is the error an options struct's Validate returns for one
// bad field. The error says the field in words for a library user
// ("sim: RAM blocks: must be > 0, got -5") and keeps the field's Go name,
// so that a command can say the same thing in terms of its own flag
// ("--ram-blocks: must be > 0, got -5") in one place, whatever package
// the options belong to.
package option

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Error is an invalid option: which field, and why.
type Error struct {
	// Field is the field's Go name, dotted for a nested field
	// ("RAMBlocks", "Promotion.MaxPerHeartbeat").
	Field string
	// Err says what is wrong with its value ("must be > 0, got -5").
	Err error
}

// Errorf returns the Error of field with the reason format (which may
// wrap an error with %w).
func Errorf(field, format string, a ...any) *Error {
	return &Error{Field: field, Err: fmt.Errorf(format, a...)}
}

// Error says the field in words and the reason.
func (e *Error) Error() string { return Words(e.Field) + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// Innermost returns the innermost Error in err's chain for which name
// reports a name, and that name; nil when there is none. Options nest
// (a demo's cluster holds a simulator's options), and the innermost
// field is the one a flag set.
func Innermost(err error, name func(field string) (string, bool)) (*Error, string) {
	var found *Error
	var foundName string
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			break
		}
		if n, ok := name(e.Field); ok {
			found, foundName = e, n
		}
		err = e.Err
	}
	return found, foundName
}

// Words spells a field name in words: "RAMBlocks" is "RAM blocks",
// "HotAccesses" "hot accesses", "Promotion.MaxPerHeartbeat" "promotion
// max per heartbeat", "SSDGBps" "SSD GBps". An acronym keeps its
// capitals.
func Words(field string) string {
	var words []string
	for _, part := range strings.Split(field, ".") {
		words = append(words, splitCamel(part)...)
	}
	return strings.Join(words, " ")
}

// units are the unit suffixes of field names, kept as they are written
// ("SSDGBps" is "SSD GBps", not "SSDG bps").
func units() []string { return []string{"GBps", "Gbps"} }

// splitCamel splits a Go identifier at its word boundaries, lowering
// each word but an acronym or a unit.
func splitCamel(s string) []string {
	for _, u := range units() {
		if rest, ok := strings.CutSuffix(s, u); ok && rest != "" {
			return append(splitCamel(rest), u)
		}
	}
	r := []rune(s)
	var words []string
	start := 0
	for i := 1; i <= len(r); i++ {
		boundary := i == len(r) ||
			(unicode.IsUpper(r[i]) && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])))
		if !boundary {
			continue
		}
		w := string(r[start:i])
		if len(w) == 1 || !isUpper(w) {
			w = strings.ToLower(w)
		}
		words = append(words, w)
		start = i
	}
	return words
}

func isUpper(s string) bool {
	for _, c := range s {
		if !unicode.IsUpper(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

// Field returns the field of the innermost Error in err's chain; "" when
// there is none.
func Field(err error) string {
	e, _ := Innermost(err, func(string) (string, bool) { return "", true })
	if e == nil {
		return ""
	}
	return e.Field
}
