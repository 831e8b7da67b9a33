// Package parallel runs a list of independent experiments on a bounded
// number of goroutines, with a progress line per finished experiment and
// fail-fast cancellation. The report builders (compare, policylab) use it
// to spread simulations over the machine's cores.
package parallel

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Job is one experiment. Run must write only its own, pre-allocated part of
// the caller's result, so that jobs need no lock between them, and should
// return promptly once ctx is done.
type Job struct {
	// Name labels the job in progress lines and errors.
	Name string
	// Run does the work.
	Run func(ctx context.Context) error
}

// Run runs jobs on at most workers goroutines (at least one), starting them
// in the order given (put the longest first for the shortest makespan).
// After each job that succeeds it writes one progress line to progress, when
// not nil. The first error cancels the jobs not yet finished and is
// returned wrapped with its job's name; otherwise Run returns ctx's error,
// if any. Run returns only after every goroutine it started has ended.
func Run(ctx context.Context, jobs []Job, workers int, progress io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var (
		mu       sync.Mutex
		done     int
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan Job)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				t0 := time.Now()
				err := j.Run(ctx)
				mu.Lock()
				done++
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", j.Name, err)
					cancel()
				}
				if progress != nil && err == nil {
					fmt.Fprintf(progress, "[%3d/%d %6.1fs] %s (%.2fs)\n", done, len(jobs), time.Since(start).Seconds(), j.Name, time.Since(t0).Seconds())
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
