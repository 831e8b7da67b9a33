package node

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpool/kvpool/internal/auth"
	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/listen"
	"github.com/kvpool/kvpool/internal/meta"
	"github.com/kvpool/kvpool/internal/node/nodemetrics"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/node/pacer"
	"github.com/kvpool/kvpool/internal/node/quota"
	"github.com/kvpool/kvpool/internal/node/respserver"
	"github.com/kvpool/kvpool/internal/node/store"
	"github.com/kvpool/kvpool/internal/node/wire"
	"github.com/kvpool/kvpool/internal/policy"
	"github.com/kvpool/kvpool/internal/resp"
	"github.com/kvpool/kvpool/internal/tier/ram"
	"github.com/kvpool/kvpool/internal/tier/ssd"
	"github.com/kvpool/kvpool/internal/vfs"
)

// Timeouts of the admin endpoint. Each says where its value comes from.
const (
	// adminReadHeaderTimeout bounds reading a request's headers: 10 s, as
	// the data plane bounds its handshake (nodeserver.DefaultHandshakeTimeout).
	adminReadHeaderTimeout = 10 * time.Second
	// adminShutdownTimeout bounds the wait for scrapes in flight at
	// shutdown: a scrape reads counters only and takes milliseconds, and
	// Prometheus's default scrape timeout is 10 s.
	adminShutdownTimeout = 5 * time.Second
)

// Node is one kvpool node process. Build it with New and run it with Run
// (once). Addr, AdminAddr and AgentStats are safe for concurrent use once
// Ready is closed.
type Node struct {
	cfg      config.Node
	opts     Options
	log      *slog.Logger
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer

	started  atomic.Bool
	stopping atomic.Bool
	ready    chan struct{}
	addr     string // set before ready closes
	admin    string
	respAddr string
	name     meta.NodeID
	ag       *agent
}

// New checks the configuration and the options and returns a node; it
// does no I/O. A data-plane or admin address reachable from other hosts
// (not loopback) is refused unless the configuration sets an auth token
// (see package listen); such an admin endpoint then requires the token as
// a bearer token (auth.AdminHandler).
func New(cfg config.Node, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node: configuration: %w", err)
	}
	if err := listen.Check(cfg.Listen, cfg.AuthToken != ""); err != nil {
		return nil, fmt.Errorf("node: configuration: %w", err)
	}
	// The admin endpoint beyond loopback requires the cluster token as a
	// bearer token (auth.AdminHandler); without one it may not start.
	if err := listen.Check(cfg.AdminListen, cfg.AuthToken != ""); err != nil {
		return nil, fmt.Errorf("node: configuration: admin_listen: %w", err)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if cfg.RESPListen != "" {
		if err := listen.Check(cfg.RESPListen, cfg.AuthToken != ""); err != nil {
			return nil, fmt.Errorf("node: configuration: resp_listen: %w", err)
		}
		if _, ok := opts.Master.(KeyIndex); !ok {
			return nil, errors.New("node: configuration: resp_listen needs a master (set master): the Redis front serves the whole pool through the master's index")
		}
	}
	n := &Node{cfg: cfg, opts: opts, log: opts.Logger, reg: opts.Registry, ready: make(chan struct{})}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.reg == nil {
		r := prometheus.NewRegistry()
		n.reg, n.gatherer = r, r
	} else {
		n.gatherer = n.reg.(prometheus.Gatherer) // checked by Validate
	}
	return n, nil
}

// Ready is closed once the node serves: its listeners are bound and
// Addr and AdminAddr return their addresses. It is never closed when Run
// fails before serving (wait for Run's return too).
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Addr returns the data-plane address really bound (":0" resolved); ""
// before Ready.
func (n *Node) Addr() string {
	select {
	case <-n.ready:
		return n.addr
	default:
		return ""
	}
}

// AdminAddr returns the admin HTTP address really bound; "" before Ready.
func (n *Node) AdminAddr() string {
	select {
	case <-n.ready:
		return n.admin
	default:
		return ""
	}
}

// RESPAddr returns the Redis front's address really bound; "" before
// Ready or when the front is off (resp_listen empty).
func (n *Node) RESPAddr() string {
	select {
	case <-n.ready:
		return n.respAddr
	default:
		return ""
	}
}

// Name returns the node's name for the master and metrics; "" before
// Ready.
func (n *Node) Name() string {
	select {
	case <-n.ready:
		return string(n.name)
	default:
		return ""
	}
}

