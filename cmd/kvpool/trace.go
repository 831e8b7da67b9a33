package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvpool/kvpool/internal/lab/tracefetch"
	"github.com/kvpool/kvpool/internal/lab/tracegen"
	"github.com/kvpool/kvpool/internal/lab/tracesample"
	"github.com/kvpool/kvpool/internal/lab/tracestat"
	"github.com/kvpool/kvpool/trace"
)

// traceCommands are the subcommands of "kvpool trace".
func traceCommands() []command {
	return []command{
		{"stats", "describe a trace: rate, lengths, reuse, infinite-cache hit ratio", runTraceStats},
		{"sample", "cut a deterministic subsample (window, families, first N, time scale)", runTraceSample},
		{"gen", "generate a synthetic multi-turn trace", runTraceGen},
		{"fetch", "download the official Mooncake traces (pinned, SHA-256 checked)", runTraceFetch},
		{"validate", "check a trace file against the format rules", runTraceValidate},
	}
}

// runTrace dispatches "kvpool trace <subcommand>".
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, "usage: kvpool trace <subcommand> [flags] [FILE|NAME]\n\nsubcommands:")
		for _, c := range traceCommands() {
			fmt.Fprintf(stderr, "  %-9s %s\n", c.name, c.summary)
		}
		fmt.Fprintln(stderr, "\nA NAME (conversation, synthetic, toolagent or a file name) is looked for in\n"+
			"--trace-dir, then $"+trace.EnvTraceDir+", then ./traces.\n"+
			"Run 'kvpool trace <subcommand> -h' for its flags.")
	}
	if len(args) == 0 {
		usage()
		return usageErrorf("missing subcommand")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		return flag.ErrHelp
	}
	for _, c := range traceCommands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage()
	return usageErrorf("unknown subcommand %q", args[0])
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("stats FILE --json" and "stats --json FILE") and returns the
// positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string, positive ...string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args, positive...); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// setUsage installs a usage text: a synopsis line, a description and the
// flag defaults.
func setUsage(fs *flag.FlagSet, stderr io.Writer, synopsis, description string) {
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: kvpool trace %s\n\n%s\n\nflags:\n", synopsis, description)
		fs.PrintDefaults()
	}
}

// oneTrace returns the single positional argument resolved along the
// trace search path.
func oneTrace(pos []string, traceDir string) (string, error) {
	if len(pos) != 1 {
		return "", usageErrorf("want exactly one FILE or NAME, got %d arguments", len(pos))
	}
	return trace.Finder{Getenv: os.Getenv}.Find(pos[0], traceDir)
}

// traceArg is the FILE|NAME argument of a trace subcommand and the flags
// that say how to find and read it: --trace-dir and --lenient.
type traceArg struct {
	dir     string
	lenient bool
}

// register declares --lenient (with help lenientHelp) and --trace-dir on
// fs.
func (a *traceArg) register(fs *flag.FlagSet, lenientHelp string) {
	fs.BoolVar(&a.lenient, "lenient", false, lenientHelp)
	fs.StringVar(&a.dir, "trace-dir", "", "directory searched first for a trace NAME")
}

// parseOpen parses args with fs (flags before or after the argument) and
// opens the one trace they name (see open).
func (a *traceArg) parseOpen(fs *flag.FlagSet, args []string) (string, *trace.Reader, io.Closer, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", nil, nil, err
	}
	return a.open(pos)
}

// open resolves the single positional argument along the trace search
// path (--trace-dir first) and opens it as a trace Reader.
func (a *traceArg) open(pos []string) (string, *trace.Reader, io.Closer, error) {
	path, err := oneTrace(pos, a.dir)
	if err != nil {
		return "", nil, nil, err
	}
	r, c, err := openTrace(path, a.lenient)
	if err != nil {
		return "", nil, nil, err
	}
	return path, r, c, nil
}

