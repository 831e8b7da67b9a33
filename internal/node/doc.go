// Package node assembles one kvpool node process: the tiered store
// (package store: RAM, and SSD when offload is on), the data-plane server
// (package nodeserver) over it, the per-path pacers of live experiments
// (package pacer), the admin HTTP endpoint (/metrics from package
// nodemetrics on the node's own registry, /health), and, when the node
// belongs to a cluster, the master agent.
//
// # Life cycle
//
// New checks the configuration and does no I/O. Run opens the store
// (checking the SSD directory first), binds the data-plane and admin
// listeners, logs the configuration's startup line with the addresses
// really bound (":0" resolved), signals Ready, and serves until its context
// ends; then it stops accepting, finishes the requests in flight, stops
// the agent and closes the store (the SSD tier syncs), and returns once
// every goroutine it started has finished.
//
// # Pacing
//
// The network pacers are the data-plane server's Egress and Ingress. The
// SSD pacers wrap the SSD tier's files: every read and write of a page
// file or of the side table waits for its bytes (after the start-up scan, which is not
// paced). While SSD reads are paced, SSD blocks are sent with positional
// reads rather than sendfile, so that the pacer sees them.
//
// # Master agent
//
// With Options.Master set the node reports to a master (see agent.go for
// the protocol): it registers with its full inventory (every block in RAM
// and on SSD with its tier, size and checksum), then heartbeats with the
// inventory delta since the previous beat, the keys it served from SSD
// (the master decides promotions; the node's own promoter is off) and
// the results of the tasks the master handed it (demote, drop, promote).
// The delta comes from the store's events (store.Options.OnEvent): an
// event marks its key dirty, and at the next beat the agent compares the
// key's current tiers (store.Locate, which touches no policy state) with
// what it last reported. A master that forgot the node
// (meta.ErrUnknownNode: it restarted, or the node was silent past its
// TTL) gets the full inventory again. An unreachable master does not stop
// the data plane: the agent retries with capped exponential backoff, and
// the changes accumulate until a beat gets through.
//
// A change reaches the master's index with the next beat, so a client
// that writes on one node and looks up through the master may miss its
// own write for up to an interval. The data plane's SYNC op (agent.Sync,
// through the nodeserver.Syncer backend extension) closes that gap: it
// wakes the agent to beat at once, and answers when the master has
// accepted a report covering every change made before the request (all
// its parts, when the report was split for size). Concurrent SYNCs share
// beats; while the master is unreachable a SYNC waits, on the agent's
// backoff, until its deadline. A standalone node answers SYNC at once.
package node
