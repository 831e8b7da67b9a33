package masterserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/kvpool/kvpool/internal/election"
	"github.com/kvpool/kvpool/internal/listen"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/option"
)

// Default listen addresses of `kvpool master`: loopback, so a master
// started without flags is not reachable from other hosts by accident.
// 7470 and 7471 sit just below the nodes' 7480 range.
const (
	DefaultListen      = "127.0.0.1:7470"
	DefaultAdminListen = "127.0.0.1:7471"
)

// AdminOff as Config.AdminListen disables the admin HTTP endpoints.
const AdminOff = "off"

// Config is what `kvpool master` runs: where to listen, the master's
// options and the server's. The zero value means every default.
type Config struct {
	// Listen is the control-plane address (DefaultListen). An address
	// reachable from other hosts (not loopback) needs Server.Token (see
	// package listen).
	Listen string
	// AdminListen is the admin HTTP address (DefaultAdminListen; AdminOff
	// disables it).
	AdminListen string
	// Master configures the master core.
	Master master.Options
	// Server configures the front end.
	Server Options
	// Etcd, when not empty, lists etcd's client URLs: the master
	// campaigns to lead its cluster (Server.ClusterID names the
	// election) and stands by while another leads (leader.go).
	Etcd []string
	// ElectionTTL is the etcd session's lease (election.DefaultTTL).
	ElectionTTL time.Duration
	// Advertise is the control address campaigned with (default: the
	// address Listen bound, when it names a host).
	Advertise string
}

// withDefaults fills the listen addresses.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.AdminListen == "" {
		c.AdminListen = DefaultAdminListen
	}
	return c
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := checkListen(c.Listen, len(c.Server.Token) > 0); err != nil {
		return fmt.Errorf("masterserver: %w", option.Errorf("Listen", "%w", err))
	}
	if c.AdminListen != AdminOff {
		// Beyond loopback the admin endpoints require the cluster token
		// as a bearer token (ServeAdmin).
		if err := checkListen(c.AdminListen, len(c.Server.Token) > 0); err != nil {
			return fmt.Errorf("masterserver: %w", option.Errorf("AdminListen", "%w (or %q to disable)", err, AdminOff))
		}
	}
	if err := c.Master.Validate(); err != nil {
		return fmt.Errorf("masterserver: %w", err)
	}
	if err := c.Server.Validate(); err != nil {
		return fmt.Errorf("masterserver: %w", err)
	}
	if len(c.Etcd) > 0 {
		if c.Server.ClusterID == "" {
			return errors.New("masterserver: a master campaigning on etcd needs its cluster's ID (--cluster-id), the election's name")
		}
		if err := (election.Options{Endpoints: c.Etcd, Cluster: c.Server.ClusterID, TTL: c.ElectionTTL}).Validate(); err != nil {
			return fmt.Errorf("masterserver: %w", err)
		}
		if c.Advertise == "" {
			if host, _, err := net.SplitHostPort(c.Listen); err == nil {
				if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
					return fmt.Errorf("masterserver: --listen %s names no host other masters' clients can reach: set --advertise", c.Listen)
				}
			}
		}
	}
	return nil
}

// checkListen checks a listen address: host:port with a port in
// 0–65535, reachable beyond loopback only with a token (listen.Check).
func checkListen(addr string, hasAuth bool) error {
	if _, _, err := listen.SplitAddr(addr); err != nil {
		return err
	}
	return listen.Check(addr, hasAuth)
}

// StartupLine describes a running master in one line: its addresses and
// the settings an operator checks first. It never includes a token.
func StartupLine(listen, admin net.Addr, o master.Options, s *Server) string {
	adminS := "off"
	if admin != nil {
		adminS = "http://" + admin.String()
	}
	auth := "off"
	if !s.srv.Auth().Open() {
		auth = "on"
	}
	if n := s.tenantTokens; n > 0 {
		auth += fmt.Sprintf(", %d tenant tokens", n)
	}
	if len(s.opts.Shared) > 0 {
		names := make([]string, len(s.opts.Shared))
		for i, ns := range s.opts.Shared {
			names[i] = ns.String()
		}
		auth += ", shared namespaces " + strings.Join(names, "; ")
	}
	cluster := ""
	if id := s.opts.ClusterID; id != "" {
		cluster = ", cluster " + id
	}
	return fmt.Sprintf("kvpool master: listening on %v, admin %s%s; node TTL %v, heartbeat %v, lease %v, eviction %s, placement %v, max promotions per heartbeat %d, maintenance every %v, auth %s",
		listen, adminS, cluster, o.NodeTTL, o.HeartbeatInterval, o.LeaseTTL, o.Eviction, o.Placement, o.Promotion.MaxPerHeartbeat, s.interval, auth)
}

// Run builds a master and its server from cfg, listens, writes the startup
// line (and then the server's log) to logw, and serves until ctx is done;
// then it closes everything and returns nil. A listen or serve failure is
// returned.
func Run(ctx context.Context, cfg Config, logw io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	m, err := master.New(cfg.Master)
	if err != nil {
		return err
	}
	if cfg.Server.Logger == nil {
		cfg.Server.Logger = slog.New(slog.NewTextHandler(logw, nil))
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("masterserver: listen on %s: %w", cfg.Listen, err)
	}
	var aln net.Listener
	if cfg.AdminListen != AdminOff {
		if aln, err = lc.Listen(ctx, "tcp", cfg.AdminListen); err != nil {
			ln.Close()
			return fmt.Errorf("masterserver: admin listen on %s: %w", cfg.AdminListen, err)
		}
	}
	closeAll := func() {
		ln.Close()
		if aln != nil {
			aln.Close()
		}
	}
	var adminAddr net.Addr
	if aln != nil {
		adminAddr = aln.Addr()
	}
	if len(cfg.Etcd) > 0 {
		if cfg.Advertise == "" {
			cfg.Advertise = ln.Addr().String()
		}
		el, err := election.Open(election.Options{Endpoints: cfg.Etcd, Cluster: cfg.Server.ClusterID, TTL: cfg.ElectionTTL, Logger: cfg.Server.Logger})
		if err != nil {
			closeAll()
			return fmt.Errorf("masterserver: %w", err)
		}
		defer el.Close()
		cfg.Server.Election, cfg.Server.Advertise = el, cfg.Advertise
	}
	s, err := New(m, cfg.Server)
	if err != nil {
		closeAll()
		return err
	}
	defer s.Close()
	line := StartupLine(ln.Addr(), adminAddr, m.Options(), s)
	if el := s.opts.Election; el != nil {
		line += fmt.Sprintf("; standing for leader of cluster %s on etcd %s (lease %v), advertising %s", el.Cluster(), strings.Join(cfg.Etcd, ","), el.TTL(), cfg.Advertise)
	}
	fmt.Fprintln(logw, line)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	n := 1
	go func() { errc <- s.Serve(ctx, ln) }()
	if aln != nil {
		n++
		go func() { errc <- s.ServeAdmin(ctx, aln) }()
	}
	var first error
	for range n {
		if err := <-errc; err != nil && first == nil && !errors.Is(err, ErrServerClosed) {
			first = err
			cancel() // one failed: stop the other
		}
	}
	s.Close()
	if first == nil {
		fmt.Fprintln(logw, "kvpool master: stopped")
	}
	return first
}