// AgentStats returns the master agent's counters (zero when standalone).
func (n *Node) AgentStats() AgentStats {
	select {
	case <-n.ready:
		if n.ag != nil {
			return n.ag.stats()
		}
	default:
	}
	return AgentStats{}
}

// Run opens the store, binds the listeners, serves until ctx ends, then
// shuts everything down and waits for it (see the package comment). It
// returns nil after a clean shutdown, and an error when the node cannot
// start or a server fails. Run may be called once.
func (n *Node) Run(ctx context.Context) error {
	if !n.started.CompareAndSwap(false, true) {
		return errors.New("node: Run called twice")
	}
	cfg := n.cfg
	if cfg.SSD.Enabled {
		if err := config.CheckSSDDir(cfg.SSD.Path); err != nil {
			return fmt.Errorf("node: SSD offload: %w", err)
		}
	}
	pacers, err := pacer.NewSet(pacer.SetOptions{
		NetEgress: float64(cfg.Pacers.NetEgress), NetIngress: float64(cfg.Pacers.NetIngress),
		SSDRead: float64(cfg.Pacers.SSDRead), SSDWrite: float64(cfg.Pacers.SSDWrite),
	})
	if err != nil {
		return fmt.Errorf("node: pacers: %w", err)
	}
	var ag *agent
	if n.opts.Master != nil {
		ag = newAgent(n.opts.Master, cfg.HeartbeatInterval, n.log)
	}
	so, pfs, err := storeOptions(cfg, pacers, ag)
	if err != nil {
		return err
	}
	wrapSSDFS(so.SSD, pfs, n.opts.WrapSSDFS)
	st, err := store.Open(ctx, so)
	if err != nil {
		return fmt.Errorf("node: open the store: %w", err)
	}
	if pfs != nil {
		pfs.armed.Store(true)
	}
	err = n.serve(ctx, cfg, st, pacers, ag)
	if cerr := st.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("node: close the store: %w", cerr))
	}
	if err == nil {
		n.log.Info("kvpool node: stopped", "node", string(n.name))
	}
	return err
}

// serve binds the listeners and runs the servers and the agent over an
// open store until ctx ends or a server fails.
func (n *Node) serve(ctx context.Context, cfg config.Node, st *store.Store, pacers *pacer.Set, ag *agent) error {
	ao := cfg.AuthOptions()
	var nb nodeserver.Backend = backend{s: st, ag: ag}
	if n.opts.WrapBackend != nil {
		nb = n.opts.WrapBackend(nb)
	}
	srv, err := nodeserver.New(nodeserver.Options{
		Backend:      nb,
		Limits:       wire.LimitsFor(int(cfg.EffectiveMaxObject())),
		Egress:       pacerOrNil(pacers, pacer.NetEgress, float64(cfg.Pacers.NetEgress)),
		Ingress:      pacerOrNil(pacers, pacer.NetIngress, float64(cfg.Pacers.NetIngress)),
		Token:        ao.ClusterToken,
		TenantTokens: ao.TenantTokens,
		Shared:       ao.Shared,
		Logger:       n.log,
	})
	if err != nil {
		return fmt.Errorf("node: data plane: %w", err)
	}
	ln, adminLn, err := bindListeners(ctx, cfg)
	if err != nil {
		return err
	}
	rs, respLn, rb, err := n.respFront(ctx, cfg, st, ag, ln.Addr().String())
	if err != nil {
		ln.Close()
		adminLn.Close()
		return err
	}
	if rb != nil {
		defer rb.close()
	}
	closeListeners := func() {
		ln.Close()
		adminLn.Close()
		if respLn != nil {
			respLn.Close()
		}
	}
	// Checked against the address really bound, which New checked as
	// configured.
	adminHandler, err := auth.AdminHandler(adminLn.Addr().String(), ao.ClusterToken, nodemetrics.NewMux(n.gatherer, n.health))
	if err != nil {
		closeListeners()
		return fmt.Errorf("node: admin_listen: %w", err)
	}
	collector, err := nodemetrics.New(n.reg, func() nodemetrics.Snapshot {
		s := snapshot(st, srv, pacers)
		if rs != nil {
			s.RESPEnabled, s.RESP = true, respSnapshot(rs, rb)
		}
		if ag != nil {
			as := ag.stats()
			s.MasterEnabled = true
			s.Master = nodemetrics.MasterStats{Registered: as.Registered, Registers: as.Registers, Reregisters: as.Reregisters, Failures: as.Failures, TasksDropped: as.TasksDropped}
			if t, ok := n.opts.Master.(Terms); ok {
				s.Master.Epoch, s.Master.Fenced = t.Epoch(), t.Fenced()
			}
		}
		return s
	})
	if err != nil {
		closeListeners()
		return fmt.Errorf("node: metrics: %w", err)
	}
	defer n.reg.Unregister(collector)

	if respLn != nil {
		n.respAddr = respLn.Addr().String()
	}
	n.announce(cfg, st, ag, ln.Addr().String(), adminLn.Addr().String())
	return n.run(ctx, srv, ln, adminLn, adminHandler, ag, rs, respLn)
}