// openTrace opens path as a trace Reader.
func openTrace(path string, lenient bool) (*trace.Reader, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open trace: %w", err)
	}
	return trace.NewReader(f, path, trace.ReadOptions{Lenient: lenient}), f, nil
}

func runTraceStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace stats", stderr)
	asJSON := fs.Bool("json", false, "write JSON instead of tables")
	var ta traceArg
	ta.register(fs, "skip bad lines (and report how many) instead of failing")
	setUsage(fs, stderr, "stats [--json] [--lenient] [--trace-dir D] FILE|NAME",
		"Prints requests, span, arrival rate, input/output length mean/median/p99/max,\n"+
			"total and unique blocks, the share of unique blocks used once, the\n"+
			"infinite-cache prefix hit ratio (tokens and blocks) and a reuse-distance\n"+
			"histogram (distinct blocks between two accesses of a block).")
	path, r, c, err := ta.parseOpen(fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := tracestat.Read(ctx, r)
	if err != nil {
		return err
	}
	if ta.lenient {
		fmt.Fprintf(stderr, "%s: %s\n", path, r.Skipped())
	}
	if *asJSON {
		return st.WriteJSON(stdout)
	}
	return st.WriteText(stdout, path)
}

func runTraceSample(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace sample", stderr)
	from := fs.Float64("from", 0, "window start in trace seconds (inclusive; 0 = the trace's start); the window is shifted to start at 0")
	to := fs.Float64("to", 0, "window end in trace seconds (exclusive); 0 = end of trace")
	families := fs.Float64("families", 0, "fraction in (0,1] of prefix families (requests sharing their first hash id) kept whole; 0 = all")
	seed := fs.Uint64("seed", 0, "seed choosing the kept families (0 is a seed like any other)")
	first := fs.Int("first", 0, "keep only the first N requests (after window and families); 0 = all")
	scale := fs.Float64("scale", 1, "multiply timestamps by X (0.5 = twice as fast)")
	out := fs.String("o", "-", "output file; - = stdout")
	var ta traceArg
	ta.register(fs, "skip bad input lines instead of failing")
	setUsage(fs, stderr, "sample [--from S --to S] [--families F --seed N] [--first N] [--scale X] -o OUT FILE|NAME",
		"Writes a deterministic subsample that is itself a valid trace. Applied in this\n"+
			"order: time window, prefix families, first N, time scaling.")
	pos, err := parseInterspersed(fs, args, "scale")
	if err != nil {
		return err
	}
	opts, err := sampleOptions(fs, *from, *to, *families, *seed, *first, *scale)
	if err != nil {
		return err
	}
	path, r, c, err := ta.open(pos)
	if err != nil {
		return err
	}
	defer c.Close()
	n := 0
	err = writeOutput(*out, stdout, func(w io.Writer) error {
		var err error
		n, err = tracesample.Copy(ctx, trace.NewWriter(w), r, opts)
		return err
	})
	if err != nil {
		return err
	}
	if ta.lenient {
		fmt.Fprintf(stderr, "%s: %s\n", path, r.Skipped())
	}
	if *out != "-" {
		fmt.Fprintf(stderr, "wrote %d requests to %s\n", n, *out)
	}
	return nil
}

// sampleOptions converts the sample flags of fs (seconds) into Options
// (ms), checking the window in seconds.
func sampleOptions(fs *flag.FlagSet, from, to, families float64, seed uint64, first int, scale float64) (tracesample.Options, error) {
	ms := func(name string, s float64) (int64, error) {
		const most = math.MaxInt64 / 1000 / 2 // halved: s*1000 rounds well below 2^63 ms
		if math.IsNaN(s) || s < 0 || s > most {
			return 0, usageErrorf("--%s %v: want seconds >= 0 and at most %d", name, s, int64(most))
		}
		return int64(math.Round(s * 1000)), nil
	}
	if to != 0 && to <= from {
		return tracesample.Options{}, usageErrorf("--to %v must be after --from %v (seconds; --to 0 = the trace's end)", to, from)
	}
	f, err := ms("from", from)
	if err != nil {
		return tracesample.Options{}, err
	}
	t, err := ms("to", to)
	if err != nil {
		return tracesample.Options{}, err
	}
	o := tracesample.Options{FromMs: f, ToMs: t, Families: families, Seed: seed, First: first, Scale: scale}
	if err := o.Validate(); err != nil {
		return o, flagError(fs, err, nil)
	}
	return o, nil
}

func runTraceGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := tracegen.ChatOptions().WithDefaults()
	fs := newFlagSet("trace gen", stderr)
	seed := fs.Uint64("seed", 0, "random seed (same flags and seed = same trace; 0 is a seed like any other)")
	requests := fs.Int("requests", 0, fmt.Sprintf("number of requests; 0 = %d unless --duration is set", tracegen.DefaultRequests))
	duration := fs.Duration("duration", 0, "stop at this trace time (e.g. 1h); 0 = no limit")
	rate := fs.Float64("rate", def.Rate, "mean request arrival rate, requests/s (Poisson sessions)")
	sys := fs.Int("system-prompts", def.SystemPrompts, "number of shared system prompts; 0 = none")
	sysBlocks := fs.Int("system-prompt-blocks", def.SystemPromptBlocks, "length of each system prompt in 512-token blocks")
	turns := fs.Float64("turns", def.MeanTurns, "mean turns per session (geometric, >= 1)")
	think := fs.Duration("think-time", def.ThinkTime, "mean time between a session's turns (exponential)")
	inMean := fs.Float64("input-mean", def.Input.Mean, "mean new tokens per turn (log-normal)")
	inSigma := fs.Float64("input-sigma", def.Input.Sigma, "log-space sigma of new tokens per turn (0 = fixed)")
	outMean := fs.Float64("output-mean", def.Output.Mean, "mean output tokens (log-normal)")
	outSigma := fs.Float64("output-sigma", def.Output.Sigma, "log-space sigma of output tokens (0 = fixed)")
	maxIn := fs.Int("max-input", def.MaxInputTokens, "largest prompt in tokens; a session ends rather than exceed it")
	out := fs.String("o", "-", "output file; - = stdout")
	setUsage(fs, stderr, "gen [flags] [-o OUT]",
		"Generates a synthetic trace in the Mooncake format: Poisson session arrivals,\n"+
			"shared system prompts, multi-turn sessions whose prompts extend the previous\n"+
			"turn's prompt and output. Defaults are tracegen.ChatOptions, a preset that\n"+
			"resembles the published conversation trace.")
	pos, err := parseInterspersed(fs, args, "rate", "system-prompt-blocks", "turns", "think-time", "input-mean", "output-mean", "max-input")
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf("unexpected arguments %q (use -o OUT for the output file)", pos)
	}
	opts := tracegen.Options{
		Seed: *seed, Requests: *requests, Duration: *duration, Rate: *rate,
		SystemPrompts: *sys, SystemPromptBlocks: *sysBlocks, MeanTurns: *turns, ThinkTime: *think,
		Input:          tracegen.LengthDist{Mean: *inMean, Sigma: *inSigma},
		Output:         tracegen.LengthDist{Mean: *outMean, Sigma: *outSigma},
		MaxInputTokens: *maxIn,
	}
	if err := opts.Validate(); err != nil {
		return flagError(fs, err, nil)
	}
	n := 0
	err = writeOutput(*out, stdout, func(w io.Writer) error {
		var err error
		n, err = tracegen.Write(ctx, trace.NewWriter(w), opts)
		return err
	})
	if err != nil {
		return err
	}
	if *out != "-" {
		fmt.Fprintf(stderr, "wrote %d requests to %s\n", n, *out)
	}
	return nil
}

