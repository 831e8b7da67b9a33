// Command kvpool is the kvpool binary: the lab (trace toolkit, hit-ratio
// engine, cluster simulator, comparison reports) and, in later releases, the
// store's processes. Each subcommand lives in its own file; main only parses
// arguments, builds the object that does the work, runs it with a context and
// handles signals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kvpool/kvpool/internal/config"
	"github.com/kvpool/kvpool/internal/node/nodeserver"
	"github.com/kvpool/kvpool/internal/vfs"
)

// command is one kvpool subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands returns the subcommands as production runs them.
func commands() []command { return commandsWith(hooks{}) }

// commandsWith returns the subcommands with h's test seams wired in.
func commandsWith(h hooks) []command {
	node := runNode
	if h.nodeFS != nil || h.nodeBackend != nil {
		node = func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runNodeWith(ctx, args, stdout, stderr, h)
		}
	}
	return []command{
		{"demo", "recompute vs local vs global, live on a local cluster and simulated, with a report", runDemo},
		{"trace", "inspect, sample, generate and fetch request traces", runTrace},
		{"hitrate", "order-only hit-ratio engine (no timing)", runHitrate},
		{"sim", "discrete-event cluster simulator in model time", runSim},
		{"compare", "run the standard comparison matrix and write a report", runCompare},
		{"policy", "the cache policy report: gap to Belady by trace half, robustness experiments", runPolicy},
		{"master", "run the master (global block index) until interrupted", runMaster},
		{"node", "run a node (RAM and SSD tiers, data plane, master agent) until interrupted", node},
		{"up", "start a local cluster (master and nodes) until interrupted", runUp},
		{"ctl", "admin commands against a running cluster (nodes, stat, get, put, query)", runCtl},
		{"bench", "benchmark a target (ram, ssd, node, master, sim, tcp, disk, redis) or compare (--vs redis,tcp,disk)", runBench},
		{"replay", "replay a trace live against a cluster (scale model), in the simulator's formats", runReplay},
		{"version", "print the module version, VCS revision and Go version of this binary", runVersion},
	}
}

func main() {
	// A closed terminal (SIGHUP) stops a command as Ctrl-C does, so that
	// kvpool up still stops its processes and removes its hosts.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	for _, w := range config.EnvWarnings(os.Environ()) {
		fmt.Fprintln(os.Stderr, "kvpool: warning: "+w)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// hooks are seams into the commands for the multi-process tests (see
// TestMain in cluster_test.go), which re-execute the test binary as
// kvpool. The zero value is production: main passes it, and no flag or
// environment variable of the real binary can set one.
type hooks struct {
	// nodeFS wraps the filesystem under a node's SSD tier (fault
	// injection; nil: the operating system's, unwrapped).
	nodeFS func(vfs.FS) vfs.FS
	// nodeBackend wraps what a node's data plane serves (fault
	// injection; nil: the store, unwrapped).
	nodeBackend func(nodeserver.Backend) nodeserver.Backend
}

// run executes the subcommand named by args[0] and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, hooks{})
}

// runWith is run with the test seams h.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, h hooks) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commandsWith(h) {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "kvpool %s: %v\n", c.name, err)
		}
		return exitCode(err)
	}
	fmt.Fprintf(stderr, "kvpool: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// exitCode is the exit status for a command's error: 0 for none (or a
// help request), 2 for a usage error, an exitError's own code (a
// verdict's), and 1 for any other failure. Only this package's
// exitError sets a code: an error that wraps a child process's exit
// status (an *exec.ExitError, which also has an ExitCode method) is a
// plain failure, not that child's code.
func exitCode(err error) int {
	var coded exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &coded):
		return coded.ExitCode()
	}
	return 1
}

// errUsage marks errors caused by bad command-line arguments (exit code 2).
var errUsage = errors.New("usage error")

// usageErrorf returns an error wrapping errUsage.
func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kvpool <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'kvpool <command> -h' for a command's flags.")
}

// newFlagSet returns a flag set for a subcommand that reports errors instead
// of exiting, writing help to stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kvpool "+name, flag.ContinueOnError)
	fs.SetOutput(flagOutput{stderr})
	return fs
}

// flagOutput is a flag set's output: the flag package prints a parse
// error ("flag provided but not defined: -x") before the usage, and it
// is written with the flag as "--x", as the user typed it and as the
// error parseFlags returns says it.
type flagOutput struct{ w io.Writer }

func (o flagOutput) Write(p []byte) (int, error) {
	if msg := string(p); strings.HasPrefix(msg, "flag provided but not defined: ") ||
		strings.HasPrefix(msg, "invalid ") || strings.HasPrefix(msg, "flag needs an argument: ") ||
		strings.HasPrefix(msg, "bad flag syntax: ") {
		if _, err := io.WriteString(o.w, dashDash(msg)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return o.w.Write(p)
}

// parseFlags parses args into fs, turning flag errors into usage errors;
// it refuses negative numbers (checkNumbers) and 0 for the positive flags
// (refuseZero).
func parseFlags(fs *flag.FlagSet, args []string, positive ...string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%s", dashDash(err.Error()))
	}
	if err := checkNumbers(fs); err != nil {
		return err
	}
	return refuseZero(fs, positive...)
}

// dashDash writes the flag package's "-name" in its parse errors as
// "--name", the form this command's help and messages use.
func dashDash(msg string) string {
	for _, p := range []string{"defined: -", "for flag -", "for -", "argument: -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	return msg
}

// parseNoArgs parses args into fs (see parseFlags) and refuses positional
// arguments.
func parseNoArgs(fs *flag.FlagSet, args []string, positive ...string) error {
	if err := parseFlags(fs, args, positive...); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
