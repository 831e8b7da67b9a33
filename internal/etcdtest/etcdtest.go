// Package etcdtest runs a real etcd server for tests: the etcd binary on
// PATH (Debian's etcd-server package), on loopback ports it picks, with a
// data directory of the test's. A test that needs etcd calls Start; where
// the binary is missing it skips saying so, except under CI (CI set),
// where .ci/run installs it and a missing binary is a failure.
package etcdtest

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one etcd process.
type Server struct {
	// Endpoint is its client URL (http://127.0.0.1:port).
	Endpoint string

	t               testing.TB
	bin, dir        string
	clientP, peerP  int
	mu              sync.Mutex
	cmd             *exec.Cmd
	exited          chan struct{}
	log             *bytes.Buffer
	paused, stopped bool
}

// Start starts etcd and waits until it answers /health; it is stopped
// (resumed first if paused) when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("etcd is not on PATH (.ci/run installs Debian's etcd-server): %v", err)
		}
		t.Skipf("etcd is not on PATH (install Debian's etcd-server as root to run this test): %v", err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), log: &bytes.Buffer{}}
	s.clientP, s.peerP = freePort(t), freePort(t)
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.clientP)
	s.start()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("etcd output:\n%s", s.log.String())
			s.mu.Unlock()
		}
	})
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs etcd on the server's ports and data directory and waits for
// it to be healthy.
func (s *Server) start() {
	s.t.Helper()
	peer := "http://127.0.0.1:" + strconv.Itoa(s.peerP)
	cmd := exec.Command(s.bin,
		"--name", "kvpool-test",
		"--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", s.Endpoint,
		"--advertise-client-urls", s.Endpoint,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "kvpool-test="+peer,
	)
	s.mu.Lock()
	cmd.Stdout, cmd.Stderr = lockedWriter{&s.mu, s.log}, lockedWriter{&s.mu, s.log}
	s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.paused, s.stopped = cmd, exited, false, false
	s.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for !s.healthy() {
		select {
		case <-exited:
			s.t.Fatalf("etcd exited while starting:\n%s", s.output())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("etcd not healthy a minute after it started:\n%s", s.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) healthy() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(s.Endpoint + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *Server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Pause freezes etcd (SIGSTOP): connections stay open, nothing answers.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, true) }

// Resume lets a paused etcd run again (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Errorf("etcd: %v: %v", sig, err)
		return
	}
	s.paused = paused
}

// Stop ends etcd (SIGTERM, SIGKILL after 10 s) and waits for it; its data
// stay for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	cmd, exited, paused := s.cmd, s.exited, s.paused
	s.mu.Unlock()
	if paused {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// Restart stops etcd and starts it again with the same data and ports.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// lockedWriter appends to a buffer under a lock.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