// respFront binds the Redis front's listener and builds its server when
// resp_listen is set (all nil when it is not).
func (n *Node) respFront(ctx context.Context, cfg config.Node, st *store.Store, ag *agent, addr string) (*respserver.Server, net.Listener, *respBackend, error) {
	if cfg.RESPListen == "" {
		return nil, nil, nil, nil
	}
	name := meta.NodeID(cfg.NodeName)
	if name == "" {
		name = meta.NodeID(nameFromAddr(addr))
	}
	ao := cfg.AuthOptions()
	rb := newRespBackend(st, ag, n.opts.Master.(KeyIndex), name, ao.ClusterToken, cfg.RESPReplicas, cfg.RAM.Policy)
	rs, err := respserver.New(respserver.Options{
		Backend:      rb,
		Token:        ao.ClusterToken,
		TenantTokens: ao.TenantTokens,
		Shared:       ao.Shared,
		Limits:       resp.Limits{MaxBulk: int(cfg.EffectiveMaxObject())},
		Version:      n.opts.Version,
		Logger:       n.log,
	})
	if err != nil {
		rb.close()
		return nil, nil, nil, fmt.Errorf("node: Redis front: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.RESPListen)
	if err != nil {
		rb.close()
		return nil, nil, nil, fmt.Errorf("node: listen on %s (resp_listen): %w", cfg.RESPListen, err)
	}
	return rs, ln, rb, nil
}

// bindListeners binds the data-plane and the admin listeners.
func bindListeners(ctx context.Context, cfg config.Node) (ln, adminLn net.Listener, err error) {
	var lc net.ListenConfig
	ln, err = lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("node: listen on %s (listen): %w", cfg.Listen, err)
	}
	adminLn, err = lc.Listen(ctx, "tcp", cfg.AdminListen)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("node: listen on %s (admin_listen): %w", cfg.AdminListen, err)
	}
	return ln, adminLn, nil
}

// announce records the bound addresses and the node's name, attaches the
// agent (if any) to the store, logs the startup line and marks the node
// ready.
func (n *Node) announce(cfg config.Node, st *store.Store, ag *agent, addr, admin string) {
	n.addr, n.admin = addr, admin
	n.name = meta.NodeID(cfg.NodeName)
	if n.name == "" {
		n.name = meta.NodeID(nameFromAddr(n.addr))
	}
	if ag != nil {
		ag.attach(st, meta.NodeInfo{
			ID:       n.name,
			Addr:     advertised(n.addr),
			RAMBytes: int64(cfg.RAM.Bytes),
			SSDBytes: ssdBytes(cfg),
			// The master rounds an object's footprint up to this: the RAM
			// tier's chunk, the granule its objects occupy.
			BlockSize: int64(cfg.RAM.ChunkBytes),
		})
		n.ag = ag
	}
	line := n.opts.StartupLine
	if line == "" {
		line = (&config.Loaded{Node: cfg}).StartupLine()
	}
	attrs := []any{"addr", n.addr, "admin_addr", n.admin, "node", string(n.name), "ssd", st.SSDOn()}
	if n.respAddr != "" {
		attrs = append(attrs, "resp_addr", n.respAddr)
	}
	if ost, ok := st.SSDOpenStats(); ok {
		attrs = append(attrs, "ssd_recovered", ost.Recovered, "ssd_dropped", ost.Torn+ost.Corrupt+ost.IOErrors)
	}
	n.log.Info(line, attrs...)
	close(n.ready)
}

