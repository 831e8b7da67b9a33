package report

import (
	"fmt"
	"html/template"
	"io"
)

// htmlPage is the data of the HTML template; every string in it is
// escaped by html/template, and every template.HTML was built by
// inlineHTML from escaped pieces.
type htmlPage struct {
	Title    string
	Intro    []htmlBlock
	Sections []htmlSection
}

type htmlBlock struct {
	Para  template.HTML
	Items []template.HTML
}

type htmlSection struct {
	ID      string
	Title   string
	Text    []htmlBlock
	Figures []htmlFigure
	Tables  []htmlTable
}

type htmlFigure struct {
	Num     int
	File    string
	Alt     string
	Caption template.HTML
}

type htmlTable struct {
	Num     int
	Caption template.HTML
	Columns []htmlCell
	Rows    [][]htmlCell
}

type htmlCell struct {
	Text template.HTML
	Num  bool
}

func htmlBlocks(text string) []htmlBlock {
	var out []htmlBlock
	for _, b := range parseBlocks(text) {
		if b.items == nil {
			out = append(out, htmlBlock{Para: inlineHTML(b.para)})
			continue
		}
		hb := htmlBlock{}
		for _, it := range b.items {
			hb.Items = append(hb.Items, inlineHTML(it))
		}
		out = append(out, hb)
	}
	return out
}

// page converts the report into template data, numbering figures and
// tables across the report.
func (r *Report) page() htmlPage {
	p := htmlPage{Title: r.Title, Intro: htmlBlocks(r.Intro)}
	if p.Title == "" {
		p.Title = defaultTitle
	}
	fig, tab := 0, 0
	for i, s := range r.Sections {
		hs := htmlSection{ID: fmt.Sprintf("s%d", i+1), Title: s.Title, Text: htmlBlocks(s.Text)}
		for _, f := range s.Figures {
			fig++
			alt := oneLine(f.Caption)
			if alt == "" {
				alt = f.File
			}
			hs.Figures = append(hs.Figures, htmlFigure{Num: fig, File: f.File, Alt: alt, Caption: inlineHTML(oneLine(f.Caption))})
		}
		for _, t := range s.Tables {
			tab++
			num := numericColumns(t)
			ht := htmlTable{Num: tab, Caption: inlineHTML(oneLine(t.Caption))}
			for c, col := range t.Columns {
				ht.Columns = append(ht.Columns, htmlCell{Text: inlineHTML(oneLine(col)), Num: num[c]})
			}
			for _, row := range t.Rows {
				cells := make([]htmlCell, len(row))
				for c, v := range row {
					cells[c] = htmlCell{Text: inlineHTML(oneLine(v)), Num: num[c]}
				}
				ht.Rows = append(ht.Rows, cells)
			}
			hs.Tables = append(hs.Tables, ht)
		}
		p.Sections = append(p.Sections, hs)
	}
	return p
}

// html writes the report as one HTML page.
func (r *Report) html(w io.Writer) error {
	t, err := template.New(HTMLFile).Parse(pageTemplate)
	if err != nil {
		return fmt.Errorf("parse page template: %w", err)
	}
	return t.Execute(w, r.page())
}

// pageTemplate is the HTML page. Void elements are self-closed so the
// page is also well-formed XML, which the tests check. Its CSS keeps prose
// to a readable measure while figures and tables get the whole width of a
// 1280 px window; system fonts, tabular figures in tables, images no wider
// than the column. Each table sits in its own horizontally scrolling box
// (class "table") with its first column pinned, so a table wider than the
// window scrolls instead of being cut; header cells wrap so most tables
// fit without scrolling. It prints cleanly too.
const pageTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.Title}}</title>
<style>
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #222;
  font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 32px 24px 64px; }
h1 { font-size: 1.9rem; line-height: 1.25; margin: 0 0 1rem; max-width: 46rem; }
h2 { font-size: 1.35rem; margin: 2.5rem 0 .75rem; padding-bottom: .3rem; border-bottom: 1px solid #e5e5e5; }
p, li { max-width: 46rem; }
p { margin: .6rem 0; }
ul { padding-left: 1.4rem; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .88em;
  background: #f3f3f3; padding: .1em .3em; border-radius: 3px; }
nav { margin: 1.25rem 0 0; padding: .75rem 1rem; background: #f7f7f7; border-radius: 6px; max-width: 46rem; }
nav h2 { font-size: 1rem; margin: 0 0 .3rem; padding: 0; border: 0; }
nav ol { margin: 0; padding-left: 1.4rem; }
a { color: #0a58a5; text-decoration: none; }
a:hover { text-decoration: underline; }
figure { margin: 1.75rem 0; text-align: center; }
figure img { max-width: 100%; height: auto; }
figcaption { font-size: .9rem; color: #555; margin: .4rem auto 0; max-width: 46rem; }
.table { overflow-x: auto; margin: 1.75rem 0; max-width: 100%; }
table { border-collapse: collapse; margin: 0 auto; font-size: .85rem; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-size: .9rem; color: #555; padding-bottom: .5rem; max-width: 46rem; }
th, td { padding: .3rem .45rem; text-align: left; border-bottom: 1px solid #e5e5e5; }
td { white-space: nowrap; }
th { font-weight: 600; border-bottom: 2px solid #333; vertical-align: bottom; min-width: 4.5em; }
th:first-child, td:first-child { position: sticky; left: 0; background: #fff; }
tbody tr:nth-child(even) td { background: #fafafa; }
.num { text-align: right; }
.label { font-weight: 600; color: #333; }
@media print {
  main { max-width: none; padding: 0; }
  figure, .table { break-inside: avoid; }
  .table { overflow: visible; }
  table { font-size: .75rem; }
  td { white-space: normal; }
}
</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
{{template "blocks" .Intro}}
{{- if gt (len .Sections) 1}}
<nav>
<h2>Contents</h2>
<ol>
{{- range .Sections}}
<li><a href="#{{.ID}}">{{.Title}}</a></li>
{{- end}}
</ol>
</nav>
{{- end}}
{{- range .Sections}}
<section id="{{.ID}}">
<h2>{{.Title}}</h2>
{{template "blocks" .Text}}
{{- range .Figures}}
<figure>
<img src="{{.File}}" alt="{{.Alt}}"/>
<figcaption><span class="label">Figure {{.Num}}.</span> {{.Caption}}</figcaption>
</figure>
{{- end}}
{{- range .Tables}}
<div class="table">
<table>
<caption><span class="label">Table {{.Num}}.</span> {{.Caption}}</caption>
<thead>
<tr>{{range .Columns}}<th{{if .Num}} class="num"{{end}}>{{.Text}}</th>{{end}}</tr>
</thead>
<tbody>
{{- range .Rows}}
<tr>{{range .}}<td{{if .Num}} class="num"{{end}}>{{.Text}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
</div>
{{- end}}
</section>
{{- end}}
</main>
</body>
</html>
{{define "blocks"}}
{{- range .}}
{{- if .Items}}
<ul>
{{- range .Items}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- else}}
<p>{{.Para}}</p>
{{- end}}
{{- end}}
{{- end}}
`
