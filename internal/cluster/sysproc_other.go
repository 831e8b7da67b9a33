//go:build !linux

package cluster

import "syscall"

// sysProcAttr puts a process in its own process group. Without Linux's
// parent-death signal a killed owner leaves its processes running; the
// owner file (owner.go) lets the next Start clean them up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
