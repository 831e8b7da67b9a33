package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvpool/kvpool/internal/option"
)

// fakeEnv makes the test binary act as a fake kvpool (see fakeMain).
const fakeEnv = "KVPOOL_CLUSTER_FAKE"

// fakeExitEnv is the exit code with which a fake node ends on SIGUSR1;
// fakeNoExitEnv is its exit code when the variable is not set.
const (
	fakeExitEnv   = "KVPOOL_CLUSTER_FAKE_EXIT"
	fakeNoExitEnv = 3
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		os.Exit(fakeMain(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// fakeMain is a stand-in for `kvpool master` and `kvpool node`: the master
// serves /nodes (live = heard from within 500 ms; session = its own pid
// followed by the pid of the node process last heard from, so a new
// master or a new node process makes a new session) on both its addresses; a node heartbeats to the
// master over HTTP every 50 ms until SIGTERM.
func fakeMain(args []string) int {
	if len(args) == 0 {
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	listen := fs.String("listen", "", "")
	admin := fs.String("admin-listen", "", "")
	name := fs.String("node-name", "", "")
	master := fs.String("master", "", "")
	clusterID := fs.String("cluster-id", "", "")
	fs.String("node-ttl", "", "")
	fs.String("heartbeat", "", "")
	fs.String("heartbeat-interval", "", "")
	fs.String("lease-ttl", "", "")
	fs.String("ram-bytes", "", "")
	fs.String("block-size", "", "")
	fs.String("max-object-bytes", "", "")
	fs.String("ssd-path", "", "")
	fs.String("ssd-bytes", "", "")
	fs.Bool("ssd-enabled", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	switch args[0] {
	case "master":
		var mu sync.Mutex
		seen := map[string]time.Time{}
		session := map[string]string{}
		mux := http.NewServeMux()
		mux.HandleFunc("/hb", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			id := r.URL.Query().Get("id")
			seen[id], session[id] = time.Now(), r.URL.Query().Get("session")
			mu.Unlock()
		})
		mux.HandleFunc("/nodes", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(clusterIDHeader, *clusterID)
			mu.Lock()
			defer mu.Unlock()
			var parts []string
			for id, t := range seen {
				parts = append(parts, fmt.Sprintf(`{"Info":{"ID":%q},"Session":%d%s,"Alive":%v}`, id, os.Getpid(), session[id], time.Since(t) < 500*time.Millisecond))
			}
			fmt.Fprintf(w, "[%s]", strings.Join(parts, ","))
		})
		for _, a := range []string{*listen, *admin} {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			go http.Serve(ln, mux)
		}
		fmt.Println("fake master up")
		<-term
		return 0
	case "node":
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return 1
		}
		defer ln.Close()
		// SIGUSR1 ends the node with exit code N when fakeExitEnv=N is
		// in its environment, and with fakeNoExitEnv otherwise.
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		code, err := strconv.Atoi(os.Getenv(fakeExitEnv))
		if err != nil {
			code = fakeNoExitEnv
		}
		fmt.Printf("fake node exit-code=%d\n", code)
		t := time.NewTicker(50 * time.Millisecond)
		for {
			select {
			case <-term:
				return 0
			case <-usr1:
				return code
			case <-t.C:
				if resp, err := http.Get("http://" + *master + "/hb?id=" + *name + "&session=" + strconv.Itoa(os.Getpid())); err == nil {
					resp.Body.Close()
				}
			}
		}
	}
	return 2
}

func fakeOptions(t *testing.T, nodes int) Options {
	t.Setenv(fakeEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Binary: exe, Nodes: nodes, StopTimeout: 5 * time.Second, StartTimeout: 20 * time.Second}
}

func liveSet(t *testing.T, c *Cluster) map[string]bool {
	t.Helper()
	ns, err := c.NodeList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range ns {
		out[n.ID] = n.Live
	}
	return out
}

func TestStartKillRestartStop(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, fakeOptions(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := c.tempDir
	t.Cleanup(func() { c.Stop() })
	if got := liveSet(t, c); !got["node-0"] || !got["node-1"] {
		t.Fatalf("after Start: live %v, want node-0 and node-1", got)
	}

	if err := c.KillNode(1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitNodes(ctx, func(ns []NodeState) bool { return countLive(ns) == 1 }); err != nil {
		t.Fatalf("killed node never went silent: %v", err)
	}
	if err := c.RestartNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := liveSet(t, c); !got["node-1"] {
		t.Fatalf("after RestartNode: live %v", got)
	}

	if err := c.ShutdownNode(1); err != nil {
		t.Fatalf("ShutdownNode: %v", err)
	}
	if _, err := c.waitNodes(ctx, func(ns []NodeState) bool { return countLive(ns) == 1 }); err != nil {
		t.Fatalf("node shut down never went silent: %v", err)
	}
	if err := c.PauseNode(1); err == nil {
		t.Error("PauseNode of an exited node succeeded")
	}
	if err := c.RestartNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseNode(0); err != nil {
		t.Fatal(err)
	}
	if err := c.ResumeNode(0); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitLive(ctx, 2); err != nil {
		t.Fatalf("after PauseNode and ResumeNode: %v", err)
	}
	if d, err := c.NodeDir(1); err != nil || d != c.Nodes[1].DataDir {
		t.Errorf("NodeDir(1) = %q, %v; want %q", d, err, c.Nodes[1].DataDir)
	}
	if _, err := c.NodeDir(2); err == nil {
		t.Error("NodeDir(2) of a 2-node cluster succeeded")
	}

	if err := c.KillMaster(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NodeList(ctx); err == nil {
		t.Fatal("the killed master still answers")
	}
	if err := c.RestartMaster(ctx); err != nil {
		t.Fatal(err)
	}

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary data %s still there after Stop (%v)", dataDir, err)
	}
	if err := c.KillNode(0); err == nil {
		t.Error("KillNode after Stop succeeded")
	}
}

// TestRestartNodeWaitsForNewSession restarts a node while its old
// registration is still live on the (fake) master, which lists a node for
// 500 ms after its last heartbeat: RestartNode must return only once the
// master lists the new process's session, never the old one's. Then the
// running master is restarted: RestartMaster returns once the node has
// registered with the new one.
func TestRestartNodeWaitsForNewSession(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, fakeOptions(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	for round := range 3 {
		old := c.session(ctx, "node-0")
		if old == 0 {
			t.Fatal("the fake master lists no session for node-0")
		}
		if err := c.RestartNode(ctx, 0); err != nil {
			t.Fatal(err)
		}
		ns, err := c.NodeList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != 1 || !ns[0].Live || ns[0].Session == old {
			t.Fatalf("round %d: after RestartNode the master lists %+v; want node-0 live under a session other than %d", round, ns, old)
		}
	}
	// RestartMaster of a running master waits for the registrations
	// with the new one.
	old := c.session(ctx, "node-0")
	if err := c.RestartMaster(ctx); err != nil {
		t.Fatal(err)
	}
	if now := c.session(ctx, "node-0"); now == old || now == 0 {
		t.Fatalf("after RestartMaster node-0's session is %d, before %d; want a new one", now, old)
	}
}

func TestStartFailsFast(t *testing.T) {
	o := fakeOptions(t, 1)
	o.ExtraNodeArgs = []string{"--no-such-flag"}
	_, err := Start(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "node-0 exited") {
		t.Fatalf("Start with a failing node: %v, want an error naming node-0", err)
	}
}

func TestParseNodes(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []NodeState
		err        string
	}{
		{"meta.NodeStatus", `[{"Info":{"ID":"a","Addr":"h:1"},"Alive":true},{"Info":{"ID":"b"},"Alive":false}]`,
			[]NodeState{{"a", "h:1", true, 0}, {"b", "", false, 0}}, ""},
		{"wrapped lower case", `{"nodes":[{"id":"a","addr":"h:1","live":true}]}`, []NodeState{{"a", "h:1", true, 0}}, ""},
		{"no liveness means live", `[{"name":"a"}]`, []NodeState{{"a", "", true, 0}}, ""},
		{"64-bit sessions exact", `[{"id":"a","session":1764633600000000001},{"id":"b","session":1764633600000000002}]`,
			[]NodeState{{"a", "", true, 1764633600000000001}, {"b", "", true, 1764633600000000002}}, ""},
		{"empty", `[]`, []NodeState{}, ""},
		{"not json", `<html>`, nil, "decode node list"},
		{"scalar", `3`, nil, "want a JSON array"},
		{"entry not object", `[1]`, nil, "entry 0"},
		{"no id", `[{"Alive":true}]`, nil, "entry 0 has no id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNodes([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"zero", Options{}, ""},
		{"negative nodes", Options{Nodes: -1}, "Nodes"},
		{"too many nodes", Options{Nodes: 65}, "Nodes"},
		{"negative ram", Options{RAMBytes: -1}, "RAMBytes"},
		{"negative heartbeat", Options{Heartbeat: -1}, "Heartbeat"},
		{"port range", Options{BasePort: 65530}, "BasePort"},
		{"block larger than the RAM", Options{RAMBytes: 1 << 20, BlockSize: 2 << 20}, "BlockSize"},
		{"block as large as the RAM", Options{RAMBytes: 1 << 20, BlockSize: 1 << 20}, ""},
		{"SSD under one object of the block size", Options{SSD: true, SSDBytes: 256 << 10}, "SSDBytes"},
		{"max object negative", Options{MaxObjectBytes: -1}, "MaxObjectBytes"},
		{"max object 512 MiB", Options{MaxObjectBytes: 512 << 20}, ""},
		{"max object over 512 MiB", Options{MaxObjectBytes: 512<<20 + 1}, "MaxObjectBytes"},
		{"max object above the RAM", Options{RAMBytes: 1 << 20, MaxObjectBytes: 2 << 20}, ""},
		{"small SSD size, SSD off", Options{SSDBytes: 1}, ""},
		{"heartbeat not under the TTL", Options{Heartbeat: 2 * time.Second, NodeTTL: 2 * time.Second}, "Heartbeat"},
		{"heartbeat not under the default TTL", Options{Heartbeat: 5 * time.Second}, "Heartbeat"},
		{"TTL under the default heartbeat", Options{NodeTTL: 500 * time.Millisecond}, "NodeTTL"},
		{"node args of a missing node", Options{Nodes: 2, NodeArgs: map[int][]string{2: {"--x"}}}, "NodeArgs"},
		{"node args of node 1", Options{Nodes: 2, NodeArgs: map[int][]string{1: {"--x"}}}, ""},
		{"node env of a missing node", Options{Nodes: 2, NodeEnv: map[int][]string{-1: {"A=1"}}}, "NodeEnv"},
		{"node env entry without =", Options{Nodes: 2, NodeEnv: map[int][]string{0: {"A"}}}, "NodeEnv"},
		{"node env entry without key", Options{Nodes: 2, NodeEnv: map[int][]string{0: {"=1"}}}, "NodeEnv"},
		{"node env of node 1", Options{Nodes: 2, NodeEnv: map[int][]string{1: {"A=1"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && option.Field(err) != tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestNodeEnvAndExit: NodeEnv reaches only its node; WaitNodeExit reports
// how a node ended by itself and NodeAlive sees it; SetNodeEnv changes the
// environment of the node's next start only.
func TestNodeEnvAndExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := fakeOptions(t, 2)
	o.NodeEnv = map[int][]string{1: {fakeExitEnv + "=7"}}
	out := &Output{}
	o.Stdout = out
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	usr1 := func(i int) {
		t.Helper()
		p, err := c.nodeProc(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		node     int
		wantCode int
	}{
		{node: 1, wantCode: 7},             // has the variable
		{node: 0, wantCode: fakeNoExitEnv}, // has not
	}
	for _, tt := range tests {
		usr1(tt.node)
		st, err := c.WaitNodeExit(ctx, tt.node)
		if err != nil {
			t.Fatal(err)
		}
		if st.ExitCode() != tt.wantCode {
			t.Errorf("node-%d ended with %v; want exit code %d", tt.node, st, tt.wantCode)
		}
		if alive, err := c.NodeAlive(tt.node); alive || err != nil {
			t.Errorf("NodeAlive(%d) after its exit = %v, %v; want false", tt.node, alive, err)
		}
	}
	if err := c.SetNodeEnv(1, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if alive, err := c.NodeAlive(1); !alive || err != nil {
		t.Fatalf("NodeAlive(1) after its restart = %v, %v; want true", alive, err)
	}
	// The restarted node-1 prints its exit code without the variable. Its
	// line may trail its liveness: poll the output.
	want := fmt.Sprintf("[node-1] fake node exit-code=%d\n", fakeNoExitEnv)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(out.String(), want) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("restarted node-1 never printed %q; output:\n%s", want, out.String())
		}
	}
	// Bad input is refused with the field named.
	if err := c.SetNodeEnv(1, []string{"NOEQUALS"}); err == nil || !strings.Contains(err.Error(), "KEY=value") {
		t.Errorf("SetNodeEnv with a bad entry: %v", err)
	}
	if err := c.SetNodeEnv(5, nil); err == nil {
		t.Error("SetNodeEnv of node 5 of 2: no error")
	}
	wctx, wcancel := context.WithCancel(ctx)
	wcancel()
	if err := c.RestartNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeExit(wctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitNodeExit of a running node with a done context = %v; want context.Canceled", err)
	}
}
