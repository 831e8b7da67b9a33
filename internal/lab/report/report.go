// Package report writes a report directory: every figure rendered to its
// own file, an index.html that shows them with the tables (self-contained
// apart from the figure files: inline CSS, no scripts), and a report.md with
// the same content as GitHub-flavoured Markdown. It also writes the CSV and
// JSON files that go next to them.
//
// Every file is written atomically (a temporary file in the same
// directory, synced, then renamed), so a reader never sees half a figure and
// a failed run leaves no partial file behind. The output depends only on
// the Report, so two runs with the same results give the same bytes. A
// report directory remembers the files it holds (ManifestFile), so the next
// report written there removes the old report's files, and only those.
//
// Tables are for people: bytes humanised (Bytes), one number format per
// column (CheckNumberFormats), each table in its own horizontally
// scrolling box in index.html; the CSV and JSON files keep exact values.
//
// The package knows nothing about experiments or charts: a Figure renders
// itself through a func(io.Writer) error, which a plot.Chart's LineSVG
// method value satisfies.
package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Report is the content of a report directory.
type Report struct {
	// Title heads both index.html and report.md.
	Title string
	// Intro is Markdown-ish text shown before the sections (see
	// Section.Text for the syntax).
	Intro string
	// Sections are shown in order, each with its own heading.
	Sections []Section
}

// Section is one headed part of a report: text, then figures, then
// tables.
type Section struct {
	// Title is the section heading.
	Title string
	// Text is Markdown-ish prose: paragraphs separated by blank lines,
	// list items starting with "- " or "* ", and inline `code` and
	// **bold**. index.html renders that subset (everything else appears
	// literally, escaped); report.md carries the text as written.
	Text string
	// Figures are rendered to files in the report directory and shown as
	// images, numbered across the report.
	Figures []Figure
	// Tables are shown as HTML and Markdown tables, numbered across the
	// report.
	Tables []Table
}

// Figure is one image of a report.
type Figure struct {
	// File is the figure's file name in the report directory, for example
	// "fig9_conversation.svg": letters, digits, '.', '_' and '-' only, not
	// starting with '.', unique within the report and neither index.html
	// nor report.md.
	File string
	// Caption is shown under the figure (Markdown-ish inline text).
	Caption string
	// Render writes the file's content, for example a plot.Chart's LineSVG.
	Render func(io.Writer) error
}

// Table is one table of a report. Cells are plain text; a column whose
// non-empty cells all start with a number is right-aligned.
type Table struct {
	// Caption is shown above the table (Markdown-ish inline text).
	Caption string
	// Columns are the header cells.
	Columns []string
	// Rows hold exactly len(Columns) cells each.
	Rows [][]string
}

// File names Write produces besides the figures.
const (
	HTMLFile     = "index.html"
	MarkdownFile = "report.md"
)

// Validate reports the first part of r that Write cannot produce: a
// figure with a bad, duplicate or reserved file name or without a Render
// function, or a table without columns or with a row of the wrong width.
// Errors name the part as Sections[i].Figures[j] or Sections[i].Tables[j].
func (r *Report) Validate() error {
	if r == nil {
		return errors.New("report: nil report")
	}
	files := map[string]string{HTMLFile: "the HTML page", MarkdownFile: "the Markdown report"}
	for i, s := range r.Sections {
		for j, f := range s.Figures {
			where := fmt.Sprintf("Sections[%d] %q: Figures[%d] %q", i, s.Title, j, f.File)
			if err := checkFileName(f.File); err != nil {
				return fmt.Errorf("report: %s: %w", where, err)
			}
			if prev, ok := files[f.File]; ok {
				return fmt.Errorf("report: %s: file name already used by %s", where, prev)
			}
			files[f.File] = fmt.Sprintf("Sections[%d].Figures[%d]", i, j)
			if f.Render == nil {
				return fmt.Errorf("report: %s: Render is nil", where)
			}
		}
		for j, t := range s.Tables {
			where := fmt.Sprintf("Sections[%d] %q: Tables[%d] %q", i, s.Title, j, t.Caption)
			if len(t.Columns) == 0 {
				return fmt.Errorf("report: %s: no Columns", where)
			}
			for k, row := range t.Rows {
				if len(row) != len(t.Columns) {
					return fmt.Errorf("report: %s: Rows[%d] has %d cells for %d columns", where, k, len(row), len(t.Columns))
				}
			}
		}
	}
	return nil
}

// checkFileName accepts plain, portable file names that need no escaping
// in a URL or in Markdown.
func checkFileName(name string) error {
	if name == "" {
		return errors.New("empty File")
	}
	if name[0] == '.' {
		return errors.New("File must not start with '.'")
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("File contains %q; use letters, digits, '.', '_' and '-'", c)
		}
	}
	return nil
}

// Write creates dir (and its parents) if needed, removes the files the
// previous report written there owned (those its ManifestFile lists: an
// old figure the new report lacks, an old CSV), records the files it is
// about to write in a new manifest, renders every figure, then writes
// index.html and report.md. Each file is written atomically. A figure
// whose Render fails stops the write with an error naming the figure's
// file; figures rendered before it stay in place, complete, and no
// partial file is left. Files in dir the manifest does not list, such as
// a user's own notes, are left alone.
//
// Write then WriteCSV and WriteJSON into the same directory make one
// report: the CSV and JSON files join the manifest, so the next Write
// clears them too. A directory is not safe for concurrent writes.
func Write(dir string, r *Report) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: create directory %s: %w", dir, err)
	}
	files := r.files()
	if err := clearOwned(dir, files); err != nil {
		return fmt.Errorf("report: clear the previous report in %s: %w", dir, err)
	}
	if err := writeManifest(dir, files); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for _, s := range r.Sections {
		for _, f := range s.Figures {
			if err := writeAtomic(filepath.Join(dir, f.File), f.Render); err != nil {
				return fmt.Errorf("report: render figure %s: %w", f.File, err)
			}
		}
	}
	if err := writeAtomic(filepath.Join(dir, MarkdownFile), r.markdown); err != nil {
		return fmt.Errorf("report: write %s: %w", MarkdownFile, err)
	}
	if err := writeAtomic(filepath.Join(dir, HTMLFile), r.html); err != nil {
		return fmt.Errorf("report: write %s: %w", HTMLFile, err)
	}
	return nil
}

// files are the names Write produces: the figures, report.md and
// index.html.
func (r *Report) files() []string {
	var out []string
	for _, s := range r.Sections {
		for _, f := range s.Figures {
			out = append(out, f.File)
		}
	}
	return append(out, MarkdownFile, HTMLFile)
}
