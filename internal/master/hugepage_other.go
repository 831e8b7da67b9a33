//go:build !linux

package master

import "unsafe"

// hugePages does nothing outside Linux (see hugepage_linux.go).
func hugePages(p unsafe.Pointer, n uintptr) uintptr { return 0 }
