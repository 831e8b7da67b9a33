package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// runVersion implements `kvpool version`: the module version of the
// binary, the VCS revision and time it was built from when the build
// recorded them, and the Go version.
func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool version\n\nPrints the module version of this binary, the VCS revision and commit time it\nwas built from (when the build recorded them) and the Go version.")
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		_, err := fmt.Fprintf(stdout, "kvpool (no build information)\ngo       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	}
	_, err := io.WriteString(stdout, versionText(info))
	return err
}

// versionText is what kvpool version prints for the build information
// info.
func versionText(info *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	text := fmt.Sprintf("kvpool   %s %s\n", info.Main.Path, info.Main.Version)
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		text += fmt.Sprintf("revision %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		text += fmt.Sprintf("time     %s\n", t)
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	if goos == "" {
		goos, goarch = runtime.GOOS, runtime.GOARCH
	}
	return text + fmt.Sprintf("go       %s %s/%s\n", info.GoVersion, goos, goarch)
}

// versionString is the binary's version in one word for servers to
// report (the Redis front's INFO): the module version, else the short VCS
// revision, else "dev".
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return s.Value[:12]
		}
	}
	return "dev"
}
