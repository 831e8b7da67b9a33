package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpool/kvpool"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/node/nodeclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is a node on loopback with free ports, blocks of 64 KiB, a
// RAM tier of 16 blocks and, when dir is not "", an SSD tier in dir.
func testConfig(dir string) config.Node {
	cfg := config.Defaults()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.BlockSize = 64 << 10
	cfg.RAM.Bytes = 16 * cfg.BlockSize
	if dir != "" {
		cfg.SSD.Enabled = true
		cfg.SSD.Path = dir
		cfg.SSD.Bytes = 64 << 20
		cfg.SSD.Sync = "none"
	}
	return cfg
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// running is a node started by start.
type running struct {
	n    *Node
	logs *syncBuffer
	stop func() error // cancels Run and returns its error
}

// start runs a node until the test ends (or stop is called) and waits
// until it serves.
func start(t *testing.T, cfg config.Node, opts Options) *running {
	t.Helper()
	logs := &syncBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	n, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	select {
	case <-n.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before the node was ready: %v", err)
	}
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &running{n: n, logs: logs, stop: stop}
}

func pool(t *testing.T, addr string) *nodeclient.Pool {
	t.Helper()
	p, err := nodeclient.NewPool(addr, nodeclient.PoolOptions{Dial: nodeclient.DialOptions{Tenant: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// metric returns the value of the series of name with the given label
// text (e.g. `tier="ssd"`) in a Prometheus text exposition.
func metric(t *testing.T, text, name, labels string) float64 {
	t.Helper()
	pat := `(?m)^` + regexp.QuoteMeta(name) + `\{[^}]*` + regexp.QuoteMeta(labels) + `[^}]*\} (\S+)$`
	if labels == "" {
		pat = `(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`
	}
	re := regexp.MustCompile(pat)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no series %s{%s} in /metrics", name, labels)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNode: 200 blocks through the data plane come back byte-identical
// though RAM holds 16 (the rest are demoted to SSD and read back
// verified); /metrics and /health answer; a restart on the same SSD
// directory finds the demoted blocks.
func TestNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ssd")
	cfg := testConfig(dir)
	r := start(t, cfg, Options{})
	addr, admin := r.n.Addr(), r.n.AdminAddr()
	if strings.HasSuffix(addr, ":0") || strings.HasSuffix(admin, ":0") || addr == "" {
		t.Fatalf("addresses not resolved: %q, %q", addr, admin)
	}
	log := r.logs.String()
	for _, want := range []string{"addr=" + addr, "admin_addr=" + admin, "SSD " + dir, "ssd=true"} {
		if !strings.Contains(log, want) {
			t.Errorf("startup log lacks %q:\n%s", want, log)
		}
	}

	p := pool(t, addr)
	const n = 200
	bs := int(cfg.BlockSize)
	for i := range uint64(n) {
		if err := p.Put(ctx, i, payload(i, bs-int(i))); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	for i := range uint64(n) {
		got, _, err := p.Get(ctx, i, nil)
		if err != nil || !bytes.Equal(got, payload(i, bs-int(i))) {
			t.Fatalf("Get %d: %d bytes, %v", i, len(got), err)
		}
	}
	ex, err := p.Exists(ctx, []uint64{0, n - 1, n})
	if err != nil || !ex[0] || !ex[1] || ex[2] {
		t.Errorf("Exists = %v, %v; want true true false", ex, err)
	}
	if err := p.Delete(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Get(ctx, 7, nil); !errors.Is(err, kvpool.ErrNotFound) {
		t.Errorf("Get of a deleted block: %v", err)
	}

	code, text := httpGet(t, "http://"+admin+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	if v := metric(t, text, "kvpool_node_tier_hits_total", `tier="ssd"`); v < n-16-1 {
		t.Errorf("SSD hits %v, want at least %d (every block RAM could not hold)", v, n-16-1)
	}
	if v := metric(t, text, "kvpool_node_tier_hits_total", `tier="ram"`); v < 1 {
		t.Errorf("RAM hits %v, want some", v)
	}
	if v := metric(t, text, "kvpool_node_demotions_total", ""); v < n-16 {
		t.Errorf("demotions %v, want at least %d", v, n-16)
	}
	if v := metric(t, text, "kvpool_node_requests_total", `op="put",status="ok"`); v != n {
		t.Errorf("put requests %v, want %d", v, n)
	}
	if code, body := httpGet(t, "http://"+admin+"/health"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/health: %d %q", code, body)
	}

	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(r.logs.String(), "kvpool node: stopped") {
		t.Errorf("no stop line in the log")
	}

	// Restart on the same directory: the demoted blocks are back.
	r2 := start(t, cfg, Options{})
	if log := r2.logs.String(); !strings.Contains(log, "ssd_recovered=") || strings.Contains(log, "ssd_recovered=0 ") {
		t.Errorf("restart log does not report recovered blocks:\n%s", log)
	}
	p2 := pool(t, r2.n.Addr())
	found := 0
	for i := range uint64(n) {
		got, _, err := p2.Get(ctx, i, nil)
		switch {
		case errors.Is(err, kvpool.ErrNotFound):
		case err != nil:
			t.Fatalf("Get %d after restart: %v", i, err)
		case !bytes.Equal(got, payload(i, bs-int(i))):
			t.Fatalf("Get %d after restart: wrong bytes", i)
		default:
			found++
		}
	}
	// RAM (16 blocks) is lost; everything demoted survives (minus the
	// deleted block).
	if found < n-16-1 {
		t.Errorf("found %d blocks after restart, want at least %d", found, n-16-1)
	}
}

// TestNodeStandaloneNoSSD: without SSD offload the startup line says so,
// /metrics shows the SSD tier off, and RAM overflow drops blocks.
func TestNodeNoSSD(t *testing.T) {
	cfg := testConfig("")
	cfg.RAM.ChunkBytes = cfg.BlockSize // one 1000-byte block per chunk: 16 fit
	reg := prometheus.NewRegistry()
	r := start(t, cfg, Options{Registry: reg, StartupLine: "kvpool node: test line; SSD offload: off (default)"})
	if log := r.logs.String(); !strings.Contains(log, "SSD offload: off") || !strings.Contains(log, "ssd=false") {
		t.Errorf("startup log:\n%s", log)
	}
	p := pool(t, r.n.Addr())
	for i := range uint64(40) {
		if err := p.Put(ctx, i, payload(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	_, text := httpGet(t, "http://"+r.n.AdminAddr()+"/metrics")
	if v := metric(t, text, "kvpool_node_tier_enabled", `tier="ssd"`); v != 0 {
		t.Errorf("tier_enabled{ssd} = %v", v)
	}
	if v := metric(t, text, "kvpool_node_tier_resident_blocks", `tier="ram"`); v != 16 {
		t.Errorf("RAM resident blocks %v, want 16", v)
	}
	// The caller's registry is the one served.
	mfs, err := reg.Gather()
	if err != nil || len(mfs) == 0 {
		t.Errorf("the caller's registry gathered %d families, %v", len(mfs), err)
	}
}

// TestNodeErrors: bad configuration, options and addresses are errors
// naming what is wrong; Run runs once.
func TestNodeErrors(t *testing.T) {
	bad := testConfig("")
	bad.RAM.Bytes = 0
	if _, err := New(bad, Options{}); err == nil || !strings.Contains(err.Error(), "ram.bytes") {
		t.Errorf("New with ram.bytes 0: %v", err)
	}
	if _, err := New(testConfig(""), Options{Registry: prometheus.WrapRegistererWith(nil, prometheus.NewRegistry())}); err == nil ||
		!strings.Contains(err.Error(), "Options.Registry") {
		t.Errorf("New with a registry that cannot gather: %v", err)
	}

	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	n, err := New(testConfig(link), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Run(ctx); !errors.Is(err, config.ErrUnsafeSSDPath) {
		t.Errorf("Run with a symlinked SSD directory: %v, want ErrUnsafeSSDPath", err)
	}
	if err := n.Run(ctx); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Run: %v", err)
	}

	r := start(t, testConfig(""), Options{})
	taken := testConfig("")
	taken.Listen = r.n.Addr()
	n2, err := New(taken, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Run(ctx); err == nil || !strings.Contains(err.Error(), "(listen)") {
		t.Errorf("Run on a taken port: %v", err)
	}
}

// TestNodeCluster: a node with a master registers on start, its puts
// reach the master's index through the heartbeat loop, and it keeps
// serving while the master is down, catching up once it is back.
func TestNodeCluster(t *testing.T) {
	m := newMaster(t, master.Options{HighWatermark: 1, LowWatermark: 0.99})
	c := &inProc{beats: make(chan struct{}, 1)}
	c.set(m, false)
	cfg := testConfig(filepath.Join(t.TempDir(), "ssd"))
	cfg.RAM.ChunkBytes = cfg.BlockSize // one block per chunk: 16 fit in RAM
	cfg.NodeName = "n1"
	cfg.HeartbeatInterval = 5 * time.Millisecond
	r := start(t, cfg, Options{Master: c})
	waitBeat := func() {
		t.Helper()
		// The first signal may predate the caller's changes and the
		// second come from a beat already running; the third beat began
		// after the second ended, so after the changes.
		for range 3 {
			select {
			case <-c.beats:
			case <-time.After(30 * time.Second):
				t.Fatal("no heartbeat within 30 s")
			}
		}
	}
	p := pool(t, r.n.Addr())
	for i := range uint64(30) {
		if err := p.Put(ctx, i, payload(i, 5000)); err != nil {
			t.Fatal(err)
		}
	}
	waitBeat()
	countReplicas := func() (ram, ssd int) {
		for _, ns := range c.master().Nodes() {
			if ns.Info.ID == "n1" {
				return ns.RAMReplicas, ns.SSDReplicas
			}
		}
		return -1, -1
	}
	if ram, ssd := countReplicas(); ram != 16 || ssd != 14 {
		t.Errorf("index holds %d RAM and %d SSD replicas, want 16 and 14", ram, ssd)
	}
	for _, ns := range c.master().Nodes() {
		if ns.Info.Addr != r.n.Addr() || ns.Info.SSDBytes != int64(cfg.SSD.Bytes) {
			t.Errorf("registered %+v", ns.Info)
		}
	}

	c.set(m, true) // master down: the data plane carries on
	if err := p.Put(ctx, 100, payload(100, 10)); err != nil {
		t.Fatalf("Put while the master is down: %v", err)
	}
	c.set(newMaster(t, master.Options{HighWatermark: 1, LowWatermark: 0.99}), false) // back, restarted
	waitBeat()
	if ram, ssd := countReplicas(); ram != 16 || ssd != 15 {
		t.Errorf("after the master restart the index holds %d RAM and %d SSD replicas, want 16 and 15", ram, ssd)
	}
	if s := r.n.AgentStats(); s.Registers < 2 || !s.Registered {
		t.Errorf("agent stats %+v, want a re-registration", s)
	}
}
