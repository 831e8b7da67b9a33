package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op is what one Worker.Do did.
type Op struct {
	// Ops is the number of operations in the request (1 for a single
	// GET, the depth of a pipelined burst, the keys of a batch lookup).
	Ops int64
	// Bytes is the payload bytes moved.
	Bytes int64
}

// Worker issues the requests of one connection. Do is called from one
// goroutine at a time; it is timed as one request.
type Worker interface {
	Do(ctx context.Context) (Op, error)
}

// Target is a system under test. Start prepares it for spec (untimed: data
// is stored, servers started) and returns the workers, one per concurrent
// request stream; Close releases everything Start made and waits for every
// goroutine it started. A Target that also implements Annotator may add to
// the Result after the timed run.
type Target interface {
	Start(ctx context.Context, spec Spec) ([]Worker, error)
	Close() error
}

// Annotator is implemented by targets that add figures or notes to a
// Result after the timed run (before Close).
type Annotator interface {
	Annotate(res *Result)
}

// Run validates spec, builds its target, runs it and closes it.
func Run(ctx context.Context, spec Spec) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	return RunTarget(ctx, spec, newTarget(spec.withDefaults()))
}

// newTarget builds the target spec names (spec is valid).
func newTarget(spec Spec) Target {
	switch spec.Target {
	case TargetRAM:
		return &ramTarget{}
	case TargetSSD:
		return &ssdTarget{}
	case TargetNode:
		return &nodeTarget{}
	case TargetMaster:
		return &masterTarget{}
	case TargetMasterIndex:
		return &masterIndexTarget{}
	case TargetSim:
		return &simTarget{}
	case TargetTCP:
		return &tcpTarget{}
	case TargetTCPSet:
		return &tcpTarget{set: true}
	case TargetDisk:
		return &diskTarget{}
	case TargetDiskNode:
		return &diskTarget{node: true}
	case TargetDiskTCP:
		return &diskTCPTarget{}
	case TargetCluster:
		if spec.Netns {
			return &netClusterTarget{}
		}
		return &clusterTarget{}
	case TargetClusterTCP:
		return &clusterTCPTarget{}
	default:
		return &redisTarget{}
	}
}

// RunTarget runs t as spec says: Start, the timed run, Annotate, Close.
// Spec.Target only labels the result here.
func RunTarget(ctx context.Context, spec Spec, t Target) (res Result, err error) {
	if spec.Target == "" {
		spec.Target = "custom"
	}
	spec = spec.withDefaults()
	res = Result{Spec: spec, Name: spec.Target}
	if spec.Target == TargetNode {
		res.Name = spec.Target + "-" + spec.Tier
	}
	if spec.Named {
		res.Name += "-named"
	}
	defer func() {
		if cerr := t.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench %s: close: %w", res.Name, cerr)
		}
	}()
	workers, err := t.Start(ctx, spec)
	if err != nil {
		return res, fmt.Errorf("bench %s: start: %w", res.Name, err)
	}
	if len(workers) == 0 {
		return res, fmt.Errorf("bench %s: start: target returned no workers", res.Name)
	}
	if err := timed(ctx, spec, workers, &res); err != nil {
		return res, fmt.Errorf("bench %s: %w", res.Name, err)
	}
	if a, ok := t.(Annotator); ok {
		a.Annotate(&res)
	}
	return res, nil
}

// timed runs the workers until the duration has passed or Count requests
// have started, and fills res.
func timed(ctx context.Context, spec Spec, workers []Worker, res *Result) error {
	var (
		stop     atomic.Bool
		started  atomic.Int64
		ops      atomic.Int64
		bytes    atomic.Int64
		firstErr error
		errOnce  sync.Once
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	lat := make([][]time.Duration, len(workers))
	t0 := time.Now()
	var timer *time.Timer
	if spec.Count == 0 {
		timer = time.AfterFunc(spec.Duration, func() { stop.Store(true) })
	}
	progressDone := make(chan struct{})
	progressStopped := make(chan struct{})
	go func() {
		defer close(progressStopped)
		progress(spec, t0, &ops, &bytes, progressDone)
	}()
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			for !stop.Load() {
				if ctx.Err() != nil {
					fail(ctx.Err())
					return
				}
				if spec.Count > 0 && started.Add(1) > spec.Count {
					return
				}
				s := time.Now()
				op, err := w.Do(ctx)
				lat[i] = append(lat[i], time.Since(s))
				if err != nil {
					fail(fmt.Errorf("worker %d request %d: %w", i, len(lat[i]), err))
					return
				}
				ops.Add(op.Ops)
				bytes.Add(op.Bytes)
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	if timer != nil {
		timer.Stop()
	}
	close(progressDone)
	<-progressStopped
	if firstErr != nil {
		return firstErr
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	res.Seconds = el.Seconds()
	res.Requests = int64(len(all))
	res.Ops = ops.Load()
	res.Bytes = bytes.Load()
	if res.Seconds > 0 {
		res.OpsPerSec = float64(res.Ops) / res.Seconds
		res.GBPerSec = float64(res.Bytes) / res.Seconds / 1e9
	}
	if len(all) > 0 {
		res.P50Micros = micros(percentile(all, 50))
		res.P99Micros = micros(percentile(all, 99))
		res.MaxMicros = micros(all[len(all)-1])
	}
	return nil
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// progress writes a progress line to spec.Progress every
// spec.ProgressEvery once ProgressAfter has passed, until done closes.
func progress(spec Spec, t0 time.Time, ops, bytes *atomic.Int64, done <-chan struct{}) {
	if spec.Progress == nil {
		return
	}
	first := time.NewTimer(min(ProgressAfter, spec.ProgressEvery*2))
	defer first.Stop()
	select {
	case <-done:
		return
	case <-first.C:
	}
	tick := time.NewTicker(spec.ProgressEvery)
	defer tick.Stop()
	for {
		el := time.Since(t0).Seconds()
		line := fmt.Sprintf("bench %s: %.1fs %d ops %.0f ops/s %.2f GB/s", spec.Target, el, ops.Load(), float64(ops.Load())/el, float64(bytes.Load())/el/1e9)
		if spec.Count == 0 {
			line += fmt.Sprintf(" (of %v)", spec.Duration)
		}
		if _, err := fmt.Fprintln(spec.Progress, line); err != nil {
			return // progress is best effort: a broken terminal does not stop the run
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// errShort is returned when a target moves fewer bytes than a block.
var errShort = errors.New("short value")
