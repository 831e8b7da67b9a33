package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/master"
	"github.com/kvpool/kvpool/internal/master/masterserver"
)

// envAuthToken is the environment variable holding the shared auth token
// (preferred over the flag, which other users can see in the process list).
const envAuthToken = "KVPOOL_AUTH_TOKEN"

// envTenantTokensFile and envSharedNamespaces are the node's variables for
// the tenant tokens file and the shared namespaces; the master reads them
// too (after its own KVPOOL_MASTER_* forms), as it does envAuthToken, so
// that one environment configures both.
const (
	envTenantTokensFile = "KVPOOL_TENANT_TOKENS_FILE"
	envSharedNamespaces = "KVPOOL_SHARED_NAMESPACES"
)

// masterEnvPrefix prefixes the environment equivalents of the master's
// flags: --node-ttl is KVPOOL_MASTER_NODE_TTL.
const masterEnvPrefix = "KVPOOL_MASTER_"

// runMaster runs the master: the global block index behind its TCP
// control plane and admin HTTP, until interrupted.
func runMaster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runMasterEnv(ctx, args, os.LookupEnv, stderr)
}

// runMasterEnv is runMaster with the environment injected (for tests).
func runMasterEnv(ctx context.Context, args []string, env func(string) (string, bool), stderr io.Writer) error {
	fs := newFlagSet("master", stderr)
	d := master.DefaultOptions()
	listen := fs.String("listen", masterserver.DefaultListen, "control-plane address (host:port) nodes and clients connect to")
	admin := fs.String("admin-listen", masterserver.DefaultAdminListen, "admin HTTP address for /metrics, /health, /nodes, /query_key (\"off\" disables)")
	nodeTTL := fs.Duration("node-ttl", d.NodeTTL, "drop a node (and its replicas) silent for this long")
	heartbeat := fs.Duration("heartbeat", d.HeartbeatInterval, "heartbeat interval told to nodes (shorter than --node-ttl)")
	leaseTTL := fs.Duration("lease-ttl", d.LeaseTTL, "read lease of a leased lookup: leased replicas are not evicted")
	eviction := fs.String("eviction-policy", d.Eviction, "global eviction policy (an online policy: lru, fifo, lfu-da, s3fifo, arc, mooncake ...)")
	placement := fs.String("placement", d.Placement.String(), "default placement strategy: local-first, least-used or hash")
	maxPerHB := fs.Int("max-per-heartbeat", d.Promotion.MaxPerHeartbeat, "most SSD-to-RAM promotions handed to a node per heartbeat")
	token := fs.String("auth-token", "", "cluster token: nodes, operators and trusted clients present it, and may act for any tenant (prefer $"+envAuthToken+": flags are visible in the process list)")
	tokensFile := fs.String("tenant-tokens-file", "", "file of \"tenant token\" lines, mode 600: a connection with a tenant's token acts for that tenant only (also $"+envTenantTokensFile+")")
	shared := fs.String("shared-namespaces", "", "namespaces every tenant may read, ';'-separated, each with optional writers: \"public:alice,bob; docs\" (also $"+envSharedNamespaces+")")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool master [flags]\n\nRuns the kvpool master: the global block index, node membership,\nplacement, leases, eviction and promotion control, served over TCP,\nwith admin HTTP endpoints. Runs until SIGINT or SIGTERM.\n\nEvery flag can also be set by the environment: KVPOOL_MASTER_<FLAG> with\ndashes as underscores (KVPOOL_MASTER_NODE_TTL=5s); the token by\n"+envAuthToken+", the tenant tokens file and shared namespaces also by\n"+envTenantTokensFile+" and "+envSharedNamespaces+". A flag on the command line wins.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if err := applyMasterEnv(fs, env); err != nil {
		return err
	}
	for _, f := range []struct {
		v   *string
		env string
	}{{token, envAuthToken}, {tokensFile, envTenantTokensFile}, {shared, envSharedNamespaces}} {
		if *f.v == "" {
			if v, ok := env(f.env); ok {
				*f.v = v
			}
		}
	}
	var tenantTokens map[string]config.Secret
	if *tokensFile != "" {
		var err error
		if tenantTokens, err = config.ReadTenantTokens(*tokensFile); err != nil {
			return usageErrorf("--tenant-tokens-file: %v", err)
		}
	}
	sharedNS, err := config.ParseSharedNamespaces(*shared)
	if err != nil {
		return usageErrorf("--shared-namespaces: %v", err)
	}
	ao := config.AuthOptions(config.Secret(*token), tenantTokens, sharedNS)
	strategy, err := master.ParseStrategy(*placement)
	if err != nil {
		return usageErrorf("--placement: %v", err)
	}
	cfg := masterserver.Config{
		Listen:      *listen,
		AdminListen: *admin,
		Master: master.Options{
			NodeTTL:           *nodeTTL,
			HeartbeatInterval: *heartbeat,
			LeaseTTL:          *leaseTTL,
			Eviction:          *eviction,
			Placement:         strategy,
			Promotion:         master.PromotionOptions{MaxPerHeartbeat: *maxPerHB},
		},
		Server: masterserver.Options{Token: []byte(*token), TenantTokens: ao.TenantTokens, Shared: ao.Shared},
	}
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	return masterserver.Run(ctx, cfg, stderr)
}

// applyMasterEnv sets every flag not given on the command line from its
// KVPOOL_MASTER_* variable, naming the variable in any error.
func applyMasterEnv(fs *flag.FlagSet, env func(string) (string, bool)) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		name := masterEnvPrefix + envName(f.Name)
		v, ok := env(name)
		if !ok {
			return
		}
		if serr := f.Value.Set(v); serr != nil {
			err = usageErrorf("$%s=%s: %v", name, strconv.Quote(v), serr)
		}
	})
	return err
}

// envName turns a flag name into its environment form: "node-ttl" →
// "NODE_TTL".
func envName(flagName string) string {
	b := []byte(flagName)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
