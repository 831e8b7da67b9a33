package report

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const tinySVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10"/></svg>`

func svgFigure(file, caption string) Figure {
	return Figure{File: file, Caption: caption, Render: func(w io.Writer) error {
		_, err := io.WriteString(w, tinySVG)
		return err
	}}
}

func sampleReport() *Report {
	return &Report{
		Title: "Local vs global <caching>",
		Intro: "First paragraph, with `code` and **bold**.\nSame paragraph.\n\n- item one\n- item two\n  continued\n\nLast paragraph.",
		Sections: []Section{
			{
				Title:   "Hit ratio",
				Text:    "Order-only replay.",
				Figures: []Figure{svgFigure("fig9_conversation.svg", "Hit ratio vs cache size"), svgFigure("fig9_synthetic.svg", "")},
				Tables: []Table{{
					Caption: `<script>alert("x")</script>`,
					Columns: []string{"trace", "local", "global", "gain"},
					Rows: [][]string{
						{"conversation", "0.168", "0.373", "2.22×"},
						{"a|b", "0.263", "n/a", "2.36×"},
					},
				}},
			},
			{
				Title:  "Goodput",
				Tables: []Table{{Caption: "Goodput per arm", Columns: []string{"arm", "req/s"}, Rows: [][]string{{"global", "12.5"}}}},
			},
		},
	}
}

// xmlElement is one element of a parsed page.
type xmlElement struct {
	name  string
	attrs map[string]string
	text  string // character data directly inside, concatenated
	inner string // character data of the element and its descendants
}

// parsePage checks that the HTML is well-formed (the template self-closes
// void elements, so a strict XML parser accepts a correct page) and returns
// its elements in document order.
func parsePage(t *testing.T, data []byte) []*xmlElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var all, stack []*xmlElement
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("index.html is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &xmlElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			all = append(all, e)
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			for i, e := range stack {
				if i == len(stack)-1 {
					e.text += string(tok)
				}
				e.inner += string(tok)
			}
		}
	}
	if len(all) == 0 || all[0].name != "html" {
		t.Fatalf("root element is not <html>")
	}
	return all
}

func find(els []*xmlElement, name string) []*xmlElement {
	var out []*xmlElement
	for _, e := range els {
		if e.name == name {
			out = append(out, e)
		}
	}
	return out
}

