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
// A restart waits for the new process, never for what its predecessor
// left behind: a killed (or stopped) node does not deregister, and the
// master lists its old registration as live until the node TTL passes, so
// RestartNode and RestartMaster wait until /nodes lists each restarted
// registration under a new session (NodeState.Session). A test that also
// needs the new process's start line waits for that line itself: it
// reaches the test's writer through a pipe, possibly after the master has
// listed the registration.
//
// # Concurrency
//
// A Cluster's methods may be called from several goroutines; fault
// controls of the same process are serialised.
package cluster
