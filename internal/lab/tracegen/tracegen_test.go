package tracegen

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/lab/tracestat"
	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
)

// strictReread writes reqs and reads them back with the strict reader.
func strictReread(t *testing.T, reqs []trace.Request) []trace.Request {
	t.Helper()
	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	for _, r := range reqs {
		if err := w.Write(r); err != nil {
			t.Fatalf("generated request is invalid: %v", err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := trace.ReadAll(trace.NewReader(&buf, "gen", trace.ReadOptions{}))
	if err != nil {
		t.Fatalf("generated trace fails the strict reader: %v", err)
	}
	return back
}

func TestGenerate(t *testing.T) {
	chat := ChatOptions()
	chat.Requests = 3000
	tests := []struct {
		name      string
		opts      Options
		wantN     int
		wantReuse bool
	}{
		{"zero options: single turn, no system prompt", Options{}, DefaultRequests, false},
		{"single turn, heavy tails", Options{Requests: 500, Input: LengthDist{Mean: 20000, Sigma: 2}, Output: LengthDist{Mean: 10, Sigma: 2}}, 500, false},
		{"chat preset", chat, 3000, true},
		{"system prompts only", Options{Requests: 300, SystemPrompts: 2}, 300, true},
		{"turns only", Options{Requests: 300, MeanTurns: 3, ThinkTime: time.Second}, 300, true},
		{"short context cap", Options{Requests: 300, MeanTurns: 10, SystemPrompts: 1, SystemPromptBlocks: 1, MaxInputTokens: 4000}, 300, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Generate(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.wantN {
				t.Fatalf("got %d requests, want %d", len(got), tt.wantN)
			}
			if back := strictReread(t, got); !reflect.DeepEqual(back, got) {
				t.Fatal("generated trace changed on re-read")
			}
			again, _ := Generate(tt.opts)
			if !reflect.DeepEqual(again, got) {
				t.Fatal("same options, different trace")
			}
			other := tt.opts
			other.Seed++
			if o, _ := Generate(other); reflect.DeepEqual(o, got) {
				t.Fatal("different seeds, same trace")
			}
			// Ids are numbered 0, 1, 2, ... in order of first appearance.
			next := uint64(0)
			for _, r := range got {
				for _, id := range r.HashIDs {
					if id > next {
						t.Fatalf("id %d appears before id %d", id, next)
					}
					if id == next {
						next++
					}
				}
			}
			max := tt.opts.WithDefaults().MaxInputTokens
			for _, r := range got {
				if r.InputLength > max {
					t.Fatalf("input length %d over MaxInputTokens %d", r.InputLength, max)
				}
			}
			ratio := tracestat.Compute(got).InfiniteCache.TokenRatio
			if tt.wantReuse && ratio <= 0 {
				t.Fatalf("infinite-cache hit ratio %v, want > 0", ratio)
			}
			if !tt.wantReuse && ratio != 0 {
				t.Fatalf("infinite-cache hit ratio %v, want 0 (single turns, no system prompt)", ratio)
			}
		})
	}
}

// TestTurnsExtendPreviousPrompt checks the prefix semantics exactly. With a
// fixed 1,000-token user message each session's first block is a full,
// unique block, so requests sharing a first id are one session's turns.
func TestTurnsExtendPreviousPrompt(t *testing.T) {
	reqs, err := Generate(Options{Requests: 2000, MeanTurns: 5, Input: LengthDist{Mean: 1000}, Output: LengthDist{Mean: 300, Sigma: 1}})
	if err != nil {
		t.Fatal(err)
	}
	last := map[uint64]trace.Request{}
	seen := map[uint64]bool{}
	extensions := 0
	for i, r := range reqs {
		p, ok := last[r.HashIDs[0]]
		if ok {
			extensions++
			if want := p.InputLength + p.OutputLength + 1000; r.InputLength != want {
				t.Fatalf("request %d: input %d, want previous prompt %d + output %d + 1000", i, r.InputLength, p.InputLength, p.OutputLength)
			}
			full := p.InputLength / trace.BlockTokens
			if !reflect.DeepEqual(r.HashIDs[:full], p.HashIDs[:full]) {
				t.Fatalf("request %d does not start with the previous turn's %d full blocks", i, full)
			}
			for _, id := range r.HashIDs[full:] {
				if seen[id] {
					t.Fatalf("request %d: block %d after the shared prefix is not fresh", i, id)
				}
			}
		} else if r.InputLength != 1000 {
			t.Fatalf("request %d: first turn has %d tokens, want 1000", i, r.InputLength)
		}
		for _, id := range r.HashIDs {
			seen[id] = true
		}
		last[r.HashIDs[0]] = r
	}
	if extensions < 1000 {
		t.Fatalf("only %d later turns among 2000 requests with 5 turns on average", extensions)
	}
}

// TestChatOptionsFigures pins the figures ChatOptions documents.
func TestChatOptionsFigures(t *testing.T) {
	o := ChatOptions()
	o.Requests = 12000
	reqs, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	s := tracestat.Compute(reqs)
	near := func(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }
	if !near(s.Input.Mean, 10983, 1) || !near(s.Output.Mean, 342, 1) || !near(s.InfiniteCache.TokenRatio, 0.445, 0.001) ||
		!near(s.UsedOnceShare, 0.703, 0.001) || !near(s.RatePerSecond, 3.38, 0.01) {
		t.Fatalf("ChatOptions figures moved: mean in/out %.0f/%.0f, token hit %.4f, used once %.4f, rate %.3f; update the doc comment",
			s.Input.Mean, s.Output.Mean, s.InfiniteCache.TokenRatio, s.UsedOnceShare, s.RatePerSecond)
	}
}

func TestDurationAndRate(t *testing.T) {
	reqs, err := Generate(Options{Duration: 10 * time.Minute, Rate: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.Timestamp >= (10 * time.Minute).Milliseconds() {
			t.Fatalf("timestamp %d at or past the 10 min duration", r.Timestamp)
		}
	}
	// 6,000 expected; Poisson sd ≈ 77, so ±5% is over 3 sd.
	if n := len(reqs); n < 5700 || n > 6300 {
		t.Fatalf("got %d requests in 10 min at 10 req/s, want about 6000", n)
	}
	both, err := Generate(Options{Duration: 10 * time.Minute, Rate: 10, Requests: 100})
	if err != nil || len(both) != 100 {
		t.Fatalf("Requests and Duration: got %d, %v; want the 100-request limit to bind", len(both), err)
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		opts  Options
		field string
	}{
		{Options{Requests: -1}, "Requests"},
		{Options{Duration: -1}, "Duration"},
		{Options{Rate: -1}, "Rate"},
		{Options{Rate: 1e-9}, "Rate"},
		{Options{SystemPrompts: -1}, "SystemPrompts"},
		{Options{SystemPromptBlocks: -1}, "SystemPromptBlocks"},
		{Options{MeanTurns: 0.5}, "MeanTurns"},
		{Options{ThinkTime: -time.Second}, "ThinkTime"},
		{Options{Input: LengthDist{Mean: -1}}, "Input.Mean"},
		{Options{Output: LengthDist{Mean: 10, Sigma: -1}}, "Output.Sigma"},
		{Options{MaxInputTokens: -1}, "MaxInputTokens"},
		{Options{SystemPrompts: 1, SystemPromptBlocks: 8, MaxInputTokens: 4096}, "SystemPromptBlocks"},
		{Options{SystemPrompts: 1, SystemPromptBlocks: math.MaxInt}, "SystemPromptBlocks"}, // blocks × tokens overflows
	} {
		err := tt.opts.Validate()
		if e, _ := option.Innermost(err, func(string) (string, bool) { return "", true }); e == nil || e.Field != tt.field {
			t.Errorf("%+v: err = %v, want one naming %s", tt.opts, err, tt.field)
		}
		if _, err := Generate(tt.opts); err == nil {
			t.Errorf("%+v: Generate accepted invalid options", tt.opts)
		}
	}
}

func TestWrite(t *testing.T) {
	var buf bytes.Buffer
	n, err := Write(context.Background(), trace.NewWriter(&buf), Options{Requests: 50})
	if err != nil || n != 50 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	reqs, err := trace.ReadAll(trace.NewReader(&buf, "w", trace.ReadOptions{}))
	if err != nil || len(reqs) != 50 {
		t.Fatalf("re-read %d, %v", len(reqs), err)
	}
	want, _ := Generate(Options{Requests: 50})
	if !reflect.DeepEqual(reqs, want) {
		t.Fatal("Write and Generate differ")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Write(ctx, trace.NewWriter(&buf), Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
}

func BenchmarkGenerateChat(b *testing.B) {
	o := ChatOptions()
	o.Requests = 10000
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Generate(o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(o.Requests)*float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// TestSessionRateUnderflow checks that a session rate so low that the
// gap to the next session is infinite (a huge MeanTurns) ends in the
// trace-time error, not in starting sessions at +Inf for ever.
func TestSessionRateUnderflow(t *testing.T) {
	for _, turns := range []float64{1e300, 1e308} {
		if _, err := Generate(Options{Requests: 10, MeanTurns: turns}); err == nil {
			t.Errorf("MeanTurns %g: no error, want the trace time passed", turns)
		}
	}
}
