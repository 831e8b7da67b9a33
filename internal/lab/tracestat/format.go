package tracestat

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteJSON writes s as indented JSON.
func (s Stats) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("tracestat: write JSON: %w", err)
	}
	return nil
}

// WriteText writes s as aligned tables (labels left, numbers right); name
// (may be empty) heads them.
func (s Stats) WriteText(w io.Writer, name string) error {
	var summary [][]string
	if name != "" {
		summary = append(summary, []string{"trace", name})
	}
	summary = append(summary, [][]string{
		{"requests", group(int64(s.Requests))},
		{"span", fmt.Sprintf("%.1f s", s.SpanSeconds)},
		{"arrival rate", fmt.Sprintf("%.3f req/s", s.RatePerSecond)},
		{"total blocks", group(s.TotalBlocks)},
		{"unique blocks", group(s.UniqueBlocks)},
		{"unique blocks used once", fmt.Sprintf("%s (%.1f%%)", group(s.UsedOnceBlocks), 100*s.UsedOnceShare)},
		{"infinite-cache token hit ratio", fmt.Sprintf("%.2f%%", 100*s.InfiniteCache.TokenRatio)},
		{"infinite-cache block hit ratio", fmt.Sprintf("%.2f%%", 100*s.InfiniteCache.BlockRatio)},
	}...)
	tables := [][][]string{summary}
	lengths := [][]string{{"length (tokens)", "mean", "median", "p99", "max"}}
	for _, d := range []struct {
		name string
		d    Dist
	}{{"input", s.Input}, {"output", s.Output}} {
		lengths = append(lengths, []string{d.name, fmt.Sprintf("%.1f", d.d.Mean),
			strconv.Itoa(d.d.Median), strconv.Itoa(d.d.P99), strconv.Itoa(d.d.Max)})
	}
	tables = append(tables, lengths)
	total := s.Reuse.FirstAccesses + s.Reuse.ReAccesses
	share := func(c int64) string {
		if total == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f%%", 100*float64(c)/float64(total))
	}
	reuse := [][]string{
		{"reuse distance (blocks)", "accesses", "share"},
		{"first access", group(s.Reuse.FirstAccesses), share(s.Reuse.FirstAccesses)},
	}
	for _, b := range s.Reuse.Buckets {
		r := strconv.FormatInt(b.Min, 10)
		if b.Max != b.Min {
			r += "-" + strconv.FormatInt(b.Max, 10)
		}
		reuse = append(reuse, []string{r, group(b.Count), share(b.Count)})
	}
	tables = append(tables, reuse)

	var out []byte
	for i, t := range tables {
		if i > 0 {
			out = append(out, '\n')
		}
		out = appendTable(out, t)
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("tracestat: write table: %w", err)
	}
	return nil
}

// appendTable renders rows with the first column left-aligned and the
// others right-aligned, columns two spaces apart.
func appendTable(out []byte, rows [][]string) []byte {
	var width []int
	for _, r := range rows {
		for j, c := range r {
			if j >= len(width) {
				width = append(width, 0)
			}
			width[j] = max(width[j], len(c))
		}
	}
	for _, r := range rows {
		for j, c := range r {
			pad := width[j] - len(c)
			switch {
			case j == 0:
				out = append(out, c...)
				if len(r) > 1 {
					out = append(out, strings.Repeat(" ", pad)...)
				}
			default:
				out = append(out, strings.Repeat(" ", pad+2)...)
				out = append(out, c...)
			}
		}
		out = append(out, '\n')
	}
	return out
}

// group formats n with thousands separators: 12031 → "12,031".
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
