package cluster

import "syscall"

// sysProcAttr puts a process in its own process group (so a signal to the
// group reaches everything it runs) and asks the kernel to SIGKILL it
// when the thread that started it exits (see spawner). SIGKILL, not
// SIGTERM: the process that would have stopped it cleanly is gone, and
// a node's SSD tier survives a kill (a block is visible only once
// completely written).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
