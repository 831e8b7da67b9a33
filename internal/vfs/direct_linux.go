//go:build linux

package vfs

import "syscall"

// ODirect is the open flag that bypasses the page cache (O_DIRECT), or 0
// where the platform has none.
const ODirect = syscall.O_DIRECT
