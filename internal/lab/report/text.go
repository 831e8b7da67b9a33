package report

import (
	"html/template"
	"strings"
	"unicode"
)

// block is one paragraph or one bulleted list of Markdown-ish text.
type block struct {
	para  string   // set for a paragraph
	items []string // set for a list
}

// parseBlocks splits text into paragraphs (separated by blank lines, inner
// line breaks joined by spaces) and lists (lines starting with "- " or
// "* "; an indented or plain line right after an item continues it).
func parseBlocks(text string) []block {
	var (
		blocks []block
		para   []string
		items  []string
	)
	flush := func() {
		if len(para) > 0 {
			blocks = append(blocks, block{para: strings.Join(para, " ")})
			para = nil
		}
		if len(items) > 0 {
			blocks = append(blocks, block{items: items})
			items = nil
		}
	}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "* "):
			if len(para) > 0 {
				flush()
			}
			items = append(items, strings.TrimSpace(line[2:]))
		case len(items) > 0:
			items[len(items)-1] += " " + line
		default:
			para = append(para, line)
		}
	}
	flush()
	return blocks
}

// inlineHTML escapes s for HTML and renders its `code` spans and **bold**
// runs. Unpaired markers appear literally.
func inlineHTML(s string) template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	for len(s) > 0 {
		i := strings.IndexAny(s, "`*")
		if i < 0 {
			b.WriteString(esc(s))
			break
		}
		b.WriteString(esc(s[:i]))
		s = s[i:]
		if s[0] == '`' {
			if j := strings.IndexByte(s[1:], '`'); j >= 0 {
				b.WriteString("<code>" + esc(s[1:1+j]) + "</code>")
				s = s[j+2:]
				continue
			}
		} else if strings.HasPrefix(s, "**") {
			if j := strings.Index(s[2:], "**"); j > 0 {
				b.WriteString("<strong>" + esc(s[2:2+j]) + "</strong>")
				s = s[j+4:]
				continue
			}
		}
		b.WriteString(esc(s[:1]))
		s = s[1:]
	}
	return template.HTML(b.String()) // every piece above was escaped
}

// numericCell reports whether a table cell reads as a number ("12",
// "−0.5", "37.3%", "2.22×", ".5 s"), so its column can be right-aligned.
func numericCell(s string) bool {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "+-\u2212")
	s = strings.TrimPrefix(s, ".")
	for _, r := range s {
		return unicode.IsDigit(r)
	}
	return false
}

// emptyCell reports whether a cell holds no value, which does not stop a
// column from being numeric.
func emptyCell(s string) bool {
	switch strings.TrimSpace(s) {
	case "", "-", "\u2013", "\u2014", "n/a", "NaN":
		return true
	}
	return false
}

// numericColumns marks the columns whose non-empty cells are all numeric
// (and that have at least one such cell).
func numericColumns(t Table) []bool {
	num := make([]bool, len(t.Columns))
	for c := range t.Columns {
		seen := false
		num[c] = true
		for _, row := range t.Rows {
			if emptyCell(row[c]) {
				continue
			}
			seen = true
			if !numericCell(row[c]) {
				num[c] = false
				break
			}
		}
		num[c] = num[c] && seen
	}
	return num
}
