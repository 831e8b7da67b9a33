// Package lab is the lab face of kvpool: everything that measures the
// store rather than serves it. Its subpackages simulate a cluster (sim,
// with netshare's shared links), replay traces against a live one
// (replay), compare the two (compare, validate, demo), study cache
// policies (policylab, hitrate), model costs (costmodel), generate,
// sample, describe and fetch traces (tracegen, tracesample, tracestat,
// tracefetch), run experiments side by side (parallel), and write
// reports and charts (report, plot). The simulator and the live replayer
// share one planner and router (sim.Planner), so the two differ only in
// what really happens.
//
// A lab package reaches the store only the way a user does: through the
// public client package and, to start a cluster, the cluster harness
// (internal/cluster). It never imports the node or master side, their
// protocols, the tiers or the filesystem layer, so what the lab measures
// is what an integrator gets, and a change to the store's internals
// cannot make the lab agree with itself by accident. lint_test.go checks
// this rule on every lab package, tests included.
package lab
