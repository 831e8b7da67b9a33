package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/listen"
	"github.com/kvpool/kvpool/internal/master/masterclient"
	"github.com/kvpool/kvpool/internal/node"
)

// envConfigFile names the node's configuration file when --config is not
// given.
const envConfigFile = config.EnvConfigFile

// runNode implements `kvpool node`: one node process (RAM and SSD tiers,
// data plane, admin HTTP, master agent) until SIGINT or SIGTERM.
func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runNodeWith(ctx, args, stdout, stderr, hooks{})
}

// runNodeWith is runNode with the test seams h (see hooks).
func runNodeWith(ctx context.Context, args []string, stdout, stderr io.Writer, h hooks) error {
	fs := newFlagSet("node", stderr)
	file := fs.String("config", "", "configuration file, YAML or JSON (default: $"+envConfigFile+")")
	for _, f := range config.Fields() {
		usage := f.Usage
		if f.Default != "" && !f.Secret {
			usage += fmt.Sprintf(" (default %s)", f.Default)
		}
		usage += " [env " + f.Env + "]"
		fs.Var(&settingFlag{isBool: f.Bool}, f.Flag, usage)
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kvpool node [flags]\n\nRuns a kvpool node: a RAM tier and, with SSD offload on, an SSD tier, served\nover TCP, with /metrics and /health on the admin address. Runs until SIGINT\nor SIGTERM. Settings come from the defaults, then the --config file, then\nthe environment, then the flags; SSD offload also takes Mooncake's names\n(MOONCAKE_OFFLOAD_ENABLED, MOONCAKE_OFFLOAD_FILE_STORAGE_PATH).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (settings are flags: --name value)", fs.Arg(0))
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "config" {
			set[f.Name] = f.Value.String()
		}
	})
	if *file == "" {
		*file = os.Getenv(envConfigFile)
	}
	loaded, err := config.Load(config.Sources{File: *file, Env: os.LookupEnv, Flags: set})
	if err != nil {
		return usageErrorf("configuration: %v", err)
	}
	// An address reachable beyond loopback without the cluster token is
	// refused by node.New too; here it is a bad setting (exit status 2),
	// as it is for the master, and named with where it came from.
	for _, a := range []struct{ key, addr string }{{"listen", loaded.Node.Listen}, {"admin_listen", loaded.Node.AdminListen}} {
		if err := listen.Check(a.addr, loaded.Node.AuthToken != ""); err != nil {
			return usageErrorf("configuration: %s %q (from %s): %v", a.key, a.addr, loaded.Origin(a.key), err)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	for _, w := range loaded.Warnings {
		log.Warn("kvpool node: " + w)
	}
	opts := node.Options{Logger: log, StartupLine: loaded.StartupLine(), WrapSSDFS: h.nodeFS, WrapBackend: h.nodeBackend, Version: versionString()}
	if addr := loaded.Node.Master; addr != "" || loaded.Node.Etcd != "" {
		// A node follows its cluster's leader even given one master: it
		// carries the epoch it saw and trusts orders only within the
		// leader's margin (a master without an election sets none).
		mo := masterclient.Options{Token: []byte(loaded.Node.AuthToken.Reveal()), ClusterID: loaded.Node.ClusterID, Follow: true}
		if loaded.Node.Etcd != "" {
			el, err := openElection(loaded.Node.Etcd, loaded.Node.ClusterID, 0, log)
			if err != nil {
				return err
			}
			defer el.Close()
			mo.Leader = leaderAddr(el)
		}
		mc := newMasterClient(addr, mo)
		defer mc.Close()
		opts.Master = mc
	}
	n, err := node.New(loaded.Node, opts)
	if err != nil {
		return err
	}
	return n.Run(ctx)
}

// newMasterClient returns the node's connection to its master, dialled
// on first use so that the node starts even while the master is down.
func newMasterClient(addr string, opts masterclient.Options) *node.LazyMaster {
	return node.NewLazyMaster(func(ctx context.Context) (node.ClosableMaster, error) {
		return masterclient.Dial(ctx, addr, opts)
	})
}

// settingFlag is the flag of one configuration setting: it keeps the text
// as typed, for config.Load to parse and to name in its errors. A bool
// setting may be given without a value (--ssd-enabled).
type settingFlag struct {
	val    string
	isBool bool
}

func (f *settingFlag) String() string     { return f.val }
func (f *settingFlag) Set(s string) error { f.val = s; return nil }
func (f *settingFlag) IsBoolFlag() bool   { return f.isBool }
