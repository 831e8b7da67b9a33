package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvpool/kvpool/internal/netns"
)

// proc is one running process of the cluster. Its waiter goroutine is
// owned by the proc: done closes when the process has exited and been
// reaped.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, set before done closes
	// ended is set when the cluster ended the process on purpose, so its
	// exit is not a failure.
	ended atomic.Bool
	// tail holds the last lines of its output.
	tail lineTail
}

// startProc starts binary args as a process named name in its own process
// group, with this process's environment plus env, and its output
// line-prefixed into stdout and stderr (writes serialised by outMu). The
// last lines of its output are kept for the error of an early exit. The
// process gets SIGKILL when the thread that starts it exits
// (sysProcAttr), so call it through the cluster's spawner.
func startProc(name, binary string, args, env []string, stdout, stderr io.Writer, outMu *sync.Mutex) (*proc, error) {
	cmd := exec.Command(binary, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = &tailWriter{w: newPrefixWriter(stdout, name, outMu), t: &p.tail}
	cmd.Stderr = &tailWriter{w: newPrefixWriter(stderr, name, outMu), t: &p.tail}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: start %s (%s %v): %w", name, binary, args, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// spawner starts the cluster's processes, all from one goroutine locked
// to its OS thread for the cluster's life.
//
// Every process is started with Linux's parent-death signal (SIGKILL,
// sysProcAttr), so that `kvpool up` killed with SIGKILL takes its master
// and nodes with it. The kernel sends that signal when the *thread* that
// forked the child exits, not the process. The Go runtime keeps its
// threads for the life of the process, with one exception: a goroutine
// that ends while locked to its thread (runtime.LockOSThread) takes the
// thread down with it, and any goroutine, ours or a library's, may run
// on the thread that happened to fork a child. Forking from a goroutine
// that holds its thread locked closes that hole: no other goroutine runs
// on the thread while it is locked, and it is unlocked (returned to the
// runtime, never ended) only after Stop, when every process it started
// has been stopped. Processes still running when this process dies, for
// whatever reason, then get the signal: the thread dies with the process.
//
// A spawner's methods may be called from several goroutines; one start
// runs at a time.
type spawner struct {
	mu     sync.Mutex // held while a request is served; guards closed
	closed bool
	reqs   chan func()
	done   chan struct{} // closed when the goroutine has ended
}

// newSpawner starts the spawner's goroutine; close stops it.
func newSpawner() *spawner {
	s, _ := newSpawnerIn("")
	return s
}

// newSpawnerIn starts a spawner whose thread has entered the network
// namespace whose file is ns ("" for this process's own), so that the
// processes it starts live on that network host (netns). A thread that
// entered another namespace is never handed back to the runtime: its
// goroutine ends locked, and the thread with it.
func newSpawnerIn(ns string) (*spawner, error) {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	entered := make(chan error, 1)
	go func() {
		defer close(s.done)
		runtime.LockOSThread()
		if ns != "" {
			if err := netns.Enter(ns); err != nil {
				entered <- err
				return // the thread ends: it may have half entered
			}
		} else {
			defer runtime.UnlockOSThread()
		}
		entered <- nil
		for f := range s.reqs {
			f()
		}
	}()
	if err := <-entered; err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return s, nil
}

// start runs startProc on the spawner's thread.
func (s *spawner) start(name, binary string, args, env []string, stdout, stderr io.Writer, outMu *sync.Mutex) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("cluster: start %s: the cluster is stopped", name)
	}
	var (
		p   *proc
		err error
	)
	ran := make(chan struct{})
	s.reqs <- func() {
		p, err = startProc(name, binary, args, env, stdout, stderr, outMu)
		close(ran)
	}
	<-ran
	return p, err
}

// close stops the goroutine and waits for it; later starts fail. Call it
// only once the processes it started have ended.
func (s *spawner) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.mu.Unlock()
	<-s.done
}

// tailLines is how many lines of a process's output are kept for the
// error of an early exit: 8, enough for a failing process's last log
// lines and its error.
const tailLines = 8

// lineTail keeps the last tailLines complete lines written through its
// tailWriters (a process's stdout and stderr), under its lock.
type lineTail struct {
	mu    sync.Mutex
	lines []string
}

// add records line, dropping the oldest beyond tailLines.
func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == tailLines {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, line)
}

