package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

// nodeStopBound is how long a node may take to exit after SIGTERM before
// the test calls it hung: shutdown finishes requests in flight and syncs
// the SSD tier, milliseconds here; 30 s leaves room for a loaded machine
// under -race.
const nodeStopBound = 30 * time.Second

// nodeProc is a `kvpool node` subprocess (the test binary re-executed as
// kvpool, see TestMain).
type nodeProc struct {
	cmd         *exec.Cmd
	addr, admin string
	startup     string // the startup log line

	mu     sync.Mutex
	stderr bytes.Buffer
	read   sync.WaitGroup // the stderr reader
}

var (
	addrRe  = regexp.MustCompile(` addr=(\S+)`)
	adminRe = regexp.MustCompile(` admin_addr=(\S+)`)
)

// startNode runs `kvpool node args...` with env added to a clean
// environment (no KVPOOL_ or MOONCAKE_ variables of the parent), and
// waits for its startup line.
func startNode(t *testing.T, env []string, args ...string) *nodeProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary to re-execute: %v", err)
	}
	cmd := exec.Command(exe, append([]string{"node"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KVPOOL_") && !strings.HasPrefix(kv, "MOONCAKE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, asKvpoolEnv+"=1"), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &nodeProc{cmd: cmd}
	lines := make(chan string, 64)
	p.read.Add(1)
	go func() {
		defer p.read.Done()
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case lines <- sc.Text():
			default: // nobody waits for lines any more
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
		p.read.Wait()
	})
	timeout := time.NewTimer(nodeStopBound)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				p.cmd.Wait()
				p.read.Wait()
				t.Fatalf("kvpool node exited before serving (%v):\n%s", p.cmd.ProcessState, p.log())
			}
			a, b := addrRe.FindStringSubmatch(line), adminRe.FindStringSubmatch(line)
			if a != nil && b != nil && strings.Contains(line, "kvpool node: RAM") {
				p.addr, p.admin, p.startup = a[1], b[1], line
				return p
			}
		case <-timeout.C:
			t.Fatalf("no startup line within %v:\n%s", nodeStopBound, p.log())
		}
	}
}

func (p *nodeProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop sends SIGTERM and requires a clean exit (status 0) within
// nodeStopBound.
func (p *nodeProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	timer := time.NewTimer(nodeStopBound)
	defer timer.Stop()
	select {
	case err := <-done:
		p.read.Wait()
		if err != nil {
			t.Fatalf("kvpool node after SIGTERM: %v\n%s", err, p.log())
		}
	case <-timer.C:
		p.cmd.Process.Kill()
		<-done
		t.Fatalf("kvpool node did not exit within %v of SIGTERM:\n%s", nodeStopBound, p.log())
	}
}

// TestNodeProcess: a real node process serves puts and gets (RAM
// overflowing to SSD), exits 0 on SIGTERM, and a restart on the same SSD
// directory serves the demoted blocks again.
func TestNodeProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := filepath.Join(t.TempDir(), "ssd")
	args := []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--ram-bytes", "8MiB",
		"--block-size", "64KiB", "--ssd-enabled", "--ssd-path", dir, "--ssd-bytes", "64MiB"}
	p := startNode(t, nil, args...)
	if !strings.Contains(p.startup, "SSD "+dir) || strings.Contains(p.startup, "offload: off") {
		t.Errorf("startup line does not say SSD offload is on at %s: %s", dir, p.startup)
	}
	ctx := context.Background()
	pool, err := nodeclient.NewPool(p.addr, nodeclient.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 200, 64 << 10 // 12.5 MiB through an 8 MiB RAM tier
	for i := range uint64(n) {
		if err := pool.Put(ctx, i, testPayload(i, size)); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	for i := range uint64(n) {
		got, _, err := pool.Get(ctx, i, nil)
		if err != nil || !bytes.Equal(got, testPayload(i, size)) {
			t.Fatalf("Get %d: %d bytes, %v", i, len(got), err)
		}
	}
	pool.Close()
	p.stop(t)

	p2 := startNode(t, nil, args...)
	if !strings.Contains(p2.startup, "ssd_recovered=") || strings.Contains(p2.startup, "ssd_recovered=0 ") {
		t.Errorf("restart found no blocks on SSD: %s", p2.startup)
	}
	pool2, err := nodeclient.NewPool(p2.addr, nodeclient.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	found := 0
	for i := range uint64(n) {
		got, _, err := pool2.Get(ctx, i, nil)
		switch {
		case errors.Is(err, kvpool.ErrNotFound): // was only in RAM
		case err != nil:
			t.Fatalf("Get %d after restart: %v", i, err)
		case !bytes.Equal(got, testPayload(i, size)):
			t.Fatalf("Get %d after restart: wrong bytes", i)
		default:
			found++
		}
	}
	// RAM holds at most 128 blocks of 64 KiB; every other block was
	// demoted and must be back.
	if found < n-128 {
		t.Errorf("restart serves %d of %d blocks, want at least %d", found, n, n-128)
	}
	pool2.Close()
	p2.stop(t)
}

// TestNodeProcessStartupLine: the startup line says truthfully whether
// SSD offload is on, including when Mooncake's variables turn it on.
func TestNodeProcessStartupLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	base := []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--ram-bytes", "4MiB", "--block-size", "64KiB"}
	mooncakeDir := filepath.Join(t.TempDir(), "mooncake")
	cases := []struct {
		name    string
		env     []string
		args    []string
		want    []string
		ssdDir  string // must hold slot files while the node runs
		notWant string
	}{
		{name: "off by default", want: []string{"SSD offload: off (default)"}},
		{name: "mooncake env",
			env:    []string{"MOONCAKE_OFFLOAD_ENABLED=1", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=" + mooncakeDir},
			args:   []string{"--ssd-bytes", "8MiB"},
			want:   []string{"SSD " + mooncakeDir, "env MOONCAKE_OFFLOAD_ENABLED", "env MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"},
			ssdDir: mooncakeDir, notWant: "offload: off"},
		{name: "mooncake env off", env: []string{"MOONCAKE_OFFLOAD_ENABLED=0"},
			want: []string{"SSD offload: off (env MOONCAKE_OFFLOAD_ENABLED)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startNode(t, c.env, append(base, c.args...)...)
			for _, w := range c.want {
				if !strings.Contains(p.startup, w) {
					t.Errorf("startup line lacks %q: %s", w, p.startup)
				}
			}
			if c.notWant != "" && strings.Contains(p.startup, c.notWant) {
				t.Errorf("startup line has %q: %s", c.notWant, p.startup)
			}
			if c.ssdDir != "" {
				files, _ := filepath.Glob(filepath.Join(c.ssdDir, "pages-*"))
				if len(files) == 0 {
					t.Errorf("SSD offload said on, but %s holds no page files", c.ssdDir)
				}
			}
			p.stop(t)
		})
	}
}

// TestNodeBadFlags: configuration errors are usage errors naming the
// setting.
func TestNodeBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--ram-bytes", "lots"}, "ram.bytes"},
		{[]string{"--ssd-enabled"}, "ssd.path"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"stray"}, "unexpected argument"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"node"}, c.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("kvpool node %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}