// run serves the data plane on ln and the admin HTTP handler on adminLn,
// and runs the agent (if any), until ctx ends or a server fails; then it
// shuts the admin server down, waits for all of them and returns the
// servers' errors.
func (n *Node) run(ctx context.Context, srv *nodeserver.Server, ln, adminLn net.Listener, adminHandler http.Handler, ag *agent, rs *respserver.Server, respLn net.Listener) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	if rs != nil {
		wg.Go(func() {
			if err := rs.Serve(runCtx, respLn); err != nil {
				errs <- fmt.Errorf("node: Redis front on %s: %w", n.respAddr, err)
				cancel()
			}
		})
	}
	wg.Go(func() {
		if err := srv.Serve(runCtx, ln); err != nil {
			errs <- fmt.Errorf("node: data plane on %s: %w", n.addr, err)
			cancel()
		}
	})
	hs := &http.Server{
		Handler:           adminHandler,
		ReadHeaderTimeout: adminReadHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return runCtx },
	}
	wg.Go(func() {
		if err := hs.Serve(adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("node: admin HTTP on %s: %w", n.admin, err)
			cancel()
		}
	})
	if ag != nil {
		wg.Go(func() { ag.run(runCtx) })
	}

	<-runCtx.Done()
	n.stopping.Store(true)
	n.log.Info("kvpool node: shutting down", "node", string(n.name))
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), adminShutdownTimeout)
	herr := hs.Shutdown(sctx)
	scancel()
	if herr != nil {
		hs.Close()
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return errors.Join(out...)
}

// health is /health: OK while the node serves.
func (n *Node) health(context.Context) error {
	if n.stopping.Load() {
		return errors.New("shutting down")
	}
	return nil
}

// storeOptions maps the configuration onto the store's options. With a
// master agent the agent decides nothing locally: it records SSD hits for
// the master (store.Promoter) and follows the store's events. The
// returned pacedFS, when not nil, is to be armed once the store is open.
// policyKeySecret derives the RAM tier's policy-key secret from the auth
// token (nil without one): a node that authenticates its clients keys its
// policy keys, so that no client can aim a block of its own at another
// tenant's policy key (ram.Options.KeySecret). Tenants never hold the
// cluster token.
func policyKeySecret(token string) []byte {
	if token == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("kvpool/ram/policy-key"))
	return m.Sum(nil)
}

func storeOptions(cfg config.Node, pacers *pacer.Set, ag *agent) (store.Options, *pacedFS, error) {
	spec, err := policy.ParseSpec(cfg.RAM.Policy)
	if err != nil {
		return store.Options{}, nil, fmt.Errorf("node: ram.policy %q: %w", cfg.RAM.Policy, err)
	}
	so := store.Options{
		MaxObjectSize: int(cfg.EffectiveMaxObject()), // the store hands it to both tiers
		RAM: ram.Options{
			// The typical object size the policies are sized for, not a
			// limit on object size (max_object_bytes is).
			BlockSize:     int(cfg.BlockSize),
			ChunkSize:     int(cfg.RAM.ChunkBytes),
			CapacityBytes: int64(cfg.RAM.Bytes),
			Eviction:      spec.Eviction,
			Admission:     spec.Admission,
			HighWatermark: cfg.RAM.HighWatermark,
			LowWatermark:  cfg.RAM.LowWatermark,
			KeySecret:     policyKeySecret(cfg.AuthToken.Reveal()),
		},
		Promotion: store.PromotionOptions{
			Off:             cfg.Promotion.MaxPerHeartbeat == 0, // the configuration's "0 disables promotion"
			Threshold:       cfg.Promotion.Threshold,
			Watermark:       cfg.Promotion.RAMWatermark,
			QueueCap:        cfg.Promotion.QueueCap,
			MaxPerHeartbeat: cfg.Promotion.MaxPerHeartbeat,
			Heartbeat:       cfg.HeartbeatInterval,
		},
		Quota: quota.Options{DefaultBytes: int64(cfg.Quota.DefaultBytes)},
	}
	if len(cfg.Quota.Tenants) > 0 {
		so.Quota.Tenants = make(map[string]int64, len(cfg.Quota.Tenants))
		for name, v := range cfg.Quota.Tenants {
			so.Quota.Tenants[name] = int64(v)
		}
	}
	if ag != nil {
		so.Promoter = ag
		so.OnEvent = ag.onEvent
		so.OnPromotion = ag.onPromotion
	}
	var pfs *pacedFS
	if cfg.SSD.Enabled {
		so.SSD = &ssd.Options{
			Dir:           cfg.SSD.Path,
			BlockSize:     int(cfg.BlockSize),
			CapacityBytes: int64(cfg.SSD.Bytes),
			Sync:          cfg.SSD.Sync,
			HighWatermark: cfg.SSD.HighWatermark,
			LowWatermark:  cfg.SSD.LowWatermark,
			DirectIO:      cfg.SSD.DirectIO,
		}
		read := pacerOrNil(pacers, pacer.SSDRead, float64(cfg.Pacers.SSDRead))
		write := pacerOrNil(pacers, pacer.SSDWrite, float64(cfg.Pacers.SSDWrite))
		if read != nil || write != nil {
			pfs = &pacedFS{FS: vfs.Default()}
			if read != nil {
				pfs.read = pacers.Pacer(pacer.SSDRead)
			}
			if write != nil {
				pfs.write = pacers.Pacer(pacer.SSDWrite)
			}
			so.SSD.FS = pfs
		}
	}
	return so, pfs, nil
}

