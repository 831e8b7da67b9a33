package netns

import (
	"os"
	"syscall"
)

// flock takes an exclusive lock on f, waiting for it; closing f releases
// it.
func flock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
