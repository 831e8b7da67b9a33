// Package procid tells whether a process recorded earlier (by pid and
// start time) is still the same process, so that what a dead owner left
// behind can be cleaned up without touching a process that reused its
// pid.
package procid

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Start returns the start time of process pid in clock ticks since boot
// (field 22 of /proc/<pid>/stat), or 0 when it cannot be read.
func Start(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after it start with field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// Alive reports whether process pid exists (a zombie counts; a process of
// another user counts as alive).
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Gone reports whether the process recorded as pid, started at start
// (Start's value then; 0 where unknown), has ended: its pid is gone, is
// a zombie (ended, not yet reaped: where no init reaps orphans, one can
// stay so for good), or now belongs to a process started at another time.
func Gone(pid int, start uint64) bool {
	if pid <= 0 || !Alive(pid) || zombie(pid) {
		return true
	}
	now := Start(pid)
	return start != 0 && now != 0 && now != start
}

// zombie reports whether process pid is a zombie (state Z in
// /proc/<pid>/stat); false where that cannot be read.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
