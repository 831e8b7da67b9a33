package report

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// filePerm is the mode of every file written: reports are meant to be
// read by others (a web server, a colleague), as os.Create would give.
const filePerm = 0o644

// writeAtomic writes path by calling fill on a buffered temporary file in
// the same directory, syncing it and renaming it over path. On any error
// the temporary file is removed and path is untouched. Errors from fill
// are returned as they are; I/O errors are wrapped with the file's name.
func writeAtomic(path string, fill func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close() // already failing; the first error is the one to report
			_ = os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriter(f)
	if err := fill(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Chmod(filePerm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	return nil
}

// WriteCSV writes header and rows to path as RFC 4180 CSV, atomically,
// creating the parent directory if needed, and adds the file to the
// directory's ManifestFile (see Write). Every row must have as many
// fields as header.
func WriteCSV(path string, header []string, rows [][]string) error {
	if len(header) == 0 {
		return fmt.Errorf("report: write CSV %s: empty header", path)
	}
	for i, row := range rows {
		if len(row) != len(header) {
			return fmt.Errorf("report: write CSV %s: rows[%d] has %d fields, header has %d", path, i, len(row), len(header))
		}
	}
	if err := mkdirParent(path); err != nil {
		return fmt.Errorf("report: write CSV %s: %w", path, err)
	}
	if err := own(path); err != nil {
		return fmt.Errorf("report: write CSV %s: %w", path, err)
	}
	err := writeAtomic(path, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write(header); err != nil {
			return err
		}
		if err := cw.WriteAll(rows); err != nil { // WriteAll flushes
			return err
		}
		return cw.Error()
	})
	if err != nil {
		return fmt.Errorf("report: write CSV %s: %w", path, err)
	}
	return nil
}

// WriteJSON writes v to path as indented JSON followed by a newline,
// atomically, creating the parent directory if needed, and adds the file
// to the directory's ManifestFile (see Write). Values JSON cannot hold
// (NaN, channels, …) are an error and leave path untouched.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("report: encode JSON for %s: %w", path, err)
	}
	data = append(data, '\n')
	if err := mkdirParent(path); err != nil {
		return fmt.Errorf("report: write JSON %s: %w", path, err)
	}
	if err := own(path); err != nil {
		return fmt.Errorf("report: write JSON %s: %w", path, err)
	}
	err = writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("report: write JSON %s: %w", path, err)
	}
	return nil
}

func mkdirParent(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return nil
}
