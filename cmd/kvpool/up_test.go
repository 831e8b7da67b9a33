package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/cluster"
)

// upProc is a `kvpool up` (or master) process of the test binary, with
// its output collected.
type upProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr cluster.Output
	lines  chan string // stdout lines
	done   chan struct{}
}

// startUp runs `kvpool args...` as a process of its own, with TMPDIR set
// to tmp (so the temporary cluster directories it makes and cleans are
// the test's), and kills it at cleanup.
func startUp(t *testing.T, tmp string, args ...string) *upProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), asKvpoolEnv+"=1", "TMPDIR="+tmp)
	p := &upProc{cmd: cmd, lines: make(chan string, 256), done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("kvpool %v stdout:\n%s\nstderr:\n%s", args, p.out(), p.errOut())
		}
	})
	return p
}

func (p *upProc) out() string    { p.mu.Lock(); defer p.mu.Unlock(); return p.stdout.String() }
func (p *upProc) errOut() string { return p.stderr.String() }

// waitLine waits for a stdout line starting with prefix.
func (p *upProc) waitLine(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-p.done:
			t.Fatalf("kvpool exited (%v) before printing %q", p.cmd.ProcessState, prefix)
		case <-deadline.C:
			t.Fatalf("no %q line within %v", prefix, timeout)
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *upProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("kvpool did not exit within %v", timeout)
		return 0
	}
}

// freePorts returns a base port with n consecutive ports free at the moment
// of the check (FreePortRange).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	base, err := cluster.FreePortRange("127.0.0.1", n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// adminNodes returns the node IDs the master at admin lists.
func adminNodes(t *testing.T, admin string) []string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ns []struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ns); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range ns {
		ids = append(ids, n.ID)
	}
	return ids
}

// TestUpAddressTaken: `up --base-port` with a taken address (a plain
// listener, a foreign kvpool master, a node's port) exits non-zero naming
// the address, and none of its nodes registers with the foreign master.
func TestUpAddressTaken(t *testing.T) {
	multiProcess(t)
	for _, tc := range []struct {
		name    string
		offset  int  // of the taken port from the base
		foreign bool // a real kvpool master holds base and base+1
		who     string
	}{
		{"master port, plain listener", 0, false, "master"},
		{"master ports, foreign master", 0, true, "master"},
		{"node port, plain listener", 4, false, "node-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			base := freePorts(t, 8)
			taken := "127.0.0.1:" + strconv.Itoa(base+tc.offset)
			admin := "127.0.0.1:" + strconv.Itoa(base+1)
			if tc.foreign {
				startUp(t, tmp, "master", "--listen", taken, "--admin-listen", admin, "--cluster-id", "foreign")
				eventually(t, "the foreign master answers", time.Minute, func() (bool, string) {
					resp, err := http.Get("http://" + admin + "/health")
					if err != nil {
						return false, err.Error()
					}
					resp.Body.Close()
					return true, ""
				})
			} else {
				ln, err := net.Listen("tcp", taken)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
			}
			up := startUp(t, tmp, "up", "--nodes", "3", "--base-port", strconv.Itoa(base))
			if code := up.wait(t, time.Minute); code == 0 {
				t.Fatalf("up exited 0 with %s taken", taken)
			}
			want := tc.who + " cannot listen on " + taken + ": address already in use (another process holds it)"
			if !strings.Contains(up.errOut(), want) {
				t.Fatalf("up's error lacks %q:\n%s", want, up.errOut())
			}
			if strings.Contains(up.out(), "try: kvpool ctl") {
				t.Fatalf("up printed the cluster as running:\n%s", up.out())
			}
			if tc.foreign {
				if ids := adminNodes(t, admin); len(ids) != 0 {
					t.Fatalf("the foreign master lists nodes %v; want none", ids)
				}
			}
			// It left no temporary cluster directory behind.
			if dirs, _ := filepath.Glob(filepath.Join(tmp, "kvpool-cluster-*")); len(dirs) != 0 {
				t.Fatalf("up left %v", dirs)
			}
		})
	}
}

// procGone reports whether pid has ended (a zombie has: its command line
// is empty).
func procGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err != nil || len(b) == 0
}

