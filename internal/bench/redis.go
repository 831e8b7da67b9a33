package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// redisTarget reads (and writes) the working set on a redis-server at
// Spec.Addr with GET/SET, pipelining Depth commands per connection. Keys
// are "kvpool-bench:<id>", or the objects' names when Spec.Named (so the
// comparison with the node's named GETs sends the same keys).
type redisTarget struct {
	conns []net.Conn
}

func redisKey(id uint64) string { return "kvpool-bench:" + strconv.FormatUint(id, 10) }

func (t *redisTarget) Start(ctx context.Context, spec Spec) ([]Worker, error) {
	n := spec.blocks()
	d := newDataset(n, spec.BlockSize, spec.Named)
	ws := make([]Worker, spec.Conns)
	var dl net.Dialer
	for i := range ws {
		c, err := dl.DialContext(ctx, "tcp", spec.Addr)
		if err != nil {
			return nil, fmt.Errorf("dial redis %s: %w", spec.Addr, err)
		}
		t.conns = append(t.conns, c)
		w := &redisWorker{
			c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10),
			d: d, mix: newMix(i, n, spec.WriteFraction), depth: spec.Depth,
			dst: make([]byte, 0, spec.BlockSize+2), size: spec.BlockSize,
		}
		ws[i] = w
	}
	w0 := ws[0].(*redisWorker)
	for id := range uint64(n) {
		if err := w0.set(id); err != nil {
			return nil, err
		}
		if err := w0.w.Flush(); err != nil {
			return nil, fmt.Errorf("redis %s: send SET: %w", spec.Addr, err)
		}
		if err := w0.expectOK(); err != nil {
			return nil, fmt.Errorf("redis %s: SET %s: %w", spec.Addr, w0.key(id), err)
		}
	}
	return ws, nil
}

func (t *redisTarget) Close() error {
	var errs []error
	for _, c := range t.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type redisWorker struct {
	c      net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	d      *dataset
	mix    mix
	depth  int
	cmd    []byte
	dst    []byte
	size   int
	writes []bool
}

// key is block id's redis key.
func (w *redisWorker) key(id uint64) string {
	if w.d.names != nil {
		return w.d.names[id]
	}
	return redisKey(id)
}

func (w *redisWorker) set(id uint64) error {
	w.cmd = AppendSetHeader(w.cmd[:0], w.key(id), w.size)
	if _, err := w.w.Write(w.cmd); err != nil {
		return fmt.Errorf("send SET: %w", err)
	}
	if _, err := w.w.Write(w.d.payload(id)); err != nil {
		return fmt.Errorf("send SET: %w", err)
	}
	if _, err := w.w.WriteString("\r\n"); err != nil {
		return fmt.Errorf("send SET: %w", err)
	}
	return nil
}

func (w *redisWorker) expectOK() error {
	rep, err := ReadReply(w.r, nil)
	if err != nil {
		return err
	}
	if rep.Kind != '+' || rep.Str != "OK" {
		return fmt.Errorf("%w: SET answered %q, want +OK", ErrRESP, rep.Str)
	}
	return nil
}

// Do sends Depth commands, then reads their Depth replies.
func (w *redisWorker) Do(ctx context.Context) (Op, error) {
	if dl, ok := ctx.Deadline(); ok {
		w.c.SetDeadline(dl)
	}
	w.writes = w.writes[:0]
	for range w.depth {
		id, write := w.mix.next()
		w.writes = append(w.writes, write)
		if write {
			if err := w.set(id); err != nil {
				return Op{}, err
			}
			continue
		}
		w.cmd = AppendGet(w.cmd[:0], w.key(id))
		if _, err := w.w.Write(w.cmd); err != nil {
			return Op{}, fmt.Errorf("send GET: %w", err)
		}
	}
	if err := w.w.Flush(); err != nil {
		return Op{}, fmt.Errorf("send %d commands: %w", w.depth, err)
	}
	var bytes int64
	for i, write := range w.writes {
		if write {
			if err := w.expectOK(); err != nil {
				return Op{}, fmt.Errorf("reply %d of %d: %w", i, w.depth, err)
			}
			bytes += int64(w.size)
			continue
		}
		rep, err := ReadReply(w.r, w.dst)
		if err != nil {
			return Op{}, fmt.Errorf("reply %d of %d: %w", i, w.depth, err)
		}
		if rep.Kind != '$' || len(rep.Bulk) != w.size {
			return Op{}, fmt.Errorf("reply %d of %d: GET returned %c of %d bytes, want %d bytes: %w", i, w.depth, rep.Kind, rep.Int, w.size, errShort)
		}
		bytes += int64(len(rep.Bulk))
	}
	return Op{Ops: int64(w.depth), Bytes: bytes}, nil
}

// RedisServer is a redis-server child process on a free loopback port,
// with persistence off (--save "" --appendonly no).
type RedisServer struct {
	cmd  *exec.Cmd
	addr string
	done chan error
}

// redisStartTimeout bounds how long StartRedis waits for the server to
// accept connections: a local redis-server starts in milliseconds.
const redisStartTimeout = 10 * time.Second

// StartRedis starts the redis-server binary bin (a name looked up in PATH,
// or a path) on a free loopback port and waits until it accepts
// connections. Close stops it.
func StartRedis(ctx context.Context, bin string) (*RedisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("find redis server %q: %w", bin, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	s := &RedisServer{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	wctx, cancel := context.WithTimeout(ctx, redisStartTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var dl net.Dialer
	for {
		c, err := dl.DialContext(wctx, "tcp", s.addr)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			return nil, fmt.Errorf("%s exited before accepting connections on %s: %v", path, s.addr, err)
		case <-wctx.Done():
			s.Close()
			return nil, fmt.Errorf("%s did not accept connections on %s within %v: %w", path, s.addr, redisStartTimeout, err)
		case <-tick.C:
		}
	}
}

// Addr is the server's address.
func (s *RedisServer) Addr() string { return s.addr }

// Close kills the server and waits for it to exit.
func (s *RedisServer) Close() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		<-s.done
		return fmt.Errorf("stop redis-server: %w", err)
	}
	<-s.done
	return nil
}
