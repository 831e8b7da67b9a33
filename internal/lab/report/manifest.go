package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ManifestFile lists, one name a line, the files the last write of a
// report directory produced: Write starts it, WriteCSV and WriteJSON add
// to it. The next Write removes the files it lists, and nothing else, so a
// figure the new report no longer has does not linger beside it while a
// user's own files in the directory are kept. Its name starts with '.', so
// it never collides with a figure's.
const ManifestFile = ".kvpool-report"

// readManifest returns the file names listed in dir's manifest (none when
// there is no manifest). Lines that are not plain file names (see
// checkFileName) are ignored, so a damaged manifest cannot name a file
// outside dir.
func readManifest(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if checkFileName(name) == nil && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return names, nil
}

// writeManifest replaces dir's manifest with names.
func writeManifest(dir string, names []string) error {
	err := writeAtomic(filepath.Join(dir, ManifestFile), func(w io.Writer) error {
		for _, n := range names {
			if _, err := io.WriteString(w, n+"\n"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return nil
}

// clearOwned removes the regular files dir's manifest lists, except those
// in keep (about to be replaced in place). Missing files are fine;
// directories, symbolic links and every file the manifest does not list
// are left alone.
func clearOwned(dir string, keep []string) error {
	names, err := readManifest(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if slices.Contains(keep, n) {
			continue
		}
		p := filepath.Join(dir, n)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", p, err)
		}
	}
	return nil
}

// own adds path's file name to the manifest of its directory. Names that
// are not plain file names (see checkFileName) are not recorded, and so
// never removed.
func own(path string) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if checkFileName(name) != nil || name == ManifestFile {
		return nil
	}
	names, err := readManifest(dir)
	if err != nil {
		return err
	}
	if slices.Contains(names, name) {
		return nil
	}
	return writeManifest(dir, append(names, name))
}
