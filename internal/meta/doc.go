// Package meta is the vocabulary every part of the store speaks about
// nodes and their blocks: node identities and sessions, tiers, replicas,
// inventories and their deltas, the tasks the master hands to nodes,
// lookup results, placements and placement strategies, and the errors the
// validation of these types returns.
//
// The master's state machine (internal/master) decides with these types,
// the master protocol (internal/master/masterproto) encodes them, and the
// node and the client use them, so none of those has to link the state
// machine (or its eviction policies and metrics) to talk about a replica.
// The package holds data and validation only: no state, no I/O, and it
// imports nothing of the store beyond the public block package.
package meta