// unescapedPipes counts the '|' of a Markdown line not preceded by '\'.
func unescapedPipes(line string) int {
	n := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '|':
			n++
		}
	}
	return n
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "report")
	r := sampleReport()
	if err := Write(dir, r); err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, f := range []string{"fig9_conversation.svg", "fig9_synthetic.svg", HTMLFile, MarkdownFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("missing %s: %v", f, err)
		}
		if fi.Mode().Perm() != filePerm {
			t.Errorf("%s has mode %v, want %v", f, fi.Mode().Perm(), os.FileMode(filePerm))
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "fig9_conversation.svg"))
	if err != nil || string(got) != tinySVG {
		t.Errorf("figure content %q, %v; want the rendered SVG", got, err)
	}
	assertNoTempFiles(t, dir)

	t.Run("html", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dir, HTMLFile))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("<script")) {
			t.Errorf("unescaped <script> in index.html")
		}
		els := parsePage(t, data)
		if title := find(els, "title"); len(title) != 1 || title[0].text != r.Title {
			t.Errorf("<title> = %v, want %q", title, r.Title)
		}
		var srcs []string
		for _, img := range find(els, "img") {
			srcs = append(srcs, img.attrs["src"])
		}
		if want := []string{"fig9_conversation.svg", "fig9_synthetic.svg"}; !slices.Equal(srcs, want) {
			t.Errorf("img src = %q, want %q", srcs, want)
		}
		caps := find(els, "figcaption")
		if len(caps) != 2 || caps[0].inner != "Figure 1. Hit ratio vs cache size" || !strings.HasPrefix(caps[1].inner, "Figure 2.") {
			t.Errorf("figure captions wrong: %+v", caps)
		}
		tcaps := find(els, "caption")
		if len(tcaps) != 2 || tcaps[0].inner != `Table 1. <script>alert("x")</script>` || tcaps[1].inner != "Table 2. Goodput per arm" {
			t.Errorf("table captions wrong (the script must survive as text): %+v", tcaps)
		}
		cells := map[string]string{}
		for _, td := range find(els, "td") {
			cells[td.text] = td.attrs["class"]
		}
		for cell, class := range map[string]string{"conversation": "", "a|b": "", "0.373": "num", "n/a": "num", "2.22×": "num", "12.5": "num"} {
			got, ok := cells[cell]
			if !ok {
				t.Errorf("cell %q missing", cell)
			} else if got != class {
				t.Errorf("cell %q has class %q, want %q", cell, got, class)
			}
		}
		if n := len(find(els, "tr")); n != 3+2 {
			t.Errorf("%d table rows, want 5 (2 headers, 3 data rows)", n)
		}
		if links := find(els, "a"); len(links) != 2 || links[0].attrs["href"] != "#s1" {
			t.Errorf("contents links wrong: %+v", links)
		}
		var paras []string
		for _, p := range find(els, "p") {
			paras = append(paras, p.inner)
		}
		if want := []string{"First paragraph, with code and bold. Same paragraph.", "Last paragraph.", "Order-only replay."}; !slices.Equal(paras, want) {
			t.Errorf("paragraphs %q, want %q", paras, want)
		}
		if code := find(els, "code"); len(code) != 1 || code[0].text != "code" {
			t.Errorf("inline code not rendered: %+v", code)
		}
		if items := find(els, "li"); len(items) < 2 || items[1].inner != "item two continued" {
			t.Errorf("list items wrong: %+v", items)
		}
	})

	t.Run("markdown", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
		if err != nil {
			t.Fatal(err)
		}
		md := string(data)
		for _, want := range []string{
			"# Local vs global <caching>\n",
			"## Hit ratio\n",
			"![Hit ratio vs cache size](fig9_conversation.svg)",
			"![fig9_synthetic.svg](fig9_synthetic.svg)",
			"**Figure 2.**",
			"**Table 2.** Goodput per arm",
			"- item two continued\n",
			"| a\\|b | 0.263 | n/a | 2.36× |",
			"|---|---:|---:|---:|",
		} {
			if !strings.Contains(md, want) {
				t.Errorf("report.md lacks %q:\n%s", want, md)
			}
		}
		// Every table line has one more unescaped pipe than its table has
		// columns.
		tables := 0
		for _, block := range strings.Split(md, "\n\n") {
			lines := strings.Split(strings.TrimSpace(block), "\n")
			if !strings.HasPrefix(lines[0], "|") {
				continue
			}
			tables++
			want := unescapedPipes(lines[0])
			for _, l := range lines {
				if got := unescapedPipes(l); got != want {
					t.Errorf("line %q has %d pipes, header has %d", l, got, want)
				}
			}
			if cols := want - 1; len(lines) < 2 || strings.Count(lines[1], "-") < 3*cols {
				t.Errorf("table %d has no valid alignment row: %q", tables, lines)
			}
		}
		if tables != 2 {
			t.Errorf("found %d Markdown tables, want 2", tables)
		}
		if got := unescapedPipes("| trace | local | global | gain |"); got != 5 {
			t.Fatalf("pipe counter broken: %d", got)
		}
	})

	t.Run("deterministic", func(t *testing.T) {
		dir2 := t.TempDir()
		if err := Write(dir2, sampleReport()); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{HTMLFile, MarkdownFile} {
			a, _ := os.ReadFile(filepath.Join(dir, f))
			b, _ := os.ReadFile(filepath.Join(dir2, f))
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs between two writes of the same report", f)
			}
		}
	})
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && e.Name() != ManifestFile {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

var errRender = errors.New("chart exploded")

func TestWriteRenderError(t *testing.T) {
	dir := t.TempDir()
	// An older, complete version of the failing figure must survive.
	old := []byte("old figure")
	if err := os.WriteFile(filepath.Join(dir, "broken.svg"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Report{Sections: []Section{{
		Title: "S",
		Figures: []Figure{
			svgFigure("good.svg", "fine"),
			{File: "broken.svg", Render: func(w io.Writer) error {
				io.WriteString(w, "<svg partial")
				return errRender
			}},
			svgFigure("later.svg", "never reached"),
		},
	}}}
	err := Write(dir, r)
	if !errors.Is(err, errRender) {
		t.Fatalf("Write error %v does not wrap the Render error", err)
	}
	if !strings.Contains(err.Error(), "broken.svg") {
		t.Errorf("error %q does not name the figure's file", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "broken.svg")); !bytes.Equal(got, old) {
		t.Errorf("broken.svg = %q, want the old content untouched", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "good.svg")); err != nil {
		t.Errorf("figure rendered before the failure is missing: %v", err)
	}
	for _, f := range []string{"later.svg", HTMLFile, MarkdownFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a failed Write (stat: %v)", f, err)
		}
	}
	assertNoTempFiles(t, dir)
}

func TestValidate(t *testing.T) {
	fig := func(file string) Report {
		return Report{Sections: []Section{{Title: "S", Figures: []Figure{svgFigure(file, "")}}}}
	}
	tests := []struct {
		name string
		r    *Report
		want []string
	}{
		{"nil", nil, []string{"nil report"}},
		{"empty file", ptr(fig("")), []string{`Sections[0] "S": Figures[0] ""`, "empty File"}},
		{"path", ptr(fig("a/x.svg")), []string{`"a/x.svg"`, `'/'`}},
		{"parent", ptr(fig("../x.svg")), []string{"start with '.'"}},
		{"hidden", ptr(fig(".x.svg")), []string{"start with '.'"}},
		{"space", ptr(fig("a b.svg")), []string{"' '"}},
		{"reserved", ptr(fig(HTMLFile)), []string{"already used by the HTML page"}},
		{"duplicate", &Report{Sections: []Section{
			{Figures: []Figure{svgFigure("a.svg", "")}},
			{Title: "T", Figures: []Figure{svgFigure("a.svg", "")}},
		}}, []string{`Sections[1] "T": Figures[0] "a.svg"`, "Sections[0].Figures[0]"}},
		{"nil render", &Report{Sections: []Section{{Figures: []Figure{{File: "a.svg"}}}}}, []string{"Render is nil"}},
		{"no columns", &Report{Sections: []Section{{Tables: []Table{{Caption: "c"}}}}}, []string{`Tables[0] "c"`, "no Columns"}},
		{"short row", &Report{Sections: []Section{{Tables: []Table{{Caption: "c", Columns: []string{"a", "b"}, Rows: [][]string{{"1", "2"}, {"1"}}}}}}},
			[]string{`Tables[0] "c"`, "Rows[1] has 1 cells for 2 columns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// Write validates before touching the disk.
			dir := filepath.Join(t.TempDir(), "out")
			if err := Write(dir, tt.r); err == nil {
				t.Errorf("Write accepted an invalid report")
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Write created %s for an invalid report", dir)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestWriteIntoAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Write(file, sampleReport())
	if err == nil || !strings.Contains(err.Error(), "create directory") {
		t.Errorf("Write into a file: error %v, want one about creating the directory", err)
	}
}

func TestParseBlocks(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []block
	}{
		{"empty", "", nil},
		{"blank lines only", "\n \n\t\n", nil},
		{"one paragraph", "a\nb\n", []block{{para: "a b"}}},
		{"two paragraphs", "a\n\n\nb", []block{{para: "a"}, {para: "b"}}},
		{"list", "- x\n* y\n  more", []block{{items: []string{"x", "y more"}}}},
		{"paragraph then list", "intro:\n- x\n\nafter", []block{{para: "intro:"}, {items: []string{"x"}}, {para: "after"}}},
		{"crlf", "a\r\nb\r\n\r\nc", []block{{para: "a b"}, {para: "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseBlocks(tt.in)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("parseBlocks(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestInlineHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a < b & c", "a &lt; b &amp; c"},
		{"run `kvpool compare`", "run <code>kvpool compare</code>"},
		{"`<b>`", "<code>&lt;b&gt;</code>"},
		{"**2.2×** faster", "<strong>2.2×</strong> faster"},
		{"unpaired ` and ** and *", "unpaired ` and ** and *"},
		{"x * y ** z", "x * y ** z"},
	}
	for _, tt := range tests {
		if got := string(inlineHTML(tt.in)); got != tt.want {
			t.Errorf("inlineHTML(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNumericColumns(t *testing.T) {
	tb := Table{
		Columns: []string{"name", "ratio", "empty", "mixed", "signed"},
		Rows: [][]string{
			{"conversation", "37.3%", "", "12", "\u22120.5"},
			{"synthetic", "n/a", "-", "abc", "-.5 s"},
		},
	}
	want := []bool{false, true, false, false, true}
	if got := numericColumns(tb); !slices.Equal(got, want) {
		t.Errorf("numericColumns = %v, want %v", got, want)
	}
}

func TestWriteCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "hitrate.csv")
	header := []string{"trace", "note"}
	rows := [][]string{{"conversation", `has "quotes", commas`}, {"synthetic", "two\nlines"}}
	if err := WriteCSV(path, header, rows); err != nil {
		t.Fatalf("WriteCSV: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	want := append([][]string{header}, rows...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read back %q, want %q", got, want)
	}
	assertNoTempFiles(t, filepath.Dir(path))

	bad := []struct {
		name   string
		header []string
		rows   [][]string
		want   string
	}{
		{"empty header", nil, nil, "empty header"},
		{"short row", []string{"a", "b"}, [][]string{{"1", "2"}, {"1"}}, "rows[1] has 1 fields, header has 2"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.csv")
			err := WriteCSV(p, tt.header, tt.rows)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %v, want one naming %s and saying %q", err, p, tt.want)
			}
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("file written despite the error")
			}
		})
	}
}

func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.json")
	v := struct {
		Trace string  `json:"trace"`
		Ratio float64 `json:"ratio"`
	}{"conversation", 0.373}
	if err := WriteJSON(path, v); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	got, _ := os.ReadFile(path)
	if want := "{\n  \"trace\": \"conversation\",\n  \"ratio\": 0.373\n}\n"; string(got) != want {
		t.Errorf("wrote %q, want %q", got, want)
	}

	// A value JSON cannot encode fails and leaves the old file intact.
	err := WriteJSON(path, map[string]float64{"ratio": math.NaN()})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("NaN: error %v, want one naming %s", err, path)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, got) {
		t.Errorf("failed WriteJSON changed the file to %q", again)
	}
	assertNoTempFiles(t, dir)
}

// TestTablesScrollInTheirOwnBox checks the page layout that keeps wide
// tables readable: every table is wrapped in its own horizontally
// scrolling box, the body is not held to a narrow fixed width, and a
// cell's **bold** renders as in the text.
func TestTablesScrollInTheirOwnBox(t *testing.T) {
	cols := make([]string, 14)
	row := make([]string, 14)
	for i := range cols {
		cols[i] = fmt.Sprintf("a long column header %d", i)
		row[i] = Bytes(int64(829297786880 + i))
	}
	row[0] = "**met** (3 of 4)"
	r := &Report{Sections: []Section{{Title: "S", Tables: []Table{
		{Caption: "wide", Columns: cols, Rows: [][]string{row}},
		{Caption: "narrow", Columns: []string{"a"}, Rows: [][]string{{"1"}}},
	}}}}
	var b bytes.Buffer
	if err := r.html(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, "<div class=\"table\">\n<table>"); n != 2 {
		t.Errorf("%d tables in their own box, want 2", n)
	}
	if !strings.Contains(page, ".table { overflow-x: auto;") {
		t.Errorf("the table box does not scroll horizontally")
	}
	if strings.Contains(page, "max-width: 960px") {
		t.Errorf("the body is still held to 960 px")
	}
	if !strings.Contains(page, "<td><strong>met</strong> (3 of 4)</td>") {
		t.Errorf("bold in a cell not rendered")
	}
	if !strings.Contains(page, ">772.3 GiB</td>") || strings.Contains(page, "829297786880") {
		t.Errorf("byte counts not humanised in the page")
	}
	parsePage(t, b.Bytes())
}
