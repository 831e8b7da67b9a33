package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/election"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterserver"
	"github.com/kvpool/kvpool/internal/meta"
)

// envAuthToken is the environment variable holding the shared auth token
// (preferred over the flag, which other users can see in the process list).
const envAuthToken = config.EnvAuthToken

// runMaster runs the master: the global block index behind its TCP
// control plane and admin HTTP, until interrupted.
func runMaster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runMasterEnv(ctx, args, os.LookupEnv, stderr)
}

// runMasterEnv is runMaster with the environment injected (for tests).
func runMasterEnv(ctx context.Context, args []string, env func(string) (string, bool), stderr io.Writer) error {
	cfg, err := parseMaster(args, env, stderr)
	if err != nil {
		return err
	}
	return masterserver.Run(ctx, cfg, stderr)
}

// masterDefaults are the master's settings before the environment and
// the flags: the master's and its server's defaults.
func masterDefaults() config.Master {
	d := master.DefaultOptions()
	return config.Master{
		Listen: masterserver.DefaultListen, AdminListen: masterserver.DefaultAdminListen,
		NodeTTL: d.NodeTTL, HeartbeatInterval: d.HeartbeatInterval, LeaseTTL: d.LeaseTTL,
		Eviction: d.Eviction, Placement: d.Placement.String(), MaxPerHeartbeat: d.Promotion.MaxPerHeartbeat,
		ElectionTTL: election.DefaultTTL,
	}
}

// parseMaster turns the flags and the environment (config.LoadMaster)
// into the master server's configuration.
func parseMaster(args []string, env func(string) (string, bool), stderr io.Writer) (masterserver.Config, error) {
	fs := newFlagSet("master", stderr)
	registerMasterFlags(fs, masterDefaults())
	if err := parseFlags(fs, args, "node-ttl", "heartbeat", "lease-ttl", "max-per-heartbeat", "election-ttl"); err != nil {
		return masterserver.Config{}, err
	}
	if fs.NArg() > 0 {
		return masterserver.Config{}, usageErrorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	m, err := config.LoadMaster(config.MasterSources{Defaults: masterDefaults(), Env: env, Flags: set})
	if err != nil {
		return masterserver.Config{}, usageErrorf("%v", err)
	}
	strategy, err := meta.ParseStrategy(m.Placement)
	if err != nil {
		return masterserver.Config{}, usageErrorf("--placement: %v", err)
	}
	ao := m.AuthOptions()
	cfg := masterserver.Config{
		Listen:      m.Listen,
		AdminListen: m.AdminListen,
		Master: master.Options{
			NodeTTL:           m.NodeTTL,
			HeartbeatInterval: m.HeartbeatInterval,
			LeaseTTL:          m.LeaseTTL,
			Eviction:          m.Eviction,
			Placement:         strategy,
			Promotion:         master.PromotionOptions{MaxPerHeartbeat: m.MaxPerHeartbeat},
		},
		Server: masterserver.Options{Token: []byte(m.AuthToken.Reveal()), TenantTokens: ao.TenantTokens, Shared: ao.Shared,
			ClusterID: m.ClusterID},
		Etcd:        m.Etcd,
		ElectionTTL: m.ElectionTTL,
		Advertise:   m.Advertise,
	}
	if err := cfg.Validate(); err != nil {
		return masterserver.Config{}, flagError(fs, err, nil)
	}
	return cfg, nil
}

// registerMasterFlags declares the master's flags on fs with the defaults
// d; their values reach the configuration through config.LoadMaster.
func registerMasterFlags(fs *flag.FlagSet, d config.Master) {
	fs.String("listen", d.Listen, "control-plane address (host:port) nodes and clients connect to")
	fs.String("admin-listen", d.AdminListen, "admin HTTP address for /metrics, /health, /nodes, /query_key (\"off\" disables)")
	fs.Duration("node-ttl", d.NodeTTL, "drop a node (and its replicas) silent for this long")
	fs.Duration("heartbeat", d.HeartbeatInterval, "heartbeat interval told to nodes (shorter than --node-ttl)")
	fs.Duration("lease-ttl", d.LeaseTTL, "read lease of a leased lookup: leased replicas are not evicted")
	fs.String("eviction-policy", d.Eviction, "global eviction policy (an online policy: lru, fifo, lfu-da, s3fifo, arc, mooncake ...)")
	fs.String("placement", d.Placement, "placement strategy of a put that asks for none: local-first, least-used or hash")
	fs.Int("max-per-heartbeat", d.MaxPerHeartbeat, "most SSD-to-RAM promotions handed to a node per heartbeat")
	fs.String("auth-token", "", "cluster token: nodes, operators and trusted clients present it, and may act for any tenant (prefer $"+envAuthToken+": flags are visible in the process list)")
	fs.String("cluster-id", "", "cluster ID: accept only nodes started with the same --cluster-id (also $"+config.EnvClusterID+"; empty: only nodes without one)")
	fs.String("tenant-tokens-file", "", "file of \"tenant token\" lines, mode 600: a connection with a tenant's token acts for that tenant only (also $"+config.EnvTenantTokensFile+")")
	fs.String("etcd", "", "etcd client URLs, comma-separated (http://127.0.0.1:2379): campaign to lead the cluster named by --cluster-id, standing by while another master leads (empty: serve alone)")
	fs.Duration("election-ttl", election.DefaultTTL, "etcd session lease with --etcd, whole seconds: a dead leader is replaced about this long after it stopped")
	fs.String("advertise", "", "control-plane address clients and nodes reach this master at, with --etcd (default: the --listen address)")
	fs.String("shared-namespaces", "", "namespaces every tenant may read, ';'-separated, each with optional writers: \"public:alice,bob; docs\" (also $"+config.EnvSharedNamespaces+")")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kvpool master [flags]\n\nRuns the kvpool master: the global block index, node membership,\nplacement, leases, eviction and promotion control, served over TCP,\nwith admin HTTP endpoints. Runs until SIGINT or SIGTERM.\n\nEvery flag can also be set by the environment: "+config.MasterEnvPrefix+"<FLAG> with\ndashes as underscores (KVPOOL_MASTER_NODE_TTL=5s); the token by\n"+envAuthToken+", the tenant tokens file and shared namespaces also by\n"+config.EnvTenantTokensFile+" and "+config.EnvSharedNamespaces+". A flag on the command line wins.\n\nflags:")
		fs.PrintDefaults()
	}
}
