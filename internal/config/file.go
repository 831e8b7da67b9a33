package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// entry is one setting read from the file: its key (dotted, or a
// top-level Mooncake alias), its value as text, and its line.
type entry struct {
	key   string
	value string
	line  int
}

// isJSON picks the parser: by extension (.yaml, .yml, .json), else by
// content (JSON when the first non-blank character is '{').
func isJSON(name string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml":
		return false
	}
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	return len(t) > 0 && t[0] == '{'
}

// parseFile parses a YAML or JSON configuration file into entries. It
// reports every unknown key (with file:line), duplicate key, wrong shape
// and empty value, joined.
func parseFile(name string, data []byte) ([]entry, error) {
	p := &fileParser{name: name, known: knownKeys()}
	if isJSON(name, data) {
		p.parseJSON(data)
	} else {
		p.parseYAML(data)
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return p.entries, nil
}

// knownKeys maps every key the file may hold to whether it is a section.
func knownKeys() map[string]bool {
	k := make(map[string]bool)
	for _, f := range fields() {
		k[f.key] = false
	}
	for _, a := range fileAliases() {
		k[a.name] = false
	}
	for _, s := range sections() {
		k[s] = true
	}
	k[quotaTenantsKey] = true
	return k
}

// quotaTenantsKey is the file-only mapping of per-tenant quotas: its
// members are tenant names, not fixed keys, each read as
// quotaTenantsKey + "." + name.
const quotaTenantsKey = "quota.tenants"

// maxFileErrors stops reporting after this many problems in one file: a
// person fixes the first few, and a wrong file (a binary, a log) would
// otherwise produce one error per line.
const maxFileErrors = 20

type fileParser struct {
	name    string
	known   map[string]bool
	entries []entry
	errs    []error
	seen    map[string]int // key → line, for duplicates
}

// room reports whether another error may be recorded; once the file has
// maxFileErrors it records a final "too many errors" instead.
func (p *fileParser) room() bool {
	if len(p.errs) < maxFileErrors {
		return true
	}
	if len(p.errs) == maxFileErrors {
		p.errs = append(p.errs, fmt.Errorf("%s: too many errors; stopped reporting", p.name))
	}
	return false
}

func (p *fileParser) errorf(line int, format string, a ...any) {
	if !p.room() {
		return
	}
	where := p.name
	if line > 0 {
		where = fmt.Sprintf("%s:%d", p.name, line)
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, a...)))
}

// key checks a key read at line: known, not a duplicate. It returns
// whether the key is known and whether it is a section.
func (p *fileParser) key(key string, line int) (known, section bool) {
	section, known = p.known[key]
	if name, ok := strings.CutPrefix(key, quotaTenantsKey+"."); ok && name != "" {
		known, section = true, false
	}
	if !known {
		if p.room() { // suggest only while errors are still reported
			p.errorf(line, "unknown key %q%s", key, p.suggest(key))
		}
		return false, false
	}
	if p.seen == nil {
		p.seen = make(map[string]int)
	}
	if prev, dup := p.seen[key]; dup {
		p.errorf(line, "duplicate key %q (first at line %d)", key, prev)
		return false, false
	}
	p.seen[key] = line
	return true, section
}

// suggest proposes the closest known key for a typo.
func (p *fileParser) suggest(key string) string {
	keys := make([]string, 0, len(p.known))
	for k := range p.known {
		keys = append(keys, k)
	}
	return suggestion(key, keys)
}

// suggestion is " (did you mean "k"?)" for the known name k closest to
// name, within an edit distance of 2; "" when none is that close. Of
// equally close names the first in sorted order is proposed.
func suggestion(name string, known []string) string {
	best, bestD := "", 3
	known = slices.Clone(known)
	slices.Sort(known)
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance, for suggestions only; inputs
// longer than 64 bytes are simply "far".
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parseYAML walks the document's node tree (yaml.v3 keeps line numbers).
func (p *fileParser) parseYAML(data []byte) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return // an empty file: all defaults
		}
		p.errs = append(p.errs, fmt.Errorf("parse %s as YAML: %w", p.name, err))
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		p.errorf(extra.Line, "more than one YAML document (or trailing garbage)")
		return
	}
	if len(doc.Content) == 0 {
		return
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root.Line, "the file must be a mapping of settings")
		return
	}
	p.yamlMapping(root, "")
}

