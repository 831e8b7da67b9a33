// Package tracegen generates synthetic request traces in the Mooncake
// FAST'25 format: Poisson session arrivals, shared system prompts, and
// multi-turn sessions whose every turn's prompt extends the previous turn's
// prompt and output, so prefix reuse arises the way it does in chat
// serving.
//
// Hash ids follow the published traces' semantics: a block's id names its
// tokens and everything before them. A new turn keeps the ids of the
// previous prompt's FULL blocks; the previous prompt's partial last block
// gets new tokens appended, so it (and every block after it) gets a fresh
// id. (The published synthetic trace behaves the same way: in 298 of 298
// turn pairs whose earlier prompt ends in a partial block, that block's id
// is not reused.) Ids are numbered from 0 in order of first appearance, as
// in the published files. Output is deterministic for a seed and always
// passes the strict trace reader.
package tracegen

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/trace"
)

// LengthDist is a log-normal distribution of token counts with the given
// mean; Sigma is the standard deviation of the underlying normal (the
// shape: 0 gives exactly Mean every time, 1 a long tail). Samples are
// rounded and at least 1. The zero value means the field's default.
type LengthDist struct {
	// Mean is the mean length in tokens (> 0; 0 means the default).
	Mean float64
	// Sigma is the log-space standard deviation (>= 0).
	Sigma float64
}

func (d LengthDist) sample(rng *rand.Rand) int {
	if d.Sigma == 0 {
		return max(1, int(math.Round(d.Mean)))
	}
	mu := math.Log(d.Mean) - d.Sigma*d.Sigma/2
	x := math.Exp(mu + d.Sigma*rng.NormFloat64())
	if x > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(1, int(math.Round(x)))
}

func (d LengthDist) validate(field string) error {
	switch {
	case math.IsNaN(d.Mean) || math.IsInf(d.Mean, 0) || d.Mean < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf(field+".Mean", "%v: want > 0 (0 means default)", d.Mean))
	case math.IsNaN(d.Sigma) || math.IsInf(d.Sigma, 0) || d.Sigma < 0 || d.Sigma > 5:
		return fmt.Errorf("tracegen: %w", option.Errorf(field+".Sigma", "%v: want in [0, 5]", d.Sigma))
	}
	return nil
}

// Defaults used for zero fields of Options.
const (
	// DefaultRequests is the trace length when neither Requests nor
	// Duration is set.
	DefaultRequests = 1000
	// DefaultRate is the conversation trace's mean arrival rate
	// (12,031 requests over 3,537 s ≈ 3.4 req/s, tracestat).
	DefaultRate = 3.4
	// DefaultSystemPromptBlocks is the length of a system prompt when
	// SystemPrompts > 0: 4 blocks = 2,048 tokens, a typical agent or chat
	// system prompt.
	DefaultSystemPromptBlocks = 4
	// DefaultThinkTime is the mean gap between a session's turns: one
	// minute of generation plus reading and typing.
	DefaultThinkTime = time.Minute
	// DefaultMaxInputTokens ends a session whose prompt would exceed it:
	// the 128k context window of LLaMA3-class models (the paper's model).
	DefaultMaxInputTokens = 128 << 10
)

// The zero-value length distributions. The input mean is a round 2,048
// new tokens per turn; the output mean is the conversation trace's mean
// output (343 tokens, tracestat). The sigmas give long tails like the
// published traces' (median output 350 but p99 1,120 in the conversation
// trace); they are round figures, not fits.
const (
	DefaultInputMean   = 2048
	DefaultInputSigma  = 1.0
	DefaultOutputMean  = 343
	DefaultOutputSigma = 0.8
)

