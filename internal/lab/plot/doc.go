// Package plot draws the charts of kvpool's reports as standalone SVG
// documents, with the standard library only: line charts, step charts (for
// CDFs) and grouped bar charts.
//
// The input is plain data (Chart, BarChart) and the output depends on
// nothing else, so the same input always gives the same bytes and a
// report can be diffed. Axes get "nice" ticks (multiples of 1, 2 or 5 ×
// 10^k) or, when logarithmic, decade ticks; series take the Okabe–Ito
// colour-blind-safe palette and distinct marker shapes; every piece of
// text is XML-escaped. Points with a NaN or infinite coordinate are
// skipped. Inconsistent input (X and Y of different lengths, inverted
// limits) is an error naming the field; a chart with nothing to draw is a
// "no data" plot, not an error.
//
// Typical use, as a report figure:
//
//	c := &plot.Chart{
//		Title:  "Token hit ratio vs cache size",
//		XLabel: "cache size (tokens)", YLabel: "token hit ratio",
//		XLog:   true, YMin: new(0.0),
//		Series: []plot.Series{{Name: "conversation", X: sizes, Y: ratios}},
//	}
//	err := c.LineSVG(w)
package plot
