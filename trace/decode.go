package trace

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// parser decodes one trace line. It is hand-written for the fixed shape of
// the format (an object of four integer/array fields) and is several times
// faster than encoding/json; it falls back to encoding/json only to validate
// unknown fields' values and to unescape keys that contain escapes.
type parser struct {
	b   []byte
	i   int
	ids []uint64 // scratch for hash ids, copied out per request
}

// The required fields, as bits of a seen-mask.
const (
	fieldTimestamp = 1 << iota
	fieldInput
	fieldOutput
	fieldHashIDs
	allFields = fieldTimestamp | fieldInput | fieldOutput | fieldHashIDs
)

// problem is a parse failure: its kind and reason.
type problem struct {
	kind   Kind
	reason string
}

func syntaxf(format string, a ...any) *problem {
	return &problem{KindSyntax, "invalid JSON: " + fmt.Sprintf(format, a...)}
}

func wrongTypef(format string, a ...any) *problem {
	return &problem{KindWrongType, fmt.Sprintf(format, a...)}
}

// parse decodes line (already trimmed, non-empty). kind 0 means success.
func (p *parser) parse(line []byte) (Request, Kind, string) {
	p.b, p.i = line, 0
	req, pr := p.object()
	p.b = nil
	if pr != nil {
		if pr.kind == KindSyntax && line[0] != '{' && json.Valid(line) {
			return Request{}, KindNotObject, "line is a JSON " + describe(line[0]) + ", want an object"
		}
		return Request{}, pr.kind, pr.reason
	}
	return req, 0, ""
}

