package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/internal/option"
	"github.com/kvpool/kvpool/internal/procid"
)

// freeBase returns a base port with n consecutive ports free at the moment
// of the check (FreePortRange).
func freeBase(t *testing.T, n int) int {
	t.Helper()
	base, err := FreePortRange("127.0.0.1", n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// TestStartAddressTaken: with a base port, an address held by another
// process fails Start before any process starts, naming the address.
func TestStartAddressTaken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset int // of the held port from the base
		who    string
	}{
		{"master data", 0, "master"},
		{"master admin", 1, "master"},
		{"node data", 2, "node-0"},
		{"node admin", 5, "node-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := fakeOptions(t, 2)
			o.BasePort = freeBase(t, 6)
			held := net.JoinHostPort("127.0.0.1", strconv.Itoa(o.BasePort+tc.offset))
			ln, err := net.Listen("tcp", held)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := Start(context.Background(), o)
			if err == nil {
				c.Stop()
				t.Fatal("Start succeeded with a taken address")
			}
			want := tc.who + " cannot listen on " + held + ": address already in use (another process holds it)"
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("Start: %v; want %q", err, want)
			}
		})
	}
}

// TestStartMasterCannotBind: a master that exits because its address is
// taken (after Start's own check) fails Start with that address, before
// any node starts.
func TestStartMasterCannotBind(t *testing.T) {
	o := fakeOptions(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o.ExtraMasterArgs = []string{"--admin-listen", ln.Addr().String()}
	out := &Output{}
	o.Stdout, o.Stderr = out, out
	c, err := Start(context.Background(), o)
	if err == nil {
		c.Stop()
		t.Fatal("Start succeeded with the master's address taken")
	}
	if want := "master cannot listen on " + ln.Addr().String() + ": address already in use"; !strings.Contains(err.Error(), want) {
		t.Fatalf("Start: %v; want %q", err, want)
	}
	if strings.Contains(out.String(), "[node-0]") {
		t.Fatalf("a node started although the master did not:\n%s", out.String())
	}
}

// TestStartForeignMaster: a master answering with another cluster ID is
// not this cluster's: Start fails at once and starts no node.
func TestStartForeignMaster(t *testing.T) {
	o := fakeOptions(t, 1)
	o.ExtraMasterArgs = []string{"--cluster-id", "someone-else"} // the later flag wins
	out := &Output{}
	o.Stdout, o.Stderr = out, out
	c, err := Start(context.Background(), o)
	if err == nil {
		c.Stop()
		t.Fatal("Start succeeded with a master of another cluster")
	}
	if !strings.Contains(err.Error(), "a master of cluster someone-else holds it") {
		t.Fatalf("Start: %v; want the foreign master named", err)
	}
	if strings.Contains(out.String(), "[node-0]") {
		t.Fatalf("a node started although the master is not ours:\n%s", out.String())
	}
}

// TestClusterIDs: each Start has its own ID unless Options give one, and
// every process gets it.
func TestClusterIDs(t *testing.T) {
	ctx := context.Background()
	a, err := Start(ctx, fakeOptions(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	o := fakeOptions(t, 1)
	o.ClusterID = "given-id"
	b, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if a.ID == "" || a.ID == b.ID || b.ID != "given-id" {
		t.Fatalf("cluster IDs %q and %q; want a random one and given-id", a.ID, b.ID)
	}
	if args := strings.Join(b.nodeArgs(0), " "); !strings.Contains(args, "--cluster-id given-id") {
		t.Fatalf("node args %q lack the cluster ID", args)
	}
	if args := strings.Join(b.nodeArgs(0), " "); !strings.Contains(args, fmt.Sprintf("--max-object-bytes %d", 64<<20)) {
		t.Fatalf("node args %q lack the default max object size", args)
	}
	o.ClusterID = "bad/id"
	if err := o.Validate(); option.Field(err) != "ClusterID" {
		t.Fatalf("Validate of a bad cluster ID: %v", err)
	}
}

// TestOwnerFile: a cluster in a temporary directory records its owner and
// processes there.
func TestOwnerFile(t *testing.T) {
	c, err := Start(context.Background(), fakeOptions(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	b, err := os.ReadFile(filepath.Join(c.tempDir, ownerFile))
	if err != nil {
		t.Fatal(err)
	}
	var o owner
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	if o.PID != os.Getpid() || o.ClusterID != c.ID || len(o.Children) != 3 || ownerGone(o) {
		t.Fatalf("owner file %+v; want this process, ID %s, 3 children", o, c.ID)
	}
	for _, pid := range o.Children {
		if !isClusterProc(pid, o) {
			t.Errorf("child %d is not recognised as the cluster's", pid)
		}
	}
	if isClusterProc(os.Getpid(), o) {
		t.Error("the test process is taken for one of the cluster's")
	}
}

// TestCleanStale: a directory whose owner is gone is removed, its leftover
// process killed; a process listed but not the cluster's is left alone,
// and a directory with a live owner or no owner file is kept.
func TestCleanStale(t *testing.T) {
	t.Setenv(fakeEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A dead owner: a process that has exited.
	gone := exec.Command(exe, "no-such-subcommand")
	if err := gone.Run(); gone.ProcessState == nil {
		t.Fatal(err)
	}
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(exe, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		return cmd
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	master := ln.Addr().String()
	ln.Close()
	leftover := start("node", "--listen", "127.0.0.1:0", "--master", master, "--cluster-id", "stale-id")
	other := start("node", "--listen", "127.0.0.1:0", "--master", master, "--cluster-id", "other-id")
	exited := make(chan struct{})
	go func() {
		leftover.Wait() // reaped here: this test is its parent
		close(exited)
	}()
	write := func(name string, o *owner) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if o != nil {
			b, _ := json.Marshal(o)
			if err := os.WriteFile(filepath.Join(p, ownerFile), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	stale := write(tempPattern+"stale", &owner{PID: gone.Process.Pid, Binary: exe, ClusterID: "stale-id",
		Children: []int{leftover.Process.Pid, other.Process.Pid}})
	live := write(tempPattern+"live", &owner{PID: os.Getpid(), Start: procid.Start(os.Getpid()), Binary: exe, ClusterID: "live-id"})
	noOwner := write(tempPattern+"noowner", nil)
	unrelated := write("something-else", nil)

	removed, err := CleanStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale {
		t.Fatalf("removed %q; want only %s", removed, stale)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("the stale cluster's process was not killed")
	}
	if !procid.Alive(other.Process.Pid) || other.ProcessState != nil {
		t.Fatal("a process of another cluster listed in the owner file was killed")
	}
	for _, p := range []string{live, noOwner, unrelated} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale directory still there: %v", err)
	}
}