// last returns the lines kept, oldest first.
func (t *lineTail) last() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

// maxTailLine bounds a kept line: 1 KiB, a log line with its error.
const maxTailLine = 1 << 10

// tailWriter writes through to w and records complete lines in t. One
// stream (stdout or stderr) writes through it, from one goroutine.
type tailWriter struct {
	w   io.Writer
	t   *lineTail
	buf []byte
}

// Write passes p on and records the lines it completes.
func (tw *tailWriter) Write(p []byte) (int, error) {
	tw.buf = append(tw.buf, p...)
	for {
		i := bytes.IndexByte(tw.buf, '\n')
		if i < 0 {
			break
		}
		tw.t.add(string(tw.buf[:min(i, maxTailLine)]))
		tw.buf = tw.buf[i+1:]
	}
	if len(tw.buf) > maxTailLine {
		tw.buf = tw.buf[:0] // a line this long is not a short error
	}
	return tw.w.Write(p)
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitState waits, up to timeout, until every thread of the process is
// in one of states ('T' stopped, 't' traced, ...) as /proc/<pid>/task/*/stat
// shows them. Where /proc cannot be read it returns at once: the wait is a
// refinement for the systems that have one.
func (p *proc) waitState(timeout time.Duration, states ...byte) error {
	tasks := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	deadline := time.Now().Add(timeout)
	for {
		state, ok := p.taskStates(tasks, states)
		if ok {
			return nil
		}
		if p.exited() {
			return errors.New("it exited")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a thread still in state %c after %v", state, timeout)
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-t.C:
		case <-p.done:
			t.Stop()
		}
	}
}

// taskStates reports whether every thread listed under tasks is in one of
// states (true as well when /proc cannot be read), and otherwise the state
// of one that is not.
func (p *proc) taskStates(tasks string, states []byte) (byte, bool) {
	ents, err := os.ReadDir(tasks)
	if err != nil {
		return 0, true
	}
	for _, e := range ents {
		b, err := os.ReadFile(tasks + "/" + e.Name() + "/stat")
		if err != nil {
			continue // the thread has ended
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold spaces or parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return 0, true
		}
		if bytes.IndexByte(states, b[i+2]) < 0 {
			return b[i+2], false
		}
	}
	return 0, true
}

// signal sends sig to the process's group.
func (p *proc) signal(sig syscall.Signal) {
	if p.exited() {
		return
	}
	// The group's id is the leader's pid (Setpgid). An error means the
	// group is already gone, which is what was wanted.
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill sends SIGKILL to the group and waits for the process to be reaped.
func (p *proc) kill() {
	p.ended.Store(true)
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, waits up to timeout, then SIGKILLs. It returns an
// error when the process had to be killed or exited with a failure.
func (p *proc) stop(timeout time.Duration) error {
	if p.exited() {
		return nil
	}
	p.ended.Store(true)
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
		return fmt.Errorf("cluster: %s ignored SIGTERM for %v; killed", p.name, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && !ee.Exited() {
		return nil // ended by our signal
	}
	if p.err != nil {
		return fmt.Errorf("cluster: %s exited after SIGTERM: %w", p.name, p.err)
	}
	return nil
}

// prefixWriter prefixes every line written through it with "[name] " and
// writes whole lines to w, under a lock shared by every process of the
// cluster.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix []byte
	buf    []byte
}

func newPrefixWriter(w io.Writer, name string, mu *sync.Mutex) io.Writer {
	if w == io.Discard {
		return w
	}
	return &prefixWriter{w: w, mu: mu, prefix: []byte("[" + name + "] ")}
}

// Write buffers p and writes out its complete lines. exec.Cmd calls it
// from one goroutine per stream.
func (pw *prefixWriter) Write(p []byte) (int, error) {
	pw.buf = append(pw.buf, p...)
	for {
		i := bytes.IndexByte(pw.buf, '\n')
		if i < 0 {
			break
		}
		line := append(append([]byte(nil), pw.prefix...), pw.buf[:i+1]...)
		pw.mu.Lock()
		_, err := pw.w.Write(line)
		pw.mu.Unlock()
		pw.buf = pw.buf[i+1:]
		if err != nil {
			return len(p), nil // a failing log sink must not kill the process
		}
	}
	return len(p), nil
}
