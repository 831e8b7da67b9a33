// Package cluster starts and stops a local kvpool cluster made of real
// processes: one `kvpool master` and N `kvpool node --master …`, each a
// separate OS process in its own process group, talking over loopback. It
// backs `kvpool up` and the multi-process integration test, which also use
// its fault controls (KillNode, RestartNode, KillMaster, RestartMaster).
//
// Start waits until the master's admin endpoint /nodes lists every node as
// live. Addresses are fixed at start (from Options.BasePort, or free ports
// picked by the operating system) and kept across restarts, so a restarted
// master is found by its nodes and a restarted node comes back under the
// same address and data directory.
//
// # Concurrency
//
// A Cluster's methods may be called from several goroutines; fault
// controls of the same process are serialised.
package cluster