// TestUpKill9NoOrphans: kill -9 of `kvpool up` takes its master and nodes
// down (parent-death signal), and the next `up` removes the temporary
// directory it left.
func TestUpKill9NoOrphans(t *testing.T) {
	multiProcess(t)
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	tmp := t.TempDir()
	up := startUp(t, tmp, "up", "--nodes", "2", "--quiet")
	up.waitLine(t, "try:", 2*time.Minute)
	dirs, err := filepath.Glob(filepath.Join(tmp, "kvpool-cluster-*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("cluster directories %v, %v; want one", dirs, err)
	}
	b, err := os.ReadFile(filepath.Join(dirs[0], "owner.json"))
	if err != nil {
		t.Fatal(err)
	}
	var owner struct {
		PID      int   `json:"pid"`
		Children []int `json:"children"`
	}
	if err := json.Unmarshal(b, &owner); err != nil {
		t.Fatal(err)
	}
	if owner.PID != up.cmd.Process.Pid || len(owner.Children) != 3 {
		t.Fatalf("owner file %s; want up's pid %d and 3 children", b, up.cmd.Process.Pid)
	}
	for _, pid := range owner.Children {
		if procGone(pid) {
			t.Fatalf("child %d is not running before the kill", pid)
		}
	}
	if err := syscall.Kill(up.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	up.wait(t, time.Minute)
	eventually(t, "up's master and nodes are gone", 30*time.Second, func() (bool, string) {
		for _, pid := range owner.Children {
			if !procGone(pid) {
				return false, "process " + strconv.Itoa(pid) + " still runs"
			}
		}
		return true, ""
	})
	if _, err := os.Stat(dirs[0]); err != nil {
		t.Fatalf("the killed up's directory is already gone: %v", err)
	}
	// The next up removes it.
	next := startUp(t, tmp, "up", "--nodes", "1")
	next.waitLine(t, "try:", 2*time.Minute)
	if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
		t.Fatalf("stale directory %s still there after the next up: %v", dirs[0], err)
	}
	if !strings.Contains(next.errOut(), "removed the stale cluster directory "+dirs[0]) {
		t.Errorf("the next up did not say it removed %s:\n%s", dirs[0], next.errOut())
	}
	if err := next.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := next.wait(t, time.Minute); code != 0 {
		t.Fatalf("up exited %d after SIGINT", code)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "kvpool-cluster-*")); len(left) != 0 {
		t.Fatalf("directories left after a clean stop: %v", left)
	}
}

// TestClusterIDProcesses: `kvpool master --cluster-id` and `kvpool node`
// with its cluster ID from the flag or $KVPOOL_CLUSTER_ID: a node of
// another cluster, or of none, is refused and says so on both sides; a
// node of the master's cluster joins.
func TestClusterIDProcesses(t *testing.T) {
	multiProcess(t)
	base := freePorts(t, 2)
	addr, admin := "127.0.0.1:"+strconv.Itoa(base), "127.0.0.1:"+strconv.Itoa(base+1)
	m := startUp(t, t.TempDir(), "master", "--listen", addr, "--admin-listen", admin, "--cluster-id", "c-a", "--heartbeat", "200ms")
	eventually(t, "the master answers", time.Minute, func() (bool, string) {
		resp, err := http.Get("http://" + admin + "/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.Header.Get("Kvpool-Cluster-Id") == "c-a", "no cluster ID header"
	})
	nodeArgs := func(name string) []string {
		return []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--node-name", name,
			"--master", addr, "--heartbeat-interval", "200ms"}
	}
	other := startNode(t, []string{"KVPOOL_CLUSTER_ID=c-b"}, nodeArgs("other")...)
	none := startNode(t, nil, nodeArgs("none")...)
	for _, w := range []struct {
		what string
		log  func() string
		text string
	}{
		{"the node of cluster c-b", other.log, "the peer is for cluster c-b, this master is cluster c-a"},
		{"the master, of the c-b node", m.errOut, "the peer is for cluster c-b, this master is cluster c-a"},
		{"the node without an ID", none.log, "node none has no cluster ID, this master is cluster c-a"},
		{"the master, of the node without an ID", m.errOut, "node none has no cluster ID, this master is cluster c-a"},
	} {
		eventually(t, w.what+" says why it was refused", time.Minute, func() (bool, string) {
			return strings.Contains(w.log(), w.text), "no " + strconv.Quote(w.text)
		})
	}
	good := startNode(t, nil, append(nodeArgs("good"), "--cluster-id", "c-a")...)
	eventually(t, "the node of cluster c-a is listed", time.Minute, func() (bool, string) {
		ids := adminNodes(t, admin)
		return len(ids) == 1 && ids[0] == "good", strings.Join(ids, ",")
	})
	good.stop(t)
	other.stop(t)
	none.stop(t)
}

