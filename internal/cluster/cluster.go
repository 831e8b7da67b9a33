package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/netns"
)

// pollInterval is how often Start and the restart methods poll the
// master's /nodes: 50 ms, a quarter of the shortest heartbeat the tests
// use (200 ms), so waiting adds little to a restart's measured time.
const pollInterval = 50 * time.Millisecond

// Endpoint is one process of the cluster.
type Endpoint struct {
	// Name is the process's name: "master" or the node's ID ("node-0"…).
	Name string
	// Addr is the data-plane address (for the master: its protocol
	// address, what nodes and clients dial).
	Addr string
	// AdminAddr is the HTTP admin address (/metrics, /health; the
	// master's /nodes).
	AdminAddr string
	// DataDir is the node's data directory ("" for the master).
	DataDir string
	// RESPAddr is the node's Redis front ("" for the master, and for
	// nodes when Options.RESP is off).
	RESPAddr string
}

// Cluster is a running local cluster.
type Cluster struct {
	opts    Options
	binary  string
	tempDir string // removed by Stop when DataDir was ""
	outMu   sync.Mutex
	http    *http.Client

	// Master and Nodes are the processes' endpoints; they do not change
	// across restarts. With several masters (Options.Masters), Master's
	// Addr lists them all, comma-separated, which is what the nodes and
	// a client (client.Options.Master) are given to follow the leader,
	// and its AdminAddr is the first master's; Masters has each one, and
	// LeaderIndex finds the one that leads.
	Master  Endpoint
	Masters []Endpoint
	Nodes   []Endpoint
	// Etcd is etcd's client URL with several masters ("" with one).
	Etcd string
	// ID is the cluster ID every process is started with (Options.ClusterID
	// or a random one): the nodes join only a master of this ID, and the
	// waits count only a master reporting it.
	ID string
	// Token is the auth token every process has (Options.Token, or a
	// random one with Netns; "" for none), and TokenFile a file holding
	// it, readable by its owner only ("" without a token).
	Token, TokenFile string
	spawn            *spawner
	// net holds the processes' hosts with Options.Netns (nil without),
	// and spawners start each process on its own, by process name.
	net      *netns.Net
	spawners map[string]*spawner
	// etcdArgs start etcd (again, on its data).
	etcdArgs []string

	mu      sync.Mutex // guards the procs, nodeEnv and stopped
	masters []*proc
	etcd    *proc
	nodes   []*proc
	nodeEnv map[int][]string // Options.NodeEnv, changed by SetNodeEnv
	stopped bool
}

