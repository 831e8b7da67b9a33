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
	// fraction of the trace's model time dispatched, for the ETA.
	fraction float64
	hitRatio float64
	ttftP50  float64 // model seconds
}

// renderProgress formats one progress line (no newline; it starts with
// \r so that it overwrites the previous one).
func renderProgress(p progressState) string {
	f := min(max(p.fraction, 0), 1)
	n := int(f * progressWidth)
	bar := strings.Repeat("=", n) + strings.Repeat(" ", progressWidth-n)
	eta := "?"
	if f > 0 {
		eta = (time.Duration(float64(p.elapsed)/f) - p.elapsed).Round(time.Second).String()
	}
	return fmt.Sprintf("\r[%s] %3.0f%% %s elapsed, ETA %s | %d/%d done | hit %.1f%% | TTFT p50 %.2fs ",
		bar, 100*f, p.elapsed.Round(time.Second), eta, p.done, p.all, 100*p.hitRatio, p.ttftP50)
}

// startProgress starts the progress goroutine when a writer is set and
// returns the function that stops it (writing a final line).
func (r *runner) startProgress() (stop func()) {
	if r.o.Progress == nil {
		return func() {}
	}
	w := r.o.Progress
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.o.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				io.WriteString(w, renderProgress(r.snapshot())+"\n")
				return
			case <-t.C:
				io.WriteString(w, renderProgress(r.snapshot()))
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
	if r.start.IsZero() {
		return p
	}
	p.elapsed = time.Since(r.start)
	p.done = int(r.completed.Load())
	if in := r.inTok.Load(); in > 0 {
		p.hitRatio = float64(r.hitTok.Load()) / float64(in)
	}
	span := r.arr[len(r.arr)-1]
	if span > 0 {
		p.fraction = p.elapsed.Seconds() * r.o.Speed / span
	} else if p.all > 0 {
		p.fraction = float64(p.done) / float64(p.all)
	}
	if p.done == p.all {
		p.fraction = 1
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
