package tracefetch

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvpool/kvpool/trace/tracetest"
)

const (
	goodBody = `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}` + "\n"
	evilBody = `{"timestamp": 0, "input_length": 2, "output_length": 1, "hash_ids": [0]}` + "\n"
)

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func gitBlob(s string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00%s", len(s), s)
	return hex.EncodeToString(h.Sum(nil))
}

// server serves body for every file under the pinned commit except
// "missing.jsonl" (404) and "truncated.jsonl" (announces more bytes than
// it sends). It counts requests.
func server(t *testing.T, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	prefix := "/" + PinnedCommit + "/" + TracePath + "/"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		name, ok := strings.CutPrefix(r.URL.Path, prefix)
		switch {
		case !ok || name == "missing.jsonl":
			http.NotFound(w, r)
		case name == "truncated.jsonl":
			w.Header().Set("Content-Length", fmt.Sprint(len(body)+100))
			w.Write([]byte(body))
		default:
			w.Write([]byte(body))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// noTemps fails if dir holds anything but the listed files.
func onlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("directory holds %v, want %v", got, want)
	}
}

func TestFetch(t *testing.T) {
	good := File{Name: "a.jsonl", Short: "a", SHA256: sha256hex(goodBody), GitBlobSHA1: gitBlob(goodBody), Size: int64(len(goodBody))}
	tests := []struct {
		name      string
		body      string
		file      File
		insecure  bool
		preexist  string // content already in the directory
		wantErr   string // "" means success
		wantStat  Status
		wantVerif string
		wantFiles []string
		wantHits  int32
	}{
		{name: "good file", body: goodBody, file: good, wantStat: Installed, wantVerif: "sha256", wantFiles: []string{"a.jsonl"}, wantHits: 1},
		{name: "already present", body: goodBody, file: good, preexist: goodBody, wantStat: Present, wantVerif: "sha256", wantFiles: []string{"a.jsonl"}, wantHits: 0},
		{name: "present but wrong is replaced", body: goodBody, file: good, preexist: evilBody, wantStat: Installed, wantVerif: "sha256", wantFiles: []string{"a.jsonl"}, wantHits: 1},
		{name: "sha256 mismatch not installed", body: evilBody, file: File{Name: "a.jsonl", SHA256: sha256hex(goodBody)}, wantErr: "sha256 mismatch", wantHits: 1},
		{name: "mismatch keeps the old file", body: evilBody, file: File{Name: "a.jsonl", SHA256: sha256hex(goodBody)}, preexist: "old\n", wantErr: "sha256 mismatch", wantFiles: []string{"a.jsonl"}, wantHits: 1},
		{name: "size mismatch", body: evilBody + evilBody, file: File{Name: "a.jsonl", SHA256: sha256hex(evilBody), Size: int64(len(evilBody))}, wantErr: "size", wantHits: 1},
		{name: "git blob only", body: goodBody, file: File{Name: "a.jsonl", GitBlobSHA1: gitBlob(goodBody)}, wantStat: Installed, wantVerif: "git blob sha1", wantFiles: []string{"a.jsonl"}, wantHits: 1},
		{name: "git blob mismatch", body: evilBody, file: File{Name: "a.jsonl", GitBlobSHA1: gitBlob(goodBody)}, wantErr: "git blob sha1 mismatch", wantHits: 1},
		{name: "no hash refused", body: goodBody, file: File{Name: "a.jsonl"}, wantErr: "--insecure-skip-verify", wantHits: 0},
		{name: "no hash insecure", body: goodBody, file: File{Name: "a.jsonl"}, insecure: true, wantStat: Installed, wantVerif: "none (insecure)", wantFiles: []string{"a.jsonl"}, wantHits: 1},
		{name: "http 404", body: goodBody, file: File{Name: "missing.jsonl", SHA256: sha256hex(goodBody)}, wantErr: "404", wantHits: 1},
		{name: "truncated body", body: goodBody, file: File{Name: "truncated.jsonl", SHA256: sha256hex(goodBody)}, wantErr: "unexpected EOF", wantHits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, hits := server(t, tt.body)
			dir := filepath.Join(t.TempDir(), "traces")
			if tt.preexist != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, tt.file.Name), []byte(tt.preexist), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Fetch(context.Background(), Options{
				Dir: dir, BaseURL: srv.URL, Client: srv.Client(), Files: []File{tt.file}, InsecureSkipVerify: tt.insecure,
			})
			if got := hits.Load(); got != tt.wantHits {
				t.Errorf("server hit %d times, want %d", got, tt.wantHits)
			}
			onlyFiles(t, dir, tt.wantFiles...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.file.Name) {
					t.Fatalf("err = %v, want one naming %s and containing %q", err, tt.file.Name, tt.wantErr)
				}
				if len(res) != 0 {
					t.Fatalf("results %+v for a failed fetch", res)
				}
				if tt.preexist != "" {
					if b, _ := os.ReadFile(filepath.Join(dir, tt.file.Name)); string(b) != tt.preexist {
						t.Fatal("a failed fetch changed the existing file")
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Status != tt.wantStat || res[0].Verified != tt.wantVerif || res[0].SHA256 != sha256hex(tt.body) {
				t.Fatalf("results %+v, want status %v verified %q", res, tt.wantStat, tt.wantVerif)
			}
			b, err := os.ReadFile(res[0].Path)
			if err != nil || string(b) != tt.body {
				t.Fatalf("installed content %q, %v", b, err)
			}
		})
	}
}