// TestUpSSDOffIgnoresEnv: an up without --ssd starts nodes without an SSD
// tier even when the environment turns SSD offload on for `kvpool node`
// (KVPOOL_SSD_ENABLED and one KVPOOL_SSD_PATH, which every node of the
// cluster would share).
func TestUpSSDOffIgnoresEnv(t *testing.T) {
	multiProcess(t)
	shared := filepath.Join(t.TempDir(), "shared-ssd")
	t.Setenv("KVPOOL_SSD_ENABLED", "true")
	t.Setenv("KVPOOL_SSD_PATH", shared)
	up := startUp(t, t.TempDir(), "up", "--nodes", "2", "--quiet")
	up.waitLine(t, "try:", 2*time.Minute)
	if _, err := os.Stat(shared); !os.IsNotExist(err) {
		t.Fatalf("a node of up used the environment's SSD path %s (%v)", shared, err)
	}
}

// TestUpMasters: `kvpool up --masters 3` starts etcd and three masters,
// prints which one leads, and `kvpool ctl leader` given the three agrees;
// after kill -9 of `up`, its masters, nodes and etcd are all gone.
func TestUpMasters(t *testing.T) {
	multiProcess(t)
	needEtcd(t)
	tmp := t.TempDir()
	up := startUp(t, tmp, "up", "--masters", "3", "--nodes", "2", "--election-ttl", "2s", "--resp=false", "--quiet")
	try := up.waitLine(t, "try:", 2*time.Minute)
	out := up.out()
	var leader, epoch string
	var masters []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || !strings.HasPrefix(f[0], "master-") {
			continue
		}
		masters = append(masters, f[2])
		if strings.Contains(l, "(leader, epoch ") {
			leader, epoch = f[2], strings.TrimSuffix(f[len(f)-1], ")")
		}
	}
	if len(masters) != 3 || leader == "" || !strings.Contains(out, "etcd     http://") {
		t.Fatalf("up printed %d masters, leader %q:\n%s", len(masters), leader, out)
	}
	list := strings.Join(masters, ",")
	if !strings.Contains(try, list) {
		t.Errorf("the hint %q does not name the three masters %s", try, list)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ctl", "--master", list, "leader"}, &stdout, &stderr); code != 0 {
		t.Fatalf("ctl leader: exit %d: %s", code, stderr.String())
	}
	if want := "leader " + leader + " epoch " + epoch + "\n"; !strings.HasSuffix(stdout.String(), want) {
		t.Errorf("ctl leader printed:\n%s\nwant it to end with %q", stdout.String(), want)
	}
	if n := strings.Count(stdout.String(), "stands by; the leader is "+leader); n != 2 {
		t.Errorf("ctl leader: %d standbys name %s, want 2:\n%s", n, leader, stdout.String())
	}

	dirs, err := filepath.Glob(filepath.Join(tmp, "kvpool-cluster-*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("cluster directories %v, %v; want one", dirs, err)
	}
	b, err := os.ReadFile(filepath.Join(dirs[0], "owner.json"))
	if err != nil {
		t.Fatal(err)
	}
	var owner struct {
		Children []int `json:"children"`
		Etcd     int   `json:"etcd"`
	}
	if err := json.Unmarshal(b, &owner); err != nil {
		t.Fatal(err)
	}
	if len(owner.Children) != 5 || owner.Etcd == 0 {
		t.Fatalf("owner file %s; want 5 children (3 masters, 2 nodes) and etcd", b)
	}
	if err := syscall.Kill(up.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	up.wait(t, time.Minute)
	eventually(t, "up's masters, nodes and etcd are gone", 30*time.Second, func() (bool, string) {
		for _, pid := range append(owner.Children, owner.Etcd) {
			if !procGone(pid) {
				return false, "process " + strconv.Itoa(pid) + " still runs"
			}
		}
		return true, ""
	})
}
