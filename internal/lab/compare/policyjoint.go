package compare

import (
	"context"
	"io"
	"slices"

	"github.com/kvpool/kvpool/internal/lab/policylab"
	"github.com/kvpool/kvpool/internal/lab/report"
)

// PolicyJoint returns the policylab.JointFunc through which the policy
// report carries this package's joint routing and placement goodput
// comparison (the Fig 10 cluster, RunJoint): on the traces named by only
// (every trace when empty), once with FIFO queues and no rejection, once
// with Algorithm 1's rejection in every arm. workers and progress are
// JointOptions.Workers and JointOptions.Progress.
func PolicyJoint(only []string, workers int, progress io.Writer) policylab.JointFunc {
	return func(ctx context.Context, traces []policylab.Trace) ([]report.Section, error) {
		var secs []report.Section
		for _, reject := range []bool{false, true} {
			opts := JointOptions{Workers: workers, Progress: progress, Reject: reject}
			for _, t := range traces {
				if len(only) == 0 || slices.Contains(only, t.Name) {
					opts.Traces = append(opts.Traces, Trace{Name: t.Name, Requests: t.Requests})
				}
			}
			res, err := RunJoint(ctx, opts)
			if err != nil {
				return nil, err
			}
			secs = append(secs, res.Section())
		}
		return secs, nil
	}
}
