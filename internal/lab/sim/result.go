package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// Source is where a prefix block a request reused came from.
type Source int

// The block sources, in the order of Record.HitTokens.
const (
	LocalRAM Source = iota
	LocalSSD
	RemoteRAM
	RemoteSSD
	numSources
)

// String returns the source's snake_case name.
func (s Source) String() string {
	switch s {
	case LocalRAM:
		return "local_ram"
	case LocalSSD:
		return "local_ssd"
	case RemoteRAM:
		return "remote_ram"
	case RemoteSSD:
		return "remote_ssd"
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// Record is what happened to one request. Times are model seconds.
type Record struct {
	// ID is the request's index in the slice given to Run (file order).
	ID int
	// Arrival is the arrival time: (timestamp - first timestamp) /
	// RateMultiplier.
	Arrival float64
	// Instance is the prefill instance it ran on, -1 if rejected.
	Instance int
	// InputTokens is the prompt length.
	InputTokens int
	// Blocks is the number of blocks of the prompt.
	Blocks int
	// HitTokens and HitBlocks are the reused prefix, by source (indexed by
	// Source). Only blocks actually reused count: a prefix the simulator
	// chose to recompute rather than load is not a hit.
	HitTokens [numSources]int
	HitBlocks [numSources]int
	// BytesNet is the KV moved over the network for it; BytesSSDRead the
	// KV read from an SSD (local or remote).
	BytesNet     int64
	BytesSSDRead int64
	// Queue is the time from arrival until it reached the head of its
	// instance's queue.
	Queue float64
	// Transfer is the duration of its block transfer, from start to the
	// end of its last flow (0 when nothing was transferred).
	Transfer float64
	// Prefill is the prefill compute time of its uncached tokens.
	Prefill float64
	// TTFT is the end of its prefill minus its arrival. The first decode
	// step is out of scope and not included. 0 when rejected.
	TTFT float64
	// Rejected is set when admission control turned it away.
	Rejected bool
}

// TotalHitTokens returns the reused prefix in tokens over all sources.
func (r *Record) TotalHitTokens() int {
	s := 0
	for _, v := range r.HitTokens {
		s += v
	}
	return s
}

// Summary aggregates a run. Ratios are over served (not rejected) requests;
// SLO attainment is over all requests, a rejected request counting as a
// miss. Times are model seconds.
type Summary struct {
	// Echo of the configuration.
	Mode           Mode    `json:"mode"`
	Routing        Routing `json:"routing"`
	Policy         string  `json:"policy"`
	Profile        string  `json:"profile"`
	Instances      int     `json:"instances"`
	RAMBlocks      int     `json:"ram_blocks"`
	SSDBlocks      int     `json:"ssd_blocks"`
	NICGbps        float64 `json:"nic_gbps"`
	SSDGBps        float64 `json:"ssd_gbps"`
	RateMultiplier float64 `json:"rate_multiplier"`
	Prefetch       bool    `json:"prefetch"`
	Reject         bool    `json:"reject"`

	// Requests is every request of the trace; Served those not rejected.
	Requests int `json:"requests"`
	Served   int `json:"served"`
	Rejected int `json:"rejected"`
	// Duration is the time from the first arrival to the last prefill end.
	Duration float64 `json:"duration_s"`

	// InputTokens and Blocks are the served prompts' size; HitTokens and
	// HitBlocks the reused prefixes.
	InputTokens int64 `json:"input_tokens"`
	HitTokens   int64 `json:"hit_tokens"`
	Blocks      int64 `json:"blocks"`
	HitBlocks   int64 `json:"hit_blocks"`
	// TokenHitRatio = HitTokens / InputTokens (the headline);
	// BlockHitRatio = HitBlocks / Blocks.
	TokenHitRatio float64 `json:"token_hit_ratio"`
	BlockHitRatio float64 `json:"block_hit_ratio"`
	// The token hit ratio split by source; the four sum to TokenHitRatio.
	TokenHitRatioLocalRAM  float64 `json:"token_hit_ratio_local_ram"`
	TokenHitRatioLocalSSD  float64 `json:"token_hit_ratio_local_ssd"`
	TokenHitRatioRemoteRAM float64 `json:"token_hit_ratio_remote_ram"`
	TokenHitRatioRemoteSSD float64 `json:"token_hit_ratio_remote_ssd"`
	// The block hit ratio split by source.
	BlockHitRatioLocalRAM  float64 `json:"block_hit_ratio_local_ram"`
	BlockHitRatioLocalSSD  float64 `json:"block_hit_ratio_local_ssd"`
	BlockHitRatioRemoteRAM float64 `json:"block_hit_ratio_remote_ram"`
	BlockHitRatioRemoteSSD float64 `json:"block_hit_ratio_remote_ssd"`

	// Bytes moved: over the network, read from SSDs, written to SSDs
	// (RAM evictions demoted to the SSD tier).
	BytesNet      int64 `json:"bytes_net"`
	BytesSSDRead  int64 `json:"bytes_ssd_read"`
	BytesSSDWrite int64 `json:"bytes_ssd_write"`

	// TTFT of served requests: mean and nearest-rank percentiles.
	TTFTMean float64 `json:"ttft_mean_s"`
	TTFTP50  float64 `json:"ttft_p50_s"`
	TTFTP90  float64 `json:"ttft_p90_s"`
	TTFTP99  float64 `json:"ttft_p99_s"`
	TTFTMax  float64 `json:"ttft_max_s"`
	// QueueMean and TransferMean are the mean queue and transfer times.
	QueueMean    float64 `json:"queue_mean_s"`
	TransferMean float64 `json:"transfer_mean_s"`
	// PrefillMean and PrefillTotal are the prefill compute time per served
	// request and in total.
	PrefillMean  float64 `json:"prefill_mean_s"`
	PrefillTotal float64 `json:"prefill_total_s"`

	// SLO is the configured TTFT SLO; SLOAttainment the share of all
	// requests served within it; SLOAttainment10s and 30s the same at
	// 10 s and 30 s.
	SLO              float64 `json:"slo_s"`
	SLOAttainment    float64 `json:"slo_attainment"`
	SLOAttainment10s float64 `json:"slo_attainment_10s"`
	SLOAttainment30s float64 `json:"slo_attainment_30s"`

	// FetchesSkipped counts requests that left a remote prefix unloaded
	// because recomputing it was estimated to be faster; SSDReadsSkipped
	// the same for a local SSD prefix.
	FetchesSkipped  int `json:"fetches_skipped"`
	SSDReadsSkipped int `json:"ssd_reads_skipped"`

	// Joint mechanisms: their configuration and what they did.
	Replication         Replication `json:"replication"`
	HotAccesses         int         `json:"hot_accesses"`
	EvictRedundantFirst bool        `json:"evict_redundant_first"`
	// ReplicasSkipped counts fetched blocks not kept as local replicas
	// (ReplicateHot); RedundantEvictions the evictions of a redundant
	// replica in place of the policy's last-copy victim
	// (EvictRedundantFirst); LateBoundBlocks the prefix blocks joint
	// routing found in RAM at the head of the queue beyond the plan made at
	// arrival.
	ReplicasSkipped    int64 `json:"replicas_skipped"`
	RedundantEvictions int64 `json:"redundant_evictions"`
	LateBoundBlocks    int64 `json:"late_bound_blocks"`
}

// Result is the outcome of Run.
type Result struct {
	// Records has one entry per request, in arrival order.
	Records []Record
	// Summary aggregates Records and the run's counters.
	Summary Summary
}

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Percentile returns the nearest-rank q-quantile of sorted (0 if empty).
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ServedTTFTs returns the TTFTs of the records in recs that were served
// (not rejected), ascending.
func ServedTTFTs(recs []Record) []float64 {
	out := make([]float64, 0, len(recs))
	for _, r := range recs {
		if !r.Rejected {
			out = append(out, r.TTFT)
		}
	}
	slices.Sort(out)
	return out
}

// Summarize fills the per-record aggregates of s (hit ratios by source,
// bytes, TTFT statistics, SLO attainment) from recs; s.SLO must be set. The
// live replayer calls it too, so simulated and live runs are summarised by
// the same code.
func Summarize(s *Summary, recs []Record) {
	s.Requests = len(recs)
	var hitTok, hitBlk [numSources]int64
	var ttfts []float64
	var queue, transfer float64
	within := [3]int{}
	limits := [3]float64{s.SLO, 10, 30}
	first, last := math.Inf(1), math.Inf(-1)
	for i := range recs {
		r := &recs[i]
		first = min(first, r.Arrival)
		if r.Rejected {
			s.Rejected++
			continue
		}
		s.Served++
		s.InputTokens += int64(r.InputTokens)
		s.Blocks += int64(r.Blocks)
		for src := range numSources {
			hitTok[src] += int64(r.HitTokens[src])
			hitBlk[src] += int64(r.HitBlocks[src])
		}
		s.BytesNet += r.BytesNet
		s.BytesSSDRead += r.BytesSSDRead
		ttfts = append(ttfts, r.TTFT)
		queue += r.Queue
		transfer += r.Transfer
		s.PrefillTotal += r.Prefill
		last = max(last, r.Arrival+r.TTFT)
		for k, lim := range limits {
			if r.TTFT <= lim {
				within[k]++
			}
		}
	}
	for src := range numSources {
		s.HitTokens += hitTok[src]
		s.HitBlocks += hitBlk[src]
	}
	in, blk := float64(s.InputTokens), float64(s.Blocks)
	s.TokenHitRatio = ratio(float64(s.HitTokens), in)
	s.BlockHitRatio = ratio(float64(s.HitBlocks), blk)
	s.TokenHitRatioLocalRAM = ratio(float64(hitTok[LocalRAM]), in)
	s.TokenHitRatioLocalSSD = ratio(float64(hitTok[LocalSSD]), in)
	s.TokenHitRatioRemoteRAM = ratio(float64(hitTok[RemoteRAM]), in)
	s.TokenHitRatioRemoteSSD = ratio(float64(hitTok[RemoteSSD]), in)
	s.BlockHitRatioLocalRAM = ratio(float64(hitBlk[LocalRAM]), blk)
	s.BlockHitRatioLocalSSD = ratio(float64(hitBlk[LocalSSD]), blk)
	s.BlockHitRatioRemoteRAM = ratio(float64(hitBlk[RemoteRAM]), blk)
	s.BlockHitRatioRemoteSSD = ratio(float64(hitBlk[RemoteSSD]), blk)
	if s.Served > 0 {
		n := float64(s.Served)
		sum := 0.0
		for _, v := range ttfts {
			sum += v
		}
		s.TTFTMean = sum / n
		slices.Sort(ttfts)
		s.TTFTP50 = Percentile(ttfts, 0.50)
		s.TTFTP90 = Percentile(ttfts, 0.90)
		s.TTFTP99 = Percentile(ttfts, 0.99)
		s.TTFTMax = ttfts[len(ttfts)-1]
		s.QueueMean = queue / n
		s.TransferMean = transfer / n
		s.PrefillMean = s.PrefillTotal / n
		s.Duration = last - first
	}
	all := float64(s.Requests)
	s.SLOAttainment = ratio(float64(within[0]), all)
	s.SLOAttainment10s = ratio(float64(within[1]), all)
	s.SLOAttainment30s = ratio(float64(within[2]), all)
}

// csvHeader returns the column list of WriteRecordsCSV.
func csvHeader() []string {
	return []string{
		"id", "arrival_s", "instance", "input_tokens",
		"hit_tokens_local_ram", "hit_tokens_local_ssd", "hit_tokens_remote_ram", "hit_tokens_remote_ssd",
		"bytes_net", "bytes_ssd_read", "queue_s", "transfer_s", "prefill_s", "ttft_s", "rejected",
	}
}

// WriteRecordsCSV writes recs as CSV with a header line: id, arrival_s,
// instance, input_tokens, hit_tokens_local_ram, hit_tokens_local_ssd,
// hit_tokens_remote_ram, hit_tokens_remote_ssd, bytes_net, bytes_ssd_read,
// queue_s, transfer_s, prefill_s, ttft_s, rejected. Floats are written in
// the shortest form that reads back exactly.
func WriteRecordsCSV(w io.Writer, recs []Record) error {
	cw := csv.NewWriter(w)
	header := csvHeader()
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("sim: write records CSV header: %w", err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	row := make([]string, len(header))
	for i := range recs {
		r := &recs[i]
		row = append(row[:0],
			strconv.Itoa(r.ID), f(r.Arrival), strconv.Itoa(r.Instance), strconv.Itoa(r.InputTokens),
			strconv.Itoa(r.HitTokens[LocalRAM]), strconv.Itoa(r.HitTokens[LocalSSD]),
			strconv.Itoa(r.HitTokens[RemoteRAM]), strconv.Itoa(r.HitTokens[RemoteSSD]),
			strconv.FormatInt(r.BytesNet, 10), strconv.FormatInt(r.BytesSSDRead, 10),
			f(r.Queue), f(r.Transfer), f(r.Prefill), f(r.TTFT), strconv.FormatBool(r.Rejected))
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("sim: write record of request %d: %w", r.ID, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("sim: write records CSV: %w", err)
	}
	return nil
}
