package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
)

const svgNS = "http://www.w3.org/2000/svg"

// element is one parsed SVG element.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parseSVG decodes the whole document with encoding/xml, failing the test
// on any syntax error, checks the root element and returns every element in
// document order.
func parseSVG(t *testing.T, data []byte) []*element {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var all, stack []*element
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse as XML: %v\n%s", err, data)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Space != svgNS {
				t.Fatalf("element <%s> in namespace %q, want %q", tok.Name.Local, tok.Name.Space, svgNS)
			}
			e := &element{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			all = append(all, e)
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tok)
			}
		}
	}
	if len(all) == 0 || all[0].name != "svg" {
		t.Fatalf("root element is not <svg>")
	}
	root := all[0]
	if root.attrs["viewBox"] == "" || root.attrs["width"] == "" || root.attrs["height"] == "" {
		t.Errorf("root <svg> lacks viewBox/width/height: %v", root.attrs)
	}
	if !bytes.Contains(data, []byte(`xmlns="`+svgNS+`"`)) {
		t.Errorf("root <svg> lacks the xmlns declaration")
	}
	for _, bad := range []string{"NaN", "Inf"} {
		if bytes.Contains(data, []byte(bad)) {
			t.Errorf("SVG contains %q", bad)
		}
	}
	return all
}

// texts returns the content of every <text> and <title> element.
func texts(els []*element) []string {
	var out []string
	for _, e := range els {
		if e.name == "text" || e.name == "title" {
			out = append(out, e.text)
		}
	}
	return out
}

// seriesPaths returns the d attribute of the data paths (unfilled paths)
// drawn in the given colour.
func seriesPaths(els []*element, color string) []string {
	var out []string
	for _, e := range els {
		if e.name == "path" && e.attrs["fill"] == "none" && e.attrs["stroke"] == color {
			out = append(out, e.attrs["d"])
		}
	}
	return out
}

func count(els []*element, name, fill string) int {
	n := 0
	for _, e := range els {
		if e.name == name && e.attrs["fill"] == fill {
			n++
		}
	}
	return n
}

func sampleChart() *Chart {
	return &Chart{
		Title:  "Hit ratio vs cache size",
		XLabel: "cache size (tokens)",
		YLabel: "token hit ratio",
		XLog:   true,
		YMin:   new(0.0),
		Series: []Series{
			{Name: "conversation", X: []float64{1e5, 1e6, 1e7}, Y: []float64{0.05, 0.17, 0.37}},
			{Name: "synthetic", X: []float64{1e5, 1e6, 1e7}, Y: []float64{0.1, 0.26, 0.62}, Dashed: true},
		},
		HLines: []HLine{{Y: 0.4, Label: "infinite cache"}},
	}
}

func sampleBars() *BarChart {
	return &BarChart{
		Title:  "Local vs global",
		YLabel: "token hit ratio",
		Groups: []string{"conversation", "synthetic"},
		Series: []BarSeries{
			{Name: "local", Values: []float64{0.168, 0.263}},
			{Name: "global", Values: []float64{0.373, 0.621}},
		},
	}
}

func render(t *testing.T, f func(io.Writer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f(&buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	return buf.Bytes()
}

func TestRenderedChartsParseAndLabel(t *testing.T) {
	tests := []struct {
		name   string
		render func(io.Writer) error
		want   []string
	}{
		{"line", sampleChart().LineSVG, []string{"Hit ratio vs cache size", "conversation", "synthetic", "cache size (tokens)", "token hit ratio", "infinite cache", "100k", "1M", "10M"}},
		{"step", sampleChart().StepSVG, []string{"Hit ratio vs cache size", "conversation", "synthetic"}},
		{"bars", sampleBars().SVG, []string{"Local vs global", "local", "global", "conversation", "synthetic", "0.168", "0.621", "token hit ratio"}},
		{"no series", (&Chart{Title: "Empty"}).LineSVG, []string{"Empty", noDataMessage}},
		{"empty series", (&Chart{Title: "Empty", Series: []Series{{Name: "a"}}}).LineSVG, []string{"Empty", "a", noDataMessage}},
		{"all NaN", (&Chart{Series: []Series{{Name: "a", X: []float64{math.NaN()}, Y: []float64{1}}}}).StepSVG, []string{noDataMessage}},
		{"log with non-positive data only", (&Chart{XLog: true, Series: []Series{{Name: "a", X: []float64{0, -1}, Y: []float64{1, 2}}}}).LineSVG, []string{noDataMessage}},
		{"no bars", (&BarChart{Title: "Nothing"}).SVG, []string{"Nothing", noDataMessage}},
		{"bars all NaN", (&BarChart{Groups: []string{"g"}, Series: []BarSeries{{Name: "s", Values: []float64{math.NaN()}}}}).SVG, []string{noDataMessage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := render(t, tt.render)
			got := strings.Join(texts(parseSVG(t, data)), "\n")
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("text %q missing; texts are:\n%s", w, got)
				}
			}
		})
	}
}

