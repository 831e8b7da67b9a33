package demo

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/validate"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
	"github.com/kvpool/kvpool/trace/tracetest"
)

func TestLoadWindow(t *testing.T) {
	empty := t.TempDir()
	noEnv := func(string) string { return "" }
	tests := []struct {
		name      string
		opts      TraceOptions
		generated bool
		notice    string // substring of the notice; "" = none
		wantErr   string
	}{
		{"generated on request", TraceOptions{Generated: true, Window: time.Minute}, true, "", ""},
		{"fallback when not found", TraceOptions{Dir: empty, Window: time.Minute, Finder: trace.Finder{Getenv: noEnv, WorkDir: empty}},
			true, "kvpool trace fetch", ""},
		{"no fallback for a trace asked for", TraceOptions{Name: "conversaton", Dir: empty, Window: time.Minute,
			Finder: trace.Finder{Getenv: noEnv, WorkDir: empty}}, false, "", "conversaton"},
		{"bad rate", TraceOptions{Rate: -1}, false, "", "Rate"},
		{"bad window", TraceOptions{Window: -time.Second}, false, "", "Window"},
		{"bad first", TraceOptions{First: -1}, false, "", "First"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := LoadWindow(tt.opts)
			if tt.wantErr != "" {
				if err == nil || option.Field(err) != tt.wantErr && !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Generated != tt.generated || len(w.Requests) == 0 {
				t.Fatalf("generated %v, %d requests", w.Generated, len(w.Requests))
			}
			if (tt.notice == "") != (w.Notice == "") || !strings.Contains(w.Notice, tt.notice) {
				t.Fatalf("notice %q, want one containing %q", w.Notice, tt.notice)
			}
			// The window is re-based to 0 and spread by 1/Rate (0.5 by default).
			o := tt.opts.WithDefaults()
			last := w.Requests[len(w.Requests)-1].Timestamp
			if w.Requests[0].Timestamp < 0 || float64(last) >= float64(o.Window.Milliseconds())/o.Rate {
				t.Fatalf("timestamps %d..%d outside [0, %v / %g)", w.Requests[0].Timestamp, last, o.Window, o.Rate)
			}
		})
	}
}

func TestLoadWindowFindsTrace(t *testing.T) {
	path := tracetest.Path(t, trace.FileName("conversation"))
	dir := filepath.Dir(path)
	w, err := LoadWindow(TraceOptions{Dir: dir, Window: time.Minute, First: 50})
	if err != nil {
		t.Fatal(err)
	}
	if w.Generated || w.Name != "conversation" || len(w.Requests) != 50 || w.Notice != "" {
		t.Fatalf("window: %s generated %v, %d requests, notice %q", w.Name, w.Generated, len(w.Requests), w.Notice)
	}
	if _, err := LoadWindow(TraceOptions{Dir: dir, From: 100 * time.Hour}); err == nil || !strings.Contains(err.Error(), "no requests") {
		t.Fatalf("window past the end of the trace: error %v", err)
	}
}

