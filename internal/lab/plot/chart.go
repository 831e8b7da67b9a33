package plot

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Series is one named line of a Chart: the points (X[i], Y[i]).
type Series struct {
	// Name labels the series in the legend; a series with an empty name
	// is drawn but left out of the legend.
	Name string
	// X and Y hold the coordinates; they must have the same length. A
	// point with a NaN or ±Inf coordinate (or a non-positive one on a log
	// axis) is skipped and breaks the line there.
	X, Y []float64
	// Dashed draws the line dashed (for example a model next to a
	// measurement).
	Dashed bool
}

// HLine is a horizontal reference line across the plot area, such as a
// recompute baseline or a published value.
type HLine struct {
	// Y is the line's position in data units.
	Y float64
	// Label is printed at the right end, above the line.
	Label string
}

// Chart is a line chart (LineSVG) or a step chart for CDFs (StepSVG) of one
// or more series. The zero value of every optional field means its
// default: automatic limits, linear axes, a 720×420 canvas.
//
// A Chart is plain data: rendering does not modify it, so one Chart may be
// rendered concurrently by several goroutines.
type Chart struct {
	// Title is printed above the plot.
	Title string
	// XLabel and YLabel name the axes (with units).
	XLabel, YLabel string
	// Series are drawn in order, each with the next palette colour and
	// marker shape (see Color).
	Series []Series
	// XLog and YLog make an axis base-10 logarithmic with decade ticks.
	XLog, YLog bool
	// XMin, XMax, YMin and YMax fix an axis limit; nil means automatic
	// (the data's extent widened to the next tick or decade). With Go 1.26
	// write, for example, YMin: new(0.0).
	XMin, XMax, YMin, YMax *float64
	// HLines are horizontal reference lines; they count as data for an
	// automatic Y range.
	HLines []HLine
	// Width and Height are the canvas size in CSS pixels; 0 means
	// DefaultWidth and DefaultHeight.
	Width, Height int
}

// Marker and label density limits.
const (
	// maxMarkers is the largest number of points per series drawn with
	// markers: beyond it (about one marker per 15 px at the default width)
	// markers merge into a thick line and only add bytes.
	maxMarkers = 40
	// minTickGapY is the vertical pixel spacing wanted between y ticks,
	// about three lines of tick-label text.
	minTickGapY = 45.0
	// minTickGapX is the initial horizontal pixel spacing wanted between x
	// ticks; it shrinks the tick count further when labels are wide.
	minTickGapX = 70.0
)

// Validate reports the first field of c that cannot be drawn: a negative
// or too small size, a non-finite or inverted limit, a non-positive limit
// on a log axis, X and Y of different lengths, or a non-finite reference
// line.
func (c *Chart) Validate() error {
	if c == nil {
		return fmt.Errorf("plot: nil chart")
	}
	if err := validateSize(c.Width, c.Height); err != nil {
		return c.errorf("%w", err)
	}
	for _, l := range []struct {
		name     string
		lo, hi   *float64
		log      bool
		loN, hiN string
	}{
		{"X", c.XMin, c.XMax, c.XLog, "XMin", "XMax"},
		{"Y", c.YMin, c.YMax, c.YLog, "YMin", "YMax"},
	} {
		for _, f := range []struct {
			name string
			v    *float64
		}{{l.loN, l.lo}, {l.hiN, l.hi}} {
			if f.v == nil {
				continue
			}
			if !finite(*f.v) {
				return c.errorf("%s is %v, want a finite number or nil for automatic", f.name, *f.v)
			}
			if l.log && *f.v <= 0 {
				return c.errorf("%s is %v, but the %s axis is logarithmic and needs a positive limit", f.name, *f.v, l.name)
			}
		}
		if l.lo != nil && l.hi != nil && *l.lo >= *l.hi {
			return c.errorf("%s (%v) must be less than %s (%v)", l.loN, *l.lo, l.hiN, *l.hi)
		}
	}
	for i, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return c.errorf("Series[%d] %q: len(X) = %d but len(Y) = %d", i, s.Name, len(s.X), len(s.Y))
		}
	}
	for i, h := range c.HLines {
		if !finite(h.Y) {
			return c.errorf("HLines[%d] %q: Y is %v, want a finite number", i, h.Label, h.Y)
		}
		if c.YLog && h.Y <= 0 {
			return c.errorf("HLines[%d] %q: Y is %v, but the Y axis is logarithmic", i, h.Label, h.Y)
		}
	}
	return nil
}

func (c *Chart) errorf(format string, args ...any) error {
	return fmt.Errorf("plot: chart %q: "+format, append([]any{c.Title}, args...)...)
}

