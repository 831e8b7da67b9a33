package plot

import (
	"fmt"
	"io"
	"math"
)

// BarSeries is one named set of bars of a BarChart: Values[i] is the bar in
// group i.
type BarSeries struct {
	// Name labels the series in the legend; empty names are left out.
	Name string
	// Values holds one value per group (NaN marks a missing bar, drawn as
	// an "n/a" label).
	Values []float64
}

// BarChart is a grouped bar chart: one cluster of bars per group (for
// example per trace), one bar per series in each cluster (for example per
// cache mode), each labelled with its value. The zero value of every
// optional field means its default.
//
// A BarChart is plain data: rendering does not modify it.
type BarChart struct {
	// Title is printed above the plot.
	Title string
	// YLabel names the value axis (with units).
	YLabel string
	// Groups name the clusters along the horizontal axis.
	Groups []string
	// Series are drawn left to right within each group, coloured with the
	// palette (see Color).
	Series []BarSeries
	// YMin and YMax fix the value axis; nil means automatic (including
	// zero, with room above the bars for their labels).
	YMin, YMax *float64
	// HLines are horizontal reference lines.
	HLines []HLine
	// Format prints the value labels; nil means FormatValue.
	Format func(v float64) string
	// Width and Height are the canvas size in CSS pixels; 0 means
	// DefaultWidth and DefaultHeight.
	Width, Height int
}

// Bar geometry.
const (
	// groupFill is the share of a group's width its bars take; the rest
	// separates the clusters.
	groupFill = 0.8
	// barFill is the share of a bar's slot the bar takes, leaving a thin
	// gap between neighbours in a cluster.
	barFill = 0.9
	// groupLabelAngle tilts group names that do not fit horizontally.
	groupLabelAngle = -35.0
)

// Validate reports the first field of b that cannot be drawn: a bad size,
// a non-finite or inverted limit, a series whose Values do not match
// Groups, or a non-finite reference line.
func (b *BarChart) Validate() error {
	if b == nil {
		return fmt.Errorf("plot: nil bar chart")
	}
	if err := validateSize(b.Width, b.Height); err != nil {
		return b.errorf("%w", err)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"YMin", b.YMin}, {"YMax", b.YMax}} {
		if f.v != nil && !finite(*f.v) {
			return b.errorf("%s is %v, want a finite number or nil for automatic", f.name, *f.v)
		}
	}
	if b.YMin != nil && b.YMax != nil && *b.YMin >= *b.YMax {
		return b.errorf("YMin (%v) must be less than YMax (%v)", *b.YMin, *b.YMax)
	}
	for i, s := range b.Series {
		if len(s.Values) != len(b.Groups) {
			return b.errorf("Series[%d] %q: %d values for %d groups", i, s.Name, len(s.Values), len(b.Groups))
		}
	}
	for i, h := range b.HLines {
		if !finite(h.Y) {
			return b.errorf("HLines[%d] %q: Y is %v, want a finite number", i, h.Label, h.Y)
		}
	}
	return nil
}

func (b *BarChart) errorf(format string, args ...any) error {
	return fmt.Errorf("plot: bar chart %q: "+format, append([]any{b.Title}, args...)...)
}

// SVG writes b as a standalone SVG grouped bar chart. A chart without
// groups, series or finite values renders a "no data" plot rather than
// failing. The output depends only on b (and on what b.Format returns).
func (b *BarChart) SVG(w io.Writer) error {
	if err := b.Validate(); err != nil {
		return err
	}
	var d doc
	b.render(&d)
	if err := d.writeTo(w); err != nil {
		return b.errorf("write SVG: %w", err)
	}
	return nil
}

func (b *BarChart) format(v float64) string {
	if !finite(v) {
		return "n/a"
	}
	if b.Format != nil {
		return b.Format(v)
	}
	return FormatValue(v)
}