func TestJudge(t *testing.T) {
	cfg := validate.Config{RAMBlocks: 777}.WithDefaults()
	row := func(arm string, verified int64) compare.LiveRow {
		return compare.LiveRow{Arm: compare.Arm{Name: arm}, Live: replay.Summary{VerifiedHits: verified}}
	}
	tests := []struct {
		name     string
		verdicts []ArmVerdict
		partial  bool
		want     validate.Verdict
		text     []string
	}{
		{"pass", []ArmVerdict{{Arm: "a", Verdict: validate.VerdictPass, HitDelta: -0.004, TTFTRelDelta: 0.05, KeptUp: true},
			{Arm: "b", Verdict: validate.VerdictPass, HitDelta: 0.011, KeptUp: true}},
			false, validate.VerdictPass, []string{"PASS: live within 1.10 points", "within 5.0%", "all of which kept up", "12 hits read and verified"}},
		{"fail", []ArmVerdict{{Arm: "a", Verdict: validate.VerdictPass, KeptUp: true},
			{Arm: "b", Verdict: validate.VerdictFail, KeptUp: true, Failures: []string{"b: token hit ratio: differ by 3 points"}}},
			false, validate.VerdictFail, []string{"FAIL: ", "in b (b: token hit ratio: differ by 3 points)"}},
		{"inconclusive", []ArmVerdict{{Arm: "a", Verdict: validate.VerdictInconclusive, Reason: "lag", SuggestedSpeed: 25},
			{Arm: "b", Verdict: validate.VerdictInconclusive, Reason: "late", SuggestedSpeed: 12}},
			false, validate.VerdictInconclusive, []string{"INCONCLUSIVE: ", "a: lag; b: late", "--speed 12"}},
		{"fail beats inconclusive", []ArmVerdict{{Arm: "a", Verdict: validate.VerdictInconclusive},
			{Arm: "b", Verdict: validate.VerdictFail}}, false, validate.VerdictFail, []string{"FAIL: "}},
		{"partial", []ArmVerdict{{Arm: "a", Verdict: validate.VerdictPass}}, true, "", []string{"PARTIAL, no verdict", "after 1 of 2 arms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Result{Config: cfg, Arms: []string{"a", "b"}, Partial: tt.partial, Verdicts: tt.verdicts,
				Trace: &Window{Name: "generated"}}
			for _, v := range tt.verdicts {
				r.Rows = append(r.Rows, row(v.Arm, 6))
			}
			v, text := r.judge()
			if v != tt.want {
				t.Fatalf("verdict %q, want %q (%s)", v, tt.want, text)
			}
			for _, w := range tt.text {
				if !strings.Contains(text, w) {
					t.Errorf("verdict text %q lacks %q", text, w)
				}
			}
			r.Verdict, r.VerdictText = v, text
			intro := r.Report().Intro
			word, rest, _ := strings.Cut(text, ": ")
			if !strings.HasPrefix(intro, "**"+word+"**: "+rest) || !strings.Contains(intro, "777 RAM blocks each") {
				t.Errorf("report intro does not start with the verdict or lacks the configured RAM: %q", intro)
			}
		})
	}
}

// TestInterruptedArm records an arm whose live run was interrupted (its
// validation fails the "complete" check): the demo gives no verdict, so
// neither may the arm's row, its verdict or the table call it a FAIL or
// a live/sim disagreement.
func TestInterruptedArm(t *testing.T) {
	cfg := validate.Config{}.WithDefaults()
	rep := &validate.Report{Config: cfg, Requests: 100, Verdict: validate.VerdictFail,
		Live: replay.Summary{Partial: true, Completed: 40},
		Checks: []validate.Check{
			{Name: "token hit ratio", Pass: false, Judged: true, Message: "differ by 9 points"},
			{Name: "complete", Pass: false, Judged: true, Message: "40 of 100 requests completed live (interrupted)"},
		}}
	r := &Result{Config: cfg, Arms: []string{"a", "b"}, Trace: &Window{Name: "generated"}}
	r.addArm("generated", compare.Arm{Name: "a"}, rep)
	if !r.Partial {
		t.Fatal("an interrupted arm does not make the result partial")
	}
	r.Verdict, r.VerdictText = r.judge()
	if r.Verdict != "" || r.Rows[0].Verdict == string(validate.VerdictFail) || r.Verdicts[0].Verdict == validate.VerdictFail {
		t.Fatalf("verdict %q, row %q, arm %q: want no FAIL for an interrupted arm", r.Verdict, r.Rows[0].Verdict, r.Verdicts[0].Verdict)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "disagreement") || strings.Contains(out, "| FAIL |") || !strings.Contains(out, "PARTIAL, no verdict") {
		t.Errorf("table of an interrupted demo:\n%s", out)
	}
}
