package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// markdown writes the report as GitHub-flavoured Markdown.
func (r *Report) markdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	title := r.Title
	if title == "" {
		title = defaultTitle
	}
	fmt.Fprintf(bw, "# %s\n", oneLine(title))
	writeBlocksMD(bw, r.Intro)
	fig, tab := 0, 0
	for _, s := range r.Sections {
		fmt.Fprintf(bw, "\n## %s\n", oneLine(s.Title))
		writeBlocksMD(bw, s.Text)
		for _, f := range s.Figures {
			fig++
			fmt.Fprintf(bw, "\n![%s](%s)\n\n**Figure %d.** %s\n", altText(f.Caption, f.File), f.File, fig, oneLine(f.Caption))
		}
		for _, t := range s.Tables {
			tab++
			fmt.Fprintf(bw, "\n**Table %d.** %s\n\n", tab, oneLine(t.Caption))
			writeTableMD(bw, t)
		}
	}
	return bw.Flush()
}

// defaultTitle heads a report whose Title is empty.
const defaultTitle = "Report"

func writeBlocksMD(w io.Writer, text string) {
	for _, b := range parseBlocks(text) {
		fmt.Fprintln(w)
		if b.items == nil {
			fmt.Fprintln(w, b.para)
			continue
		}
		for _, it := range b.items {
			fmt.Fprintf(w, "- %s\n", it)
		}
	}
}

// WriteMarkdownTable writes t as a GitHub pipe table, as report.md shows
// it (without its caption): for the terminal and for README tables, so
// they carry the same column names and number formats as the report.
func WriteMarkdownTable(w io.Writer, t Table) error {
	bw := bufio.NewWriter(w)
	writeTableMD(bw, t)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("report: write table %q: %w", t.Caption, err)
	}
	return nil
}

// Select returns t with only the named columns, in the order given;
// names t does not have are skipped.
func (t Table) Select(columns ...string) Table {
	var idx []int
	out := Table{Caption: t.Caption}
	for _, name := range columns {
		for i, c := range t.Columns {
			if c == name {
				idx = append(idx, i)
				out.Columns = append(out.Columns, c)
				break
			}
		}
	}
	for _, row := range t.Rows {
		r := make([]string, len(idx))
		for j, i := range idx {
			r[j] = row[i]
		}
		out.Rows = append(out.Rows, r)
	}
	return out
}

// writeTableMD writes a pipe table: one header row, the alignment row
// (numeric columns right-aligned) and one row per table row, each with
// exactly len(Columns)+1 unescaped pipes.
func writeTableMD(w io.Writer, t Table) {
	num := numericColumns(t)
	row := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + mdCell(c) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	row(t.Columns)
	align := make([]string, len(t.Columns))
	for i := range align {
		align[i] = "---"
		if num[i] {
			align[i] = "---:"
		}
	}
	fmt.Fprintln(w, "|"+strings.Join(align, "|")+"|")
	for _, r := range t.Rows {
		row(r)
	}
}

// mdCell makes s safe inside a pipe-table cell: one line, pipes escaped.
func mdCell(s string) string {
	s = strings.ReplaceAll(oneLine(s), `\`, `\\`)
	return strings.ReplaceAll(s, "|", `\|`)
}

// oneLine joins the lines of s with spaces and trims it.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// altText is the image description in Markdown: the caption, or the file
// name without one, with the brackets that would end it escaped.
func altText(caption, file string) string {
	s := oneLine(caption)
	if s == "" {
		s = file
	}
	r := strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`)
	return r.Replace(s)
}
