package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
}

// startProc starts binary args as a process named name in its own process
// group, with this process's environment plus env, and its output
// line-prefixed into stdout and stderr (writes serialised by outMu).
func startProc(name, binary string, args, env []string, stdout, stderr io.Writer, outMu *sync.Mutex) (*proc, error) {
	cmd := exec.Command(binary, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = newPrefixWriter(stdout, name, outMu)
	cmd.Stderr = newPrefixWriter(stderr, name, outMu)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: start %s (%s %v): %w", name, binary, args, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
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
