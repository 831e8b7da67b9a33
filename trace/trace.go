// Package trace reads, writes and describes request traces in the Mooncake
// FAST'25 JSON Lines format:
//
//	{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [int...]}
//
// One request per line. hash_ids are the keys of the request's 512-token
// blocks; a key identifies its block's tokens and everything before them, so
// the cached part of a request is always a prefix of its key list.
package trace

// BlockTokens is the number of tokens per block in the published traces
// (Mooncake FAST'25, FAST25-release/traces/README).
const BlockTokens = 512

// Request is one line of a trace.
type Request struct {
	// Timestamp is the arrival time in milliseconds from the trace start.
	Timestamp int64 `json:"timestamp"`
	// InputLength is the prompt length in tokens (> 0).
	InputLength int `json:"input_length"`
	// OutputLength is the generated length in tokens (> 0).
	OutputLength int `json:"output_length"`
	// HashIDs are the request's block keys, first to last;
	// len(HashIDs) == ceil(InputLength/BlockTokens).
	HashIDs []uint64 `json:"hash_ids"`
}

// Blocks returns the number of blocks a prompt of n tokens spans.
func Blocks(n int) int { return (n + BlockTokens - 1) / BlockTokens }

// HitTokens converts a hit length in blocks into hit tokens for r:
// min(hitBlocks*BlockTokens, InputLength).
func (r *Request) HitTokens(hitBlocks int) int {
	return min(hitBlocks*BlockTokens, r.InputLength)
}
