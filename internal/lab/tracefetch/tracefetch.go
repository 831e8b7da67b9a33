// Package tracefetch downloads the official Mooncake FAST'25 traces from
// the kvcache-ai/Mooncake GitHub repository at a pinned commit, verifies
// each file against hashes recorded here, and installs it atomically
// (temporary file, then rename) into a traces directory.
package tracefetch

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvpool/kvpool/internal/option"
)

// PinnedCommit is the kvcache-ai/Mooncake commit the traces are fetched
// from: "add FAST25 release" (2025-02-21), the only commit that touches
// FAST25-release/traces/ as of the mirror inspected for this package.
const PinnedCommit = "3cca71daccf2a7afb8fe3f0295358f70e3a69fdb"

// DefaultBaseURL is where files are downloaded from; the URL of a file is
// BaseURL/<commit>/FAST25-release/traces/<name>.
const DefaultBaseURL = "https://raw.githubusercontent.com/kvcache-ai/Mooncake"

// TracePath is the directory of the traces inside the repository.
const TracePath = "FAST25-release/traces"

// DefaultDir is the default destination directory, the ./traces entry of
// the trace search path (trace.Find).
const DefaultDir = "traces"

// DefaultMaxBytes bounds a download. The published files are 3.0 MB
// (conversation) and 1.1 MB (synthetic); the toolagent trace has about
// twice the conversation trace's requests. 256 MiB leaves ample room while
// stopping a runaway response.
const DefaultMaxBytes = 256 << 20

// File is one known trace file and the hashes it must have.
type File struct {
	// Name is the file name, e.g. "conversation_trace.jsonl".
	Name string
	// Short is the short name, e.g. "conversation".
	Short string
	// SHA256 is the hex SHA-256 of the file; "" if not known.
	SHA256 string
	// GitBlobSHA1 is the hex git blob id of the file in PinnedCommit's
	// tree (SHA-1 over "blob <size>\x00" + content); "" if not known.
	GitBlobSHA1 string
	// Size is the file size in bytes; 0 if not known.
	Size int64
}

// Known returns the official trace files. The SHA-256 and size of the
// conversation and synthetic traces were computed from copies of the
// published files whose git blob ids match the pinned commit's tree.
// The toolagent file's SHA-256 is not known (its content was not available
// when this was written); it is verified by its git blob id, read from the
// pinned commit's tree.
func Known() []File {
	return []File{
		{
			Name:        "conversation_trace.jsonl",
			Short:       "conversation",
			SHA256:      "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
			GitBlobSHA1: "5a371794b81d7fc7487ec8a02a2c631bcc7fbdf8",
			Size:        3029533,
		},
		{
			Name:        "synthetic_trace.jsonl",
			Short:       "synthetic",
			SHA256:      "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
			GitBlobSHA1: "e4838049c0dcfc358a5f24ab08251279475cba94",
			Size:        1136313,
		},
		{
			Name:        "toolagent_trace.jsonl",
			Short:       "toolagent",
			GitBlobSHA1: "b765599d1e0828b37f68d481563c385d3c11de54",
		},
	}
}

// Options controls Fetch. The zero value fetches every known file into
// ./traces from GitHub at PinnedCommit.
type Options struct {
	// Dir is the destination directory, created if needed; "" means
	// DefaultDir.
	Dir string
	// Names selects files by short name ("conversation") or file name;
	// empty or "all" means every file.
	Names []string
	// BaseURL replaces DefaultBaseURL (tests use an httptest.Server).
	BaseURL string
	// Client is the HTTP client; nil means a new http.Client with no
	// timeout of its own (the caller's ctx bounds the whole fetch).
	Client *http.Client
	// Files replaces Known() (tests use their own files and hashes).
	Files []File
	// InsecureSkipVerify installs a file that has no known hash. A file
	// whose known hash does not match is never installed.
	InsecureSkipVerify bool
	// MaxBytes bounds each download; 0 means DefaultMaxBytes.
	MaxBytes int64
}

// Validate reports the first invalid field of o.
func (o Options) Validate() error {
	if o.MaxBytes < 0 {
		return fmt.Errorf("tracefetch: %w", option.Errorf("MaxBytes", "%d: want >= 0", o.MaxBytes))
	}
	if o.BaseURL != "" && !strings.HasPrefix(o.BaseURL, "http://") && !strings.HasPrefix(o.BaseURL, "https://") {
		return fmt.Errorf("tracefetch: %w", option.Errorf("BaseURL", "%q is not an http(s) URL", o.BaseURL))
	}
	if _, err := o.selected(); err != nil {
		return err
	}
	return nil
}

func (o Options) files() []File {
	if o.Files != nil {
		return o.Files
	}
	return Known()
}

// selected returns the files named by o.Names.
func (o Options) selected() ([]File, error) {
	all := o.files()
	if len(o.Names) == 0 || (len(o.Names) == 1 && o.Names[0] == "all") {
		return all, nil
	}
	var out []File
	for _, n := range o.Names {
		found := false
		for _, f := range all {
			if n == f.Short || n == f.Name {
				out = append(out, f)
				found = true
				break
			}
		}
		if !found {
			var names []string
			for _, f := range all {
				names = append(names, f.Short)
			}
			return nil, fmt.Errorf("tracefetch: %w", option.Errorf("Names", "unknown trace %q (known: all, %s)", n, strings.Join(names, ", ")))
		}
	}
	return out, nil
}

// Status says what Fetch did with a file.
type Status int

const (
	// Installed: downloaded, verified and moved into place.
	Installed Status = iota + 1
	// Present: already in the directory with the right hash; not fetched.
	Present
)