// Start starts a master and opts.Nodes nodes and waits, within
// opts.StartTimeout and ctx, until the master lists every node as live.
//
// Every process gets the cluster ID (Cluster.ID). The nodes start only
// once the master's admin endpoint answers with that ID, so no node of
// this cluster dials a master that is not its own, and every wait counts
// only nodes listed by a master reporting it. With Options.BasePort,
// Start first checks that every address is free. An address taken, by a
// plain listener or another kvpool, fails Start with an error naming it.
// On failure everything started is stopped.
//
// Without Options.DataDir, Start first removes the stale temporary
// directories of clusters whose owner died without Stop (CleanStale), and
// records itself as the owner of the one it makes.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, binary: o.Binary, nodeEnv: map[int][]string{}, ID: o.ClusterID, Token: o.Token}
	if c.Token == "" && o.Netns {
		if c.Token, err = randomID(); err != nil {
			return nil, err
		}
	}
	c.http = &http.Client{Timeout: time.Second, Transport: bearer{c.Token, http.DefaultTransport.(*http.Transport).Clone()}}
	for i, env := range o.NodeEnv {
		c.nodeEnv[i] = slices.Clone(env)
	}
	if c.ID == "" {
		if c.ID, err = randomID(); err != nil {
			return nil, err
		}
	}
	if c.binary == "" {
		if c.binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("cluster: find the kvpool binary: %w", err)
		}
	}
	dir := o.DataDir
	if dir == "" {
		removed, err := CleanStale(os.TempDir())
		for _, d := range removed {
			fmt.Fprintf(o.Stderr, "[cluster] removed the stale cluster directory %s (its owner is gone)\n", d)
		}
		if err != nil {
			fmt.Fprintf(o.Stderr, "[cluster] %v\n", err) // not this cluster's problem: start anyway
		}
		if dir, err = os.MkdirTemp("", tempPattern); err != nil {
			return nil, fmt.Errorf("cluster: make a data directory: %w", err)
		}
		c.tempDir = dir
		if err := c.writeOwner(); err != nil {
			c.removeTemp()
			return nil, err
		}
	}
	if c.Token != "" {
		c.TokenFile = filepath.Join(dir, "token")
		err := os.WriteFile(c.TokenFile, []byte(c.Token+"\n"), 0o600)
		if err == nil {
			err = os.Chmod(c.TokenFile, 0o600) // a file already there keeps its mode
		}
		if err != nil {
			c.removeTemp()
			return nil, fmt.Errorf("cluster: write the token file: %w", err)
		}
	}
	base := 2 * o.Masters // the first node's port
	nports := o.ports()
	var addr func(i int) string
	if o.Netns {
		if err := c.makeHosts(ctx); err != nil {
			c.removeTemp()
			return nil, err
		}
		addr = c.hostAddr
	} else {
		ports, err := c.ports(nports)
		if err != nil {
			c.undoStart()
			return nil, err
		}
		addr = func(i int) string { return net.JoinHostPort(o.Host, strconv.Itoa(ports[i])) }
	}
	for j := range o.Masters {
		name := "master"
		if o.Masters > 1 {
			name = fmt.Sprintf("master-%d", j)
		}
		c.Masters = append(c.Masters, Endpoint{Name: name, Addr: addr(2 * j), AdminAddr: addr(2*j + 1)})
	}
	c.Master = c.Masters[0]
	if o.Masters > 1 {
		list := make([]string, o.Masters)
		for j, e := range c.Masters {
			list[j] = e.Addr
		}
		c.Master = Endpoint{Name: "masters", Addr: strings.Join(list, ","), AdminAddr: c.Masters[0].AdminAddr}
		c.Etcd = "http://" + addr(nports-2)
	}
	for i := range o.Nodes {
		nd := filepath.Join(dir, fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			c.undoStart()
			return nil, fmt.Errorf("cluster: make node %d's data directory: %w", i, err)
		}
		e := Endpoint{Name: fmt.Sprintf("node-%d", i), Addr: addr(base + 2*i), AdminAddr: addr(base + 1 + 2*i), DataDir: nd}
		if o.RESP {
			e.RESPAddr = addr(base + 2*o.Nodes + i)
		}
		c.Nodes = append(c.Nodes, e)
	}
	c.nodes = make([]*proc, o.Nodes)
	c.masters = make([]*proc, o.Masters)
	if o.BasePort != 0 && !o.Netns {
		if err := c.checkFree(); err != nil {
			c.undoStart()
			return nil, err
		}
	}
	c.spawn = newSpawner()
	if o.Netns {
		if err := c.hostSpawners(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if c.Etcd != "" {
		if err := c.startEtcd(ctx, filepath.Join(dir, "etcd"), addr(nports-2), addr(nports-1)); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for j := range c.masters {
		if err := c.startMaster(j); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if _, err := c.waitNodes(ctx, func([]NodeState) bool { return true }); err != nil {
		c.Stop()
		return nil, fmt.Errorf("cluster: wait for the master: %w", err)
	}
	for i := range c.nodes {
		if err := c.startNode(i); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitLive(ctx, o.Nodes); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// ports returns n ports: numbered from BasePort, or free ones.
func (c *Cluster) ports(n int) ([]int, error) {
	out := make([]int, n)
	if c.opts.BasePort != 0 {
		for i := range out {
			out[i] = c.opts.BasePort + i
		}
		return out, nil
	}
	// Hold every listener until all are chosen, so no port is picked
	// twice; a process may still lose its port to another program in the
	// moment between Close and its own bind, which Start then reports.
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range out {
		ln, err := net.Listen("tcp", net.JoinHostPort(c.opts.Host, "0"))
		if err != nil {
			return nil, fmt.Errorf("cluster: pick a free port on %s: %w", c.opts.Host, err)
		}
		lns = append(lns, ln)
		out[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

// randomID returns a new cluster ID: "kvpool-" and 16 random hex digits.
func randomID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cluster: make a cluster ID: %w", err)
	}
	return "kvpool-" + hex.EncodeToString(b[:]), nil
}

// checkFree reports the first of the cluster's addresses that another
// process holds, by binding each for a moment. A process may still lose
// its address to another program between this check and its own bind;
// Start then reports its exit (exitedEarly).
func (c *Cluster) checkFree() error {
	for _, e := range append(slices.Clone(c.Masters), c.Nodes...) {
		for _, a := range []string{e.Addr, e.AdminAddr, e.RESPAddr} {
			if a == "" {
				continue
			}
			ln, err := net.Listen("tcp", a)
			if err != nil {
				return listenError(e.Name, a, err)
			}
			ln.Close()
		}
	}
	return nil
}

// listenError is the error of process name unable to listen on addr.
func listenError(name, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("cluster: %s cannot listen on %s: address already in use (another process holds it): %w", name, addr, err)
	}
	return fmt.Errorf("cluster: %s cannot listen on %s: %w", name, addr, err)
}

func (c *Cluster) masterArgs(j int) []string {
	e := c.Masters[j]
	args := []string{"master", "--listen", e.Addr, "--admin-listen", e.AdminAddr, "--cluster-id", c.ID}
	if c.Etcd != "" {
		args = append(args, "--etcd", c.Etcd)
		if c.opts.ElectionTTL > 0 {
			args = append(args, "--election-ttl", c.opts.ElectionTTL.String())
		}
	}
	if c.opts.NodeTTL > 0 {
		args = append(args, "--node-ttl", c.opts.NodeTTL.String())
	}
	if c.opts.Heartbeat > 0 {
		args = append(args, "--heartbeat", c.opts.Heartbeat.String())
	}
	if c.opts.LeaseTTL > 0 {
		args = append(args, "--lease-ttl", c.opts.LeaseTTL.String())
	}
	return append(args, c.opts.ExtraMasterArgs...)
}

func (c *Cluster) nodeArgs(i int) []string {
	e := c.Nodes[i]
	args := []string{"node", "--listen", e.Addr, "--admin-listen", e.AdminAddr, "--node-name", e.Name,
		"--master", c.Master.Addr, "--cluster-id", c.ID,
		"--ram-bytes", strconv.FormatInt(c.opts.RAMBytes, 10),
		"--block-size", strconv.FormatInt(c.opts.BlockSize, 10),
		"--max-object-bytes", strconv.FormatInt(c.opts.MaxObjectBytes, 10)}
	if c.opts.SSD {
		args = append(args, "--ssd-enabled=true", "--ssd-path", filepath.Join(e.DataDir, "ssd"),
			"--ssd-bytes", strconv.FormatInt(c.opts.SSDBytes, 10))
	} else {
		// Said, not left to the default: the environment or a config
		// file could turn SSD offload on, at one path for every node.
		args = append(args, "--ssd-enabled=false")
	}
	if c.opts.Heartbeat > 0 {
		args = append(args, "--heartbeat-interval", c.opts.Heartbeat.String())
	}
	if e.RESPAddr != "" {
		args = append(args, "--resp-listen", e.RESPAddr)
	}
	if c.Etcd != "" {
		args = append(args, "--etcd", c.Etcd)
	}
	args = append(args, c.opts.ExtraNodeArgs...)
	return append(args, c.opts.NodeArgs[i]...)
}

func (c *Cluster) startMaster(j int) error {
	p, err := c.spawnerOf(c.Masters[j].Name).start(c.Masters[j].Name, c.binary, c.masterArgs(j), c.tokenEnv(nil), c.opts.Stdout, c.opts.Stderr, &c.outMu)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.masters[j] = p
	c.mu.Unlock()
	return c.writeOwner()
}

func (c *Cluster) startNode(i int) error {
	c.mu.Lock()
	env := c.nodeEnv[i]
	c.mu.Unlock()
	p, err := c.spawnerOf(c.Nodes[i].Name).start(c.Nodes[i].Name, c.binary, c.nodeArgs(i), c.tokenEnv(env), c.opts.Stdout, c.opts.Stderr, &c.outMu)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[i] = p
	c.mu.Unlock()
	return c.writeOwner()
}

// exitedEarly returns an error naming a process that has exited although
// it should be running.
func (c *Cluster) exitedEarly() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := append(append([]*proc{c.etcd}, c.masters...), c.nodes...)
	for _, p := range all {
		if p != nil && !p.ended.Load() && p.exited() {
			return p.exitError()
		}
	}
	return nil
}

// inUse finds "listen tcp ADDR: bind: address already in use" (Go's
// error for a taken address) in a process's output.
var inUse = regexp.MustCompile(`listen tcp (\S+): bind: address already in use`)

// exitError describes the early exit of p: the address it could not
// listen on when its output says so, else its status and last output.
func (p *proc) exitError() error {
	lines := p.tail.last()
	for i := len(lines) - 1; i >= 0; i-- {
		if m := inUse.FindStringSubmatch(lines[i]); m != nil {
			return fmt.Errorf("cluster: %s cannot listen on %s: address already in use (another process holds it); it exited: %v", p.name, m[1], p.err)
		}
	}
	if len(lines) == 0 {
		return fmt.Errorf("cluster: %s exited: %v (no output)", p.name, p.err)
	}
	return fmt.Errorf("cluster: %s exited: %v; its last output: %s", p.name, p.err, lines[len(lines)-1])
}

// WaitLive waits, within StartTimeout and ctx, until the master lists at
// least n live nodes.
func (c *Cluster) WaitLive(ctx context.Context, n int) error {
	_, err := c.waitNodes(ctx, func(ns []NodeState) bool { return countLive(ns) >= n })
	if err != nil {
		return fmt.Errorf("cluster: wait for %d live nodes: %w", n, err)
	}
	return nil
}

// waitNodes polls /nodes until ok accepts the list of a master reporting
// the cluster's ID. A process that exited, or an admin address answered
// by a master of another cluster, ends the wait at once.
func (c *Cluster) waitNodes(ctx context.Context, ok func([]NodeState) bool) ([]NodeState, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var last error
	for {
		if err := c.exitedEarly(); err != nil {
			return nil, err
		}
		ns, id, err := fetchNodes(ctx, c.http, c.leaderAdmin(ctx))
		if err == nil && id != c.ID {
			return nil, c.foreign(id)
		}
		if err == nil && ok(ns) {
			return ns, nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("%d of %d nodes live", countLive(ns), len(ns))
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		}
	}
}

// foreign is the error of the master's admin address answered by a
// master of cluster id, not this cluster's.
func (c *Cluster) foreign(id string) error {
	// Our master cannot hold the address while another process does; if
	// it has exited, its own error names what it could not bind.
	if err := c.exitedEarly(); err != nil {
		return err
	}
	what := "a master without a cluster ID"
	if id != "" {
		what = "a master of cluster " + id
	}
	return fmt.Errorf("cluster: master cannot listen on %s: address already in use (%s holds it; this cluster is %s)", c.Master.AdminAddr, what, c.ID)
}

func countLive(ns []NodeState) int {
	n := 0
	for _, s := range ns {
		if s.Live {
			n++
		}
	}
	return n
}

// NodeList returns the master's node list; an answer from a master of
// another cluster is an error.
func (c *Cluster) NodeList(ctx context.Context) ([]NodeState, error) {
	ns, id, err := fetchNodes(ctx, c.http, c.leaderAdmin(ctx))
	if err != nil {
		return nil, err
	}
	if id != c.ID {
		return nil, c.foreign(id)
	}
	return ns, nil
}

// KillNode kills node i with SIGKILL and waits for it to exit.
func (c *Cluster) KillNode(i int) error {
	p, err := c.nodeProc(i)
	if err != nil {
		return err
	}
	p.kill()
	return nil
}

// RestartNode starts node i again, with the same addresses and data
// directory (killing it first if it still runs), and waits until the
// master lists the new process's registration as live: a session other
// than the one listed before the restart. The old registration stays live
// on the master for up to the node TTL after a kill (a killed or stopped
// node does not deregister), so "listed as live" alone could be the old
// process. When the master's list carries no sessions, or could not be
// read before the restart, RestartNode waits for the node to be live.
func (c *Cluster) RestartNode(ctx context.Context, i int) error {
	p, err := c.nodeProc(i)
	if err != nil {
		return err
	}
	name := c.Nodes[i].Name
	old := c.session(ctx, name)
	p.kill()
	if err := c.startNode(i); err != nil {
		return err
	}
	if _, err := c.waitNodes(ctx, func(ns []NodeState) bool { return newSessionLive(ns, name, old) }); err != nil {
		return fmt.Errorf("cluster: wait for restarted %s to register anew: %w", name, err)
	}
	return nil
}

// session returns node name's session as the master lists it now, or 0
// when it is not listed, the list has no sessions or cannot be read.
func (c *Cluster) session(ctx context.Context, name string) uint64 {
	ns, id, err := fetchNodes(ctx, c.http, c.leaderAdmin(ctx))
	if err != nil || id != c.ID {
		return 0
	}
	for _, s := range ns {
		if s.ID == name {
			return s.Session
		}
	}
	return 0
}

// newSessionLive reports whether ns lists node name as live under a
// session other than old (any session when old is 0).
func newSessionLive(ns []NodeState, name string, old uint64) bool {
	for _, s := range ns {
		if s.ID == name && s.Live && (old == 0 || s.Session != old) {
			return true
		}
	}
	return false
}

func (c *Cluster) nodeProc(i int) (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("cluster: node %d does not exist (the cluster has %d)", i, len(c.nodes))
	}
	if c.stopped {
		return nil, errors.New("cluster: stopped")
	}
	return c.nodes[i], nil
}

// KillMaster kills the master with SIGKILL and waits for it to exit.
func (c *Cluster) KillMaster() error {
	if len(c.masters) > 1 {
		return errors.New("cluster: KillMaster with several masters: name one (KillMasterAt)")
	}
	return c.KillMasterAt(0)
}

// KillMasterAt kills master j with SIGKILL and waits for it to exit.
func (c *Cluster) KillMasterAt(j int) error {
	p, err := c.masterProc(j)
	if err != nil {
		return err
	}
	p.kill()
	return nil
}

// masterProc returns master j's process.
func (c *Cluster) masterProc(j int) (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j < 0 || j >= len(c.masters) {
		return nil, fmt.Errorf("cluster: master %d does not exist (the cluster has %d)", j, len(c.masters))
	}
	if c.stopped {
		return nil, errors.New("cluster: stopped")
	}
	return c.masters[j], nil
}

// RestartMaster starts the master again at the same addresses (killing it
// first if it still runs) and waits until every node has registered with
// the new master and is live: each listed under a session other than the
// one it had before (when the list carries sessions). The new master
// starts with an empty membership, so any registration it lists is new;
// comparing sessions also keeps the wait honest should the old master's
// answer still be in flight.
func (c *Cluster) RestartMaster(ctx context.Context) error {
	old := map[string]uint64{}
	if ns, id, err := fetchNodes(ctx, c.http, c.Master.AdminAddr); err == nil && id == c.ID {
		for _, s := range ns {
			old[s.ID] = s.Session
		}
	}
	if err := c.KillMaster(); err != nil {
		return err
	}
	if err := c.startMaster(0); err != nil {
		return err
	}
	_, err := c.waitNodes(ctx, func(ns []NodeState) bool {
		for _, e := range c.Nodes {
			if !newSessionLive(ns, e.Name, old[e.Name]) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("cluster: wait for %d nodes to register with the restarted master: %w", len(c.Nodes), err)
	}
	return nil
}

// Stop stops every process (SIGTERM, then SIGKILL after StopTimeout),
// nodes first, and removes the temporary data directory. It returns the
// processes' shutdown errors; calling it again does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	nodes, masters, etcd := c.nodes, c.masters, c.etcd
	c.mu.Unlock()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range nodes {
		if p == nil {
			continue
		}
		wg.Go(func() {
			if err := p.stop(c.opts.StopTimeout); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range masters {
		if p != nil {
			errs = append(errs, p.stop(c.opts.StopTimeout))
		}
	}
	if etcd != nil {
		errs = append(errs, etcd.stop(c.opts.StopTimeout))
	}
	if c.spawn != nil {
		c.spawn.close()
	}
	for _, s := range c.spawners {
		s.close()
	}
	c.http.CloseIdleConnections()
	if c.net != nil {
		errs = append(errs, c.net.Close())
	}
	errs = append(errs, c.removeTemp())
	return errors.Join(errs...)
}

// undoStart removes what Start made before it started a process: the
// network hosts and the temporary directory.
func (c *Cluster) undoStart() {
	if c.net != nil {
		c.net.Close()
	}
	c.removeTemp()
}

func (c *Cluster) removeTemp() error {
	if c.tempDir == "" {
		return nil
	}
	if err := os.RemoveAll(c.tempDir); err != nil {
		return fmt.Errorf("cluster: remove temporary data %s: %w", c.tempDir, err)
	}
	return nil
}

// PauseNode freezes node i with SIGSTOP: its process keeps its sockets
// open but answers nothing, as a network partition looks to its peers.
// ResumeNode undoes it. Resume a paused node before Stop, or Stop waits
// StopTimeout for it and then kills it.
func (c *Cluster) PauseNode(i int) error {
	p, err := c.nodeProc(i)
	if err != nil {
		return err
	}
	return c.pause(p)
}

// ResumeNode lets node i, frozen by PauseNode, run again (SIGCONT).
func (c *Cluster) ResumeNode(i int) error {
	p, err := c.nodeProc(i)
	if err != nil {
		return err
	}
	return resume(p)
}

// ShutdownNode stops node i cleanly (SIGTERM, then SIGKILL after
// StopTimeout) and waits for it to exit; RestartNode starts it again. It
// returns the node's shutdown error, if any.
func (c *Cluster) ShutdownNode(i int) error {
	p, err := c.nodeProc(i)
	if err != nil {
		return err
	}
	return p.stop(c.opts.StopTimeout)
}

// NodeDir returns node i's data directory (its SSD tier, when on, is the
// ssd subdirectory).
func (c *Cluster) NodeDir(i int) (string, error) {
	if i < 0 || i >= len(c.Nodes) {
		return "", fmt.Errorf("cluster: node %d does not exist (the cluster has %d)", i, len(c.Nodes))
	}
	return c.Nodes[i].DataDir, nil
}

// SetNodeEnv replaces node i's extra environment (Options.NodeEnv) for
// its next start by RestartNode; the running process keeps its own.
func (c *Cluster) SetNodeEnv(i int, env []string) error {
	if i < 0 || i >= len(c.Nodes) {
		return fmt.Errorf("cluster: node %d does not exist (the cluster has %d)", i, len(c.Nodes))
	}
	if err := checkEnv(env); err != nil {
		return fmt.Errorf("cluster: environment of node %d: %w", i, err)
	}
	c.mu.Lock()
	c.nodeEnv[i] = slices.Clone(env)
	c.mu.Unlock()
	return nil
}

// NodeAlive reports whether node i's current process is still running
// (a paused process is running).
func (c *Cluster) NodeAlive(i int) (bool, error) {
	p, err := c.nodeProc(i)
	if err != nil {
		return false, err
	}
	return !p.exited(), nil
}

// WaitNodeExit waits, within ctx, until node i's current process exits,
// by itself or killed, and returns how it ended (exit code or signal, as
// os.ProcessState tells). The exit is then expected: later waits (Start's,
// RestartNode's) do not report it as a process that exited early.
func (c *Cluster) WaitNodeExit(ctx context.Context, i int) (*os.ProcessState, error) {
	p, err := c.nodeProc(i)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
		p.ended.Store(true)
		return p.cmd.ProcessState, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("cluster: wait for %s to exit: %w", p.name, ctx.Err())
	}
}

// tokenEnv returns env with the cluster's token, when it has one, first
// (a later entry of env wins).
func (c *Cluster) tokenEnv(env []string) []string {
	if c.Token == "" {
		return env
	}
	return append([]string{config.EnvAuthToken + "=" + c.Token}, env...)
}

// bearer is the harness's HTTP transport: it presents the cluster's
// token to the admin endpoints, which want one beyond loopback.
type bearer struct {
	token string
	t     *http.Transport
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.t.RoundTrip(r)
}

// CloseIdleConnections closes the transport's idle connections.
func (b bearer) CloseIdleConnections() { b.t.CloseIdleConnections() }
