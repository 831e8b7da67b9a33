package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvpool/kvpool/internal/procid"
)

// A cluster in a temporary directory (Options.DataDir "") records who owns
// it in the owner file there, so that a later Start can clean up after an
// owner that died without Stop (kill -9, a crash) on a system where the
// parent-death signal (spawner) did not take the processes down: it
// removes stale directories and kills the processes they list, each
// verified first to be one of that cluster's.
const (
	// tempPattern names the temporary directories (os.MkdirTemp).
	tempPattern = "kvpool-cluster-"
	// ownerFile is the owner file's name in the directory.
	ownerFile = "owner.json"
	// reapTimeout bounds the wait for a killed leftover process to be
	// gone: 2 s, far more than SIGKILL takes.
	reapTimeout = 2 * time.Second
)

// owner is the owner file's content.
type owner struct {
	// PID and Start identify the owning process: its pid and start time
	// (/proc/<pid>/stat, clock ticks since boot; 0 where unknown), so a
	// reused pid is not taken for the owner.
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	// Binary and ClusterID identify the cluster's processes: each runs
	// Binary with "--cluster-id ClusterID" in its arguments.
	Binary    string `json:"binary"`
	ClusterID string `json:"cluster_id"`
	// Children are the pids of the cluster's processes now (a restart
	// ends the old process before it starts the new one).
	Children []int `json:"children"`
	// Etcd is the pid of the cluster's etcd (several masters; 0 for
	// none), recognised by its data directory under the cluster's.
	Etcd int `json:"etcd,omitempty"`
}

// writeOwner records the cluster's owner and current processes in its
// temporary directory (nothing when it has none). It replaces the file
// atomically, so a reader never sees half of it.
func (c *Cluster) writeOwner() error {
	if c.tempDir == "" {
		return nil
	}
	c.mu.Lock()
	o := owner{PID: os.Getpid(), Start: procid.Start(os.Getpid()), Binary: c.binary, ClusterID: c.ID}
	for _, p := range append(slices.Clone(c.masters), c.nodes...) {
		if p != nil {
			o.Children = append(o.Children, p.cmd.Process.Pid)
		}
	}
	if c.etcd != nil {
		o.Etcd = c.etcd.cmd.Process.Pid
	}
	c.mu.Unlock()
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("cluster: encode the owner file: %w", err)
	}
	path := filepath.Join(c.tempDir, ownerFile)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("cluster: write the owner file: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("cluster: write the owner file: %w", err)
	}
	return nil
}

// ownerGone reports whether o's owner has ended: its pid is gone, or now
// belongs to a process started at another time.
func ownerGone(o owner) bool { return procid.Gone(o.PID, o.Start) }

// isClusterProc reports whether process pid is one of o's cluster: its
// command line is o.Binary master|node … --cluster-id o.ClusterID …. It
// is false whenever that cannot be read, so no other process is killed.
func isClusterProc(pid int, o owner) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || o.ClusterID == "" {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	if len(args) < 2 || args[0] != o.Binary || (args[1] != "master" && args[1] != "node") {
		return false
	}
	for i := 2; i+1 < len(args); i++ {
		if args[i] == "--cluster-id" && args[i+1] == o.ClusterID {
			return true
		}
	}
	return slices.Contains(args[2:], "--cluster-id="+o.ClusterID)
}

// isEtcdOf reports whether process pid is the etcd of the cluster in dir:
// its command line has --data-dir dir/etcd. It is false whenever that
// cannot be read.
func isEtcdOf(pid int, dir string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	want := filepath.Join(dir, "etcd")
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "--data-dir" && args[i+1] == want {
			return true
		}
	}
	return false
}

// CleanStale removes the stale cluster directories under dir (Start
// passes os.TempDir()): the kvpool-cluster-* directories of this user
// whose owner file names an owner process that has ended. It first kills
// the leftover processes each lists that still run, each verified by its
// command line to be that cluster's (isClusterProc), and waits for them
// to be gone. A directory without an owner file, or with a live owner,
// is left alone. It returns the directories removed; an error says which
// directory could not be cleaned, the others are cleaned anyway.
func CleanStale(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cluster: look for stale cluster directories in %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tempPattern) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		ok, err := cleanOne(path)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, path)
		}
	}
	return removed, errors.Join(errs...)
}

// cleanOne cleans path if it is stale, and reports whether it removed it.
func cleanOne(path string) (bool, error) {
	info, err := os.Stat(path)
	if err != nil {
		return false, nil // gone meanwhile
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return false, nil // another user's
	}
	b, err := os.ReadFile(filepath.Join(path, ownerFile))
	if err != nil {
		return false, nil // no owner file: not provably stale
	}
	var o owner
	if err := json.Unmarshal(b, &o); err != nil || o.PID <= 0 {
		return false, nil
	}
	if !ownerGone(o) {
		return false, nil
	}
	ours := func(pid int) bool {
		return isClusterProc(pid, o) || pid == o.Etcd && isEtcdOf(pid, path)
	}
	var left []int
	for _, pid := range append(slices.Clone(o.Children), o.Etcd) {
		if pid > 0 && ours(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // an error: it is gone already
			left = append(left, pid)
		}
	}
	deadline := time.Now().Add(reapTimeout)
	for _, pid := range left {
		for ours(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // a killed process is reaped by init, not by us
		}
		if ours(pid) {
			return false, fmt.Errorf("cluster: stale cluster directory %s: process %d still runs after SIGKILL", path, pid)
		}
	}
	if err := os.RemoveAll(path); err != nil {
		return false, fmt.Errorf("cluster: remove stale cluster directory %s: %w", path, err)
	}
	return true, nil
}