// render draws b into d. Value labels and group names decide the margins,
// so it measures them first; the legend decides the top margin.
func (b *BarChart) render(d *doc) {
	width, height := canvasSize(b.Width, b.Height)
	W, H := float64(width), float64(height)
	var head doc
	top := head.header(b.Title, b.legend(), W)
	// start opens the document once the final height is known.
	start := func(bottomMargin float64) {
		height = growToFit(height, top+bottomMargin)
		H = float64(height)
		d.open(width, height, b.Title)
		d.b.Write(head.b.Bytes())
	}

	vals := b.valueExtent()
	leftBase := pad
	if b.YLabel != "" {
		leftBase += labelSize + 8
	}
	right := W - pad
	if !vals.ok {
		start(pad + tickLen + 4 + tickSize)
		bottom := H - pad - tickLen - 4 - tickSize
		d.noData(leftBase, top, right, bottom)
		b.yTitle(d, top, bottom)
		d.close()
		return
	}

	maxValueW, maxGroupW := b.labelWidths()
	data := extent{lo: min(vals.lo, 0), hi: max(vals.hi, 0), ok: true}
	for _, h := range b.HLines {
		data.add(h.Y)
	}
	rotateValues, rotateGroups := b.orientLabels(data, leftBase, top, right, H, maxValueW, maxGroupW)

	bottomMargin := pad + tickLen + 4 + tickSize
	if rotateGroups {
		bottomMargin += maxGroupW * math.Sin(-groupLabelAngle*math.Pi/180)
	}
	start(bottomMargin)
	bottom := H - bottomMargin
	ya := b.valueAxis(data, vals, top, bottom, rotateValues, maxValueW)
	left := leftBase + maxLabelWidth(ya.labels) + tickLen + 4

	b.drawValueAxis(d, &ya, left, top, right, bottom)
	b.drawGroups(d, &ya, left, right, bottom, rotateValues, rotateGroups)
	drawHLines(d, b.HLines, &ya, left, right)
	d.close()
}

// legend lists the named series.
func (b *BarChart) legend() []legendEntry {
	var entries []legendEntry
	for i, s := range b.Series {
		if s.Name != "" {
			entries = append(entries, legendEntry{name: s.Name, color: Color(i), marker: -1, swatch: true})
		}
	}
	return entries
}

// valueExtent is the extent of the finite values.
func (b *BarChart) valueExtent() extent {
	var vals extent
	for _, s := range b.Series {
		for _, v := range s.Values {
			if finite(v) {
				vals.add(v)
			}
		}
	}
	return vals
}

// labelWidths returns the widths of the widest value label and the widest
// group name.
func (b *BarChart) labelWidths() (maxValueW, maxGroupW float64) {
	for _, s := range b.Series {
		for _, v := range s.Values {
			maxValueW = max(maxValueW, textWidth(b.format(v), valueSize))
		}
	}
	for _, g := range b.Groups {
		maxGroupW = max(maxGroupW, textWidth(g, tickSize))
	}
	return maxValueW, maxGroupW
}

// orientLabels decides whether the value labels and the group names are
// rotated. A provisional value axis over data (H is the canvas height
// before it grows to fit) gives the left margin, which gives the bar
// width, which decides label orientation; valueAxis then builds the final
// axis with room for the labels.
func (b *BarChart) orientLabels(data extent, leftBase, top, right, H, maxValueW, maxGroupW float64) (rotateValues, rotateGroups bool) {
	provisional := scaleAxis(false, data, b.YMin, b.YMax, tickTarget(H-top-pad-40, minTickGapY))
	left := leftBase + maxLabelWidth(provisional.labels) + tickLen + 4
	groupW, slotW := b.groupWidths(left, right)
	return maxValueW > slotW, maxGroupW > groupW-6
}

// groupWidths returns the width of a group and of a bar's slot in it for
// a plot area from left to right.
func (b *BarChart) groupWidths(left, right float64) (groupW, slotW float64) {
	groupW = (right - left) / float64(len(b.Groups))
	return groupW, groupW * groupFill / float64(len(b.Series))
}

