package compare

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/internal/lab/replay"
)

// TestKvchainInFig9 checks that kvchain, ours, is in the default Fig 9
// sweep and, when swept, in the Fig 9 figure and table of every trace,
// marked as ours.
func TestKvchainInFig9(t *testing.T) {
	if !slices.Contains(DefaultOptions().Policies, Ours) {
		t.Fatalf("default policies %q lack %s", DefaultOptions().Policies, Ours)
	}
	o := smallOptions(smallTrace(t, 5))
	o.Policies = []string{"lru", Ours, "belady"}
	o.SkipGoodput = true
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sec := res.fig9Section()
	if len(sec.Figures) != 1 || len(sec.Tables) < 1 {
		t.Fatalf("Fig 9 section has %d figures and %d tables", len(sec.Figures), len(sec.Tables))
	}
	var rows []string
	for _, row := range sec.Tables[0].Rows {
		rows = append(rows, row[0])
	}
	if !slices.Contains(rows, "kvchain (ours)") {
		t.Errorf("Fig 9 table rows %q lack kvchain (ours)", rows)
	}
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "fig9_gen.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), "kvchain (ours)") {
		t.Error("fig9_gen.svg has no kvchain (ours) series")
	}
	hr, err := os.ReadFile(filepath.Join(dir, "hitrate.csv"))
	if err != nil || !strings.Contains(string(hr), "gen,kvchain,") {
		t.Errorf("hitrate.csv lacks kvchain rows (%v)", err)
	}
}

// TestReportFormats checks the rendered report: one number format per
// column in every table, byte counts humanised in the page and the
// Markdown while live.csv keeps them exact, and the live columns named
// the same in the report and in the terminal table.
func TestReportFormats(t *testing.T) {
	o := smallOptions(smallTrace(t, 6))
	o.Live = func(ctx context.Context, tr Trace, a Arm, _ replay.NetMode) (LiveRow, error) {
		var row LiveRow
		row.Sim.Requests, row.Sim.TokenHitRatio, row.Live.TokenHitRatio = 300, 0.25, 0.24
		row.Sim.TTFTMean, row.Live.TTFTMean, row.Live.LagP99 = 2, 2.1, 0.0123
		row.Sim.BytesNet, row.Live.LiveBytesRead, row.Live.LiveBytesStored = 829297786880, 1395864371, 512
		row.SimTTFTs, row.LiveTTFTs = []float64{0, 0, 1, 2, 3}, []float64{0, 1.1, 2.1, 3.1}
		return row, nil
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Report().CheckNumberFormats(); err != nil {
		t.Error(err)
	}
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"772.3 GiB", "1.3 GiB", "512 B", "live bytes read", "live bytes written", "sim network bytes (model)"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	for _, raw := range []string{"829297786880", "1395864371", "live bytes fetched", "bytes moved live"} {
		if strings.Contains(string(html), raw) {
			t.Errorf("index.html shows %q", raw)
		}
	}
	f, err := os.Open(filepath.Join(dir, "live.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(recs[0], "sim_bytes_net")
	if col < 0 || recs[1][col] != "829297786880" {
		t.Errorf("live.csv: sim_bytes_net column %d, row %q; want the exact byte count", col, recs[1])
	}
	var md strings.Builder
	if err := res.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| live bytes read | live bytes written |") || !strings.Contains(md.String(), "| 1.3 GiB | 512 B |") {
		t.Errorf("terminal table does not use the report's names and formats:\n%s", md.String())
	}
	cdf := LiveCDFSection(res.Live[:1], "")
	if len(cdf.Figures) != 1 || !strings.Contains(cdf.Figures[0].Caption, "sim 2 of 5") {
		t.Errorf("CDF caption does not count the zero TTFTs: %+v", cdf.Figures)
	}
}

// TestCDFSeriesSkipsZeros checks that a CDF drawn on a log axis starts at
// the smallest positive value, at the share of the values up to it.
func TestCDFSeriesSkipsZeros(t *testing.T) {
	s := cdfSeries("x", []float64{0, 0, 0.05, 0.5, 5})
	if s.X[0] != 0.05 || s.Y[0] != 0.6 || s.X[len(s.X)-1] != 5 || s.Y[len(s.Y)-1] != 1 {
		t.Fatalf("series X %v Y %v", s.X, s.Y)
	}
	if s := cdfSeries("x", []float64{0, 0}); len(s.X) != 0 {
		t.Fatalf("all-zero series drew %v", s.X)
	}
}
