package trace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvTraceDir is the environment variable naming a directory of traces,
// searched after the explicit directory (docs/design.md, "The traces").
const EnvTraceDir = "KVPOOL_TRACE_DIR"

// ErrNotFound is returned (wrapped) by Find when no trace file matches.
var ErrNotFound = errors.New("trace not found")

// FileName returns the file name for a trace name: the file of a short
// name of a published trace ("conversation" → "conversation_trace.jsonl";
// also "synthetic" and "toolagent"), else name unchanged.
func FileName(name string) string {
	switch name {
	case "conversation", "synthetic", "toolagent":
		return name + "_trace.jsonl"
	}
	return name
}

// Finder locates trace files along the search path its caller gives: an
// explicit directory (the command line's --trace-dir), then the directory
// $KVPOOL_TRACE_DIR names, then ./traces (where "kvpool trace fetch"
// downloads the published traces). Nothing else is searched: a caller that
// keeps its traces elsewhere passes that directory or sets the variable.
// The zero value uses the process environment and working directory.
type Finder struct {
	// Getenv looks up environment variables; nil means os.Getenv.
	Getenv func(string) string
	// WorkDir is the directory relative paths are resolved against;
	// "" means the process's working directory.
	WorkDir string
}

// Find locates the trace called name with the default Finder (process
// environment and working directory). See Finder.Find.
func Find(name, dir string) (string, error) {
	return Finder{}.Find(name, dir)
}

// Find returns the path of the trace called name. name is a short name
// ("conversation", "synthetic", "toolagent"), a file name
// ("conversation_trace.jsonl") or a path. A name that is an existing file
// (relative to WorkDir) or that contains a path separator is used as it is.
// Otherwise the file is looked for in dir (if not empty), $KVPOOL_TRACE_DIR
// (if set) and ./traces, in that order. The error lists
// every place looked and wraps ErrNotFound.
func (f Finder) Find(name, dir string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("trace: find: empty trace name")
	}
	getenv := f.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if p := f.resolve(name); isFile(p) {
		return p, nil
	}
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		if st, err := os.Stat(f.resolve(name)); err == nil && st.IsDir() {
			return "", fmt.Errorf("trace: find %s: is a directory, not a trace file", name)
		}
		return "", fmt.Errorf("trace: find %s: no such file: %w", name, ErrNotFound)
	}
	file := FileName(name)
	type place struct{ label, dir string }
	var places []place
	if dir != "" {
		places = append(places, place{"--trace-dir " + dir, dir})
	}
	env := getenv(EnvTraceDir)
	if env != "" {
		places = append(places, place{"$" + EnvTraceDir + "=" + env, env})
	}
	places = append(places, place{"./traces", "traces"})
	var looked []string
	for _, pl := range places {
		p := filepath.Join(pl.dir, file)
		if r := f.resolve(p); isFile(r) {
			return r, nil
		}
		looked = append(looked, pl.label)
	}
	if env == "" {
		looked = append(looked, "($"+EnvTraceDir+" not set)")
	}
	return "", fmt.Errorf("trace: find %s: %w; looked for %s in %s; run \"kvpool trace fetch\" to download the official traces or \"kvpool trace gen\" to generate one",
		name, ErrNotFound, file, strings.Join(looked, ", "))
}

// resolve makes p relative to WorkDir.
func (f Finder) resolve(p string) string {
	if f.WorkDir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(f.WorkDir, p)
}

// isFile reports whether p is a file to read: anything but a directory,
// so that a device or a pipe (/dev/stdin, a shell's <(…)) reads too.
func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