// Options describes the workload. The zero value generates DefaultRequests
// independent single-turn requests with no shared system prompt; see
// ChatOptions for a multi-turn chat preset.
type Options struct {
	// Seed selects the random stream; the same Options give the same trace.
	Seed uint64
	// Requests is the number of requests to generate; 0 means no count
	// limit if Duration is set, else DefaultRequests.
	Requests int
	// Duration stops generation at this trace time; 0 means no limit.
	Duration time.Duration
	// Rate is the mean request arrival rate in requests per second; 0
	// means DefaultRate. Sessions arrive as a Poisson process at
	// Rate / MeanTurns, so the request rate is approximately Rate (lower
	// when sessions are cut short by MaxInputTokens or Duration).
	Rate float64
	// SystemPrompts is the number of distinct shared system prompts; each
	// session starts with one chosen uniformly. 0 means none.
	SystemPrompts int
	// SystemPromptBlocks is each system prompt's length in whole blocks;
	// 0 means DefaultSystemPromptBlocks.
	SystemPromptBlocks int
	// MeanTurns is the mean number of turns per session (geometric
	// distribution, at least 1); 0 means 1 (single-turn sessions).
	MeanTurns float64
	// ThinkTime is the mean gap between consecutive turns of a session
	// (exponential); 0 means DefaultThinkTime.
	ThinkTime time.Duration
	// Input is the distribution of the new tokens a turn adds (the user
	// message); zero means mean 2,048 with Sigma 1.
	Input LengthDist
	// Output is the distribution of output lengths; zero means mean 343
	// with Sigma 0.8.
	Output LengthDist
	// MaxInputTokens caps a prompt: a session ends rather than exceed it;
	// 0 means DefaultMaxInputTokens.
	MaxInputTokens int
}

// ChatOptions returns a multi-turn chat preset whose figures resemble the
// published conversation trace: 16 system prompts of 4 blocks, 1.5 turns
// per session on average, 6,000 new tokens per turn (log-normal, Sigma 1),
// one minute between turns, 3.4 req/s. Measured with tracestat on 12,000
// requests, seed 0: mean input/output 10,983/342 tokens, infinite-cache
// token hit ratio 44.5%, 70.3% of unique blocks used once, 3.38 req/s
// (conversation trace: 12,035/343, 37.4%, 75.8%, 3.40 req/s). The values
// were picked from a small sweep (turns 1.5–3, input 4k–8k), not fitted.
func ChatOptions() Options {
	return Options{
		SystemPrompts:      16,
		SystemPromptBlocks: 4,
		MeanTurns:          1.5,
		Input:              LengthDist{Mean: 6000, Sigma: 1.0},
	}
}

// Validate reports the first invalid field of o.
func (o Options) Validate() error {
	switch {
	case o.Requests < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf("Requests", "%d: want >= 0", o.Requests))
	case o.Duration < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf("Duration", "%v: want >= 0", o.Duration))
	case math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) || o.Rate < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf("Rate", "%v: want > 0 req/s (0 means default)", o.Rate))
	case o.Rate != 0 && o.Rate < 1e-6:
		return fmt.Errorf("tracegen: %w", option.Errorf("Rate", "%v: want >= 1e-6 req/s", o.Rate))
	case o.SystemPrompts < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf("SystemPrompts", "%d: want >= 0", o.SystemPrompts))
	case o.SystemPromptBlocks < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf("SystemPromptBlocks", "%d: want >= 0", o.SystemPromptBlocks))
	case math.IsNaN(o.MeanTurns) || math.IsInf(o.MeanTurns, 0) || (o.MeanTurns != 0 && o.MeanTurns < 1):
		return fmt.Errorf("tracegen: %w", option.Errorf("MeanTurns", "%v: want >= 1", o.MeanTurns))
	case o.ThinkTime < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf("ThinkTime", "%v: want >= 0", o.ThinkTime))
	case o.MaxInputTokens < 0:
		return fmt.Errorf("tracegen: %w", option.Errorf("MaxInputTokens", "%d: want >= 0", o.MaxInputTokens))
	}
	if err := o.Input.validate("Input"); err != nil {
		return err
	}
	if err := o.Output.validate("Output"); err != nil {
		return err
	}
	d := o.WithDefaults()
	// SystemPromptBlocks*BlockTokens >= MaxInputTokens, without the
	// product overflowing for a huge SystemPromptBlocks.
	if d.SystemPrompts > 0 && d.SystemPromptBlocks > (d.MaxInputTokens-1)/trace.BlockTokens {
		return fmt.Errorf("tracegen: %w", option.Errorf("SystemPromptBlocks", "%d blocks leave no room under the largest prompt (%d tokens)",
			d.SystemPromptBlocks, d.MaxInputTokens))
	}
	return nil
}

