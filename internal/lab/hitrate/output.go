package hitrate

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// WriteText writes r as a short aligned summary, one quantity a line.
func (r Result) WriteText(w io.Writer) error {
	node := "node"
	if r.Nodes != 1 {
		node = "nodes"
	}
	_, err := fmt.Fprintf(w, "%-16s %s\n%-16s %d blocks per node × %d %s (routing %s)\n%-16s %d\n%-16s %.2f%% (%d of %d tokens)\n%-16s %.2f%% (%d of %d blocks)\n",
		"policy", r.Policy,
		"capacity", r.Capacity, r.Nodes, node, r.Routing,
		"requests", r.Requests,
		"token hit ratio", 100*r.TokenHitRatio, r.HitTokens, r.InputTokens,
		"block hit ratio", 100*r.BlockHitRatio, r.HitBlocks, r.Blocks)
	if err == nil && len(r.NodeRequests) > 0 {
		_, err = fmt.Fprintf(w, "%-16s %v\n", "node requests", r.NodeRequests)
	}
	return err
}

// CSVHeader is the header row WriteCSV writes.
func CSVHeader() []string {
	return []string{"trace", "policy", "capacity", "nodes", "routing", "token_hit_ratio", "block_hit_ratio"}
}

// WriteCSV writes results as CSV (CSVHeader, then one row per result),
// naming the trace in every row so sweeps of several traces concatenate.
func WriteCSV(w io.Writer, traceName string, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader()); err != nil {
		return fmt.Errorf("hitrate: write CSV: %w", err)
	}
	for _, r := range results {
		row := []string{
			traceName, r.Policy, strconv.Itoa(r.Capacity), strconv.Itoa(r.Nodes), r.Routing,
			strconv.FormatFloat(r.TokenHitRatio, 'f', 6, 64),
			strconv.FormatFloat(r.BlockHitRatio, 'f', 6, 64),
		}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("hitrate: write CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("hitrate: write CSV: %w", err)
	}
	return nil
}

// SkewShare is the share of the requests on one cache above which
// Warning calls affinity routing lopsided: 90%, where the other caches of
// even a 2-node run hold little more than a tenth of the trace and the
// run measures one cache, not Nodes.
const SkewShare = 0.9

// Warning says, in words, when affinity routing sent more than SkewShare
// of the requests to one cache (typically because every request shares
// its first block, so the longest cached prefix is always on that
// cache); "" otherwise.
func (r Result) Warning() string {
	if r.Routing != Affinity || len(r.NodeRequests) < 2 || r.Requests == 0 {
		return ""
	}
	top := 0
	for i, n := range r.NodeRequests {
		if n > r.NodeRequests[top] {
			top = i
		}
	}
	share := float64(r.NodeRequests[top]) / float64(r.Requests)
	if share <= SkewShare {
		return ""
	}
	return fmt.Sprintf("affinity routing sent %.0f%% of the requests (%d of %d) to node %d of %d: "+
		"they share their first blocks, so the longest cached prefix is nearly always on that node "+
		"and this measures one cache, not %d (rr spreads them)",
		100*share, r.NodeRequests[top], r.Requests, top, r.Nodes, r.Nodes)
}
