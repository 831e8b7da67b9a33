//go:build !linux

package netns

import (
	"fmt"
	"runtime"
)

// Enter fails: network namespaces are Linux's.
func Enter(path string) error {
	return fmt.Errorf("netns: network namespaces need Linux (this is %s)", runtime.GOOS)
}

// HasNetem is false: netem is Linux's.
func HasNetem() bool { return false }