// pacerOrNil returns path's pacer when its rate is set, so that an
// unpaced path costs nothing and the server logs it as unpaced.
func pacerOrNil(ps *pacer.Set, path pacer.Path, rate float64) nodeserver.Pacer {
	if rate <= 0 {
		return nil
	}
	return ps.Pacer(path)
}

func ssdBytes(cfg config.Node) int64 {
	if !cfg.SSD.Enabled {
		return 0
	}
	return int64(cfg.SSD.Bytes)
}

// nameFromAddr derives a node name from its bound data-plane address:
// "127.0.0.1:7480" → "node-127.0.0.1-7480" (letters, digits, '.', '-').
func nameFromAddr(addr string) string {
	var b strings.Builder
	b.WriteString("node-")
	for _, r := range addr {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.':
			b.WriteRune(r)
		case r == ':':
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > 64 { // config's and masterproto's node-name limit
		s = s[len(s)-64:]
	}
	return s
}

// advertised is the data-plane address given to the master: the bound
// address, with an unspecified host (0.0.0.0, ::) replaced by the host
// name so that clients elsewhere can reach it.
func advertised(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return addr
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return net.JoinHostPort(h, port)
	}
	return addr
}

// snapshot reads every counter the node's metrics show.
func snapshot(st *store.Store, srv *nodeserver.Server, ps *pacer.Set) nodemetrics.Snapshot {
	s := st.Stats()
	out := nodemetrics.Snapshot{
		RAM:        s.RAM,
		SSD:        s.SSD,
		SSDEnabled: s.SSDOn,
		Store: nodemetrics.StoreStats{
			Demotions:           s.Demotions,
			DemotionFailures:    s.DemotionFailures,
			PromotionsCompleted: s.Promotion.Completed,
			PromotionsFailed:    s.Promotion.Failed,
		},
		PacerWait: ps.Waited(),
	}
	for _, tq := range st.Quota() {
		out.Tenants = append(out.Tenants, nodemetrics.TenantQuota{Tenant: tq.Tenant, Bytes: tq.Bytes, Limit: tq.Limit, Rejections: tq.Rejections})
	}
	ss := srv.Stats()
	for op := range nodeserver.OpSlots {
		for code := range nodeserver.CodeSlots {
			if c := ss.Requests[op][code]; c > 0 {
				out.Requests = append(out.Requests, nodemetrics.RequestCount{Op: opLabel(op), Status: statusLabel(code), Count: c})
			}
		}
	}
	return out
}

// respSnapshot reads the Redis front's counters.
func respSnapshot(rs *respserver.Server, rb *respBackend) nodemetrics.RESPStats {
	ss := rs.Stats()
	return nodemetrics.RESPStats{
		Connections: ss.Open, Commands: ss.Commands, Errors: ss.Errors, ProtocolErrors: ss.ProtocolErrors,
		HitsLocalRAM: rb.hitsRAM.Load(), HitsLocalSSD: rb.hitsSSD.Load(), HitsRemote: rb.hitsRemote.Load(), Misses: rb.misses.Load(),
		CorruptCopies: rb.corrupt.Load(),
		OwnReads:      rb.ownReads.Load(), InPlaceSets: rb.ownSets.Load(), CoalescedSets: ss.CoalescedSets,
	}
}

// opLabel names a request slot of nodeserver.Stats.Requests.
func opLabel(slot int) string {
	switch wire.Op(slot) {
	case wire.OpGet:
		return "get"
	case wire.OpMGet:
		return "batch_get"
	case wire.OpPut:
		return "put"
	case wire.OpMPut:
		return "batch_put"
	case wire.OpExists:
		return "exists"
	case wire.OpDelete:
		return "delete"
	case wire.OpStats:
		return "stats"
	case wire.OpSync:
		return "sync"
	}
	return "other"
}

// statusLabel names a status slot of nodeserver.Stats.Requests: "ok",
// "not_found", … ("other" for the catch-all slot).
func statusLabel(slot int) string {
	if slot >= nodeserver.CodeSlots-1 {
		return "other"
	}
	return strings.ReplaceAll(wire.Code(slot).String(), " ", "_")
}