func (p *fileParser) yamlMapping(m *yaml.Node, prefix string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k.Line, "keys must be plain names")
			continue
		}
		key := prefix + k.Value
		known, section := p.key(key, k.Line)
		if !known {
			continue
		}
		if v.Kind == yaml.AliasNode {
			p.errorf(v.Line, "%s: YAML aliases (*%s) are not supported", key, v.Value)
			continue
		}
		if section {
			switch {
			case v.Kind == yaml.MappingNode:
				p.yamlMapping(v, key+".")
			case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
				// "ssd:" with nothing under it: no settings.
			default:
				p.errorf(v.Line, "%s: want a mapping of %s.* settings", key, key)
			}
			continue
		}
		switch {
		case v.Kind != yaml.ScalarNode:
			p.errorf(v.Line, "%s: want a single value, not a list or mapping", key)
		case v.Tag == "!!null" && (v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle)) == 0:
			p.errorf(v.Line, "%s: no value (write \"\" for an empty one)", key)
		default:
			p.entries = append(p.entries, entry{key: key, value: v.Value, line: k.Line})
		}
	}
}

// parseJSON walks the document token by token, so that each key's line
// is known.
func (p *fileParser) parseJSON(data []byte) {
	if len(bytes.TrimSpace(data)) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lines := lineCounter{data: data}
	tok, err := dec.Token()
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("parse %s as JSON: %w", p.name, err))
		return
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		p.errorf(1, "the file must be a JSON object of settings")
		return
	}
	if err := p.jsonObject(dec, &lines, ""); err != nil {
		p.errs = append(p.errs, fmt.Errorf("parse %s as JSON (line %d): %w", p.name, lines.at(dec.InputOffset()), err))
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		p.errorf(lines.at(dec.InputOffset()), "trailing data after the JSON object")
	}
}

// jsonObject reads the members of an object whose '{' has been read, and
// its closing '}'. It returns an error only when the JSON itself is
// broken; bad settings are recorded and skipped.
func (p *fileParser) jsonObject(dec *json.Decoder, lines *lineCounter, prefix string) error {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("want a member name, got %v", tok)
		}
		line := lines.at(dec.InputOffset())
		key := prefix + name
		known, section := p.key(key, line)
		if !known {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		tok, err = dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch {
			case v == '{' && section:
				if err := p.jsonObject(dec, lines, key+"."); err != nil {
					return err
				}
			case v == '{' || v == '[':
				if err := skipJSON(dec); err != nil {
					return err
				}
				if section {
					p.errorf(line, "%s: want an object of %s.* settings", key, key)
				} else {
					p.errorf(line, "%s: want a single value, not an array or object", key)
				}
			default:
				return fmt.Errorf("unexpected %v", v)
			}
		case nil:
			if !section {
				p.errorf(line, "%s: no value (write \"\" for an empty one)", key)
			}
		default:
			if section {
				p.errorf(line, "%s: want an object of %s.* settings", key, key)
				continue
			}
			p.entries = append(p.entries, entry{key: key, value: fmt.Sprint(v), line: line})
		}
	}
	tok, err := dec.Token() // the closing '}'
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '}' {
		return fmt.Errorf("want '}', got %v", tok)
	}
	return nil
}

// skipJSON skips the rest of an array or object whose opening delimiter
// has been read.
func skipJSON(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// lineCounter turns byte offsets into line numbers, counting forward from
// the last offset asked (offsets only grow while decoding).
type lineCounter struct {
	data []byte
	off  int
	line int
}

func (c *lineCounter) at(off int64) int {
	if c.line == 0 {
		c.line = 1
	}
	o := int(min(max(off, 0), int64(len(c.data))))
	if o < c.off {
		c.off, c.line = 0, 1
	}
	c.line += bytes.Count(c.data[c.off:o], []byte{'\n'})
	c.off = o
	return c.line
}