// WithDefaults returns o with every zero field replaced by its default (the
// values Generate uses).
func (o Options) WithDefaults() Options {
	if o.Requests == 0 && o.Duration == 0 {
		o.Requests = DefaultRequests
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.SystemPromptBlocks == 0 {
		o.SystemPromptBlocks = DefaultSystemPromptBlocks
	}
	if o.MeanTurns == 0 {
		o.MeanTurns = 1
	}
	if o.ThinkTime == 0 {
		o.ThinkTime = DefaultThinkTime
	}
	if o.Input.Mean == 0 {
		o.Input = LengthDist{Mean: DefaultInputMean, Sigma: DefaultInputSigma}
	}
	if o.Output.Mean == 0 {
		o.Output = LengthDist{Mean: DefaultOutputMean, Sigma: DefaultOutputSigma}
	}
	if o.MaxInputTokens == 0 {
		o.MaxInputTokens = DefaultMaxInputTokens
	}
	return o
}

// session is one conversation in progress.
type session struct {
	turnsLeft int
	prompt    int      // tokens of the last prompt: blocks covers exactly these
	tokens    int      // prompt plus the last turn's output: the next prompt's prefix
	blocks    []uint64 // content ids of the last prompt's blocks (last may be partial)
}

// event is a turn due at time at (ms, float to avoid drift).
type event struct {
	at  float64
	seq uint64
	s   *session
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// Generator produces a trace one request at a time. It is not safe for
// concurrent use.
type Generator struct {
	o         Options
	rng       *rand.Rand
	queue     eventQueue
	seq       uint64
	nextStart float64 // ms
	content   uint64  // next fresh content id
	sys       [][]uint64
	label     map[uint64]uint64 // content id → output id, by first appearance
	emitted   int
	done      bool
}

// New returns a Generator for opts.
func New(opts Options) (*Generator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.WithDefaults()
	g := &Generator{
		o:     o,
		rng:   rand.New(rand.NewPCG(o.Seed, 0x6b76706f6f6c)), // "kvpool"
		label: make(map[uint64]uint64),
	}
	for range o.SystemPrompts {
		ids := make([]uint64, o.SystemPromptBlocks)
		for i := range ids {
			ids[i] = g.fresh()
		}
		g.sys = append(g.sys, ids)
	}
	return g, nil
}

func (g *Generator) fresh() uint64 {
	g.content++
	return g.content
}

// sessionRatePerMs is the Poisson rate of new sessions per millisecond.
func (g *Generator) sessionRatePerMs() float64 {
	return g.o.Rate / g.o.MeanTurns / 1000
}

func (g *Generator) turns() int {
	if g.o.MeanTurns <= 1 {
		return 1
	}
	p := 1 / g.o.MeanTurns
	u := 1 - g.rng.Float64() // (0, 1]
	return 1 + int(math.Floor(math.Log(u)/math.Log1p(-p)))
}

// maxTimeMs bounds trace time so timestamps stay exact in float64 and far
// from int64 overflow (2^53 ms is 285,000 years).
const maxTimeMs = 1 << 53

// errTimePassed is the error of a trace whose time would pass maxTimeMs.
var errTimePassed = fmt.Errorf("tracegen: trace time passed %d ms; lower the number of requests, raise the rate or lower the mean turns per session", int64(maxTimeMs))

// Next returns the next request in timestamp order, or io.EOF when the
// trace is complete.
func (g *Generator) Next() (trace.Request, error) {
	for !g.done {
		if g.o.Requests > 0 && g.emitted >= g.o.Requests {
			g.done = true
			break
		}
		if len(g.queue) == 0 || g.nextStart <= g.queue[0].at {
			if g.nextStart >= maxTimeMs {
				// A session rate so low that the next one is due past
				// the bound (+Inf when the gap overflows): without this,
				// sessions due at +Inf would start for ever.
				return trace.Request{}, errTimePassed
			}
			// Start a session: its first turn is due now.
			s := &session{turnsLeft: g.turns()}
			if len(g.sys) > 0 {
				s.blocks = append(s.blocks, g.sys[g.rng.IntN(len(g.sys))]...)
				s.prompt = len(s.blocks) * trace.BlockTokens
				s.tokens = s.prompt
			}
			g.push(g.nextStart, s)
			g.nextStart += g.rng.ExpFloat64() / g.sessionRatePerMs()
			continue
		}
		e := heap.Pop(&g.queue).(event)
		if e.at >= maxTimeMs {
			return trace.Request{}, errTimePassed
		}
		ts := int64(math.Floor(e.at))
		if g.o.Duration > 0 && ts >= g.o.Duration.Milliseconds() {
			g.done = true
			break
		}
		req, more := g.turn(e.s, ts)
		if more {
			g.push(e.at+g.rng.ExpFloat64()*float64(g.o.ThinkTime.Milliseconds()), e.s)
		}
		g.emitted++
		return req, nil
	}
	return trace.Request{}, io.EOF
}

func (g *Generator) push(at float64, s *session) {
	g.seq++
	heap.Push(&g.queue, event{at: at, seq: g.seq, s: s})
}

// turn emits session s's next turn at ts and reports whether the session
// continues.
func (g *Generator) turn(s *session, ts int64) (trace.Request, bool) {
	room := g.o.MaxInputTokens - s.tokens
	add := min(g.o.Input.sample(g.rng), room)
	// Keep the last prompt's full blocks; its partial last block gets new
	// tokens appended, so it and every block after it get fresh ids.
	s.blocks = s.blocks[:s.prompt/trace.BlockTokens]
	s.tokens += add
	s.prompt = s.tokens
	for len(s.blocks) < trace.Blocks(s.tokens) {
		s.blocks = append(s.blocks, g.fresh())
	}
	out := g.o.Output.sample(g.rng)
	req := trace.Request{
		Timestamp:    ts,
		InputLength:  s.tokens,
		OutputLength: out,
		HashIDs:      make([]uint64, len(s.blocks)),
	}
	for i, c := range s.blocks {
		id, ok := g.label[c]
		if !ok {
			id = uint64(len(g.label))
			g.label[c] = id
		}
		req.HashIDs[i] = id
	}
	s.turnsLeft--
	s.tokens += out // the next prompt contains this turn's output
	more := s.turnsLeft > 0 && s.tokens < g.o.MaxInputTokens
	return req, more
}

// Generate returns a whole trace for opts.
func Generate(opts Options) ([]trace.Request, error) {
	g, err := New(opts)
	if err != nil {
		return nil, err
	}
	var out []trace.Request
	for {
		r, err := g.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
}

// ctxCheckEvery is how many requests Write generates between context
// checks: about a millisecond of work.
const ctxCheckEvery = 1024

// Write generates a trace for opts into w, flushes it, and returns the
// number of requests written.
func Write(ctx context.Context, w *trace.Writer, opts Options) (int, error) {
	g, err := New(opts)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		if n%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return n, fmt.Errorf("tracegen: generate: %w", err)
			}
		}
		r, err := g.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		if err := w.Write(r); err != nil {
			return n, fmt.Errorf("tracegen: %w", err)
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return n, fmt.Errorf("tracegen: %w", err)
	}
	return n, nil
}