// String returns "installed" or "already present".
func (s Status) String() string {
	switch s {
	case Installed:
		return "installed"
	case Present:
		return "already present"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result reports one file Fetch handled successfully.
type Result struct {
	// File is the file.
	File File
	// Path is where it is installed.
	Path string
	// Status is what was done.
	Status Status
	// Bytes is the file size.
	Bytes int64
	// SHA256 is the file's SHA-256 (hex).
	SHA256 string
	// Verified names the check that passed: "sha256", "git blob sha1",
	// or "none (insecure)".
	Verified string
}

// Fetch downloads and installs the selected files. It goes on to the next
// file after a failure and returns the results of the files that succeeded
// with the joined errors of those that did not. A file is never installed
// unless it verifies (or has no known hash and InsecureSkipVerify is set).
func Fetch(ctx context.Context, opts Options) ([]Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	files, _ := opts.selected()
	dir := opts.Dir
	if dir == "" {
		dir = DefaultDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tracefetch: create directory %s: %w", dir, err)
	}
	var results []Result
	var errs []error
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("tracefetch: fetch %s: %w", f.Name, err))
			break
		}
		r, err := fetchOne(ctx, opts, dir, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		results = append(results, r)
	}
	return results, errors.Join(errs...)
}

// URL returns the download URL of file name at commit under base.
func URL(base, commit, name string) string {
	return strings.TrimSuffix(base, "/") + "/" + commit + "/" + TracePath + "/" + name
}

func fetchOne(ctx context.Context, opts Options, dir string, f File) (Result, error) {
	dst := filepath.Join(dir, f.Name)
	if sum, size, ok := present(dst, f); ok {
		return Result{File: f, Path: dst, Status: Present, Bytes: size, SHA256: sum.sha256, Verified: sum.verified(f)}, nil
	}
	if f.SHA256 == "" && f.GitBlobSHA1 == "" && !opts.InsecureSkipVerify {
		return Result{}, fmt.Errorf("tracefetch: %s has no known hash; refusing to install it unverified (use --insecure-skip-verify to override)", f.Name)
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	url := URL(base, PinnedCommit, f.Name)
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	maxBytes := opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: %w", f.Name, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: %w", f.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: GET %s: %s", f.Name, url, resp.Status)
	}

	tmp, err := os.CreateTemp(dir, "."+f.Name+".*.tmp")
	if err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: create temporary file: %w", f.Name, err)
	}
	installed := false
	defer func() {
		if !installed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := newHasher()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: download from %s after %d bytes: %w", f.Name, url, n, err)
	}
	if n > maxBytes {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: response larger than %d bytes", f.Name, maxBytes)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: truncated download: got %d of %d bytes", f.Name, n, resp.ContentLength)
	}
	sum, err := h.sums(tmp, n)
	if err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: hash download: %w", f.Name, err)
	}
	if err := sum.check(f, n); err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s from %s: %w; file not installed", f.Name, url, err)
	}
	if err := tmp.Sync(); err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: sync temporary file: %w", f.Name, err)
	}
	if err := tmp.Close(); err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: close temporary file: %w", f.Name, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return Result{}, fmt.Errorf("tracefetch: fetch %s: install as %s: %w", f.Name, dst, err)
	}
	installed = true
	return Result{File: f, Path: dst, Status: Installed, Bytes: n, SHA256: sum.sha256, Verified: sum.verified(f)}, nil
}

// digests are the hashes of one file.
type digests struct {
	sha256  string
	gitBlob string
}

func (d digests) verified(f File) string {
	switch {
	case f.SHA256 != "":
		return "sha256"
	case f.GitBlobSHA1 != "":
		return "git blob sha1"
	}
	return "none (insecure)"
}

// check compares d with every hash f knows.
func (d digests) check(f File, size int64) error {
	if f.Size != 0 && size != f.Size {
		return fmt.Errorf("size %d bytes, want %d", size, f.Size)
	}
	if f.SHA256 != "" && d.sha256 != f.SHA256 {
		return fmt.Errorf("sha256 mismatch: got %s, want %s", d.sha256, f.SHA256)
	}
	if f.GitBlobSHA1 != "" && d.gitBlob != f.GitBlobSHA1 {
		return fmt.Errorf("git blob sha1 mismatch: got %s, want %s", d.gitBlob, f.GitBlobSHA1)
	}
	return nil
}

// hashState computes the SHA-256 while a file streams in; the git blob id
// needs the size first, so sums computes it by re-reading the file.
type hashState struct{ h hash.Hash }

func newHasher() *hashState { return &hashState{h: sha256.New()} }

func (s *hashState) Write(p []byte) (int, error) { return s.h.Write(p) }

// sums finishes the SHA-256 and computes the git blob id of the n bytes in
// f (from its start).
func (s *hashState) sums(f *os.File, n int64) (digests, error) {
	d := digests{sha256: hex.EncodeToString(s.h.Sum(nil))}
	g, err := gitBlobSHA1(f, n)
	if err != nil {
		return digests{}, err
	}
	d.gitBlob = g
	return d, nil
}

// gitBlobSHA1 returns the git blob id of the n bytes at the start of f.
func gitBlobSHA1(f *os.File, n int64) (string, error) {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", n)
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// present reports whether path holds f with every known hash matching,
// and returns its digests and size.
func present(path string, f File) (digests, int64, bool) {
	if f.SHA256 == "" && f.GitBlobSHA1 == "" {
		return digests{}, 0, false // nothing to check against: fetch again
	}
	fh, err := os.Open(path)
	if err != nil {
		return digests{}, 0, false
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return digests{}, 0, false
	}
	h := newHasher()
	if _, err := io.Copy(h, fh); err != nil {
		return digests{}, 0, false
	}
	d, err := h.sums(fh, st.Size())
	if err != nil || d.check(f, st.Size()) != nil {
		return digests{}, 0, false
	}
	return d, st.Size(), true
}
