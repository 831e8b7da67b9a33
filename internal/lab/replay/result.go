package replay

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kvpool/kvpool/internal/lab/sim"
)

// LiveRecord is the live-time side of one request's record (seconds of
// wall-clock time; sim.Record holds the same intervals in model seconds).
type LiveRecord struct {
	// ID is the request's index in the slice given to Run.
	ID int `json:"id"`
	// Lag is how late the dispatcher started it (live seconds).
	Lag float64 `json:"lag_s"`
	// Queue, Transfer, Prefill and TTFT are live seconds.
	Queue    float64 `json:"queue_s"`
	Transfer float64 `json:"transfer_s"`
	Prefill  float64 `json:"prefill_s"`
	TTFT     float64 `json:"ttft_s"`
	// LocalWait is the part of Prefill the worker spent waiting, after
	// its planned prefill, for the request's local RAM blocks to be read
	// and verified (0 when they were, as usual, done by then).
	LocalWait float64 `json:"local_wait_s"`
}

// Summary is a replay's summary: the simulator's Summary computed the same
// way over the completed requests (times in model seconds), plus what only
// a live run has.
type Summary struct {
	sim.Summary
	// Speed is the time compression S; PayloadBytes the live block size.
	Speed        float64 `json:"speed"`
	PayloadBytes int     `json:"payload_bytes"`
	// PrefillMode and VerifyMode echo the options.
	PrefillMode PrefillMode `json:"prefill_mode"`
	VerifyMode  VerifyMode  `json:"verify_mode"`
	// Partial is set when the run was cut short (context cancelled); the
	// statistics then cover the completed requests only.
	Partial bool `json:"partial"`
	// Completed counts requests that finished their prefill.
	Completed int `json:"completed"`
	// LiveSeconds is the wall-clock duration of the run.
	LiveSeconds float64 `json:"live_seconds"`
	// LagP50 and LagP99 are the dispatcher's lag percentiles (live
	// seconds); KeptUp is false when LagP99 exceeds MaxLagP99: the machine
	// could not keep up with the arrival schedule.
	LagP50 float64 `json:"lag_p50_s"`
	LagP99 float64 `json:"lag_p99_s"`
	KeptUp bool    `json:"kept_up"`
	// VerifiedHits counts the planned hits that were read and verified:
	// every block a plan reuses (local RAM, local SSD, remote) is read
	// through the client, which checks key and checksum, and with
	// VerifyFull compared with its regenerated payload; only a verified
	// block is reused (one planned after a block that failed is verified
	// but not reused: the prefix ended before it).
	VerifiedHits int64 `json:"verified_hits"`
	// WrongBlocks counts received blocks whose bytes differed from their
	// generated payload (VerifyFull only): must be 0. CorruptBlocks counts
	// blocks the node client rejected by checksum or key. Neither is
	// reused: the prefix ends before it and the rest is recomputed.
	WrongBlocks   int64 `json:"wrong_blocks"`
	CorruptBlocks int64 `json:"corrupt_blocks"`
	// FetchFailures and PutFailures count blocks that could not be loaded
	// or stored (missing, node error, timeout).
	FetchFailures int64 `json:"fetch_failures"`
	PutFailures   int64 `json:"put_failures"`
	// LiveBytesRead is the payload bytes of every hit read from the
	// nodes (local and remote); LiveBytesReadRemote the part read from
	// another node than the request's worker's (the modelled network's
	// share). LiveBytesStored is the payload bytes written to the nodes.
	LiveBytesRead       int64 `json:"live_bytes_read"`
	LiveBytesReadRemote int64 `json:"live_bytes_read_remote"`
	LiveBytesStored     int64 `json:"live_bytes_stored"`
	// WarmBlocks is the blocks the nodes already held when the replay
	// started (every tier and tenant): 0 on a fresh cluster. A warm
	// cluster (a second replay on the same nodes) starts with hits a
	// fresh one, and the simulator, would not have.
	WarmBlocks int `json:"warm_blocks"`
	// FirstError is the first unexpected error met (the run carries on);
	// empty when none.
	FirstError string `json:"first_error,omitempty"`
}

// Result is the outcome of Run.
type Result struct {
	// Records has one entry per completed (or rejected) request, in arrival order
	// (model seconds, sim's format: sim.WriteRecordsCSV writes them).
	Records []sim.Record
	// Live has the live-time side of each record, in the same order.
	Live []LiveRecord
	// Summary aggregates Records.
	Summary Summary
}

