//go:build linux

package master

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePages asks the kernel to back the whole 2 MiB pages inside the n
// bytes at p — Go heap memory of one live, pointer-free object — with
// huge pages (madvise MADV_HUGEPAGE, which the transparent_hugepage
// setting "madvise" waits for, then MADV_COLLAPSE for the pages already
// present). The object's contents are kept; the part of it outside whole
// huge pages is left alone, so no huge page spans another object whose
// memory the Go runtime may give back. It is a hint: a kernel without
// transparent huge pages refuses it, one without a free huge page falls
// back to small pages, and nothing else changes. It reports the bytes
// advised.
func hugePages(p unsafe.Pointer, n uintptr) uintptr {
	start := (uintptr(p) + hugePage - 1) &^ (hugePage - 1)
	end := (uintptr(p) + n) &^ (hugePage - 1)
	if end <= start {
		return 0
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start)
	// Pages not yet touched (memory fresh from the kernel, which the Go
	// heap does not zero) are faulted in as huge pages on first touch
	// once advised; pages already touched are collapsed now (the kernel
	// refuses to collapse a range none of whose pages are present, with
	// EINVAL, so that error is expected and ignored).
	if unix.Madvise(b, unix.MADV_HUGEPAGE) != nil {
		return 0
	}
	_ = unix.Madvise(b, unix.MADV_COLLAPSE)
	return end - start
}