// validateSize checks a canvas size where 0 means the default.
func validateSize(w, h int) error {
	if w != 0 && w < MinWidth {
		return fmt.Errorf("Width is %d, want 0 (default %d) or at least %d", w, DefaultWidth, MinWidth)
	}
	if h != 0 && h < MinHeight {
		return fmt.Errorf("Height is %d, want 0 (default %d) or at least %d", h, DefaultHeight, MinHeight)
	}
	return nil
}

// canvasSize resolves the default size.
func canvasSize(w, h int) (int, int) {
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	return w, h
}

// LineSVG writes c as a standalone SVG line chart: straight segments
// between consecutive points, with point markers on series of at most 40
// points. A chart without any drawable point renders a "no data" plot
// rather than failing. The output depends only on c.
func (c *Chart) LineSVG(w io.Writer) error { return c.write(w, false) }

// StepSVG writes c as a standalone SVG step chart, the usual drawing of an
// empirical CDF: each point's Y holds until the next point's X. Every
// series' X must be in non-decreasing order.
func (c *Chart) StepSVG(w io.Writer) error { return c.write(w, true) }

func (c *Chart) write(w io.Writer, step bool) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if step {
		for i, s := range c.Series {
			prev := math.Inf(-1)
			for j, x := range s.X {
				if !finite(x) || !finite(s.Y[j]) {
					continue
				}
				if x < prev {
					return c.errorf("Series[%d] %q: X[%d] = %v is less than an earlier X (%v); a step chart needs X in non-decreasing order", i, s.Name, j, x, prev)
				}
				prev = x
			}
		}
	}
	var d doc
	c.render(&d, step)
	if err := d.writeTo(w); err != nil {
		return c.errorf("write SVG: %w", err)
	}
	return nil
}

// render draws c into d, as a step chart if step is set.
func (c *Chart) render(d *doc, step bool) {
	width, height := canvasSize(c.Width, c.Height)
	W := float64(width)
	var head doc
	top := head.header(c.Title, c.legend(step), W)

	bottomMargin := pad + tickLen + 4 + tickSize
	if c.XLabel != "" {
		bottomMargin += labelSize + 10
	}
	height = growToFit(height, top+bottomMargin)
	H := float64(height)
	d.open(width, height, c.Title)
	d.b.Write(head.b.Bytes())

	xs, ys, points := c.extents()
	bottom := H - bottomMargin
	left := pad
	if c.YLabel != "" {
		left += labelSize + 8
	}
	right := W - pad - 12 // room for half of the last x label

	if points == 0 {
		d.noData(left, top, right, bottom)
		c.axisTitles(d, left, top, right, bottom, W, H)
		d.close()
		return
	}

	ya := scaleAxis(c.YLog, ys, c.YMin, c.YMax, tickTarget(bottom-top, minTickGapY))
	left += maxLabelWidth(ya.labels) + tickLen + 4
	ya.px0, ya.px1 = bottom, top
	xa := c.xAxis(xs, left, right)

	drawGridAndAxes(d, &xa, &ya, left, top, right, bottom)
	c.axisTitles(d, left, top, right, bottom, W, H)
	c.drawData(d, &xa, &ya, left, top, right, bottom, step)
	drawHLines(d, c.HLines, &ya, left, right)
	d.close()
}

// legend lists the named series; a step chart's entries have no marker.
func (c *Chart) legend(step bool) []legendEntry {
	var entries []legendEntry
	for i, s := range c.Series {
		if s.Name == "" {
			continue
		}
		mk := i
		if step {
			mk = -1
		}
		entries = append(entries, legendEntry{name: s.Name, color: Color(i), dashed: s.Dashed, marker: mk})
	}
	return entries
}

// extents returns the extents of the drawable points (finite, and
// positive on a log axis) and their number; with any point, ys includes
// the reference lines.
func (c *Chart) extents() (xs, ys extent, points int) {
	for _, s := range c.Series {
		for j := range s.X {
			x, y := s.X[j], s.Y[j]
			if !finite(x) || !finite(y) || (c.XLog && x <= 0) || (c.YLog && y <= 0) {
				continue
			}
			xs.add(x)
			ys.add(y)
			points++
		}
	}
	if points > 0 {
		for _, h := range c.HLines {
			ys.add(h.Y)
		}
	}
	return xs, ys, points
}

// xAxis builds the x axis from left to right with as many ticks as fit
// their labels (at least two).
func (c *Chart) xAxis(xs extent, left, right float64) axis {
	var xa axis
	for n := tickTarget(right-left, minTickGapX); ; n-- {
		xa = scaleAxis(c.XLog, xs, c.XMin, c.XMax, n)
		xa.px0, xa.px1 = left, right
		if n <= 2 || labelsFit(&xa, tickSize) {
			break
		}
	}
	return xa
}

