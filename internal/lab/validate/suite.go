package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kvpool/kvpool/internal/lab/compare"
	"github.com/kvpool/kvpool/internal/lab/replay"
	"github.com/kvpool/kvpool/internal/lab/tracesample"
	"github.com/kvpool/kvpool/trace"
)

// SuiteOptions is one validation suite: the same requests run live and
// simulated under each of Configs, one after the other (kvpool compare
// --validate).
type SuiteOptions struct {
	// Requests are the requests every configuration runs on.
	Requests []trace.Request
	// TraceName, FromSeconds, WindowSeconds and Rate describe where
	// Requests were cut from, for the header line.
	TraceName                  string
	FromSeconds, WindowSeconds float64
	Rate                       float64
	// Notice is a warning about the requests (a fallback to a generated
	// trace), written to Log before anything runs ("" for none).
	Notice string
	// Configs are the configurations to validate, in order.
	Configs []Config
	// Log receives the notice and one line per configuration as it
	// starts, each prefixed by LogPrefix (nil: none).
	Log       io.Writer
	LogPrefix string
	// Quiet drops the per-configuration lines (the notice stays).
	Quiet bool
}

// Validate reports the first bad field by name.
func (o SuiteOptions) Validate() error {
	if len(o.Configs) == 0 {
		return errors.New("validate: no configuration given")
	}
	for i, c := range o.Configs {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("validate: configuration %d (%s): %w", i+1, c.Mode, err)
		}
	}
	if len(o.Requests) == 0 {
		return errors.New("validate: no requests to run")
	}
	return nil
}

// RunSuite runs every configuration of o (Run), writes the header, the
// table (WriteTable) and the verdict line to out, and returns the
// reports. Its error is nil when every configuration passed; it joins the
// failed configurations' errors when any failed, and otherwise wraps
// ErrInconclusive (with each inconclusive configuration's reason and
// suggested speed) when some could not be judged. When ctx ends, the
// configurations not yet run are skipped, the table covers those that
// ran (a cut one marked interrupted), no verdict is given, and the error
// says so, wrapping ctx's cause.
func RunSuite(ctx context.Context, o SuiteOptions, out io.Writer) ([]*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	logf := func(quiet bool, format string, a ...any) {
		if o.Log != nil && !(quiet && o.Quiet) {
			fmt.Fprintf(o.Log, o.LogPrefix+format+"\n", a...)
		}
	}
	if o.Notice != "" {
		logf(false, "NOTICE: %s", o.Notice)
	}
	var reps []*Report
	interrupted := false
	for _, c := range o.Configs {
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		logf(true, "validating %s on %d requests of %s", c.WithDefaults().Name, len(o.Requests), o.TraceName)
		rep, err := Run(ctx, o.Requests, c)
		if err != nil {
			if ctx.Err() != nil {
				interrupted = true
				break
			}
			return nil, err
		}
		reps = append(reps, rep)
		if rep.Live.Partial {
			interrupted = true
			break
		}
	}
	network := ""
	if len(o.Configs) > 0 {
		network = "; network: " + o.Configs[0].ReplayOptions().NetDescription()
	}
	if _, err := fmt.Fprintf(out, "validation on %s: %d requests (%.0f s window from %.0f s, arrivals ×%g%s)\n\n", o.TraceName,
		len(o.Requests), o.WindowSeconds, o.FromSeconds, o.Rate, network); err != nil {
		return nil, fmt.Errorf("validate: write the header: %w", err)
	}
	if err := WriteTable(out, reps); err != nil {
		return nil, err
	}
	if interrupted {
		// An interruption is no verdict: neither the cut configuration
		// nor the suite passes or fails.
		msg := fmt.Sprintf("interrupted after %d of %d configurations (the last one in part)", len(reps), len(o.Configs))
		if _, err := fmt.Fprintf(out, "\nINTERRUPTED: %s; no verdict\n", msg); err != nil {
			return reps, fmt.Errorf("validate: write the verdict: %w", err)
		}
		return reps, fmt.Errorf("validate: %s: %w", msg, context.Cause(ctx))
	}
	var failed, inconclusive []error
	for _, r := range reps {
		switch err := r.Err(); {
		case errors.Is(err, ErrInconclusive):
			inconclusive = append(inconclusive, err)
		case err != nil:
			failed = append(failed, err)
		}
	}
	if err := errors.Join(failed...); err != nil {
		return reps, err
	}
	if len(inconclusive) > 0 {
		speed := 0.0
		for _, r := range reps {
			if r.Verdict == VerdictInconclusive && (speed == 0 || r.SuggestedSpeed < speed) {
				speed = r.SuggestedSpeed
			}
		}
		if _, err := fmt.Fprintf(out, "\nINCONCLUSIVE: nothing judged disagrees, but the machine did not keep up with the live runs, so the checks named above were not judged; rerun with --speed %g\n", speed); err != nil {
			return reps, fmt.Errorf("validate: write the verdict: %w", err)
		}
		return reps, errors.Join(inconclusive...)
	}
	if _, err := fmt.Fprintln(out, "\nPASS: live and simulated runs agree"); err != nil {
		return reps, fmt.Errorf("validate: write the verdict: %w", err)
	}
	return reps, nil
}

// Sample is the subsample of each trace a live arm of kvpool compare
// --live runs on: the window [From, From+Window) of trace time, its first
// First requests (0: all), arrivals multiplied by Rate (> 0).
type Sample struct {
	From, Window time.Duration
	First        int
	Rate         float64
}

// LiveFunc returns the compare.LiveFunc of kvpool compare --live: arm a
// of trace t runs (Run) on the window s of the requests compare already
// read, under cfg with the arm's name, mode, routing and NIC.
func LiveFunc(s Sample, cfg Config) compare.LiveFunc {
	return func(ctx context.Context, t compare.Trace, a compare.Arm, net replay.NetMode) (compare.LiveRow, error) {
		reqs, err := tracesample.Sample(t.Requests, tracesample.Options{FromMs: s.From.Milliseconds(),
			ToMs: (s.From + s.Window).Milliseconds(), First: s.First, Scale: 1 / s.Rate})
		if err != nil {
			return compare.LiveRow{}, fmt.Errorf("subsample %s: %w", t.Name, err)
		}
		if len(reqs) == 0 {
			return compare.LiveRow{}, fmt.Errorf("subsample %s: the %v window at %v holds no requests", t.Name, s.Window, s.From)
		}
		c := cfg
		c.Name, c.Mode, c.Routing, c.NICGbps = a.Name, a.Mode, a.Routing, a.NICGbps
		if net != "" {
			c.Net = net
		}
		rep, err := Run(ctx, reqs, c)
		if err != nil {
			return compare.LiveRow{}, err
		}
		return rep.Row(t.Name, a), nil
	}
}