func runTraceFetch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace fetch", stderr)
	dir := fs.String("dir", tracefetch.DefaultDir, "destination directory")
	names := fs.String("name", "all", "traces to fetch: all, or a comma-separated list of conversation, synthetic, toolagent")
	insecure := fs.Bool("insecure-skip-verify", false, "install a file that has no known hash (a known hash must still match)")
	baseURL := fs.String("base-url", tracefetch.DefaultBaseURL, "repository URL prefix (a mirror of raw.githubusercontent.com/kvcache-ai/Mooncake)")
	setUsage(fs, stderr, "fetch [--dir D] [--name all|conversation|synthetic|toolagent]",
		"Downloads the official Mooncake FAST'25 traces from kvcache-ai/Mooncake at\n"+
			"commit "+tracefetch.PinnedCommit+",\n"+
			"verifies their hashes and installs them atomically. Files already present\n"+
			"with the right hash are skipped.")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf("unexpected arguments %q", pos)
	}
	opts := tracefetch.Options{Dir: *dir, BaseURL: *baseURL, InsecureSkipVerify: *insecure}
	for _, n := range strings.Split(*names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			opts.Names = append(opts.Names, n)
		}
	}
	if err := opts.Validate(); err != nil {
		return flagError(fs, err, nil)
	}
	res, err := tracefetch.Fetch(ctx, opts)
	for _, r := range res {
		fmt.Fprintf(stdout, "%s %s (%d bytes, %s verified, sha256 %s)\n", r.Status, r.Path, r.Bytes, r.Verified, r.SHA256)
	}
	return err
}

func runTraceValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace validate", stderr)
	var ta traceArg
	ta.register(fs, "read past bad lines and report how many of each kind (still fails if any)")
	setUsage(fs, stderr, "validate [--lenient] FILE|NAME",
		"Checks every line: valid JSON object with integer timestamp >= 0 (never going\n"+
			"backwards), input_length > 0, output_length > 0 and exactly\n"+
			"ceil(input_length/512) non-negative integer hash_ids. Prints OK and the\n"+
			"request count, or the first error as file:line: reason (exit status 1).")
	path, r, c, err := ta.parseOpen(fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	n := 0
	for ; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("validate %s: %w", path, err)
			}
		}
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	sk := r.Skipped()
	if sk.Total > 0 {
		fmt.Fprintf(stdout, "%s: %d good requests; %s\n", path, n, sk)
		for _, k := range sk.ByKind {
			fmt.Fprintf(stdout, "  %s:%d: %s\n", path, k.FirstLine, k.FirstReason)
		}
		return fmt.Errorf("%s: %d bad lines", path, sk.Total)
	}
	if n == 0 {
		return fmt.Errorf("%s: empty trace (no requests)", path)
	}
	fmt.Fprintf(stdout, "OK %s: %d requests\n", path, n)
	return nil
}

// writeOutput runs write on stdout (path "-") or on a temporary file next to
// path that is renamed into place only if write succeeds, so a failed or
// interrupted run never leaves a partial trace behind.
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "-" || path == "" {
		return write(stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create output %s: %w", path, err)
	}
	err = write(tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close output %s: %w", path, cerr)
	}
	if err == nil {
		if rerr := os.Rename(tmp.Name(), path); rerr != nil {
			err = fmt.Errorf("install output %s: %w", path, rerr)
		}
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// loadTrace resolves name along the trace search path (dir first) and reads
// the whole trace; a trace that cannot be found is a usage error (--trace).
// With lenient, bad lines are skipped and a summary of
// what was skipped goes to stderr, so a lenient run never hides them.
func loadTrace(name, dir string, lenient bool, stderr io.Writer) (path string, reqs []trace.Request, err error) {
	path, err = trace.Finder{Getenv: os.Getenv}.Find(name, dir)
	if err != nil {
		return "", nil, usageErrorf("--trace %s: %v", name, err)
	}
	r, c, err := openTrace(path, lenient)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	reqs, err = trace.ReadAll(r)
	if err != nil {
		return "", nil, err
	}
	if sk := r.Skipped(); lenient && sk.Total > 0 {
		fmt.Fprintf(stderr, "%s: %s\n", path, sk)
	}
	return path, reqs, nil
}
