package demo

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/lab/tracesample"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
)

// Defaults of TraceOptions.
const (
	// DefaultTrace is the published trace the demo looks for first.
	DefaultTrace = "conversation"
	// DefaultWindow is ten minutes of trace: 1,750 requests of the
	// conversation trace, enough for caches to warm up and be reused.
	DefaultWindow = 10 * time.Minute
	// DefaultRate spreads the window's arrivals ×2 (rate multiplier 0.5).
	// The paper's cluster has about ten prefill nodes; the demo has four,
	// and at the trace's own rate they are overloaded (measured on the
	// first 10 minutes of the conversation trace, global cache-aware:
	// mean TTFT 47 s in the simulator, almost all of it queueing, where
	// live timing errors add up and live and simulated TTFT differ by
	// ≈18%). At 0.5 the mean TTFT is ≈2.4 s, in the paper's range, and
	// live and simulated agree within 5%.
	DefaultRate = 0.5
	// DefaultSeed seeds the generated fallback trace.
	DefaultSeed = 1
	// DefaultSpeed is the demo's time compression, half of the
	// replayer's: every arm's live run must keep up with its schedule to
	// be judged (package validate, KeptUp), and at 50× the caching arms
	// did not on an idle 2-core machine — the five processes and the
	// replayer's reads and full verification of every hit made requests
	// run 2.9–4.0 ms late on average, 0.15–0.20 model s, over the
	// 0.12–0.13 s a quarter of the TTFT tolerance allows (verdict
	// INCONCLUSIVE). At 25× the same lateness is half as many model
	// seconds and every arm kept up (PASS, 195 s for the four arms).
	DefaultSpeed = 25
)

// TraceOptions choose the requests of a demo or validation run: a window
// of a published trace found on the search path, or of a generated one.
// The zero value of every field means its default.
type TraceOptions struct {
	// Name is a trace name or file. "" looks for DefaultTrace and falls
	// back to a generated trace when it is not found; a Name given must
	// be found (LoadWindow fails otherwise).
	Name string
	// Dir is searched first (then $KVPOOL_TRACE_DIR and ./traces; see
	// trace.Finder).
	Dir string
	// Generated skips the search and generates a chat trace
	// (tracegen.ChatOptions, which resembles the conversation trace).
	Generated bool
	// From is where the window starts in trace time (0: the start).
	From time.Duration
	// Window is the window's length (DefaultWindow).
	Window time.Duration
	// First keeps only the first First requests of the window (0: all).
	First int
	// Rate multiplies the arrival rate (DefaultRate): timestamps are
	// divided by it after the window is cut and re-based to 0.
	Rate float64
	// Seed seeds the generated trace (DefaultSeed).
	Seed uint64
	// Finder locates trace files (zero: process environment and working
	// directory).
	Finder trace.Finder
}

// WithDefaults returns o with every zero field replaced by its default.
func (o TraceOptions) WithDefaults() TraceOptions {
	if o.Name == "" {
		o.Name = DefaultTrace
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	return o
}

// Validate reports the first bad field by name.
func (o TraceOptions) Validate() error {
	d := o.WithDefaults()
	switch {
	case d.From < 0:
		return fmt.Errorf("demo: trace: %w", option.Errorf("From", "must be >= 0, got %v", d.From))
	case d.Window < time.Millisecond:
		return fmt.Errorf("demo: trace: %w", option.Errorf("Window", "must be at least 1ms, got %v", d.Window))
	case d.First < 0:
		return fmt.Errorf("demo: trace: %w", option.Errorf("First", "must be >= 0, got %d", d.First))
	case math.IsNaN(d.Rate) || math.IsInf(d.Rate, 0) || d.Rate <= 0 || d.Rate > 1000:
		return fmt.Errorf("demo: trace: %w", option.Errorf("Rate", "must be in (0, 1000], got %g", d.Rate))
	}
	return nil
}

// Window is the requests chosen by LoadWindow and where they came from.
type Window struct {
	// Name is a short trace name ("conversation", "generated").
	Name string `json:"name"`
	// Path is the trace file ("" when generated).
	Path string `json:"path,omitempty"`
	// Generated is set when the trace was generated.
	Generated bool `json:"generated"`
	// Notice explains a fallback to a generated trace ("" otherwise).
	Notice string `json:"notice,omitempty"`
	// From, Window and Rate echo the options.
	FromSeconds   float64 `json:"from_s"`
	WindowSeconds float64 `json:"window_s"`
	Rate          float64 `json:"rate_multiplier"`
	// Requests is the window, timestamps re-based to 0 and divided by
	// Rate.
	Requests []trace.Request `json:"-"`
}

// LoadWindow finds and reads the trace and cuts the window out of it.
// When no Name was given and DefaultTrace is not found, it falls back to
// a generated trace, with a Notice saying where it looked and how to
// fetch the real one; a Name given that cannot be found or read is an
// error naming it.
func LoadWindow(opts TraceOptions) (*Window, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	asked := opts.Name != ""
	o := opts.WithDefaults()
	w := &Window{FromSeconds: o.From.Seconds(), WindowSeconds: o.Window.Seconds(), Rate: o.Rate}
	var reqs []trace.Request
	if !o.Generated {
		path, err := o.Finder.Find(o.Name, o.Dir)
		switch {
		case errors.Is(err, trace.ErrNotFound) && !asked:
			w.Notice = fmt.Sprintf("%v.\nFalling back to a GENERATED chat trace (tracegen, seed %d) that resembles the conversation trace; "+
				"figures will differ from the paper's. Run \"kvpool trace fetch\" for the real one, or pass --generated to silence this.", err, o.Seed)
		case err != nil:
			return nil, fmt.Errorf("demo: find trace %s: %w", o.Name, err)
		default:
			if reqs, err = trace.ReadFile(path, trace.ReadOptions{}); err != nil {
				return nil, fmt.Errorf("demo: read trace %s: %w", path, err)
			}
			w.Name, w.Path = compare.TraceName(path), path
		}
	}
	if w.Path == "" {
		g := tracegen.ChatOptions()
		g.Seed, g.Duration = o.Seed, o.From+o.Window
		var err error
		if reqs, err = tracegen.Generate(g); err != nil {
			return nil, fmt.Errorf("demo: generate a trace: %w", err)
		}
		w.Name, w.Generated = "generated", true
	}
	s, err := tracesample.Sample(reqs, tracesample.Options{
		FromMs: o.From.Milliseconds(), ToMs: (o.From + o.Window).Milliseconds(), First: o.First, Scale: 1 / o.Rate,
	})
	if err != nil {
		return nil, fmt.Errorf("demo: cut a %v window at %v out of %s: %w", o.Window, o.From, w.Name, err)
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("demo: the %v window at %v of %s holds no requests", o.Window, o.From, w.Name)
	}
	w.Requests = s
	return w, nil
}
