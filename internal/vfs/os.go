package vfs

import (
	"fmt"
	"os"
	"slices"
)

// OS is the operating system's filesystem. Its zero value is ready to use.
type OS struct{}

var _ FS = OS{}

// Default returns the operating system's filesystem.
func Default() OS { return OS{} }

// OpenFile opens name with os.OpenFile.
func (OS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove removes name with os.Remove.
func (OS) Remove(name string) error { return os.Remove(name) }

// Rename renames with os.Rename.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// MkdirAll creates dir with os.MkdirAll.
func (OS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// ReadDir lists dir with os.ReadDir.
func (OS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

// Stat returns the size of name.
func (OS) Stat(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// SyncDir opens dir and fsyncs it.
func (OS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("sync dir %s: %w", dir, serr)
	}
	return cerr
}

// osFile adapts *os.File to File.
type osFile struct{ *os.File }

// Fd returns the descriptor. Unlike (*os.File).Fd it does not switch the
// file to blocking mode (regular files never use the poller anyway, but the
// method is called on every zero-copy send).
func (f osFile) Fd() uintptr {
	rc, err := f.File.SyscallConn()
	if err != nil {
		return 0
	}
	var fd uintptr
	if err := rc.Control(func(p uintptr) { fd = p }); err != nil {
		return 0
	}
	return fd
}
