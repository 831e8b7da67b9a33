package report

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWriteClearsOwnedFiles writes a report with two figures and a CSV,
// then a report with one figure: the dropped figure and the old CSV go,
// while the user's files (a note, a figure-like SVG the manifest never
// listed, a directory) stay.
func TestWriteClearsOwnedFiles(t *testing.T) {
	dir := t.TempDir()
	mustWrite := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("notes.txt", "mine")
	mustWrite("sketch.svg", "<svg/>")
	if err := os.Mkdir(filepath.Join(dir, "old.svg.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	first := &Report{Sections: []Section{{Title: "S", Figures: []Figure{svgFigure("a.svg", ""), svgFigure("b.svg", "")}}}}
	if err := Write(dir, first); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(filepath.Join(dir, "summary.csv"), []string{"x"}, [][]string{{"1"}}); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(filepath.Join(dir, "summary.json"), map[string]int{"x": 1}); err != nil {
		t.Fatal(err)
	}
	names, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.svg", "b.svg", MarkdownFile, HTMLFile, "summary.csv", "summary.json"}; !slices.Equal(names, want) {
		t.Fatalf("manifest %q, want %q", names, want)
	}

	second := &Report{Sections: []Section{{Title: "S", Figures: []Figure{svgFigure("b.svg", "")}}}}
	if err := Write(dir, second); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"a.svg", "summary.csv", "summary.json"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s from the previous report is still there (stat: %v)", gone, err)
		}
	}
	for _, kept := range []string{"b.svg", HTMLFile, MarkdownFile, "notes.txt", "sketch.svg", "old.svg.d"} {
		if _, err := os.Stat(filepath.Join(dir, kept)); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	if names, _ := readManifest(dir); !slices.Equal(names, []string{"b.svg", MarkdownFile, HTMLFile}) {
		t.Errorf("manifest after the second write: %q", names)
	}
	assertNoTempFiles(t, dir)
}

// TestManifestCannotEscape checks that a damaged or hostile manifest
// cannot make Write remove anything but plain files in its directory.
func TestManifestCannotEscape(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "report")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(parent, "precious.txt")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(parent, "target.txt")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link.svg")); err != nil {
		t.Fatal(err)
	}
	manifest := strings.Join([]string{"../precious.txt", outside, "sub", "link.svg", ".hidden", ""}, "\n")
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, &Report{Title: "T"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, target, filepath.Join(dir, "sub"), filepath.Join(dir, "link.svg")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1024*1024 - 1, "1.0 MiB"},
		{829297786880, "772.3 GiB"},
		{1 << 40, "1.0 TiB"},
		{-2048, "\u22122.0 KiB"},
	} {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestCheckNumberFormats(t *testing.T) {
	table := func(cells ...string) *Report {
		tab := Table{Caption: "t", Columns: []string{"name", "v"}}
		for _, c := range cells {
			tab.Rows = append(tab.Rows, []string{"x", c})
		}
		return &Report{Sections: []Section{{Title: "S", Tables: []Table{tab}}}}
	}
	for _, tt := range []struct {
		cells []string
		ok    bool
	}{
		{[]string{"12.3%", "1.5%", "100.0%", "–", "n/a"}, true},
		{[]string{"0.1234", "12.3%"}, false},
		{[]string{"2.5", "2.524"}, false},
		{[]string{"2.50", "12.52", "\u22120.25", "+1.00"}, true},
		{[]string{"1.3 GiB", "512 B", "4.0 KiB"}, true},
		{[]string{"1.3 GiB", "829297786880"}, false},
		{[]string{"1.1×", "12.30×"}, false},
		{[]string{"yes", "no (partial)", "3"}, true},
	} {
		err := table(tt.cells...).CheckNumberFormats()
		if (err == nil) != tt.ok {
			t.Errorf("cells %q: error %v, want ok=%v", tt.cells, err, tt.ok)
		}
	}
}
