package bench

import (
	"context"
	"fmt"

	"github.com/kvpool/kvpool/internal/lab/hitrate"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/trace"
)

// simTarget replays a trace through the hit-ratio engine (one LRU cache of
// DefaultSimCapacity blocks); each request is one whole replay, its ops
// the block accesses.
type simTarget struct{}

func (t *simTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	var (
		reqs []trace.Request
		err  error
	)
	if spec.TracePath != "" {
		reqs, err = trace.ReadFile(spec.TracePath, trace.ReadOptions{})
		if err != nil {
			return nil, fmt.Errorf("read trace %s: %w", spec.TracePath, err)
		}
	} else if reqs, err = tracegen.Generate(tracegen.ChatOptions()); err != nil {
		return nil, fmt.Errorf("generate a chat trace: %w", err)
	}
	ws := make([]Worker, spec.Conns)
	for i := range ws {
		ws[i] = &simWorker{reqs: reqs, opts: hitrate.Options{Capacity: DefaultSimCapacity}}
	}
	return ws, nil
}

func (t *simTarget) Close() error { return nil }

type simWorker struct {
	reqs []trace.Request
	opts hitrate.Options
}

func (w *simWorker) Do(ctx context.Context) (Op, error) {
	res, err := hitrate.Run(w.reqs, w.opts)
	if err != nil {
		return Op{}, fmt.Errorf("replay %d requests: %w", len(w.reqs), err)
	}
	return Op{Ops: res.Accesses}, nil
}