func TestFetchGoesOnAfterFailure(t *testing.T) {
	srv, _ := server(t, goodBody)
	dir := t.TempDir()
	files := []File{
		{Name: "missing.jsonl", Short: "m", SHA256: sha256hex(goodBody)},
		{Name: "b.jsonl", Short: "b", SHA256: sha256hex(goodBody)},
		{Name: "c.jsonl", Short: "c", SHA256: sha256hex(goodBody)},
	}
	res, err := Fetch(context.Background(), Options{Dir: dir, BaseURL: srv.URL, Files: files, Names: []string{"m", "b.jsonl"}})
	if err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Fatalf("err = %v, want the 404 of missing.jsonl", err)
	}
	if len(res) != 1 || res[0].File.Name != "b.jsonl" {
		t.Fatalf("results %+v, want b.jsonl only (c was not selected)", res)
	}
	onlyFiles(t, dir, "b.jsonl")
}

func TestFetchCancelled(t *testing.T) {
	srv, hits := server(t, goodBody)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Fetch(ctx, Options{Dir: t.TempDir(), BaseURL: srv.URL, Files: []File{{Name: "a.jsonl", SHA256: sha256hex(goodBody)}}})
	if !errors.Is(err, context.Canceled) || hits.Load() != 0 {
		t.Fatalf("err = %v after %d hits, want context.Canceled and no request", err, hits.Load())
	}
}

func TestFetchTooLarge(t *testing.T) {
	srv, _ := server(t, goodBody)
	dir := t.TempDir()
	_, err := Fetch(context.Background(), Options{Dir: dir, BaseURL: srv.URL, MaxBytes: 10, Files: []File{{Name: "a.jsonl", SHA256: sha256hex(goodBody)}}})
	if err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Fatalf("err = %v, want a size-limit error", err)
	}
	onlyFiles(t, dir)
}

func TestOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{MaxBytes: -1}, "max bytes: -1"},
		{Options{BaseURL: "ftp://x"}, "base URL"},
		{Options{Names: []string{"nope"}}, `unknown trace "nope" (known: all, conversation, synthetic, toolagent)`},
	} {
		err := tt.opts.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.opts, err, tt.want)
		}
	}
	if err := (Options{Names: []string{"all"}}).Validate(); err != nil {
		t.Errorf("all: %v", err)
	}
}

func TestURL(t *testing.T) {
	want := "https://raw.githubusercontent.com/kvcache-ai/Mooncake/" + PinnedCommit + "/FAST25-release/traces/conversation_trace.jsonl"
	for _, base := range []string{DefaultBaseURL, DefaultBaseURL + "/"} {
		if got := URL(base, PinnedCommit, "conversation_trace.jsonl"); got != want {
			t.Errorf("URL = %q, want %q", got, want)
		}
	}
}

// TestKnownHashesMatchSharedTraces checks the constants against the
// published files when they are available.
func TestKnownHashesMatchSharedTraces(t *testing.T) {
	shared := tracetest.Dir(t)
	checked := 0
	for _, f := range Known() {
		p := filepath.Join(shared, f.Name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, _, ok := present(p, f); !ok {
			t.Errorf("%s does not match its recorded hashes", p)
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no known trace in", shared)
	}
}
