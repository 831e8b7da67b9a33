//go:build unix

package config

import (
	"os"
	"syscall"
)

// ownedByOther reports whether the file st describes belongs to another
// user than this process's (as ssh refuses keys owned by someone else).
func ownedByOther(st os.FileInfo) (uid uint32, other bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return s.Uid, int(s.Uid) != os.Getuid()
}
