package replay

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvpool/kvpool/internal/lab/sim"
)

// progressWidth is the bar's width in characters: 24 leaves room for the
// counters on an 80-column terminal.
const progressWidth = 24

// progressState is what one progress line shows.
type progressState struct {
	elapsed   time.Duration
	done, all int
	// fraction of the requests finished, for the bar and the ETA.
	fraction float64
	hitRatio float64
	ttftP50  float64 // model seconds
}

// renderProgress formats one progress line (no \r, no newline).
func renderProgress(p progressState) string {
	f := min(max(p.fraction, 0), 1)
	n := int(f * progressWidth)
	bar := strings.Repeat("=", n) + strings.Repeat(" ", progressWidth-n)
	eta := "?"
	if f > 0 {
		eta = (time.Duration(float64(p.elapsed)/f) - p.elapsed).Round(time.Second).String()
	}
	return fmt.Sprintf("[%s] %3.0f%% %s elapsed, ETA %s | %d/%d done | hit %.1f%% | TTFT p50 %.2fs ",
		bar, 100*f, p.elapsed.Round(time.Second), eta, p.done, p.all, 100*p.hitRatio, p.ttftP50)
}

// startProgress starts the progress goroutine when a writer is set and
// returns the function that stops it (writing a final line). On a
// terminal (ProgressTerminal) the line is redrawn in place, with \r,
// every ProgressEvery; elsewhere (a file, a pipe) a whole line is
// written every ProgressLineEvery, so that a log holds readable lines.
func (r *runner) startProgress() (stop func()) {
	if r.o.Progress == nil {
		return func() {}
	}
	w := r.o.Progress
	every, prefix, suffix := r.o.ProgressLineEvery, "", "\n"
	if r.o.ProgressTerminal {
		every, prefix, suffix = r.o.ProgressEvery, "\r", ""
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				io.WriteString(w, prefix+renderProgress(r.snapshot())+"\n")
				return
			case <-t.C:
				io.WriteString(w, prefix+renderProgress(r.snapshot())+suffix)
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
	}
}

// snapshot reads the run's progress.
func (r *runner) snapshot() progressState {
	p := progressState{all: len(r.reqs)}
	p.elapsed = time.Since(r.start)
	p.done = int(r.completed.Load())
	if in := r.inTok.Load(); in > 0 {
		p.hitRatio = float64(r.hitTok.Load()) / float64(in)
	}
	if p.all > 0 {
		// Finished requests, not dispatched ones: a run that falls
		// behind its schedule shows it.
		p.fraction = float64(p.done) / float64(p.all)
	}
	r.recMu.Lock()
	var ttfts []float64
	for k, d := range r.done {
		if d {
			ttfts = append(ttfts, r.records[k].TTFT)
		}
	}
	r.recMu.Unlock()
	slices.Sort(ttfts)
	p.ttftP50 = sim.Percentile(ttfts, 0.5)
	return p
}
