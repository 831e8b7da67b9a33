package demo

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

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
