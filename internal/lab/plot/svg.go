package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Default and minimum canvas sizes in SVG user units (CSS pixels). 720×420
// fits the 1000 px content column of the report two-thirds wide and keeps
// the aspect ratio of the paper's figures; below 320×200 the margins leave
// no room for data.
const (
	DefaultWidth  = 720
	DefaultHeight = 420
	MinWidth      = 320
	MinHeight     = 200
)

// Typography and spacing, in user units. The sizes follow the usual
// hierarchy of publication figures (title > axis label > tick label).
const (
	fontFamily    = "Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif"
	titleSize     = 16.0
	labelSize     = 13.0
	tickSize      = 11.0
	legendSize    = 12.0
	valueSize     = 10.5
	pad           = 16.0 // outer padding on every side
	tickLen       = 5.0
	legendRowH    = 20.0
	legendGap     = 18.0 // between legend entries in a row
	legendSample  = 26.0 // length of the line or swatch sample
	textColor     = "#222222"
	mutedColor    = "#555555"
	gridColor     = "#e6e6e6"
	axisColor     = "#333333"
	refLineColor  = "#666666"
	noDataMessage = "no data"
)

// charWidthEm is the average advance width of a character, in ems, used to
// estimate text extents for layout (there is no font metrics engine here).
// Digits in Helvetica/Arial are 0.556 em and lower-case letters average
// about 0.5 em; 0.6 overestimates slightly so labels never collide.
const charWidthEm = 0.6

// textWidth estimates the rendered width of s at the given font size.
func textWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * size * charWidthEm
}

// Color returns the colour of the i-th series: the Okabe–Ito palette
// (Okabe & Ito, "Color Universal Design", 2008), which stays distinguishable
// under the common colour-vision deficiencies, then a mid grey, so that the
// nine policies of a Fig 9 chart get nine colours. Yellow comes late
// because it has little contrast on white. Indices wrap around after nine;
// negative indices are treated as their absolute value.
func Color(i int) string {
	palette := [...]string{
		"#0072B2", // blue
		"#D55E00", // vermillion
		"#009E73", // bluish green
		"#E69F00", // orange
		"#CC79A7", // reddish purple
		"#56B4E9", // sky blue
		"#000000", // black
		"#F0E442", // yellow
		"#777777", // grey
	}
	if i < 0 {
		i = -i
	}
	return palette[i%len(palette)]
}

// escape returns s escaped for use in XML character data and attribute
// values. Characters that XML 1.0 forbids are replaced by U+FFFD.
func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// num formats a coordinate with at most two decimals and no trailing zeros;
// rounding makes the output deterministic and compact.
func num(v float64) string {
	r := math.Round(v*100) / 100
	if r == 0 {
		return "0" // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// doc accumulates one SVG document. Rendering into memory first means a
// chart is written with a single Write, so a failing chart never leaves
// half a document in the caller's writer.
type doc struct {
	b bytes.Buffer
}

func (d *doc) printf(format string, args ...any) {
	fmt.Fprintf(&d.b, format, args...)
}

// open writes the XML declaration, the root element with its viewBox, the
// accessible title and a white background.
func (d *doc) open(width, height int, title string) {
	d.printf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	d.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" role="img">`+"\n",
		width, height, width, height, fontFamily)
	if title != "" {
		d.printf("<title>%s</title>\n", escape(title))
	}
	d.printf(`<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
}

func (d *doc) close() { d.printf("</svg>\n") }

// textOpts are the optional attributes of a text element.
type textOpts struct {
	size   float64
	anchor string // start (default), middle or end
	weight string
	fill   string
	rotate float64 // degrees, around the anchor point
	halo   bool    // white outline so the text reads over lines
}

func (d *doc) text(x, y float64, s string, o textOpts) {
	d.printf(`<text x="%s" y="%s" font-size="%s"`, num(x), num(y), num(o.size))
	if o.anchor != "" && o.anchor != "start" {
		d.printf(` text-anchor="%s"`, o.anchor)
	}
	if o.weight != "" {
		d.printf(` font-weight="%s"`, o.weight)
	}
	fill := o.fill
	if fill == "" {
		fill = textColor
	}
	d.printf(` fill="%s"`, fill)
	if o.rotate != 0 {
		d.printf(` transform="rotate(%s %s %s)"`, num(o.rotate), num(x), num(y))
	}
	if o.halo {
		d.printf(` stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke"`)
	}
	d.printf(">%s</text>\n", escape(s))
}

func (d *doc) line(x1, y1, x2, y2 float64, stroke string, width float64, dash string) {
	d.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"`,
		num(x1), num(y1), num(x2), num(y2), stroke, num(width))
	if dash != "" {
		d.printf(` stroke-dasharray="%s"`, dash)
	}
	d.printf("/>\n")
}

