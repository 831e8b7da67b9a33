// Package vfs is the small filesystem interface all of kvpool's disk access
// goes through, so that tests can swap the operating system for an
// in-memory filesystem that simulates power loss (MemFS.Crash) or wrap
// either with fault injection (package errorfs). It follows the shape of
// pebble's vfs: an FS opens Files; a File is positional (ReadAt/WriteAt)
// and knows how to Sync and Truncate.
package vfs

import (
	"io"
	"os"
)

// File is an open file. Reads and writes are positional, so one File may be
// used by several goroutines at once (as *os.File may); Close must not race
// with other calls.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes everything written to the file so far durable.
	Sync() error
	// Truncate changes the file's size; growing it fills with zeros.
	Truncate(size int64) error
	// Close releases the file.
	Close() error
	// Name is the name the file was opened with.
	Name() string
	// Fd is the operating-system descriptor (for sendfile and friends), or
	// 0 when the file is not a real file.
	Fd() uintptr
}

// FS is a filesystem. Paths use the host's separator (filepath).
// Implementations are safe for concurrent use.
type FS interface {
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_RDWR,
	// O_CREATE, O_EXCL, O_TRUNC, and ODirect where supported).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// Rename renames oldname to newname, replacing a file at newname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the sorted names of the entries of dir.
	ReadDir(dir string) ([]string, error)
	// Stat returns the size in bytes of the file name.
	Stat(name string) (size int64, err error)
	// SyncDir makes the creations, removals and renames of entries of dir
	// durable.
	SyncDir(dir string) error
}

// DirectIOAlign is the alignment O_DIRECT needs for file offsets, lengths
// and buffer addresses: 4096 covers the logical block size of every
// current SSD and of 4Kn disks (512e disks accept it too).
const DirectIOAlign = 4096
