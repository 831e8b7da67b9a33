package report

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Bytes formats a byte count for people: binary units with one decimal
// ("772.3 GiB", "1.5 KiB") from 1 KiB up, the exact count below ("512 B").
// Tables in index.html, report.md and the terminal use it; CSV and JSON
// files keep the exact integer.
func Bytes(n int64) string {
	const unit = 1024
	neg := n < 0
	u := uint64(n)
	if neg {
		u = uint64(-n)
	}
	sign := ""
	if neg {
		sign = "\u2212"
	}
	if u < unit {
		return sign + strconv.FormatUint(u, 10) + " B"
	}
	v, i := float64(u), -1
	for v >= unit-0.05 && i < len(byteUnits)-1 {
		v /= unit
		i++
	}
	return sign + strconv.FormatFloat(v, 'f', 1, 64) + " " + byteUnits[i]
}

// byteUnits are the binary prefixes Bytes uses, from KiB.
var byteUnits = [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// CheckNumberFormats reports the first table column of r whose number
// cells do not share one format: the same number of decimals and the same
// unit ("12.3%" beside "0.1234", or "2.5" beside "2.524"). Byte counts
// written by Bytes count as one format whatever their unit; empty cells
// ("–", "n/a") and text are ignored. Report builders' tests call it so
// every table keeps one format per column.
func (r *Report) CheckNumberFormats() error {
	for i, s := range r.Sections {
		for j, t := range s.Tables {
			for c, col := range t.Columns {
				first, firstRow := "", -1
				for k, row := range t.Rows {
					v := row[c]
					if emptyCell(v) || !numericCell(v) {
						continue
					}
					f := numberFormat(v)
					if firstRow < 0 {
						first, firstRow = f, k
						continue
					}
					if f != first {
						return fmt.Errorf("report: Sections[%d] %q: Tables[%d] %q: column %q: row %d %q (%s) and row %d %q (%s) differ in format",
							i, s.Title, j, t.Caption, col, firstRow, t.Rows[firstRow][c], first, k, v, f)
					}
				}
			}
		}
	}
	return nil
}

// numberFormat is the shape of a number cell: every integer part becomes
// "9", every decimal digit stays a "9" each, the sign goes, and a Bytes
// unit becomes "<bytes>". "12.3%" and "1.5%" give "9.9%"; "−0.25" gives
// "9.99"; "1.3 GiB" and "512 B" give "<bytes>".
func numberFormat(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "+-\u2212")
	if i := strings.LastIndexByte(s, ' '); i > 0 {
		unit := s[i+1:]
		if unit == "B" || strings.HasSuffix(unit, "iB") {
			return "<bytes>"
		}
	}
	var b strings.Builder
	inInt, afterPoint := false, false
	for _, r := range s {
		switch {
		case unicode.IsDigit(r) && afterPoint:
			b.WriteByte('9')
		case unicode.IsDigit(r):
			if !inInt {
				b.WriteByte('9')
				inInt = true
			}
		case r == '.' && inInt:
			afterPoint = true
			b.WriteRune(r)
		default:
			inInt, afterPoint = false, false
			b.WriteRune(r)
		}
	}
	return b.String()
}