// result assembles the Result.
func (r *runner) result(partial bool) *Result {
	o := r.o
	res := &Result{}
	for k := range r.records {
		if r.done[k] {
			res.Records = append(res.Records, r.records[k])
			res.Live = append(res.Live, r.live[k])
		}
	}
	s := Summary{
		Summary: sim.Summary{
			Mode: o.Mode, Routing: o.Routing, Policy: o.Policy, Profile: o.Profile.Name,
			Instances: len(r.workers), RAMBlocks: o.RAMBlocks, SSDBlocks: o.SSDBlocks,
			NICGbps: o.NICGbps, SSDGBps: o.SSDGBps, RateMultiplier: 1,
			Prefetch: !o.NoPrefetch, Reject: o.Reject, SLO: o.SLOSeconds,
			FetchesSkipped: int(r.fetchesSkipped.Load()), SSDReadsSkipped: int(r.ssdSkipped.Load()),
		},
		Speed: o.Speed, PayloadBytes: o.PayloadBytes, PrefillMode: o.Prefill, VerifyMode: o.Verify,
		Partial: partial, Completed: len(res.Records), LiveSeconds: time.Since(r.start).Seconds(),
		VerifiedHits: r.verified.Load(), WrongBlocks: r.wrong.Load(), CorruptBlocks: r.corrupt.Load(),
		FetchFailures: r.fetchFailed.Load(), PutFailures: r.putFailed.Load(),
		LiveBytesRead: r.bytesRead.Load(), LiveBytesReadRemote: r.bytesReadRemote.Load(), LiveBytesStored: r.bytesStored.Load(),
		WarmBlocks: r.warm,
	}
	if o.Mode == sim.ModeRecompute {
		s.RAMBlocks, s.SSDBlocks = 0, 0
	}
	if r.firstErr != nil {
		s.FirstError = r.firstErr.Error()
	}
	sim.Summarize(&s.Summary, res.Records)
	s.LagP50, s.LagP99 = lagPercentiles(r.lags)
	s.KeptUp = s.LagP99 <= MaxLagP99.Seconds()
	res.Summary = s
	return res
}

// lagPercentiles returns the nearest-rank p50 and p99 of lags in seconds.
func lagPercentiles(lags []time.Duration) (p50, p99 float64) {
	if len(lags) == 0 {
		return 0, 0
	}
	s := make([]float64, len(lags))
	for i, l := range lags {
		s[i] = l.Seconds()
	}
	slices.Sort(s)
	return sim.Percentile(s, 0.50), sim.Percentile(s, 0.99)
}

// WriteText writes the summary as the simulator does, followed by the
// live-only lines.
func (s *Summary) WriteText(w io.Writer) error {
	if err := s.Summary.WriteText(w); err != nil {
		return err
	}
	kept := "yes"
	if !s.KeptUp {
		kept = fmt.Sprintf("NO: p99 lag above %v, the machine could not keep up; lower --speed", MaxLagP99)
	}
	partial := ""
	if s.Partial {
		partial = "  (PARTIAL: interrupted)"
	}
	_, err := fmt.Fprintf(w, "%-16s %d of %d requests in %.1f s live at speed %g, payload %d B%s\n"+
		"%-16s p50 %.2f ms  p99 %.2f ms  kept up: %s\n"+
		"%-16s %d verified hits, %d wrong (verify %s), %d corrupt, %d fetch failures, %d put failures\n"+
		"%-16s read %d B (%d B from other nodes), stored %d B\n",
		"live", s.Completed, s.Requests, s.LiveSeconds, s.Speed, s.PayloadBytes, partial,
		"dispatch lag", s.LagP50*1e3, s.LagP99*1e3, kept,
		"blocks", s.VerifiedHits, s.WrongBlocks, s.VerifyMode, s.CorruptBlocks, s.FetchFailures, s.PutFailures,
		"live bytes", s.LiveBytesRead, s.LiveBytesReadRemote, s.LiveBytesStored)
	if err == nil && s.WarmBlocks > 0 {
		_, err = fmt.Fprintf(w, "%-16s %s\n", "WARNING", s.WarmNotice())
	}
	if err == nil && s.FirstError != "" {
		_, err = fmt.Fprintf(w, "%-16s %s\n", "first error", s.FirstError)
	}
	if err != nil {
		return fmt.Errorf("replay: write summary: %w", err)
	}
	return nil
}

// WarmNotice says, when the nodes held blocks at the start (WarmBlocks
// > 0), that the hit ratios are a warm cluster's; "" otherwise.
func (s *Summary) WarmNotice() string {
	if s.WarmBlocks == 0 {
		return ""
	}
	return fmt.Sprintf("the nodes already held %d blocks when the replay started (a warm cluster, e.g. from an earlier replay): "+
		"its hit ratios are higher than a fresh cluster's, and than the simulator's, which starts empty; "+
		"restart the cluster, or use --local, for comparable figures", s.WarmBlocks)
}
