package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/client"
)

// serveConns is a loopback listener that runs handle on each connection
// it accepts (handle closes nothing; the connection is closed after it).
// It stops at cleanup, waiting for every handler.
func serveConns(t *testing.T, handle func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer nc.Close()
				handle(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Wait()
	})
	return ln.Addr().String()
}

// respServer is a listener that answers every line, and every chunk that
// is not a line, with a RESP error, as a Redis server answers an unknown
// command. It stops at cleanup.
func respServer(t *testing.T) string {
	t.Helper()
	return serveConns(t, func(nc net.Conn) {
		buf := make([]byte, 512)
		for {
			if _, err := nc.Read(buf); err != nil {
				return
			}
			if _, err := nc.Write([]byte("-ERR unknown command\r\n")); err != nil {
				return
			}
		}
	})
}

// inlineRESPServer is a listener that behaves as a real Redis server
// does to what is not RESP: it waits for a whole line (an inline
// command), answers it with a RESP error, and closes the connection at a
// "Host:" line (Redis's guard against HTTP requests). A HELLO, with no
// line end, gets no answer. It stops at cleanup.
func inlineRESPServer(t *testing.T) string {
	t.Helper()
	return serveConns(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			line, err := r.ReadString('\n')
			if err != nil || strings.HasPrefix(strings.ToLower(line), "host:") {
				return
			}
			cmd, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if _, err := nc.Write([]byte("-ERR unknown command '" + cmd + "'\r\n")); err != nil {
				return
			}
		}
	})
}

// httpServer is a real net/http server on loopback, stopped at cleanup.
func httpServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestCtlWrongEndpoint: ctl and client.New pointed at something that is
// not a master say what it looks like, without waiting for a timeout.
func TestCtlWrongEndpoint(t *testing.T) {
	multiProcess(t)
	node := startNode(t, nil, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	defer node.stop(t)
	for _, tc := range []struct {
		name, addr, want string
	}{
		{"node data port", node.addr, "it looks like a kvpool node's data port"},
		{"node admin port", node.admin, "it looks like an HTTP server"},
		{"http.Server", httpServer(t), "it looks like an HTTP server"},
		{"RESP server", respServer(t), "it looks like a Redis server"},
		{"Redis-like server waiting for a line", inlineRESPServer(t), "it looks like a Redis server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.addr + " is not a kvpool master: " + tc.want
			var out, errb bytes.Buffer
			code := runWith(context.Background(), []string{"ctl", "--master", tc.addr, "nodes"}, &out, &errb, hooks{})
			if code == 0 || !strings.Contains(errb.String(), want) {
				t.Fatalf("ctl nodes: exit %d, stderr %q; want a failure saying %q", code, errb.String(), want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := client.New(ctx, client.Options{Master: tc.addr})
			if err == nil {
				c.Close()
				t.Fatal("client.New succeeded")
			}
			if !errors.Is(err, kvpool.ErrUnavailable) || !strings.Contains(err.Error(), want) {
				t.Fatalf("client.New: %v; want ErrUnavailable saying %q", err, want)
			}
			if ctx.Err() != nil {
				t.Fatal("client.New waited for its deadline")
			}
		})
	}
}

// TestReadPayload: ctl put reads a file of 0 bytes, 1 byte and exactly
// the limit whole, and refuses one over it — a regular file by its size
// before reading (a sparse 5 GiB file here), a pipe as soon as more than
// the limit arrives — with the size, the limit and the setting.
func TestReadPayload(t *testing.T) {
	const limit = 1 << 20
	dir := t.TempDir()
	write := func(name string, n int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(n); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	for _, n := range []int64{0, 1, limit} {
		got, err := readPayload(write(fmt.Sprint(n), n), nil, limit)
		if err != nil || int64(len(got)) != n {
			t.Errorf("file of %d bytes: read %d, %v", n, len(got), err)
		}
	}
	for _, tc := range []struct {
		name, file string
		stdin      io.Reader
		want       string
	}{
		{"max+1", write("max1", limit+1), nil, "1048577 bytes (1.0 MiB), more than 1.0 MiB"},
		{"5 GiB", write("huge", 5<<30), nil, "5368709120 bytes (5.0 GiB), more than 1.0 MiB"},
		{"pipe", "-", io.LimitReader(zeros{}, 3<<20), "- is over 1048576 bytes, more than 1.0 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readPayload(tc.file, tc.stdin, limit)
			if !errors.Is(err, kvpool.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--max-object-bytes") {
				t.Fatalf("readPayload = %v; want ErrTooLarge saying %q and naming --max-object-bytes", err, tc.want)
			}
		})
	}
	if _, err := readPayload(filepath.Join(dir, "missing"), nil, limit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