func TestEscaping(t *testing.T) {
	nasty := `<script>alert("x")</script> & 'co' ]]>`
	c := &Chart{
		Title: nasty, XLabel: nasty, YLabel: nasty,
		Series: []Series{{Name: nasty, X: []float64{1, 2}, Y: []float64{1, 2}}},
		HLines: []HLine{{Y: 1.5, Label: nasty}},
	}
	b := &BarChart{
		Title: nasty, YLabel: nasty, Groups: []string{nasty},
		Series: []BarSeries{{Name: nasty, Values: []float64{1}}},
		Format: func(float64) string { return nasty },
	}
	for name, f := range map[string]func(io.Writer) error{"line": c.LineSVG, "bars": b.SVG} {
		t.Run(name, func(t *testing.T) {
			data := render(t, f)
			if bytes.Contains(data, []byte("<script")) {
				t.Fatalf("raw <script in output")
			}
			n := 0
			for _, s := range texts(parseSVG(t, data)) {
				if s == nasty {
					n++
				}
			}
			if n < 4 {
				t.Errorf("the text survives escaping intact %d times, want at least 4", n)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	for name, f := range map[string]func(io.Writer) error{
		"line": sampleChart().LineSVG, "step": sampleChart().StepSVG, "bars": sampleBars().SVG,
	} {
		t.Run(name, func(t *testing.T) {
			first := render(t, f)
			// Concurrent renders of the same value must agree too (the
			// types document that rendering does not modify them).
			var wg sync.WaitGroup
			outs := make([][]byte, 4)
			for i := range outs {
				wg.Go(func() {
					var buf bytes.Buffer
					if err := f(&buf); err == nil {
						outs[i] = buf.Bytes()
					}
				})
			}
			wg.Wait()
			for i, o := range outs {
				if !bytes.Equal(first, o) {
					t.Fatalf("render %d differs from the first", i)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	two := []float64{1, 2}
	tests := []struct {
		name   string
		render func(io.Writer) error
		want   []string // substrings of the error
	}{
		{"mismatched lengths", (&Chart{Title: "T", Series: []Series{{Name: "ok", X: two, Y: two}, {Name: "global", X: two, Y: []float64{1}}}}).LineSVG,
			[]string{`chart "T"`, `Series[1] "global"`, "len(X) = 2", "len(Y) = 1"}},
		{"inverted limits", (&Chart{XMin: new(2.0), XMax: new(1.0)}).LineSVG, []string{"XMin", "XMax"}},
		{"equal limits", (&Chart{YMin: new(1.0), YMax: new(1.0)}).LineSVG, []string{"YMin", "YMax"}},
		{"NaN limit", (&Chart{YMax: new(math.NaN())}).LineSVG, []string{"YMax", "NaN"}},
		{"log limit", (&Chart{XLog: true, XMin: new(0.0)}).LineSVG, []string{"XMin", "logarithmic"}},
		{"narrow", (&Chart{Width: 100}).LineSVG, []string{"Width is 100"}},
		{"negative height", (&Chart{Height: -1}).StepSVG, []string{"Height is -1"}},
		{"NaN hline", (&Chart{HLines: []HLine{{Y: math.NaN(), Label: "base"}}}).LineSVG, []string{`HLines[0] "base"`}},
		{"log hline", (&Chart{YLog: true, HLines: []HLine{{Y: 0, Label: "zero"}}}).LineSVG, []string{`HLines[0] "zero"`, "logarithmic"}},
		{"unsorted step", (&Chart{Series: []Series{{Name: "cdf", X: []float64{1, 3, 2}, Y: []float64{0.1, 0.5, 1}}}}).StepSVG,
			[]string{`Series[0] "cdf"`, "X[2] = 2", "non-decreasing"}},
		{"nil chart", (*Chart)(nil).LineSVG, []string{"nil chart"}},
		{"bar values", (&BarChart{Title: "B", Groups: []string{"a", "b"}, Series: []BarSeries{{Name: "local", Values: []float64{1}}}}).SVG,
			[]string{`bar chart "B"`, `Series[0] "local"`, "1 values for 2 groups"}},
		{"bar limits", (&BarChart{YMin: new(1.0), YMax: new(0.0)}).SVG, []string{"YMin", "YMax"}},
		{"bar inf hline", (&BarChart{HLines: []HLine{{Y: math.Inf(1)}}}).SVG, []string{"HLines[0]"}},
		{"nil bar chart", (*BarChart)(nil).SVG, []string{"nil bar chart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := tt.render(&buf)
			if err == nil {
				t.Fatalf("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if buf.Len() != 0 {
				t.Errorf("%d bytes written despite the error", buf.Len())
			}
		})
	}
}

var errSink = errors.New("sink full")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errSink }

func TestWriteErrorWrapped(t *testing.T) {
	for name, f := range map[string]func(io.Writer) error{
		"line": sampleChart().LineSVG, "bars": sampleBars().SVG,
	} {
		err := f(failWriter{})
		if !errors.Is(err, errSink) {
			t.Errorf("%s: error %v does not wrap the writer's error", name, err)
		}
	}
}

func TestSkippedPointsBreakTheLine(t *testing.T) {
	c := &Chart{Series: []Series{{
		Name: "gappy",
		X:    []float64{1, 2, 3, math.Inf(1), 5, 6},
		Y:    []float64{1, 2, math.NaN(), 4, 5, 6},
	}}}
	els := parseSVG(t, render(t, c.LineSVG))
	paths := seriesPaths(els, Color(0))
	if len(paths) != 1 {
		t.Fatalf("%d data paths, want 1", len(paths))
	}
	if got := strings.Count(paths[0], "M"); got != 2 {
		t.Errorf("path %q has %d subpaths, want 2 (broken at the NaN/Inf points)", paths[0], got)
	}
	if got := count(els, "circle", Color(0)); got != 4+1 {
		t.Errorf("%d markers, want 5 (one per finite point, one in the legend)", got)
	}
}

func TestStepPathAndMarkers(t *testing.T) {
	x := make([]float64, maxMarkers+1)
	y := make([]float64, maxMarkers+1)
	for i := range x {
		x[i], y[i] = float64(i), float64(i)/float64(len(x)-1)
	}
	tests := []struct {
		name    string
		series  []float64
		step    bool
		markers int
		cmd     string // path command that must appear
	}{
		{"short line has markers", x[:5], false, 5, "L"},
		{"long line has none", x, false, 0, "L"},
		{"step has none", x[:5], true, 0, "H"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Chart{Series: []Series{{Name: "s", X: tt.series, Y: y[:len(tt.series)]}}}
			f := c.LineSVG
			if tt.step {
				f = c.StepSVG
			}
			els := parseSVG(t, render(t, f))
			// The legend of a line chart carries one marker of its own.
			got := count(els, "circle", Color(0))
			if !tt.step {
				got--
			}
			if got != tt.markers {
				t.Errorf("%d data markers, want %d", got, tt.markers)
			}
			paths := seriesPaths(els, Color(0))
			if len(paths) != 1 || !strings.Contains(paths[0], tt.cmd) {
				t.Errorf("data paths %q, want one using %q", paths, tt.cmd)
			}
		})
	}
}

func TestFarPointsStayFinite(t *testing.T) {
	c := &Chart{
		YMin: new(0.0), YMax: new(1.0),
		Series: []Series{{Name: "wild", X: []float64{0, 1, 2}, Y: []float64{0.5, 1e300, -1e300}}},
	}
	data := render(t, c.LineSVG)
	parseSVG(t, data)
	if bytes.Contains(data, []byte("e+")) {
		t.Errorf("coordinates in exponent form: output is not compact")
	}
}

func TestDefaultAndCustomSize(t *testing.T) {
	tests := []struct {
		w, h int
		want string
	}{
		{0, 0, "0 0 720 420"},
		{1000, 300, "0 0 1000 300"},
	}
	for _, tt := range tests {
		c := sampleChart()
		c.Width, c.Height = tt.w, tt.h
		els := parseSVG(t, render(t, c.LineSVG))
		if got := els[0].attrs["viewBox"]; got != tt.want {
			t.Errorf("size %dx%d: viewBox %q, want %q", tt.w, tt.h, got, tt.want)
		}
	}
}

func TestBarValuesAndMissing(t *testing.T) {
	b := &BarChart{
		Groups: []string{"a", "b", "c"},
		Series: []BarSeries{
			{Name: "x", Values: []float64{1, math.NaN(), -2}},
			{Name: "y", Values: []float64{3, 4, 5}},
		},
	}
	els := parseSVG(t, render(t, b.SVG))
	bars := 0
	for _, e := range els {
		if e.name == "rect" && (e.attrs["fill"] == Color(0) || e.attrs["fill"] == Color(1)) {
			bars++
		}
	}
	// Five finite values plus two legend swatches.
	if bars != 5+2 {
		t.Errorf("%d coloured rects, want 7", bars)
	}
	got := strings.Join(texts(els), "\n")
	for _, w := range []string{"n/a", "\u22122", "5"} {
		if !strings.Contains(got, w) {
			t.Errorf("label %q missing; texts:\n%s", w, got)
		}
	}
}

func TestColorPalette(t *testing.T) {
	seen := map[string]bool{}
	for i := range 9 {
		seen[Color(i)] = true
	}
	if len(seen) != 9 {
		t.Errorf("palette has %d distinct colours, want 9", len(seen))
	}
	if Color(9) != Color(0) || Color(-1) != Color(1) {
		t.Errorf("palette does not wrap: Color(9)=%s Color(-1)=%s", Color(9), Color(-1))
	}
}

func BenchmarkLineSVG(b *testing.B) {
	x := make([]float64, 10000)
	y := make([]float64, len(x))
	for i := range x {
		x[i], y[i] = float64(i), float64(i)/float64(len(x))
	}
	c := &Chart{Title: "CDF", Series: []Series{{Name: "ttft", X: x, Y: y}}}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		var buf bytes.Buffer
		if err := c.StepSVG(&buf); err != nil {
			b.Fatal(err)
		}
		n = buf.Len()
	}
	b.ReportMetric(float64(n), "bytes/svg")
}

func TestCanvasGrowsForLongLegend(t *testing.T) {
	c := &Chart{Title: "Many series", XLabel: "x", Width: MinWidth, Height: MinHeight}
	b := &BarChart{Title: "Many series", Groups: []string{"g"}, Width: MinWidth, Height: MinHeight}
	for i := range 6 {
		name := fmt.Sprintf("a rather long series name %d", i)
		c.Series = append(c.Series, Series{Name: name, X: []float64{1, 2}, Y: []float64{1, 2}})
		b.Series = append(b.Series, BarSeries{Name: name, Values: []float64{float64(i)}})
	}
	for name, f := range map[string]func(io.Writer) error{"line": c.LineSVG, "bars": b.SVG} {
		els := parseSVG(t, render(t, f))
		var h int
		if _, err := fmt.Sscanf(els[0].attrs["height"], "%d", &h); err != nil {
			t.Fatalf("%s: height %q: %v", name, els[0].attrs["height"], err)
		}
		// Six legend rows need 120 px on their own; the canvas must grow
		// to keep a usable plot area.
		if h <= MinHeight {
			t.Errorf("%s: height %d, want the canvas to grow beyond %d", name, h, MinHeight)
		}
	}
}
