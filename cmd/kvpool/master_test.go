package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineWriter is a goroutine-safe log sink that announces the first line
// matching re.
type lineWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	re    *regexp.Regexp
	match chan []string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.match != nil {
		if m := w.re.FindStringSubmatch(w.buf.String()); m != nil {
			w.match <- m
			w.match = nil
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestMasterCommand runs `kvpool master` in-process on ephemeral ports,
// checks its startup line and /health, and that it stops cleanly when its
// context is cancelled.
func TestMasterCommand(t *testing.T) {
	matched := make(chan []string, 1) // read here, never through stderr.match (Write clears that field)
	stderr := &lineWriter{re: regexp.MustCompile(`listening on (\S+), admin http://(\S+);`), match: matched}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := map[string]string{"KVPOOL_MASTER_LEASE_TTL": "7s", envAuthToken: "top-secret-token"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	done := make(chan error, 1)
	go func() {
		done <- runMasterEnv(ctx, []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--node-ttl", "4s", "--eviction-policy", "fifo"}, lookup, stderr)
	}()
	var m []string
	select {
	case m = <-matched:
	case err := <-done:
		t.Fatalf("master exited before its startup line: %v\n%s", err, stderr)
	case <-time.After(10 * time.Second):
		t.Fatalf("no startup line after 10 s:\n%s", stderr)
	}
	line := stderr.String()
	for _, want := range []string{"node TTL 4s", "heartbeat 1s", "lease 7s", "eviction fifo", "max promotions per heartbeat 16", "auth on"} {
		if !strings.Contains(line, want) {
			t.Errorf("startup line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "top-secret-token") {
		t.Error("the startup line shows the token")
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + m[2] + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("/health: %d %s", resp.StatusCode, body)
	}
	tr.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("master returned %v after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("master did not stop within 10 s of cancel")
	}
	if !strings.Contains(stderr.String(), "kvpool master: stopped") {
		t.Errorf("no stop line:\n%s", stderr)
	}
}

// TestMasterCommandBadInput: bad flags and environment values are usage
// errors naming what was wrong.
func TestMasterCommandBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad duration flag", []string{"--node-ttl", "soon"}, nil, "node-ttl"},
		{"bad env", nil, map[string]string{"KVPOOL_MASTER_NODE_TTL": "x"}, "KVPOOL_MASTER_NODE_TTL"},
		{"heartbeat not below ttl", []string{"--node-ttl", "1s", "--heartbeat", "2s"}, nil, "--heartbeat"},
		{"unknown policy", []string{"--eviction-policy", "nope"}, nil, "--eviction-policy"},
		{"offline policy", []string{"--eviction-policy", "belady"}, nil, "offline"},
		{"bad placement", []string{"--placement", "random"}, nil, "placement"},
		{"bad listen", []string{"--listen", "nonsense"}, nil, "--listen"},
		{"stray argument", []string{"extra"}, nil, "unexpected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			err := runMasterEnv(context.Background(), c.args, lookup, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want a usage error mentioning %q", err, c.want)
			}
		})
	}
	if code := run(context.Background(), []string{"master", "--help"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("master --help: exit %d", code)
	}
}