func (p *parser) ws() {
	for p.i < len(p.b) && isSpace(p.b[p.i]) {
		p.i++
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *parser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) where() string {
	if p.i >= len(p.b) {
		return "unexpected end of line"
	}
	return fmt.Sprintf("unexpected %s at column %d", quoteByte(p.b[p.i]), p.i+1)
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// object parses one request object: the whole line, which must hold
// nothing else, with every field the format requires.
func (p *parser) object() (Request, *problem) {
	var req Request
	if p.peek() != '{' {
		return req, syntaxf("%s, want '{'", p.where())
	}
	p.i++
	seen := 0
	if p.peek() == '}' {
		p.i++
	} else if pr := p.members(&req, &seen); pr != nil {
		return req, pr
	}
	if p.peek() != 0 {
		return req, syntaxf("%s after the object", p.where())
	}
	if seen != allFields {
		return req, missingField(seen)
	}
	return req, nil
}

// members parses an object's members, up to and including its closing
// '}', into req, adding the bit of every known field to seen.
func (p *parser) members(req *Request, seen *int) *problem {
	for {
		key, pr := p.member(req, seen)
		if pr != nil {
			return pr
		}
		c := p.peek()
		if c == ',' {
			p.i++
			continue
		}
		if c == '}' {
			p.i++
			return nil
		}
		return syntaxf("%s after field %q, want ',' or '}'", p.where(), key)
	}
}

// member parses one "name": value member into req (skipping the value of
// an unknown field) and returns the field's name.
func (p *parser) member(req *Request, seen *int) (string, *problem) {
	if p.peek() != '"' {
		return "", syntaxf("%s, want a field name", p.where())
	}
	kb, pr := p.key()
	if pr != nil {
		return "", pr
	}
	if p.peek() != ':' {
		return "", syntaxf("%s after field %q, want ':'", p.where(), kb)
	}
	p.i++
	p.ws()
	bit := 0
	switch string(kb) {
	case "timestamp":
		bit = fieldTimestamp
	case "input_length":
		bit = fieldInput
	case "output_length":
		bit = fieldOutput
	case "hash_ids":
		bit = fieldHashIDs
	}
	key := fieldName(bit, kb)
	if bit != 0 && *seen&bit != 0 {
		return key, &problem{KindDuplicateField, fmt.Sprintf("field %q appears twice", key)}
	}
	*seen |= bit
	switch bit {
	case fieldTimestamp:
		req.Timestamp, pr = p.int64Field(key)
	case fieldInput:
		req.InputLength, pr = p.intField(key)
	case fieldOutput:
		req.OutputLength, pr = p.intField(key)
	case fieldHashIDs:
		req.HashIDs, pr = p.hashIDs()
	default:
		pr = p.skipValue(key)
	}
	return key, pr
}

// missingField reports the first required field (in the format's order)
// whose bit is not in seen.
func missingField(seen int) *problem {
	for _, f := range [...]struct {
		bit  int
		name string
	}{{fieldTimestamp, "timestamp"}, {fieldInput, "input_length"}, {fieldOutput, "output_length"}, {fieldHashIDs, "hash_ids"}} {
		if seen&f.bit == 0 {
			return &problem{KindMissingField, fmt.Sprintf("missing field %q", f.name)}
		}
	}
	return nil
}

// fieldName names a field for messages without allocating for the known ones.
func fieldName(bit int, kb []byte) string {
	switch bit {
	case fieldTimestamp:
		return "timestamp"
	case fieldInput:
		return "input_length"
	case fieldOutput:
		return "output_length"
	case fieldHashIDs:
		return "hash_ids"
	}
	return string(kb)
}

// key reads a JSON string at p.i (which is '"') and the position after it.
// The fast path returns a view into the line (no allocation).
func (p *parser) key() ([]byte, *problem) {
	start := p.i
	p.i++
	for j := p.i; j < len(p.b); j++ {
		c := p.b[j]
		if c == '"' {
			p.i = j + 1
			return p.b[start+1 : j], nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return p.slowString(start)
		}
	}
	p.i = len(p.b)
	return nil, syntaxf("unterminated string starting at column %d", start+1)
}

// slowString decodes the string starting at start with encoding/json
// (escapes, non-ASCII); it finds the closing quote first.
func (p *parser) slowString(start int) ([]byte, *problem) {
	j := start + 1
	for j < len(p.b) && p.b[j] != '"' {
		if p.b[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(p.b) {
		p.i = len(p.b)
		return nil, syntaxf("unterminated string starting at column %d", start+1)
	}
	var s string
	if err := json.Unmarshal(p.b[start:j+1], &s); err != nil {
		return nil, syntaxf("bad string at column %d: %v", start+1, err)
	}
	p.i = j + 1
	return []byte(s), nil
}

// number scans a JSON number at p.i, returning its text and whether it is
// an integer (no fraction, no exponent). p.i moves past it.
func (p *parser) number() (text []byte, isInt bool, pr *problem) {
	start := p.i
	b := p.b
	i := p.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		p.i = i
		return nil, false, syntaxf("%s in number at column %d", p.where(), start+1)
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		isInt = false
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			p.i = i
			return nil, false, syntaxf("%s in number at column %d", p.where(), start+1)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			p.i = i
			return nil, false, syntaxf("%s in number at column %d", p.where(), start+1)
		}
	}
	p.i = i
	return b[start:i], isInt, nil
}

// describe names the JSON type that starts with c.
func describe(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// notNumber handles a non-number value where a number is needed: a wrong
// type if the value is valid JSON, else a syntax error.
func (p *parser) notNumber(what string) *problem {
	c := p.peek()
	if pr := p.skipValue(what); pr != nil {
		return pr
	}
	return wrongTypef("%s: want an integer, got a %s", what, describe(c))
}

// signedInt reads a JSON integer into an int64.
func (p *parser) signedInt(what string) (int64, *problem) {
	c := p.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, p.notNumber(what)
	}
	text, isInt, pr := p.number()
	if pr != nil {
		return 0, pr
	}
	if !isInt {
		return 0, wrongTypef("%s: want an integer, got %s", what, text)
	}
	neg := text[0] == '-'
	digits := text
	if neg {
		digits = text[1:]
	}
	var u uint64
	for _, d := range digits {
		if u > (math.MaxUint64-9)/10 {
			return 0, wrongTypef("%s: %s is out of range", what, text)
		}
		u = u*10 + uint64(d-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, wrongTypef("%s: %s is out of range", what, text)
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, wrongTypef("%s: %s is out of range", what, text)
	}
	return int64(u), nil
}

func (p *parser) int64Field(name string) (int64, *problem) {
	return p.signedInt(name)
}

func (p *parser) intField(name string) (int, *problem) {
	v, pr := p.signedInt(name)
	if pr != nil {
		return 0, pr
	}
	if v != int64(int(v)) {
		return 0, wrongTypef("%s: %d is out of range", name, v)
	}
	return int(v), nil
}

// hashIDs reads an array of non-negative integers.
func (p *parser) hashIDs() ([]uint64, *problem) {
	if p.peek() != '[' {
		c := p.peek()
		if pr := p.skipValue("hash_ids"); pr != nil {
			return nil, pr
		}
		return nil, wrongTypef("hash_ids: want an array, got a %s", describe(c))
	}
	p.i++
	ids := p.ids[:0]
	defer func() { p.ids = ids[:0] }()
	if p.peek() == ']' {
		p.i++
		return []uint64{}, nil
	}
	b := p.b
	for {
		p.ws()
		// Fast path: a plain run of digits followed by ',' or ']' or space.
		i := p.i
		var u uint64
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' && j-i < 19 {
			u = u*10 + uint64(b[j]-'0')
			j++
		}
		if j > i && j < len(b) && (b[j] == ',' || b[j] == ']' || b[j] == ' ') && !(b[i] == '0' && j-i > 1) {
			p.i = j
		} else {
			v, pr := p.hashID(len(ids))
			if pr != nil {
				return nil, pr
			}
			u = v
		}
		ids = append(ids, u)
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			out := make([]uint64, len(ids))
			copy(out, ids)
			return out, nil
		default:
			return nil, syntaxf("%s in hash_ids, want ',' or ']'", p.where())
		}
	}
}

// hashID reads one hash id the slow way, with full checks.
func (p *parser) hashID(idx int) (uint64, *problem) {
	what := fmt.Sprintf("hash_ids[%d]", idx)
	c := p.peek()
	if c != '-' && (c < '0' || c > '9') {
		if pr := p.skipValue(what); pr != nil {
			return 0, pr
		}
		return 0, wrongTypef("%s: want a non-negative integer, got a %s", what, describe(c))
	}
	text, isInt, pr := p.number()
	if pr != nil {
		return 0, pr
	}
	if !isInt || text[0] == '-' {
		if isInt && string(text) == "-0" {
			return 0, nil
		}
		return 0, wrongTypef("%s: want a non-negative integer, got %s", what, text)
	}
	u, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		return 0, wrongTypef("%s: %s is out of range", what, text)
	}
	return u, nil
}

// skipValue moves past one JSON value of any type, checking its syntax.
// It is iterative (no recursion), so deep nesting cannot exhaust the stack.
func (p *parser) skipValue(what string) *problem {
	p.ws()
	start := p.i
	b := p.b
	depth := 0
	i := p.i
	for {
		if i >= len(b) {
			p.i = i
			return syntaxf("unexpected end of line in value of %q", what)
		}
		c := b[i]
		switch {
		case c == '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				p.i = len(b)
				return syntaxf("unterminated string in value of %q", what)
			}
			i++
		case c == '{' || c == '[':
			depth++
			i++
		case c == '}' || c == ']':
			depth--
			i++
		default:
			i++
		}
		if depth < 0 {
			p.i = i - 1
			return syntaxf("%s in value of %q", p.where(), what)
		}
		if depth == 0 {
			// A scalar ends at a delimiter; a container at its closing bracket.
			if c != '}' && c != ']' && c != '"' {
				for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
					i++
				}
			}
			break
		}
	}
	if !json.Valid(b[start:i]) {
		p.i = start
		return syntaxf("bad value of %q at column %d", what, start+1)
	}
	p.i = i
	return nil
}
