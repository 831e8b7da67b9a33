package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnsafeSSDPath marks an SSD directory refused for safety: relative,
// with a ".." element, or a symbolic link.
var ErrUnsafeSSDPath = errors.New("unsafe SSD path")

// CheckSSDDir checks the SSD tier's directory before the node uses it: the
// path must be absolute without ".." elements, and if it exists it must
// be a real directory, not a symbolic link (checked with Lstat; whoever
// can change a link could redirect the node's writes). A directory that
// does not exist yet passes: the tier creates it. Errors wrap
// ErrUnsafeSSDPath when the path is refused for safety.
func CheckSSDDir(path string) error {
	return checkSSDDir(path, os.Lstat)
}

func checkSSDDir(path string, lstat func(string) (fs.FileInfo, error)) error {
	if err := checkSSDPath(path); err != nil {
		return fmt.Errorf("config: check SSD directory %q: %w", path, err)
	}
	fi, err := lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("config: check SSD directory %q: %w", path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("config: check SSD directory %q: %w: it is a symbolic link; give the real directory", path, ErrUnsafeSSDPath)
	case !fi.IsDir():
		return fmt.Errorf("config: check SSD directory %q: not a directory (mode %v)", path, fi.Mode().Type())
	}
	return nil
}

// checkSSDPath checks the SSD path's text: not empty, no NUL byte,
// absolute, and no ".." element — not even one that cleans away, as in
// /data/../etc, since such a path says something other than what it
// means.
func checkSSDPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty")
	case strings.ContainsRune(p, 0):
		return errors.New("contains a NUL byte")
	case hasDotDot(p):
		return fmt.Errorf("%w: contains a \"..\" element", ErrUnsafeSSDPath)
	case !filepath.IsAbs(p):
		return fmt.Errorf("%w: not absolute", ErrUnsafeSSDPath)
	}
	return nil
}

// hasDotDot reports whether any element of p is "..".
func hasDotDot(p string) bool {
	for _, el := range strings.Split(filepath.ToSlash(p), "/") {
		if el == ".." {
			return true
		}
	}
	return false
}
