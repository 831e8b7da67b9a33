package parallel

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

func TestRunAll(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 16} {
		results := make([]int, 10)
		var jobs []Job
		for i := range results {
			jobs = append(jobs, Job{Name: "job", Run: func(context.Context) error { results[i] = i * i; return nil }})
		}
		var progress bytes.Buffer
		if err := Run(context.Background(), jobs, workers, &progress); err != nil {
			t.Fatalf("workers %d: %v", workers, err)
		}
		for i, r := range results {
			if r != i*i {
				t.Errorf("workers %d: result %d = %d, want %d", workers, i, r, i*i)
			}
		}
		if got := strings.Count(progress.String(), "\n"); got != len(jobs) {
			t.Errorf("workers %d: %d progress lines, want %d", workers, got, len(jobs))
		}
		if !strings.Contains(progress.String(), "[ 10/10") {
			t.Errorf("workers %d: progress does not count to 10/10:\n%s", workers, progress.String())
		}
	}
}

func TestRunFirstErrorCancels(t *testing.T) {
	boom := errors.New("boom")
	var started atomic.Int32
	jobs := []Job{{Name: "bad", Run: func(context.Context) error { started.Add(1); return boom }}}
	for range 50 {
		jobs = append(jobs, Job{Name: "good", Run: func(ctx context.Context) error {
			started.Add(1)
			<-ctx.Done() // would block forever without the cancellation
			return ctx.Err()
		}})
	}
	err := Run(context.Background(), jobs, 2, nil)
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "bad: ") {
		t.Fatalf("err = %v; want the first job's error named by the job", err)
	}
	if n := started.Load(); n == int32(len(jobs)) {
		t.Errorf("all %d jobs started after the first failed; want the feed to stop", n)
	}
}

func TestRunCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A job may or may not start before the feed sees the cancellation;
	// either way Run reports it.
	err := Run(ctx, []Job{{Name: "x", Run: func(context.Context) error { return nil }}}, 1, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
}