// legendEntry is one item of a legend.
type legendEntry struct {
	name   string
	color  string
	dashed bool
	marker int  // marker shape index, or -1 for none
	swatch bool // a filled square (bars) instead of a line sample
}

// legendWidth is the horizontal space one entry takes, gap excluded.
func (e legendEntry) width() float64 {
	return legendSample + 6 + textWidth(e.name, legendSize)
}

// layoutLegend assigns entries to rows that fit in avail and returns the
// rows (indices into entries).
func layoutLegend(entries []legendEntry, avail float64) [][]int {
	var rows [][]int
	x := 0.0
	for i, e := range entries {
		w := e.width()
		if len(rows) == 0 || (x > 0 && x+w > avail) {
			rows = append(rows, nil)
			x = 0
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], i)
		x += w + legendGap
	}
	return rows
}

// legend draws the entries in rows starting at (x0, y0) (top of the first
// row).
func (d *doc) legend(entries []legendEntry, rows [][]int, x0, y0 float64) {
	for r, row := range rows {
		x := x0
		cy := y0 + float64(r)*legendRowH + legendRowH/2
		for _, i := range row {
			e := entries[i]
			if e.swatch {
				d.printf(`<rect x="%s" y="%s" width="14" height="14" fill="%s"/>`+"\n",
					num(x+legendSample-14), num(cy-7), e.color)
			} else {
				dash := ""
				if e.dashed {
					dash = dashPattern
				}
				d.line(x, cy, x+legendSample, cy, e.color, lineWidth, dash)
				if e.marker >= 0 {
					d.marker(e.marker, x+legendSample/2, cy, e.color)
				}
			}
			d.text(x+legendSample+6, cy+legendSize*0.35, e.name, textOpts{size: legendSize})
			x += e.width() + legendGap
		}
	}
}

// Series styling.
const (
	lineWidth   = 2.0
	dashPattern = "7 4"
	markerSize  = 3.5 // radius-equivalent of a marker, in user units
	markerKinds = 5
)

// marker draws marker shape kind (circle, square, triangle up, diamond,
// triangle down) centred on (x, y). Distinct shapes keep series apart in
// greyscale print and for readers who cannot rely on colour.
func (d *doc) marker(kind int, x, y float64, color string) {
	r := markerSize
	switch mod(kind, markerKinds) {
	case 0:
		d.printf(`<circle cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", num(x), num(y), num(r), color)
	case 1:
		s := r * 0.9
		d.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n",
			num(x-s), num(y-s), num(2*s), num(2*s), color)
	case 2:
		s := r * 1.2
		d.printf(`<path d="M%s %sL%s %sL%s %sZ" fill="%s"/>`+"\n",
			num(x), num(y-s), num(x+s), num(y+s*0.8), num(x-s), num(y+s*0.8), color)
	case 3:
		s := r * 1.25
		d.printf(`<path d="M%s %sL%s %sL%s %sL%s %sZ" fill="%s"/>`+"\n",
			num(x), num(y-s), num(x+s), num(y), num(x), num(y+s), num(x-s), num(y), color)
	case 4:
		s := r * 1.2
		d.printf(`<path d="M%s %sL%s %sL%s %sZ" fill="%s"/>`+"\n",
			num(x), num(y+s), num(x+s), num(y-s*0.8), num(x-s), num(y-s*0.8), color)
	}
}

// header draws the title and the legend from the top of the canvas and
// returns the y coordinate where the plot area may start.
func (d *doc) header(title string, entries []legendEntry, width float64) float64 {
	y := pad
	if title != "" {
		d.text(pad, y+titleSize*0.8, title, textOpts{size: titleSize, weight: "bold"})
		y += titleSize + 10
	}
	if len(entries) > 0 {
		rows := layoutLegend(entries, width-2*pad)
		d.legend(entries, rows, pad, y)
		y += float64(len(rows))*legendRowH + 4
	}
	return y + 10
}

// minPlotHeight is the least height of a plot area: enough for three
// labelled y ticks at minTickGapY apart and the bar labels above them.
const minPlotHeight = 130.0

// growToFit returns the canvas height, raised when the header and the
// bottom margin (together fixed) would leave less than minPlotHeight for
// the plot, so a long legend on a small canvas never squeezes the data away.
func growToFit(height int, fixed float64) int {
	return max(height, int(math.Ceil(fixed+minPlotHeight)))
}

// noData draws the empty-plot placeholder: a frame with a centred message.
func (d *doc) noData(x0, y0, x1, y1 float64) {
	d.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s"/>`+"\n",
		num(x0), num(y0), num(x1-x0), num(y1-y0), gridColor)
	d.text((x0+x1)/2, (y0+y1)/2, noDataMessage, textOpts{size: labelSize, anchor: "middle", fill: mutedColor})
}

// writeTo writes the finished document to w in one call.
func (d *doc) writeTo(w io.Writer) error {
	_, err := w.Write(d.b.Bytes())
	return err
}
