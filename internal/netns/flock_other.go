//go:build !linux

package netns

import (
	"fmt"
	"os"
	"runtime"
)

// flock fails: network namespaces are Linux's.
func flock(*os.File) error {
	return fmt.Errorf("network namespaces need Linux (this is %s)", runtime.GOOS)
}