// drawData draws every series, clipped to the plot area (padded so edge
// markers stay whole).
func (c *Chart) drawData(d *doc, xa, ya *axis, left, top, right, bottom float64, step bool) {
	cp := markerSize + 2
	d.printf(`<clipPath id="plot-area"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`+"\n",
		num(left-cp), num(top-cp), num(right-left+2*cp), num(bottom-top+2*cp))
	d.printf(`<g clip-path="url(#plot-area)">` + "\n")
	for i, s := range c.Series {
		drawSeries(d, s, i, xa, ya, step)
	}
	d.printf("</g>\n")
}

// drawHLines draws the reference lines within the value axis ya, from
// left to right, each with its label at the right end.
func drawHLines(d *doc, lines []HLine, ya *axis, left, right float64) {
	for _, h := range lines {
		if h.Y < ya.lo || h.Y > ya.hi {
			continue
		}
		y := ya.pos(h.Y)
		d.line(left, y, right, y, refLineColor, 1.25, "4 3")
		if h.Label != "" {
			d.text(right-4, y-5, h.Label, textOpts{size: tickSize, anchor: "end", fill: mutedColor, halo: true})
		}
	}
}

// axisTitles draws the x label under the x tick labels and the y label
// rotated along the left edge.
func (c *Chart) axisTitles(d *doc, left, top, right, bottom, W, H float64) {
	if c.XLabel != "" {
		d.text((left+right)/2, H-pad, c.XLabel, textOpts{size: labelSize, anchor: "middle"})
	}
	if c.YLabel != "" {
		x := pad + labelSize*0.8
		d.text(x, (top+bottom)/2, c.YLabel, textOpts{size: labelSize, anchor: "middle", rotate: -90})
	}
}

// drawGridAndAxes draws grid lines at the ticks, the two axis lines, tick
// marks and tick labels.
func drawGridAndAxes(d *doc, xa, ya *axis, left, top, right, bottom float64) {
	for _, t := range xa.ticks {
		x := xa.pos(t)
		d.line(x, top, x, bottom, gridColor, 1, "")
	}
	for _, t := range ya.ticks {
		y := ya.pos(t)
		d.line(left, y, right, y, gridColor, 1, "")
	}
	d.line(left, bottom, right, bottom, axisColor, 1, "")
	d.line(left, top, left, bottom, axisColor, 1, "")
	for _, t := range xa.minor {
		x := xa.pos(t)
		d.line(x, bottom, x, bottom+tickLen*0.6, axisColor, 0.75, "")
	}
	for _, t := range ya.minor {
		y := ya.pos(t)
		d.line(left-tickLen*0.6, y, left, y, axisColor, 0.75, "")
	}
	for i, t := range xa.ticks {
		x := xa.pos(t)
		d.line(x, bottom, x, bottom+tickLen, axisColor, 1, "")
		d.text(x, bottom+tickLen+3+tickSize*0.8, xa.labels[i], textOpts{size: tickSize, anchor: "middle"})
	}
	for i, t := range ya.ticks {
		y := ya.pos(t)
		d.line(left-tickLen, y, left, y, axisColor, 1, "")
		d.text(left-tickLen-3, y+tickSize*0.35, ya.labels[i], textOpts{size: tickSize, anchor: "end"})
	}
}

// drawSeries draws one series as a path (breaking at undrawable points)
// and, for short line series, its markers.
func drawSeries(d *doc, s Series, i int, xa, ya *axis, step bool) {
	color := Color(i)
	var path strings.Builder
	drawn := 0
	pen := false // whether the path has a current point
	for j := range s.X {
		x, y := s.X[j], s.Y[j]
		if !xa.plottable(x) || !ya.plottable(y) {
			pen = false
			continue
		}
		px, py := xa.pos(x), ya.pos(y)
		switch {
		case !pen:
			fmt.Fprintf(&path, "M%s %s", num(px), num(py))
		case step:
			fmt.Fprintf(&path, "H%sV%s", num(px), num(py))
		default:
			fmt.Fprintf(&path, "L%s %s", num(px), num(py))
		}
		pen = true
		drawn++
	}
	if drawn == 0 {
		return
	}
	d.printf(`<path d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" stroke-linecap="round"`,
		path.String(), color, num(lineWidth))
	if s.Dashed {
		d.printf(` stroke-dasharray="%s"`, dashPattern)
	}
	d.printf("/>\n")
	if step || drawn > maxMarkers {
		return
	}
	for j := range s.X {
		x, y := s.X[j], s.Y[j]
		if xa.plottable(x) && ya.plottable(y) {
			d.marker(i, xa.pos(x), ya.pos(y), color)
		}
	}
}
