package netns

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Enter moves the calling OS thread into the network namespace whose file
// is path (Host.Path). The caller must hold the thread locked
// (runtime.LockOSThread) and never hand it back to the runtime: end the
// goroutine while still locked, and the thread ends with it.
func Enter(path string) error {
	fd, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	defer fd.Close()
	if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("netns: enter %s: %w", path, err)
	}
	return nil
}

// HasNetem reports whether the kernel has the netem qdisc that a link
// delay needs. It asks tc to add one in a namespace of its own, made for
// the question and gone with the thread that made it.
func HasNetem() bool {
	netemOnce.Do(func() {
		done := make(chan bool, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends here
			if Available() != nil || unix.Unshare(unix.CLONE_NEWNET) != nil {
				done <- false
				return
			}
			// exec forks from this locked thread: tc runs in its namespace.
			done <- exec.Command("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").Run() == nil
		}()
		hasNetem = <-done
	})
	return hasNetem
}

var (
	netemOnce sync.Once
	hasNetem  bool
)