// valueAxis builds the final value axis from top to bottom: over data
// (vals is the extent of the bars alone), with headroom beyond the
// tallest bars for their labels unless a limit is fixed.
func (b *BarChart) valueAxis(data, vals extent, top, bottom float64, rotateValues bool, maxValueW float64) axis {
	plotH := bottom - top
	headroom := valueSize + 6
	if rotateValues {
		headroom = maxValueW + 8
	}
	headroom = min(headroom, plotH/2)
	if b.YMax == nil && vals.hi > 0 {
		data.hi = max(data.hi, data.lo+(vals.hi-data.lo)*plotH/(plotH-headroom))
	}
	if b.YMin == nil && vals.lo < 0 {
		data.lo = min(data.lo, data.hi-(data.hi-vals.lo)*plotH/(plotH-headroom))
	}
	ya := scaleAxis(false, data, b.YMin, b.YMax, tickTarget(plotH, minTickGapY))
	ya.px0, ya.px1 = bottom, top
	return ya
}

// drawValueAxis draws the grid, the value axis with its ticks and tick
// labels, and the axis title.
func (b *BarChart) drawValueAxis(d *doc, ya *axis, left, top, right, bottom float64) {
	for _, t := range ya.ticks {
		y := ya.pos(t)
		d.line(left, y, right, y, gridColor, 1, "")
	}
	d.line(left, top, left, bottom, axisColor, 1, "")
	for i, t := range ya.ticks {
		y := ya.pos(t)
		d.line(left-tickLen, y, left, y, axisColor, 1, "")
		d.text(left-tickLen-3, y+tickSize*0.35, ya.labels[i], textOpts{size: tickSize, anchor: "end"})
	}
	b.yTitle(d, top, bottom)
}

// drawGroups draws every group's name and bars with their value labels,
// then the base line the bars grow from.
func (b *BarChart) drawGroups(d *doc, ya *axis, left, right, bottom float64, rotateValues, rotateGroups bool) {
	groupW, slotW := b.groupWidths(left, right)
	base := min(max(0, ya.lo), ya.hi)
	baseY := ya.pos(base)
	for g, name := range b.Groups {
		cx := left + (float64(g)+0.5)*groupW
		ly := bottom + tickLen + 3 + tickSize*0.8
		if rotateGroups {
			d.text(cx, ly, name, textOpts{size: tickSize, anchor: "end", rotate: groupLabelAngle})
		} else {
			d.text(cx, ly, name, textOpts{size: tickSize, anchor: "middle"})
		}
		x0 := cx - groupW*groupFill/2
		for i, s := range b.Series {
			v := s.Values[g]
			bx := x0 + float64(i)*slotW + slotW*(1-barFill)/2
			bw := slotW * barFill
			bcx := bx + bw/2
			label := b.format(v)
			if !finite(v) {
				b.valueLabel(d, bcx, baseY, true, label, rotateValues, mutedColor)
				continue
			}
			vy := ya.pos(min(max(v, ya.lo), ya.hi))
			y0, y1 := min(vy, baseY), max(vy, baseY)
			d.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
				num(bx), num(y0), num(bw), num(y1-y0), Color(i), escape(s.Name+", "+name+": "+label))
			b.valueLabel(d, bcx, vy, v >= base, label, rotateValues, textColor)
		}
	}
	d.line(left, baseY, right, baseY, axisColor, 1, "")
}

// valueLabel prints a bar's value just beyond its end: above a bar that
// grows upwards, below one that grows downwards; vertical when the
// labels are wider than the bars.
func (b *BarChart) valueLabel(d *doc, cx, y float64, up bool, label string, rotate bool, fill string) {
	o := textOpts{size: valueSize, fill: fill, halo: true}
	switch {
	case rotate && up:
		o.anchor, o.rotate = "start", -90
		d.text(cx+valueSize*0.35, y-4, label, o)
	case rotate:
		o.anchor, o.rotate = "end", -90
		d.text(cx+valueSize*0.35, y+4, label, o)
	case up:
		o.anchor = "middle"
		d.text(cx, y-4, label, o)
	default:
		o.anchor = "middle"
		d.text(cx, y+valueSize+3, label, o)
	}
}

func (b *BarChart) yTitle(d *doc, top, bottom float64) {
	if b.YLabel != "" {
		d.text(pad+labelSize*0.8, (top+bottom)/2, b.YLabel, textOpts{size: labelSize, anchor: "middle", rotate: -90})
	}
}

func maxLabelWidth(labels []string) float64 {
	w := 0.0
	for _, l := range labels {
		w = max(w, textWidth(l, tickSize))
	}
	return w
}
